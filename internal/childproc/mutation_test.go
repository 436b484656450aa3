package childproc

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestOneSpawningThread: everything Do runs, asked from threads that end
// right after (a goroutine that locked its thread and returns) or from
// any goroutine, runs on one thread, which is still there at the end: the
// spawning goroutine is locked to it, so no goroutine that ends its thread
// ever runs there. A child started through Start among them keeps running.
func TestOneSpawningThread(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	testkit.OnEndingThread(t, func() { err = Start(cmd) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	seen := map[int]int{}
	for range 30 {
		testkit.OnEndingThread(t, func() { Do(func() { seen[unix.Gettid()]++ }) })
		Do(func() { seen[unix.Gettid()]++ })
	}
	if len(seen) != 1 {
		t.Fatalf("Do ran its functions on %d threads (thread: calls): %v; want one", len(seen), seen)
	}
	for tid := range seen {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err != nil {
			t.Fatalf("the spawning thread %d ended: %v", tid, err)
		}
	}
	if testkit.Killed(t, cmd.Process.Pid) {
		t.Fatalf("child %d, started through Start, was killed as threads ended", cmd.Process.Pid)
	}
}

// TestStartFromManyGoroutines: children started at once from many
// goroutines all start through the one spawning thread (run with -race),
// and Start returns cmd.Start's error.
func TestStartFromManyGoroutines(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			cmd := exec.Command("true")
			if err := Start(cmd); err != nil {
				t.Error(err)
				return
			}
			if err := cmd.Wait(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	err := Start(exec.Command("/nonexistent/maiden-test-binary"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start of a missing binary: %v; want its error (not exist)", err)
	}
}
