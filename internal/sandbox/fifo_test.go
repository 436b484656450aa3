package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCompileRefusesAFIFOSwappedIn: the in-process cache reads a tool's
// file after StatKey saw a regular file there; a FIFO renamed over it in
// between is refused at once (not a regular file), where a blocking read
// hung the call until someone wrote to the pipe (pass 48's defect, in the
// worker's registry and here).
func TestCompileRefusesAFIFOSwappedIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tool.wasm")
	if err := os.WriteFile(path, []byte("\x00asm\x0d\x00\x01\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := StatKey(path)
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
	errs := make(chan error, 1)
	go func() {
		_, err := (&cache{}).compile(path, key, "")
		errs <- err
	}()
	select {
	case err := <-errs:
		if !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Fatalf("compile of a FIFO swapped in after StatKey: %v; want ErrInvalidTool, not a regular file", err)
		}
	case <-time.After(5 * time.Second):
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close() // unblocks the reader
		}
		t.Fatalf("compile of a FIFO swapped in after StatKey hung until a writer came (then: %v); want it refused at once as not a regular file", <-errs)
	}
}
