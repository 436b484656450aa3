package confine

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The trampoline: Run starts the current binary with envMarker set, the
// spec on fd 3 and a status pipe on fd 4 (close-on-exec in the trampoline:
// EOF without a message means the target was executed).
const (
	envMarker = "MAIDEN_CONFINE_TRAMPOLINE"
	specFD    = 3
	statusFD  = 4
)

// wireSpec is what the parent sends the trampoline.
type wireSpec struct {
	Path      string
	Argv      []string
	Env       []string
	ReadOnly  []string
	Writable  []string
	ProxyPort int
	Limits    Limits
	// Landlock is the ABI to confine with; 0 means none (Unconfined).
	Landlock int
}

// Main is the trampoline's entry point. A program that calls Run must call
// Main first thing in main (before anything else starts goroutines that
// matter): in the trampoline it confines the process and executes the
// target, never returning; in any other process it returns at once.
func Main() {
	if os.Getenv(envMarker) == "" {
		switch os.Getenv(probeMarker) {
		case "":
		case probeLeave:
			probeLeaveGroup() // never returns
		default:
			probeChild() // never returns
		}
		return
	}
	// Every step below applies to this thread; the target is executed from
	// it, and execve keeps only the calling thread.
	runtime.LockOSThread()
	err := trampoline()
	status := os.NewFile(statusFD, "status")
	fmt.Fprintf(status, "%v", err)
	os.Exit(127)
}

func trampoline() error {
	f := os.NewFile(specFD, "spec")
	data, err := io.ReadAll(io.LimitReader(f, 16<<20))
	f.Close()
	if err != nil {
		return fmt.Errorf("reading the spec: %v", err)
	}
	var s wireSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("reading the spec: %v", err)
	}
	if _, err := unix.FcntlInt(statusFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return fmt.Errorf("status pipe: %v", err)
	}
	// Everything that allocates or opens files happens first; after the
	// rlimits only raw system calls run.
	ruleset := -1
	if s.Landlock > 0 {
		if ruleset, err = buildRuleset(&s, s.Landlock); err != nil {
			return err
		}
	}
	filter, err := seccompFilter(s.ProxyPort != 0)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	path, err := syscall.BytePtrFromString(s.Path)
	if err != nil {
		return fmt.Errorf("path: %v", err)
	}
	argv, err := syscall.SlicePtrFromStrings(s.Argv)
	if err != nil {
		return fmt.Errorf("argument: %v", err)
	}
	envv, err := syscall.SlicePtrFromStrings(s.Env)
	if err != nil {
		return fmt.Errorf("environment: %v", err)
	}
	l := s.Limits
	for _, r := range []struct {
		what     string
		resource int
		v        uint64
	}{
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0},
		{"RLIMIT_DATA", unix.RLIMIT_DATA, l.Memory},
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, l.Processes},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, l.FileSize},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, l.Files},
	} {
		rl := unix.Rlimit{Cur: r.v, Max: r.v}
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(r.resource), uintptr(unsafe.Pointer(&rl)), 0, 0, 0); e != 0 {
			return fmt.Errorf("%s: %v", r.what, e)
		}
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %v", e)
	}
	if ruleset >= 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); e != 0 {
			return fmt.Errorf("landlock_restrict_self: %v", e)
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %v", e)
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return fmt.Errorf("execve %s: %v", s.Path, e)
}
