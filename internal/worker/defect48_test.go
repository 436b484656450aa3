package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/internal/regfile"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestFIFOSwappedInIsRefusedAtOnce (pass 48's defect): a tool's file
// replaced by a FIFO between the registry's StatKey (which refuses what is
// not a regular file) and readComponent's open is refused at once, as not a
// regular file. A blocking open hung the call past its deadline until
// someone wrote to the pipe. readComponent is given the key of the regular
// file that stood at the path a moment before, as the race would.
func TestFIFOSwappedInIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tool.wasm")
	if err := os.WriteFile(path, []byte("\x00asm\x0d\x00\x01\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := sandbox.StatKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, path); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := readComponent(ctx, path, key)
		errs <- err
	}()
	select {
	case err := <-errs:
		if !errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), regfile.ErrNotRegular.Error()+" (a FIFO)") {
			t.Fatalf("readComponent of a FIFO swapped in after StatKey: %v; want ErrInvalidTool, not a regular file", err)
		}
	case <-time.After(5 * time.Second): // far past ctx's 200 ms
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close() // unblocks the reader
		}
		t.Fatalf("readComponent of a FIFO swapped in after StatKey hung past its context's deadline (200 ms) until a writer came (then: %v); want it refused at once as not a regular file", <-errs)
	}
}

// TestComponentFileOverTheCapRefused: a component file larger than
// sandbox.MaxComponentBytes is refused from its size, never read (a sparse
// file: nothing of it is on disk).
func TestComponentFileOverTheCapRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tool.wasm")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(sandbox.MaxComponentBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	key, err := sandbox.StatKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readComponent(context.Background(), path, key); !errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), regfile.ErrTooLarge.Error()) {
		t.Fatalf("readComponent of a file of MaxComponentBytes+1: %v; want ErrInvalidTool, too large", err)
	}
}
