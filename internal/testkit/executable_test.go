package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestWriteExecutableNeverBusy: while other goroutines fork and exec
// without pause (as parallel tests do), a program file WriteExecutable
// wrote runs at once, never "text file busy". Written with a plain
// os.WriteFile, 44 of 300 copies of /bin/true were (2026-12-07, this
// machine).
func TestWriteExecutableNeverBusy(t *testing.T) {
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_ = exec.Command("/bin/true").Run()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	busy := 0
	const n = 300
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("true-%d", i))
		WriteExecutable(t, p, b)
		if err := exec.Command(p).Run(); errors.Is(err, syscall.ETXTBSY) {
			busy++
		} else if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	if busy > 0 {
		t.Fatalf("%d of %d copies written by WriteExecutable were text file busy to exec", busy, n)
	}
}
