package worker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// The tests of the mutation pass over how a worker's confinement is built
// (docs/security-tests.md, "Fifth pass"; docs/mutation/confinement.tsv):
// each bug planted in confine_linux.c that the older tests let through is
// killed by one of these, with a real attempt from inside the worker.

// envHideLandlock makes this test binary a launcher that hides Landlock
// (landlock_create_ruleset answers ENOSYS, as on a kernel without it) and
// executes itself as a worker with the rest of its arguments: the worker's
// seccomp filter is then its only wall, as on kernels before Landlock's
// signal scoping (ABI 6) or without Landlock.
const envHideLandlock = "MAIDEN_TEST_HIDE_LANDLOCK"

func init() {
	if os.Getenv(envHideLandlock) != "" && !IsChild() {
		os.Exit(hideLandlockAndExec())
	}
	if IsChild() && len(os.Args) > 2 && os.Args[1] == "filter-probe" {
		os.Exit(filterProbe(os.Args[2], os.Args[3:]))
	}
	if IsChild() && len(os.Args) > 2 && os.Args[1] == "i386-probe" {
		os.Exit(i386Probe(os.Args[2]))
	}
}

// hideLandlockAndExec installs, on this thread, a filter that answers
// landlock_create_ruleset with ENOSYS, then executes this binary as a
// worker (MAIDEN_WORKER set, the marker removed) with the same arguments.
func hideLandlockAndExec() int {
	runtime.LockOSThread()
	const landlockCreateRuleset = 444
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: landlockCreateRuleset, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("no_new_privs:", err)
		return 1
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		fmt.Println("seccomp:", e)
		return 1
	}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, envHideLandlock+"=") {
			env = append(env, e)
		}
	}
	exe, _ := os.Executable()
	err := unix.Exec(exe, os.Args, append(env, envWorker+"=1"))
	fmt.Println("exec:", err)
	return 1
}

// Arguments that no call takes as valid: -1 as a descriptor, a pid, a
// flag word or a pointer (a kernel address: EFAULT).
const bad = ^uintptr(0)

// deniedProbes are the calls confine_linux.c's denied[] names, each made
// with arguments the kernel would refuse or answer harmlessly were the
// filter to let it through (EBADF, EFAULT, EINVAL, ESRCH, ENOENT, a no-op
// success): only the filter answers EPERM, and a call dropped from denied[]
// gets the filter's default, ENOSYS. Calls the kernel refuses without a
// capability (mount, reboot, kexec, modules, swap, sethostname) answer EPERM
// either way; they are listed for the ENOSYS a dropped entry would give.
var deniedProbes = func() []probeCall {
	calls := []struct {
		name string
		nr   uintptr
		args []uintptr
	}{
		{"socket", unix.SYS_SOCKET, nil}, {"socketpair", unix.SYS_SOCKETPAIR, nil}, {"connect", unix.SYS_CONNECT, nil},
		{"bind", unix.SYS_BIND, nil}, {"listen", unix.SYS_LISTEN, nil}, {"accept", unix.SYS_ACCEPT, nil},
		{"accept4", unix.SYS_ACCEPT4, nil}, {"execve", unix.SYS_EXECVE, nil}, {"execveat", unix.SYS_EXECVEAT, nil},
		{"ptrace", unix.SYS_PTRACE, nil}, {"process_vm_readv", unix.SYS_PROCESS_VM_READV, nil},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, nil}, {"process_madvise", unix.SYS_PROCESS_MADVISE, nil},
		{"process_mrelease", 448, nil}, {"kcmp", unix.SYS_KCMP, nil}, {"pidfd_open", unix.SYS_PIDFD_OPEN, nil},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD, nil}, {"pidfd_send_signal", unix.SYS_PIDFD_SEND_SIGNAL, nil},
		{"setpriority", unix.SYS_SETPRIORITY, nil}, {"sched_setscheduler", unix.SYS_SCHED_SETSCHEDULER, nil},
		{"sched_setparam", unix.SYS_SCHED_SETPARAM, nil}, {"sched_setattr", unix.SYS_SCHED_SETATTR, nil},
		{"sched_setaffinity", unix.SYS_SCHED_SETAFFINITY, nil}, {"ioprio_set", unix.SYS_IOPRIO_SET, nil},
		{"migrate_pages", unix.SYS_MIGRATE_PAGES, nil}, {"move_pages", unix.SYS_MOVE_PAGES, nil},
		{"unshare", unix.SYS_UNSHARE, nil}, {"setns", unix.SYS_SETNS, nil}, {"mount", unix.SYS_MOUNT, nil},
		{"umount2", unix.SYS_UMOUNT2, nil}, {"pivot_root", unix.SYS_PIVOT_ROOT, nil}, {"chroot", unix.SYS_CHROOT, nil},
		{"fsopen", unix.SYS_FSOPEN, nil}, {"fsconfig", unix.SYS_FSCONFIG, nil}, {"fsmount", unix.SYS_FSMOUNT, nil},
		{"fspick", unix.SYS_FSPICK, nil}, {"open_tree", unix.SYS_OPEN_TREE, nil}, {"open_tree_attr", 467, nil},
		{"move_mount", unix.SYS_MOVE_MOUNT, nil}, {"mount_setattr", unix.SYS_MOUNT_SETATTR, nil},
		{"syslog", unix.SYS_SYSLOG, nil}, {"bpf", unix.SYS_BPF, nil}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN, nil},
		{"keyctl", unix.SYS_KEYCTL, nil}, {"add_key", unix.SYS_ADD_KEY, nil}, {"request_key", unix.SYS_REQUEST_KEY, nil},
		{"userfaultfd", unix.SYS_USERFAULTFD, nil}, {"kexec_load", unix.SYS_KEXEC_LOAD, nil},
		{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, nil}, {"init_module", unix.SYS_INIT_MODULE, nil},
		{"finit_module", unix.SYS_FINIT_MODULE, nil}, {"delete_module", unix.SYS_DELETE_MODULE, nil},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, nil}, {"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, nil},
		{"swapon", unix.SYS_SWAPON, nil}, {"swapoff", unix.SYS_SWAPOFF, nil}, {"reboot", unix.SYS_REBOOT, nil},
		{"acct", unix.SYS_ACCT, nil}, {"quotactl", unix.SYS_QUOTACTL, nil}, {"settimeofday", unix.SYS_SETTIMEOFDAY, nil},
		{"clock_settime", unix.SYS_CLOCK_SETTIME, nil}, {"clock_adjtime", unix.SYS_CLOCK_ADJTIME, nil},
		{"adjtimex", unix.SYS_ADJTIMEX, nil}, {"sethostname", unix.SYS_SETHOSTNAME, nil},
		{"setdomainname", unix.SYS_SETDOMAINNAME, nil}, {"personality (query)", unix.SYS_PERSONALITY, []uintptr{0xffffffff}},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, nil}, {"io_uring_enter", unix.SYS_IO_URING_ENTER, nil},
		{"io_uring_register", unix.SYS_IO_URING_REGISTER, nil},
		// Identity: -1 everywhere leaves the ids as they are (success).
		{"setuid", unix.SYS_SETUID, nil}, {"setgid", unix.SYS_SETGID, nil}, {"setreuid", unix.SYS_SETREUID, nil},
		{"setregid", unix.SYS_SETREGID, nil}, {"setresuid", unix.SYS_SETRESUID, nil}, {"setresgid", unix.SYS_SETRESGID, nil},
		{"setfsuid (query)", unix.SYS_SETFSUID, nil}, {"setfsgid (query)", unix.SYS_SETFSGID, nil},
		{"setgroups", unix.SYS_SETGROUPS, nil}, {"capset", unix.SYS_CAPSET, nil}, {"setrlimit", unix.SYS_SETRLIMIT, nil},
		{"setsid", unix.SYS_SETSID, nil}, {"setpgid", unix.SYS_SETPGID, nil},
		{"fchmodat", unix.SYS_FCHMODAT, nil}, {"fchmodat2", 452, nil}, {"fchmod", unix.SYS_FCHMOD, nil},
		{"fchownat", unix.SYS_FCHOWNAT, nil}, {"fchown", unix.SYS_FCHOWN, nil}, {"utimensat", unix.SYS_UTIMENSAT, nil},
		{"setxattr", unix.SYS_SETXATTR, nil}, {"lsetxattr", unix.SYS_LSETXATTR, nil}, {"fsetxattr", unix.SYS_FSETXATTR, nil},
		{"removexattr", unix.SYS_REMOVEXATTR, nil}, {"lremovexattr", unix.SYS_LREMOVEXATTR, nil},
		{"fremovexattr", unix.SYS_FREMOVEXATTR, nil}, {"setxattrat", 463, nil}, {"removexattrat", 466, nil},
		{"fanotify_init", unix.SYS_FANOTIFY_INIT, nil}, {"fanotify_mark", unix.SYS_FANOTIFY_MARK, nil},
		{"inotify_init1", unix.SYS_INOTIFY_INIT1, nil}, {"inotify_add_watch", unix.SYS_INOTIFY_ADD_WATCH, nil},
		{"mknodat", unix.SYS_MKNODAT, nil},
		// IPC and memory no limit counts. The keys name no object and
		// IPC_CREAT is not asked: ENOENT.
		{"shmget", unix.SYS_SHMGET, []uintptr{bad, 8, 0}}, {"shmat", unix.SYS_SHMAT, nil}, {"shmctl", unix.SYS_SHMCTL, nil},
		{"msgget", unix.SYS_MSGGET, []uintptr{bad, 0}}, {"msgsnd", unix.SYS_MSGSND, nil}, {"msgrcv", unix.SYS_MSGRCV, nil},
		{"msgctl", unix.SYS_MSGCTL, nil}, {"semget", unix.SYS_SEMGET, []uintptr{bad, 1, 0}}, {"semop", unix.SYS_SEMOP, nil},
		{"semtimedop", unix.SYS_SEMTIMEDOP, nil}, {"semctl", unix.SYS_SEMCTL, nil}, {"mq_open", unix.SYS_MQ_OPEN, nil},
		{"memfd_create", unix.SYS_MEMFD_CREATE, nil}, {"memfd_secret", 447, nil}, {"pipe2", unix.SYS_PIPE2, nil},
		{"vmsplice", unix.SYS_VMSPLICE, nil}, {"splice", unix.SYS_SPLICE, nil}, {"tee", unix.SYS_TEE, nil},
		{"openat", unix.SYS_OPENAT, nil}, {"openat2", unix.SYS_OPENAT2, nil}, {"tkill", unix.SYS_TKILL, nil},
	}
	calls = append(calls, legacyDenied...)
	var out []probeCall
	for _, c := range calls {
		args := c.args
		if args == nil {
			args = []uintptr{bad, bad, bad, bad, bad, bad}
		}
		out = append(out, probeCall{c.name, func(string, int) error { return sys(c.nr, args...) }})
	}
	// The two that would start a process: its child exits at once.
	for _, f := range forkCalls {
		out = append(out, probeCall{f.name, func(string, int) error {
			r, _, e := unix.RawSyscall6(f.nr, 0, 0, 0, 0, 0, 0)
			if e == 0 && r == 0 {
				unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
			}
			return errnoOf(r, 0, e)
		}})
	}
	return out
}()

// argProbes try the forms of checked calls that the filter refuses, and
// the forms it must let through (want 0). target is a file the worker may
// not open (unused by the filter's refusals); victim is a process of the
// worker's user that is not the worker.
var argProbes = append([]probeCall{
	{"getpid", func(string, int) error { return sys(unix.SYS_GETPID) }},
	{"prlimit64 read RLIMIT_DATA", func(string, int) error {
		var rl unix.Rlimit
		return unix.Prlimit(0, unix.RLIMIT_DATA, nil, &rl)
	}},
	{"madvise MADV_DONTNEED", func(string, int) error {
		b, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return err
		}
		defer unix.Munmap(b)
		return unix.Madvise(b, unix.MADV_DONTNEED)
	}},
	// Raising its own memory limit, with new_limit at an address whose
	// low 32 bits are zero, then at one below 4 GiB (high 32 bits zero):
	// the filter must read the whole pointer.
	{"prlimit64 raise, new_limit low half zero", func(string, int) error { return raiseDataLimitAt(0x5a00000000) }},
	{"prlimit64 raise, new_limit below 4 GiB", func(string, int) error { return raiseDataLimitAt(0x5b000000) }},
	{"mmap MAP_GROWSDOWN", func(string, int) error {
		b, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_GROWSDOWN)
		if err == nil {
			_ = unix.Munmap(b)
		}
		return err
	}},
	// Guard regions (Linux 6.13): advice 102, no privilege needed.
	{"madvise MADV_GUARD_INSTALL", func(string, int) error {
		b, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return err
		}
		defer unix.Munmap(b)
		return sys(unix.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 102)
	}},
	// Without a code channel (codefd.go), recvmsg reads no descriptor.
	{"recvmsg stdin, no code channel", func(string, int) error {
		var msg unix.Msghdr
		return sys(unix.SYS_RECVMSG, 0, uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT)
	}},
	{"fcntl F_SETSIG", func(string, int) error { return sys(unix.SYS_FCNTL, 1, unix.F_SETSIG, uintptr(unix.SIGUSR1)) }},
	{"fcntl F_SETOWN_EX victim", func(_ string, v int) error {
		owner := struct{ typ, pid int32 }{1 /* F_OWNER_PID */, int32(v)} // struct f_owner_ex
		return sys(unix.SYS_FCNTL, 1, unix.F_SETOWN_EX, uintptr(unsafe.Pointer(&owner)))
	}},
	{"fcntl F_SETLEASE", func(string, int) error { return sys(unix.SYS_FCNTL, 1, unix.F_SETLEASE, unix.F_RDLCK) }},
	{"prctl PR_SET_DUMPABLE", func(string, int) error { return sys(unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 1) }},
	// A process sharing the worker's memory that is not a thread of it
	// (the vfork form: the parent waits, the child exits at once).
	{"clone CLONE_VM|CLONE_VFORK|SIGCHLD", func(string, int) error {
		r, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_VFORK|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e == 0 && r == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		return errnoOf(r, 0, e)
	}},
	// Signals to other processes, by every call and form that reaches them.
	{"kill victim 0", func(_ string, v int) error { return sys(unix.SYS_KILL, uintptr(v), 0) }},
	{"kill -1 0 (every process it may signal)", func(string, int) error { return sys(unix.SYS_KILL, bad, 0) }},
	{"kill 0 0 (its process group)", func(string, int) error { return sys(unix.SYS_KILL, 0, 0) }},
	{"tgkill victim 0", func(_ string, v int) error { return sys(unix.SYS_TGKILL, uintptr(v), uintptr(v), 0) }},
	{"rt_sigqueueinfo victim 0", func(_ string, v int) error {
		var info [128]byte
		code := (*int32)(unsafe.Pointer(&info[8])) // si_code: SI_QUEUE (-1), as sigqueue(3) sends
		*code = -1
		return sys(unix.SYS_RT_SIGQUEUEINFO, uintptr(v), 0, uintptr(unsafe.Pointer(&info)))
	}},
}, archArgProbes...)

// raiseDataLimitAt writes RLIMIT_DATA {hard, hard} in a page mapped at
// addr and asks prlimit64 to set it.
func raiseDataLimitAt(addr uintptr) error {
	var cur unix.Rlimit
	if err := unix.Prlimit(0, unix.RLIMIT_DATA, nil, &cur); err != nil {
		return err
	}
	p, err := unix.MmapPtr(-1, 0, unsafe.Add(unsafe.Pointer(nil), addr), 4096, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED_NOREPLACE)
	if err != nil || uintptr(p) != addr {
		return fmt.Errorf("mapping a page at %#x: %v (got %p)", addr, err, p)
	}
	defer unix.MunmapPtr(p, 4096)
	rl := (*unix.Rlimit)(p)
	rl.Cur, rl.Max = cur.Max, cur.Max
	return sys(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_DATA, uintptr(p), 0)
}

// argWant is what each of argProbes must get: 0 for the controls, EPERM
// from the filter for the rest.
func argWant(name string) unix.Errno {
	switch name {
	case "getpid", "prlimit64 read RLIMIT_DATA", "madvise MADV_DONTNEED":
		return 0
	}
	return unix.EPERM
}

// preopenFilterProbes run in a worker with a read-only directory (fd 4,
// holding in.txt) and a read-write one (fd 5, holding mine.txt); target is
// a file of maiden's outside both. Landlock has no right for a file's
// mode, owner, times or attributes, and the worker accesses files with
// maiden's filesystem ids: the filter alone keeps it from changing them,
// anywhere. What Landlock decides (changing the read-only directory) is its
// EACCES; the size of a file written, RLIMIT_FSIZE's EFBIG.
var preopenFilterProbes = []probeCall{
	{"read rw/mine.txt", func(string, int) error { return openClose(5, "mine.txt", unix.O_RDONLY) }},
	{"chmod a file outside", func(t string, _ int) error { return sys(unix.SYS_FCHMODAT, atFDCWD, str(t), 0o666, 0) }},
	{"chmod rw/mine.txt", func(string, int) error { return sys(unix.SYS_FCHMODAT, 5, str("mine.txt"), 0o666, 0) }},
	// To its own group, which the kernel allows its owner (maiden's
	// filesystem ids): only the filter refuses.
	{"chown rw/mine.txt to its group", func(string, int) error {
		var st unix.Stat_t
		if err := unix.Fstatat(5, "mine.txt", &st, 0); err != nil {
			return err
		}
		return sys(unix.SYS_FCHOWNAT, 5, str("mine.txt"), bad, uintptr(st.Gid), 0)
	}},
	{"utimensat rw/mine.txt", func(string, int) error { return sys(unix.SYS_UTIMENSAT, 5, str("mine.txt"), 0, 0) }},
	{"setxattr a file outside", func(t string, _ int) error {
		return sys(unix.SYS_SETXATTR, str(t), str("user.maiden"), str("x"), 1, 0)
	}},
	{"mknodat fifo in rw", func(string, int) error { return sys(unix.SYS_MKNODAT, 5, str("fifo"), unix.S_IFIFO|0o600, 0) }},
	{"open ro/in.txt O_RDONLY|O_TRUNC", func(string, int) error { return openClose(4, "in.txt", unix.O_RDONLY|unix.O_TRUNC) }},
	{"open ro/in.txt O_WRONLY", func(string, int) error { return openClose(4, "in.txt", unix.O_WRONLY) }},
	{"create ro/new.txt O_RDONLY|O_CREAT", func(string, int) error { return openClose(4, "new.txt", unix.O_RDONLY|unix.O_CREAT) }},
	{"mkdir ro/d", func(string, int) error { return unix.Mkdirat(4, "d", 0o755) }},
	{"unlink ro/in.txt", func(string, int) error { return unix.Unlinkat(4, "in.txt", 0) }},
	{"write rw/big past 1 GiB", func(string, int) error {
		fd, err := unix.Openat(5, "big", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Pwrite(fd, []byte("x"), 1<<30)
		return err
	}},
}

func preopenFilterWant(name string) unix.Errno {
	switch name {
	case "read rw/mine.txt":
		return 0
	case "open ro/in.txt O_RDONLY|O_TRUNC", "open ro/in.txt O_WRONLY", "create ro/new.txt O_RDONLY|O_CREAT", "mkdir ro/d", "unlink ro/in.txt":
		return unix.EACCES
	case "write rw/big past 1 GiB":
		return unix.EFBIG
	}
	return unix.EPERM
}

var probeLists = map[string][]probeCall{"denied": deniedProbes, "args": argProbes, "preopen": preopenFilterProbes}

// filterProbe makes every call of the list named and prints one line per
// call, "CALL <errno> <name>", after its confinement note. args: the
// target path and the victim pid.
func filterProbe(list string, args []string) int {
	if msg := confinementError(); msg != "" {
		fmt.Printf("CONFINEMENT FAILED %s\n", msg)
		return 0
	}
	fmt.Printf("NOTE %s\n", confinementNote())
	target, victim := "", os.Getppid()
	if len(args) > 0 {
		target = args[0]
	}
	if len(args) > 1 {
		victim, _ = strconv.Atoi(args[1])
	}
	for _, p := range probeLists[list] {
		var errno unix.Errno
		if err := p.call(target, victim); err != nil && !errors.As(err, &errno) {
			errno = 1<<16 - 1 // not an errno
		}
		fmt.Printf("CALL %d %s\n", int(errno), p.name)
	}
	fmt.Println("DONE")
	return 0
}

// i386Probe sends a UDP datagram to addr through the 32-bit entry (int
// 0x80): socketcall, i386 number 102, is the 64-bit getuid, which the filter
// allows; by that numbering it makes the socket the filter refuses.
func i386Probe(addr string) int {
	if msg := confinementError(); msg != "" {
		fmt.Printf("CONFINEMENT FAILED %s\n", msg)
		return 0
	}
	ap, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		fmt.Println("bad address", addr)
		return 1
	}
	x, err := testkit.NewI386()
	if err != nil {
		fmt.Println("no i386 entry:", err)
		return 1
	}
	fmt.Println("TRYING")
	const socketcall, sysSocket, sysSendto = 102, 1, 11
	fd := x.Syscall(socketcall, sysSocket, x.Words(unix.AF_INET, unix.SOCK_DGRAM, 0))
	if fd < 0 {
		fmt.Printf("REFUSED socket %v\n", unix.Errno(-fd))
		return 0
	}
	var sa [16]byte
	sa[0] = unix.AF_INET
	sa[2], sa[3] = byte(ap.Port>>8), byte(ap.Port)
	copy(sa[4:], ap.IP.To4())
	if n := x.Syscall(socketcall, sysSendto, x.Words(uint32(fd), x.Put([]byte("x")), 1, 0, x.Put(sa[:]), 16)); n < 0 {
		fmt.Printf("REFUSED sendto %v\n", unix.Errno(-n))
		return 0
	}
	fmt.Println("SENT")
	return 0
}

// probeOut runs cmd and returns its "CALL" lines' errnos by name, the note,
// and its whole output.
func probeOut(t *testing.T, cmd *exec.Cmd) (map[string]unix.Errno, string, string) {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	got := map[string]unix.Errno{}
	note := ""
	for _, line := range strings.Split(string(out), "\n") {
		if n, ok := strings.CutPrefix(line, "NOTE "); ok {
			note = n
		}
		var errno int
		if _, err := fmt.Sscanf(line, "CALL %d", &errno); err == nil {
			got[strings.SplitN(line, " ", 3)[2]] = unix.Errno(errno)
		}
	}
	if !strings.Contains(string(out), "\nDONE\n") {
		t.Fatalf("probe did not finish:\n%s", out)
	}
	return got, note, string(out)
}

// checkProbes compares what each probe got with want.
func checkProbes(t *testing.T, what string, probes []probeCall, got map[string]unix.Errno, want func(string) unix.Errno) {
	t.Helper()
	for _, p := range probes {
		g, ok := got[p.name]
		if !ok {
			t.Errorf("%s: %s: not tried", what, p.name)
			continue
		}
		if w := want(p.name); g != w {
			t.Errorf("%s: %s: errno %d (%v), want %d (%v)", what, p.name, int(g), g, int(w), w)
		}
	}
}

// TestWorkerFilterNamesEveryDenial: every call confine_linux.c's denied[]
// names gets the filter's EPERM in a confined worker, a refusal a test can
// tell from the kernel's: one dropped from the list would get ENOSYS (the
// default), one moved among the allowed calls the kernel's own answer.
func TestWorkerFilterNamesEveryDenial(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(mustExe(t), "filter-probe", "denied")
	cmd.Env = []string{envWorker + "=1"}
	got, note, _ := probeOut(t, cmd)
	checkProbes(t, note, deniedProbes, got, func(string) unix.Errno { return unix.EPERM })
}

// TestWorkerFilterChecksArguments: the calls the filter lets through
// only in some forms refuse the others with EPERM: raising its own limits
// (prlimit64 with a new limit, wherever the pointer is), grows-down
// mappings, guard regions, descriptor ownership and signals to other
// processes (fcntl F_SETOWN_EX, F_SETSIG, F_SETLEASE), dumpability, a
// process sharing its memory (clone with CLONE_VM, no CLONE_THREAD),
// signals to any process but itself (kill, tgkill, rt_sigqueueinfo; -1 and
// its group), x32 calls (on x86_64); while the forms a worker uses pass.
func TestWorkerFilterChecksArguments(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(mustExe(t), "filter-probe", "args", "", strconv.Itoa(os.Getpid()))
	cmd.Env = []string{envWorker + "=1"}
	got, note, _ := probeOut(t, cmd)
	checkProbes(t, note, argProbes, got, argWant)
}

// TestWorkerSeccompAloneRefuses: the filter's refusals hold by themselves,
// as they must on a kernel without Landlock or before its signal scoping
// (ABI 6), for a maiden not running as root (whose worker keeps its user):
// a worker started as nobody, with Landlock hidden, signals no other
// process of nobody's (kill, tgkill, rt_sigqueueinfo, fcntl F_SETOWN_EX)
// and its every other checked call is refused as above.
func TestWorkerSeccompAloneRefuses(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("starts processes as nobody: needs root")
	}
	exe := nobodyCopy(t)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	victim := exec.Command("sleep", "60")
	victim.SysProcAttr = &syscall.SysProcAttr{Credential: nobody, Pdeathsig: syscall.SIGKILL}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	cmd := exec.Command(exe, "filter-probe", "args", "", strconv.Itoa(victim.Process.Pid))
	cmd.Env = []string{envHideLandlock + "=1"}
	cmd.Dir = filepath.Dir(exe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody, Pdeathsig: syscall.SIGKILL}
	got, note, out := probeOut(t, cmd)
	if !strings.HasPrefix(note, "landlock unavailable (errno 38)") {
		t.Fatalf("the worker was not started without Landlock:\n%s", out)
	}
	checkProbes(t, "without Landlock, as nobody", argProbes, got, argWant)
	if testkit.Killed(t, victim.Process.Pid) {
		t.Error("the victim was killed")
	}
}

// nobodyCopy is a copy of this test binary that nobody may execute.
func nobodyCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "worker-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(mustExe(t))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "worker.test")
	testkit.WriteExecutable(t, exe, b)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestWorkerOtherArchitectureIsKilled: a worker's system call by the i386
// numbering (int 0x80) kills it (SIGSYS) before the filter's checks by
// number are read under the wrong names: socketcall (i386 102) would pass
// as the 64-bit getuid and make the socket the filter refuses, and send a
// datagram from it.
func TestWorkerOtherArchitectureIsKilled(t *testing.T) {
	t.Parallel()
	if err := testkit.I386Syscalls(); errors.Is(err, testkit.ErrNoI386) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got atomic.Int64
	go func() {
		buf := make([]byte, 16)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	cmd := exec.Command(mustExe(t), "i386-probe", c.LocalAddr().String())
	cmd.Env = []string{envWorker + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSYS || !strings.Contains(string(out), "TRYING") {
		t.Errorf("an i386 socketcall in a worker: %v, want killed by SIGSYS:\n%s", err, out)
	}
	if n := got.Load(); n != 0 {
		t.Errorf("the UDP socket got %d datagrams", n)
	}
}

// TestWorkerLimitsHold: a worker's rlimits, read from outside: no core
// dump (a crashed worker's memory holds the call's input and revealed
// secrets), no file written (RLIMIT_FSIZE 0; 1 GiB for one with a writable
// preopened directory), 256 descriptors; started by root, no supplementary
// group; and its note names the kernel's Landlock ABI (the ruleset was
// built and applied).
func TestWorkerLimitsHold(t *testing.T) {
	t.Parallel()
	w, err := spawn(t.Context(), []string{mustExe(t)}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.kill(killedShutdown)
	rlimits := func(pid int) string {
		var parts []string
		for _, r := range []struct {
			name string
			res  int
		}{{"core", unix.RLIMIT_CORE}, {"fsize", unix.RLIMIT_FSIZE}, {"nofile", unix.RLIMIT_NOFILE}} {
			var rl unix.Rlimit
			if err := prlimit(pid, r.res, nil, &rl); err != nil {
				t.Fatal(err)
			}
			parts = append(parts, fmt.Sprintf("%s %d/%d", r.name, rl.Cur, rl.Max))
		}
		return strings.Join(parts, ", ")
	}
	if got, want := rlimits(w.pid), "core 0/0, fsize 0/0, nofile 256/256"; got != want {
		t.Errorf("a worker's rlimits: %s, want %s", got, want)
	}
	if abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); e == 0 {
		if want := fmt.Sprintf("landlock ABI %d", abi); !strings.HasPrefix(w.confinement, want) {
			t.Errorf("a worker's confinement: %q, want %q", w.confinement, want)
		}
	}
	if os.Geteuid() == 0 {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.pid))
		if err != nil {
			t.Fatal(err)
		}
		if g := statusField(string(status), "Groups"); g != "" {
			t.Errorf("a worker started by root is in groups %q, want none", g)
		}
	}
	dir := t.TempDir()
	dirs, err := sandbox.OpenPreopens([]sandbox.Preopen{{HostPath: dir, GuestPath: "/w", Write: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.ClosePreopens(dirs)
	files, env := preopenSpawn(dirs)
	pw, err := spawnWith(t.Context(), []string{mustExe(t)}, 10*time.Second, files, env, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pw.kill(killedShutdown)
	if got, want := rlimits(pw.pid), "core 0/0, fsize 1073741824/1073741824, nofile 256/256"; got != want {
		t.Errorf("a worker with a writable directory: %s, want %s", got, want)
	}
}

// TestPreopenWorkerFilter: a worker with preopened directories, which
// Landlock confines to them, changes no file's mode, owner, times or
// attributes (no Landlock right covers them, and its filesystem ids are
// maiden's: the filter alone refuses, EPERM), makes no FIFO (the filter,
// before Landlock), changes nothing in a read-only directory (opens no file
// for writing or truncation, creates, makes or removes nothing: Landlock,
// EACCES), and writes no file past 1 GiB (EFBIG).
func TestPreopenWorkerFilter(t *testing.T) {
	t.Parallel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ro, rw, outside := filepath.Join(base, "ro"), filepath.Join(base, "rw"), filepath.Join(base, "outside")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{filepath.Join(ro, "in.txt"): "public", filepath.Join(rw, "mine.txt"): "mine", outside: "maiden's"}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := sandbox.OpenPreopens([]sandbox.Preopen{{HostPath: ro, GuestPath: "/ro"}, {HostPath: rw, GuestPath: "/rw", Write: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.ClosePreopens(dirs)
	pfiles, env := preopenSpawn(dirs)
	cmd := exec.Command(mustExe(t), "filter-probe", "preopen", outside)
	cmd.Env = append(env, envWorker+"=1")
	cmd.ExtraFiles = append([]*os.File{os.Stdin}, pfiles...)
	got, note, _ := probeOut(t, cmd)
	checkProbes(t, note, preopenFilterProbes, got, preopenFilterWant)
	for p, s := range files {
		fi, err := os.Stat(p)
		if b, _ := os.ReadFile(p); err != nil || string(b) != s || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s after the probe: %q, %v %v", p, b, fi.Mode(), err)
		}
	}
}

// TestPreopenWorkerNeedsLandlock: where the kernel offers no Landlock, a
// worker for preopened directories refuses to start (the filter lets its
// opens through: nothing else would hold it to its directories), and an
// ordinary worker starts, saying Landlock is unavailable.
func TestPreopenWorkerNeedsLandlock(t *testing.T) {
	t.Parallel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ro, outside := filepath.Join(base, "ro"), filepath.Join(base, "outside")
	for _, d := range []string{ro, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirs, err := sandbox.OpenPreopens([]sandbox.Preopen{{HostPath: ro, GuestPath: "/ro"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.ClosePreopens(dirs)
	pfiles, env := preopenSpawn(dirs)
	cmd := exec.Command(mustExe(t), "preopen-probe", outside)
	cmd.Env = append(env, envHideLandlock+"=1")
	cmd.ExtraFiles = append([]*os.File{os.Stdin}, pfiles...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "CONFINEMENT-ERROR preopened directories need Landlock") {
		t.Errorf("a preopen worker without Landlock: %v\n%s", err, out)
	}
	plain := exec.Command(mustExe(t), "filter-probe", "args", "", strconv.Itoa(os.Getpid()))
	plain.Env = []string{envHideLandlock + "=1"}
	got, note, _ := probeOut(t, plain)
	if !strings.HasPrefix(note, "landlock unavailable") {
		t.Errorf("a worker without Landlock says %q", note)
	}
	checkProbes(t, note, argProbes, got, argWant)
}

// TestWorkerMemcgBoundsTheWorker: where maiden runs as root over cgroup
// v1's memory controller, a worker is in a memory cgroup of its own (its
// usage is what the worker holds), and growing past the limit setLimit
// sets has the kernel kill it, which oomKilled then reports (and not
// before).
func TestWorkerMemcgBoundsTheWorker(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 || !memoryControllerMounted(t) {
		t.Skip("workers get a memory cgroup only from root on cgroup v1's memory controller")
	}
	if _, err := memcgRoot(); err != nil {
		t.Fatalf("root, cgroup v1's memory controller mounted, and no memory cgroup for workers: %v", err)
	}
	cmd, stdin, out, m := startMemcgHog(t)
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + filepath.Base(filepath.Dir(m.dir)) + "/" + filepath.Base(m.dir); !strings.Contains(string(cg), want+"\n") {
		t.Fatalf("the process is not in its memory cgroup %s:\n%s", m.dir, cg)
	}
	if _, err := fmt.Fprintln(stdin, "grow 16"); err != nil || !out.Scan() || out.Text() != "ok" {
		t.Fatalf("grow 16: %q %v", out.Text(), err)
	}
	if m.oomKilled() {
		t.Error("oomKilled before any limit was reached")
	}
	if err := m.setLimit(16 << 20); err != nil {
		t.Fatal(err)
	}
	// memcgSlack (64 MiB) and the headroom (16 MiB) are above the usage:
	// 256 MiB more is over.
	_, _ = fmt.Fprintln(stdin, "grow 256")
	if out.Scan() {
		t.Errorf("the process grew 256 MiB past its cgroup's headroom: %q", out.Text())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process ended with %v, want killed by the kernel (SIGKILL)", err)
	}
	if !m.oomKilled() {
		t.Error("oomKilled does not report the kernel's kill")
	}
}

// memoryControllerMounted says whether cgroup v1's memory controller is
// mounted here (read from mountinfo, independently of memcgMount).
func memoryControllerMounted(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if _, post, ok := strings.Cut(line, " - cgroup "); ok {
			if f := strings.Fields(post); len(f) >= 2 && strings.Contains(","+f[1]+",", ",memory,") {
				return true
			}
		}
	}
	return false
}

// TestMemcgLimitWriteFailureIsAnError: a limit the kernel did not take is
// an error for the call (which then does not run), never a limit recorded
// as set.
func TestMemcgLimitWriteFailureIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.usage_in_bytes"), []byte("1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &memcg{dir: dir}
	var err error
	if m.usage, err = os.Open(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
		t.Fatal(err)
	}
	defer m.usage.Close()
	if m.pread, err = newFilePread(m.usage); err != nil {
		t.Fatal(err)
	}
	// Every write to /dev/full fails (ENOSPC).
	if m.limit, err = os.OpenFile("/dev/full", os.O_WRONLY, 0); err != nil {
		t.Skip(err)
	}
	defer m.limit.Close()
	if err := m.setLimit(16 << 20); !errors.Is(err, unix.ENOSPC) || m.set != 0 {
		t.Errorf("setLimit with a limit file that refuses writes: %v, limit recorded %d; want ENOSPC and none", err, m.set)
	}
}

// TestPreopenWorkerNotReusedForAReplacedDirectory: a worker started for a
// directory (its Landlock rule holds that directory, not its name) does not
// serve the next call for the same path once another directory was put
// there: a new worker serves it, and reads the new directory, not the one
// moved away.
func TestPreopenWorkerNotReusedForAReplacedDirectory(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1, CacheDir: testkit.CompileCache(t)})
	tl, err := p.Open(t.Context(), testkit.Component(t, "go/fsprobe"), lim)
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(base, "a")
	read := func() (string, int) {
		t.Helper()
		out, err := tl.Execute(t.Context(), sandbox.Call{Limits: sandbox.Limits{Timeout: 30 * time.Second, Memory: 128 << 20},
			Input: `{"op":"read","path":"` + a + `/name"}`, Preopens: []sandbox.Preopen{{HostPath: a, GuestPath: a}}})
		if err != nil {
			t.Fatal(err)
		}
		p.preMu.Lock()
		defer p.preMu.Unlock()
		if len(p.preIdle) == 0 {
			t.Fatal("no idle one-call worker after a call")
		}
		if out.Failure != nil {
			return "error: " + out.Failure.Message, p.preIdle[len(p.preIdle)-1].w.pid
		}
		return out.Output, p.preIdle[len(p.preIdle)-1].w.pid
	}
	makeA := func(name string) {
		t.Helper()
		if err := os.Mkdir(a, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(a, "name"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	makeA("a")
	out1, pid1 := read()
	if err := os.Rename(a, filepath.Join(base, "moved")); err != nil {
		t.Fatal(err)
	}
	makeA("new a")
	out2, pid2 := read()
	if out1 != `"a"` || pid2 == pid1 || out2 != `"new a"` {
		t.Errorf("before the directory was replaced: %s (worker %d); after: %s (worker %d); want a new worker reading the new directory", out1, pid1, out2, pid2)
	}
}

// TestMemcgHeadroomIsOverTheRestingSize: the cgroup's limit for a call is
// what the worker holds now plus the call's headroom above its resting
// size (the data limit less the resting size), not the whole data limit
// again on top of what it holds.
func TestMemcgHeadroomIsOverTheRestingSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const used, base, headroom = 50 << 20, 100 << 20, 32 << 20
	for name, v := range map[string]string{"memory.usage_in_bytes": strconv.Itoa(used) + "\n", "memory.limit_in_bytes": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := openMemcg(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.usage.Close()
	defer m.limit.Close()
	w := &proc{memcg: m, base: base}
	if err := w.setMemcgLimit(base + headroom); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.limit_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), strconv.Itoa(used+headroom+memcgSlack); got != want {
		t.Errorf("the limit for a data limit of the resting size + %d MiB: %s, want %s (usage + headroom + slack)", headroom>>20, got, want)
	}
}

// TestWorkerDropsGroupsAndFilesystemIds: a worker started by root (here
// with a supplementary group, as maiden may have) keeps none of root's
// groups, and its filesystem ids are its own uid and gid, not maiden's
// (only a worker with preopened directories keeps maiden's): the kernel's
// checks by group and by owner give it nothing of maiden's files.
func TestWorkerDropsGroupsAndFilesystemIds(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("workers change ids only when maiden runs as root")
	}
	cmd := exec.Command(mustExe(t), "confine-probe")
	cmd.Env = []string{envWorker + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{4242}}}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	r := bufio.NewReader(stdout)
	var pid, uid, gid int
	for _, prefix := range []string{"NOTE ", "IDS ", "PDEATHSIG "} {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, prefix) {
			t.Fatalf("probe: %q %v", line, err)
		}
		if prefix == "IDS " {
			fmt.Sscanf(line, "IDS %d %d %d", &pid, &uid, &gid)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	if g := statusField(string(status), "Groups"); g != "" {
		t.Errorf("a worker started by root in group 4242 is in groups %q, want none", g)
	}
	for key, id := range map[string]int{"Uid": uid, "Gid": gid} {
		want := strings.Repeat(strconv.Itoa(id)+"\t", 3) + strconv.Itoa(id)
		if got := statusField(string(status), key); got != want {
			t.Errorf("a worker's %s (real, effective, saved, filesystem): %q, want %q", key, got, want)
		}
	}
}
