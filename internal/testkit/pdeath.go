package testkit

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// OnEndingThread runs f on an OS thread (not the main one) that ends when
// f returns: the goroutine is locked to it and never unlocks, so Go
// destroys the thread. It returns once the thread has left
// /proc/self/task, by when the kernel has sent every child forked from
// that thread its parent-death signal (SysProcAttr.Pdeathsig).
func OnEndingThread(t testing.TB, f func()) {
	t.Helper()
	tids := make(chan int, 1)
	for {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			if unix.Gettid() == os.Getpid() {
				runtime.UnlockOSThread() // Go never ends the main thread: another
				tids <- 0
				return
			}
			f()
			tids <- unix.Gettid()
		}()
		if tid := <-tids; tid != 0 {
			task := fmt.Sprintf("/proc/self/task/%d", tid)
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat(task); os.IsNotExist(err) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("thread %d did not end within 10 s", tid)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

// Killed reports whether process pid is gone, a zombie, or has SIGKILL
// pending (sent, not yet acted on).
func Killed(t testing.TB, pid int) bool {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return true
			}
		case "SigPnd", "ShdPnd":
			mask, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %q", pid, k, v)
			}
			if mask&(1<<(syscall.SIGKILL-1)) != 0 {
				return true
			}
		}
	}
	return false
}
