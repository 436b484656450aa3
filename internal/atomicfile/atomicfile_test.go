package atomicfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new content"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "new content" {
		t.Fatalf("%q %v", b, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteFailureLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "missing-dir", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("wrote into a missing directory")
	}
	// A directory in the way: the rename fails, the temp file goes.
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o644); err == nil {
		t.Fatal("replaced a non-empty directory")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestLockExcludes: holders of one lock never overlap (-race).
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	var inside, overlaps, waited atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := Lock(context.Background(), path, func() { waited.Add(1) })
			if err != nil {
				t.Error(err)
				return
			}
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			time.Sleep(30 * time.Millisecond)
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Errorf("%d overlapping holders", overlaps.Load())
	}
	if waited.Load() == 0 {
		t.Errorf("nobody was told to wait")
	}
}

func TestLockWaitEndsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	unlock, err := Lock(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, path, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

// TestWriteReplacesASymlink: a symlink at path is replaced by the new
// file, never written through: the file it pointed at keeps its content
// and its mode, wherever it is.
func TestWriteReplacesASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "theirs" {
		t.Errorf("the link's target holds %q (%v) after a Write to the link; want \"theirs\" untouched", b, err)
	}
	if fi, err := os.Stat(target); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("the link's target has mode %v after a Write to the link; want 0600 untouched", fi.Mode().Perm())
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() {
		t.Fatalf("path is %v after Write; want a regular file in the link's place", fi.Mode())
	}
	if b, _ := os.ReadFile(path); string(b) != "mine" {
		t.Errorf("path holds %q, want \"mine\"", b)
	}
}
