package testkit

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestI386 checks the 32-bit system call helper the confinement tests use
// (an i386 getpid, number 20, answers this process's pid), so that a
// confinement test seeing no effect from an i386 call knows the call was
// made.
func TestI386(t *testing.T) {
	t.Parallel()
	if err := I386Syscalls(); errors.Is(err, ErrNoI386) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err) // the probe failed otherwise than by the kernel's fault
	}
	x, err := NewI386()
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if got := x.Syscall(20); int(got) != os.Getpid() {
		t.Fatalf("i386 getpid = %d, want %d", got, os.Getpid())
	}
}

// TestCloneExit checks the clone helper the confinement tests use: a
// process sharing this one's memory starts (a pid) and exits at once.
func TestCloneExit(t *testing.T) {
	t.Parallel()
	pid, err := CloneExit(uint32(unix.CLONE_VM | unix.SIGCHLD))
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("no raw clone on this platform")
	}
	if err != nil || pid <= 0 {
		t.Fatalf("clone(CLONE_VM|SIGCHLD) = %d, %v", pid, err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != nil || !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("the child: %v, %v", ws, err)
	}
}
