package worker

import (
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// legacyDenied are the calls of denied[] that only x86_64 has (arm64 has
// their *at forms only).
var legacyDenied = []struct {
	name string
	nr   uintptr
	args []uintptr
}{
	{"chmod", unix.SYS_CHMOD, nil}, {"chown", unix.SYS_CHOWN, nil}, {"lchown", unix.SYS_LCHOWN, nil},
	{"utimes", unix.SYS_UTIMES, nil}, {"utime", unix.SYS_UTIME, nil}, {"futimesat", unix.SYS_FUTIMESAT, nil},
	{"inotify_init", unix.SYS_INOTIFY_INIT, nil}, {"mknod", unix.SYS_MKNOD, nil}, {"pipe", unix.SYS_PIPE, nil},
	{"open", unix.SYS_OPEN, nil}, {"creat", unix.SYS_CREAT, nil},
}

// forkCalls start a process (denied[] names them on x86_64).
var forkCalls = []struct {
	name string
	nr   uintptr
}{{"fork", unix.SYS_FORK}, {"vfork", unix.SYS_VFORK}}

// archArgProbes: a process sharing the worker's memory that is not a
// thread of it, started with only flags a thread may have (CLONE_VM, no
// CLONE_THREAD), its child exiting at once (testkit.CloneExit); and x32's
// numbering of socket(2) (bit 30), a refusal of the filter's own.
var archArgProbes = []probeCall{
	{"clone CLONE_VM|CLONE_FS|CLONE_FILES|SIGCHLD", func(string, int) error {
		r, err := testkit.CloneExit(uint32(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.SIGCHLD))
		if err != nil {
			return err
		}
		if r < 0 {
			return unix.Errno(-r)
		}
		return nil
	}},
	{"x32 socket", func(string, int) error { return sys(unix.SYS_SOCKET|0x40000000, unix.AF_INET, unix.SOCK_DGRAM, 0) }},
}
