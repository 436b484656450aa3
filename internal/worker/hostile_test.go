package worker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hostileWorker behaves as a compromised worker would, for the tests that
// check the parent survives it.
func hostileWorker(mode string) int {
	conn := os.NewFile(ipcFD, "ipc")
	r := bufio.NewReader(conn)
	write := func(b []byte) { _, _ = conn.Write(b) }
	// The shared mailboxes, for the modes that write them out of turn.
	var toW, toP *mailbox
	if strings.HasPrefix(mode, "hostile-mailbox-") {
		region := childMailboxes()
		if region == nil {
			fmt.Fprintln(os.Stderr, "hostile worker: no mailbox region")
			return 1
		}
		toW, toP = mailboxAt(region, toWorker), mailboxAt(region, toParent)
	}
	write(hello{Version: protocolVersion, Fingerprint: "hostile", Confinement: "none"}.encode())
	loads := 0
	for {
		typ, p, err := readFrame(r, maxFrame)
		if err != nil {
			return 0
		}
		switch typ {
		case msgLoad:
			loads++
			m, _ := decodeLoad(p)
			// The code sent by descriptor is taken (and dropped), as a
			// worker must before it answers; hostile-code-unread leaves
			// it in the channel.
			if mode != "hostile-code-unread" {
				takeCode(m)
			}
			write(loadedMsg{Digest: m.Digest}.encode())
			if mode == "hostile-mailbox-deaf" {
				// Say a frame of the parent's is being read from the
				// slot, forever: the parent's next frame waits for it.
				toW.state.Store(mbReading)
			}
		case msgCompile:
			if mode == "hostile-crash-on-compile" {
				// As cranelift's panic would: abort the process.
				_ = unix.Kill(os.Getpid(), unix.SIGABRT)
				time.Sleep(time.Second)
			}
			return 1
		case msgRun:
			m, _ := decodeRun(p)
			switch mode {
			case "hostile-mailbox-overrun":
				// Once the parent polls, a frame "in the slot" longer
				// than the slot (and the whole region).
				for end := time.Now().Add(5 * time.Second); toP.state.Load() != mbWaiting && time.Now().Before(end); {
				}
				toP.state.Store(mbTaken)
				toP.n.Store(1 << 30)
				toP.state.Store(mbFull)
			case "hostile-mailbox-stray":
				// Answer by the socket, then, idle, a frame in the
				// slot nobody asked for.
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
				time.Sleep(10 * time.Millisecond)
				copy(toP.slot, doneMsg{ID: m.ID + 1, Output: `"forged"`}.encode())
				toP.n.Store(32)
				toP.state.Store(mbFull)
			case "hostile-garbage":
				write([]byte{0, 0, 0, 5, 67, 1, 2, 3, 4})
			case "hostile-huge-frame":
				write([]byte{0xff, 0xff, 0xff, 0xff, 67})
			case "hostile-wrong-id":
				write(doneMsg{ID: m.ID + 7, Output: "forged"}.encode())
			case "hostile-flood-logs":
				line := make([]byte, 60000)
				for i := range line {
					line[i] = 'x'
				}
				for i := 0; i < 200; i++ {
					write(logMsg{ID: m.ID, Level: "info", Source: "log", Message: string(line)}.encode())
				}
				write(doneMsg{ID: m.ID, FailKind: "tool", FailMessage: "flooded"}.encode())
			case "hostile-pagetables":
				// Page tables RLIMIT_DATA does not see: a read-only
				// mapping read once per 2 MiB costs a 4 KiB page-table
				// page each, 512 MiB for 256 GiB, and no data at all.
				const size = 256 << 30
				b, err := unix.Mmap(-1, 0, size, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
				if err != nil {
					write(doneMsg{ID: m.ID, FailKind: "tool", FailMessage: "mmap: " + err.Error()}.encode())
					continue
				}
				_ = unix.Madvise(b, unix.MADV_NOHUGEPAGE)
				sum := 0
				for i := 0; i < size; i += 2 << 20 {
					sum += int(b[i])
				}
				write(doneMsg{ID: m.ID, Output: fmt.Sprintf(`"survived %d"`, sum)}.encode())
			case "hostile-silent":
				// Never answers: the deadline kill must end the call.
			case "hostile-mailbox-deaf-silent":
				// Never answers, and says forever that a frame of the
				// parent's is being read from the slot: a cancel frame
				// cannot be written.
				toW.state.Store(mbReading)
			case "hostile-mailbox-deaf-when-full":
				// Honest until it holds as many codes as a worker
				// keeps; then, answered and idle, it says forever that
				// a frame of the parent's is being read from the slot.
				// Between calls the parent watches only the other
				// mailbox and the socket, so it is reused, and the
				// next new code's drop frame waits for the slot.
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
				if loads >= maxLoadedPerWorker {
					toW.state.Store(mbReading)
				}
			case "hostile-compiled-frame":
				// A call worker announcing compiled code of the
				// largest frame's size, which only a compile worker
				// sends; then gone.
				var hdr [5]byte
				binary.BigEndian.PutUint32(hdr[:4], maxFrame)
				hdr[4] = msgCompiled
				write(hdr[:])
				return 0
			case "hostile-reveal-twice":
				// A tool is one thread: a second reveal before the first
				// answer cannot come from a sandbox.
				write(revealMsg{ID: m.ID, Handle: "a"}.encode())
				write(revealMsg{ID: m.ID, Handle: "b"}.encode())
			case "hostile-reveal-wrong-id":
				write(revealMsg{ID: m.ID + 1, Handle: "a"}.encode())
			case "hostile-reveal-huge":
				write(revealMsg{ID: m.ID, Handle: strings.Repeat("h", 1<<20)}.encode())
			}
		}
	}
}

// probeCall is one attempt of the confinement probe: a system call made
// with arguments chosen so that, were the filter to let it through, the
// kernel would answer something other than the filter's errno (success on
// the probe's own process or a file the test gave it, EINVAL, EBADF,
// ESRCH), and nothing the test process depends on is harmed.
type probeCall struct {
	name string
	call func(target string, parent int) error
}

func errnoOf(_, _ uintptr, e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// takeCode takes (and drops) the code a load frame says was sent by
// descriptor, as a worker must before it answers the load: the fake
// workers of these tests answer loads without looking at the code.
func takeCode(m loadMsg) {
	if m.Size > 0 {
		if _, unmap, err := receiveCode(childCodeFD(), m.Size); err == nil {
			unmap()
		}
	}
}

func sys(nr uintptr, a ...uintptr) error {
	var args [6]uintptr
	copy(args[:], a)
	return errnoOf(unix.Syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5]))
}

func str(s string) uintptr {
	p, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(p))
}

const atFDCWD = ^uintptr(99) // AT_FDCWD (-100) as a register

// confineProbes are the calls TestWorkerIsConfined makes in a confined
// worker; confineWant says what each must get.
var confineProbes = []probeCall{
	// Calls a worker needs (positive controls: the filter lets them through).
	{"getpid", func(string, int) error { return sys(unix.SYS_GETPID) }},
	{"kill self 0", func(string, int) error { return sys(unix.SYS_KILL, uintptr(os.Getpid()), 0) }},
	{"tgkill self 0", func(string, int) error { return sys(unix.SYS_TGKILL, uintptr(os.Getpid()), uintptr(unix.Gettid()), 0) }},
	{"prctl PR_SET_NAME", func(string, int) error { return sys(unix.SYS_PRCTL, unix.PR_SET_NAME, str("probe")) }},
	{"fcntl F_GETFD", func(string, int) error { return sys(unix.SYS_FCNTL, 1, unix.F_GETFD) }},
	{"mmap private", func(string, int) error {
		b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err == nil {
			_ = unix.Munmap(b)
		}
		return err
	}},
	// Files: metadata no Landlock right covers, on a file the worker owns.
	{"open /etc/hostname", func(string, int) error {
		return sys(unix.SYS_OPENAT, atFDCWD, str("/etc/hostname"), unix.O_RDONLY)
	}},
	{"fchmodat", func(t string, _ int) error { return sys(unix.SYS_FCHMODAT, atFDCWD, str(t), 0o666) }},
	{"fchmodat2", func(t string, _ int) error { return sys(452, atFDCWD, str(t), 0o666, 0) }},
	{"fchownat", func(t string, _ int) error {
		return sys(unix.SYS_FCHOWNAT, atFDCWD, str(t), uintptr(os.Getuid()), uintptr(os.Getgid()), 0)
	}},
	{"utimensat", func(t string, _ int) error { return sys(unix.SYS_UTIMENSAT, atFDCWD, str(t), 0, 0) }},
	{"setxattr", func(t string, _ int) error {
		return sys(unix.SYS_SETXATTR, str(t), str("user.maiden"), str("x"), 1, 0)
	}},
	{"fanotify_init", func(string, int) error {
		return sys(unix.SYS_FANOTIFY_INIT, unix.FAN_CLASS_NOTIF|unix.FAN_REPORT_FID, unix.O_RDONLY)
	}},
	{"fanotify_mark", func(string, int) error {
		return sys(unix.SYS_FANOTIFY_MARK, ^uintptr(0), unix.FAN_MARK_ADD, unix.FAN_OPEN_PERM, atFDCWD, str("/"))
	}},
	{"inotify_init1", func(string, int) error { return sys(unix.SYS_INOTIFY_INIT1, 0) }},
	{"inotify_add_watch", func(string, int) error {
		return sys(unix.SYS_INOTIFY_ADD_WATCH, ^uintptr(0), str("/"), unix.IN_ALL_EVENTS)
	}},
	// Scheduling: on itself (allowed to any process for itself), so that
	// only the filter refuses.
	{"setpriority", func(string, int) error { return sys(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, 19) }},
	{"sched_setscheduler", func(string, int) error {
		var param [1]int32
		return sys(unix.SYS_SCHED_SETSCHEDULER, 0, 0 /* SCHED_OTHER */, uintptr(unsafe.Pointer(&param)))
	}},
	{"sched_setaffinity", func(string, int) error {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return err
		}
		return unix.SchedSetaffinity(0, &set)
	}},
	{"ioprio_set", func(string, int) error { return sys(unix.SYS_IOPRIO_SET, 1, 0, 2<<13|4) }},
	{"prctl PR_SET_PDEATHSIG 0", func(string, int) error { return sys(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, 0) }},
	// Processes and namespaces. clone's flags are invalid for the kernel
	// (a thread group without shared signal handlers: EINVAL), so that
	// only the filter answers EPERM.
	{"clone CLONE_THREAD|CLONE_NEWNET", func(string, int) error {
		return sys(unix.SYS_CLONE, unix.CLONE_THREAD|unix.CLONE_NEWNET)
	}},
	{"clone3", func(string, int) error { return sys(unix.SYS_CLONE3, 0, 0) }},
	{"fork (clone SIGCHLD)", func(string, int) error {
		r, _, e := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e == 0 && r == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0) // the child
		}
		return errnoOf(r, 0, e)
	}},
	{"unshare CLONE_NEWUSER", func(string, int) error { return sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER) }},
	{"unshare CLONE_NEWNET", func(string, int) error { return sys(unix.SYS_UNSHARE, unix.CLONE_NEWNET) }},
	{"setns", func(string, int) error { return sys(unix.SYS_SETNS, ^uintptr(0), 0) }},
	{"ptrace PEEKDATA parent", func(_ string, p int) error { return sys(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, uintptr(p), 0, 0) }},
	{"pidfd_open parent", func(_ string, p int) error { return sys(unix.SYS_PIDFD_OPEN, uintptr(p), 0) }},
	{"kill parent 0", func(_ string, p int) error { return sys(unix.SYS_KILL, uintptr(p), 0) }},
	{"tkill self 0", func(string, int) error { return sys(unix.SYS_TKILL, uintptr(unix.Gettid()), 0) }},
	{"fsopen", func(string, int) error { return sys(unix.SYS_FSOPEN, str("tmpfs"), 0) }},
	{"open_tree", func(string, int) error { return sys(unix.SYS_OPEN_TREE, atFDCWD, str("/"), 1<<30) }},
	{"mount", func(string, int) error { return sys(unix.SYS_MOUNT, str("none"), str("/"), str("tmpfs"), 0, 0) }},
	{"chroot", func(string, int) error { return sys(unix.SYS_CHROOT, str("/")) }},
	{"syslog", func(string, int) error { return sys(unix.SYS_SYSLOG, 10 /* SIZE_BUFFER */, 0, 0) }},
	{"socket AF_UNIX", func(string, int) error { return sys(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0) }},
	{"socket AF_INET", func(string, int) error { return sys(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0) }},
	{"bpf", func(string, int) error { return sys(unix.SYS_BPF, 9999, 0, 0) }},
	{"keyctl", func(string, int) error { return sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(2), 0) }},
	{"perf_event_open", func(string, int) error { return sys(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0) }},
	{"userfaultfd", func(string, int) error { return sys(unix.SYS_USERFAULTFD, 0) }},
	{"memfd_create", func(string, int) error { return sys(unix.SYS_MEMFD_CREATE, str("probe"), 0) }},
	{"io_uring_setup", func(string, int) error { return sys(unix.SYS_IO_URING_SETUP, 0, 0) }},
	{"personality", func(string, int) error { return sys(unix.SYS_PERSONALITY, 0xffffffff) }},
	{"setsid", func(string, int) error { return sys(unix.SYS_SETSID) }},
	{"setresuid 0", func(string, int) error { return sys(unix.SYS_SETRESUID, 0, 0, 0) }},
	// Memory nothing accounts: pipes, shared and huge mappings, IPC.
	{"pipe2", func(string, int) error {
		var fds [2]int32
		return sys(unix.SYS_PIPE2, uintptr(unsafe.Pointer(&fds)), 0)
	}},
	{"fcntl F_SETPIPE_SZ", func(string, int) error { return sys(unix.SYS_FCNTL, 1, unix.F_SETPIPE_SZ, 1<<20) }},
	{"fcntl F_SETOWN parent", func(_ string, p int) error { return sys(unix.SYS_FCNTL, 1, unix.F_SETOWN, uintptr(p)) }},
	{"fcntl F_NOTIFY", func(string, int) error { return sys(unix.SYS_FCNTL, 1, unix.F_NOTIFY, 2 /* DN_MODIFY */) }},
	{"ioctl TIOCSTI", func(string, int) error {
		c := byte('x')
		return sys(unix.SYS_IOCTL, 1, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	}},
	{"mmap MAP_SHARED", func(string, int) error {
		_, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
		return err
	}},
	{"mmap MAP_HUGETLB", func(string, int) error {
		_, err := unix.Mmap(-1, 0, 2<<20, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_HUGETLB)
		return err
	}},
	{"madvise MADV_HWPOISON", func(string, int) error { return sys(unix.SYS_MADVISE, 0, 4096, unix.MADV_HWPOISON) }},
	{"shmget", func(string, int) error { return sys(unix.SYS_SHMGET, unix.IPC_PRIVATE, 1<<20, unix.IPC_CREAT|0o600) }},
	{"prlimit64 raise RLIMIT_DATA", func(string, int) error {
		var rl unix.Rlimit
		_ = unix.Prlimit(0, unix.RLIMIT_DATA, nil, &rl)
		return unix.Prlimit(0, unix.RLIMIT_DATA, &unix.Rlimit{Cur: rl.Max, Max: rl.Max}, nil)
	}},
	// Calls in neither list: the default answer.
	{"getxattr (unlisted)", func(t string, _ int) error { return sys(unix.SYS_GETXATTR, str(t), str("user.x"), 0, 0) }},
	{"mlock (unlisted)", func(string, int) error { var b [8]byte; return sys(unix.SYS_MLOCK, uintptr(unsafe.Pointer(&b)), 8) }},
	// Last: were execve allowed, this process would become /bin/true and
	// the test would miss the line.
	{"execve /bin/true", func(string, int) error { return unix.Exec("/bin/true", []string{"true"}, nil) }},
}

// The parent-death signal is a thread's (a new thread starts without
// one): the constructor sets it on the main thread, so the probe reads it
// there. Locking the OS thread in an init function keeps the main
// goroutine, and so TestMain and confineProbe, on the main thread; without
// it the read came from whichever thread the goroutine ran on and said 0
// now and then (TestWorkerIsConfined in a full run).
func init() {
	if IsChild() && len(os.Args) > 1 && os.Args[1] == "confine-probe" {
		runtime.LockOSThread()
	}
}

// confineProbe makes every call in confineProbes and prints one line per
// call: "CALL <errno number> <name>" (0: it succeeded). It waits for a line
// on stdin first, so the test can hand it the target file (its first
// argument) as its own.
func confineProbe() int {
	if msg := confinementError(); msg != "" {
		fmt.Printf("CONFINEMENT FAILED %s\n", msg)
		return 0
	}
	fmt.Printf("NOTE %s\n", confinementNote())
	fmt.Printf("IDS %d %d %d\n", os.Getpid(), os.Getuid(), os.Getgid())
	var sig int32
	_ = sys(unix.SYS_PRCTL, unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)))
	fmt.Printf("PDEATHSIG %d\n", sig)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	target, parent := "", os.Getppid()
	if len(os.Args) > 2 {
		target = os.Args[2]
	}
	for _, p := range confineProbes {
		var errno unix.Errno
		if err := p.call(target, parent); err != nil && !errors.As(err, &errno) {
			errno = 1<<16 - 1 // not an errno
		}
		fmt.Printf("CALL %d %s\n", int(errno), p.name)
	}
	return 0
}

// threadsProbe starts threads (goroutines locked to their own) until the
// runtime cannot: the Go runtime then ends the process, saying so.
func threadsProbe() int {
	block := make(chan struct{})
	for i := 1; i <= 3000; i++ {
		started := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(started)
			<-block
		}()
		<-started
		if i%50 == 0 {
			fmt.Printf("THREADS %d\n", i)
		}
	}
	fmt.Println("THREADS all 3000")
	return 0
}
