//go:build linux

package confine_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/internal/childproc"
	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The attacks of the mutation pass over how a wrapped CLI's confinement is
// built (docs/security-tests.md, "Fifth pass"): each is a real attempt from
// inside, reported as hostileNet's verbs are ("ok ..." or "refused: ERRNO").

// hostileBuild runs the verbs below; hostileNet hands it what it does not
// know.
func hostileBuild(verb string, args []string) (string, bool) {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	num := func(i int) int {
		n, _ := strconv.Atoi(arg(i))
		return n
	}
	switch verb {
	case "i386-udp":
		return i386UDP(arg(0)), true
	case "x32-socket":
		// socket(2) by the x32 numbering (the number with bit 30 set).
		_, _, e := unix.RawSyscall(unix.SYS_SOCKET|0x40000000, unix.AF_INET, unix.SOCK_DGRAM, 0)
		if e != 0 {
			return errnoReport(e), true
		}
		return "ok, socket", true
	case "socket":
		fd, err := unix.Socket(num(0), num(1), num(2))
		if err != nil {
			return errnoReport(err), true
		}
		unix.Close(fd)
		return "ok, socket", true
	case "signal":
		if err := unix.Kill(num(0), 0); err != nil {
			return errnoReport(err), true
		}
		return "ok, signalled", true
	case "truncate":
		if err := unix.Truncate(arg(0), 0); err != nil {
			return errnoReport(err), true
		}
		return "ok, truncated", true
	case "open-trunc":
		fd, err := unix.Open(arg(0), unix.O_RDONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			return errnoReport(err), true
		}
		unix.Close(fd)
		return "ok, opened with O_TRUNC", true
	case "open-write":
		// Opened for writing without O_TRUNC, then written over.
		fd, err := unix.Open(arg(0), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return errnoReport(err), true
		}
		defer unix.Close(fd)
		if _, err := unix.Pwrite(fd, []byte("X"), 0); err != nil {
			return "opened, write " + errnoReport(err), true
		}
		return "ok, written", true
	case "ioctl-entcnt":
		// RNDGETENTCNT: a device's own ioctl, harmless.
		fd, err := unix.Open(arg(0), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "open " + errnoReport(err), true
		}
		defer unix.Close(fd)
		n, err := unix.IoctlGetInt(fd, unix.RNDGETENTCNT)
		if err != nil {
			return errnoReport(err), true
		}
		return fmt.Sprintf("ok, entropy count %d", n), true
	case "readfd":
		buf := make([]byte, 64)
		n, err := unix.Read(num(0), buf)
		if err != nil {
			return errnoReport(err), true
		}
		return fmt.Sprintf("ok, read %q", buf[:n]), true
	case "rlimits":
		var out []string
		for _, r := range []struct {
			name string
			res  int
		}{{"core", unix.RLIMIT_CORE}, {"data", unix.RLIMIT_DATA}, {"nproc", unix.RLIMIT_NPROC}, {"fsize", unix.RLIMIT_FSIZE}, {"nofile", unix.RLIMIT_NOFILE}} {
			var rl unix.Rlimit
			if err := unix.Getrlimit(r.res, &rl); err != nil {
				return errnoReport(err), true
			}
			out = append(out, fmt.Sprintf("%s %d/%d", r.name, rl.Cur, rl.Max))
		}
		nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
		if err != nil {
			return errnoReport(err), true
		}
		return strings.Join(append(out, fmt.Sprintf("nnp %d", nnp)), ", "), true
	case "run-sleeper", "startcmd-sleeper":
		return sleeperParent(verb), true
	}
	return "", false
}

// i386UDP sends one datagram to addr (ip:port) through the 32-bit entry:
// socketcall (i386 102, the 64-bit getuid) SYS_SOCKET, then SYS_SENDTO.
func i386UDP(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return "bad address " + addr
	}
	x, err := testkit.NewI386()
	if err != nil {
		return "no i386 entry: " + err.Error()
	}
	const socketcall, sysSocket, sysSendto = 102, 1, 11
	fd := x.Syscall(socketcall, sysSocket, x.Words(unix.AF_INET, unix.SOCK_DGRAM, 0))
	if fd < 0 {
		return errnoReport(unix.Errno(-fd))
	}
	var sa [16]byte
	binary.LittleEndian.PutUint16(sa[0:], unix.AF_INET)
	binary.BigEndian.PutUint16(sa[2:], ap.Port())
	ip := ap.Addr().As4()
	copy(sa[4:], ip[:])
	msg := x.Put([]byte("x"))
	if n := x.Syscall(socketcall, sysSendto, x.Words(uint32(fd), msg, 1, 0, x.Put(sa[:]), 16)); n < 0 {
		return "socket ok, sendto " + errnoReport(unix.Errno(-n))
	}
	return "ok, sent"
}

// sleeperParent is not confined: it is maiden, starting a confined
// sleeper (by Run or StartCmd), printing the sleeper's pid once it is
// confined (its seccomp filter in force: past every step of its start),
// and waiting to be killed.
func sleeperParent(how string) string {
	self, _ := os.Executable()
	pid := 0
	switch how {
	case "run-sleeper":
		go func() {
			_, _ = confine.Run(context.Background(), confine.Spec{Path: self, Env: []string{modeEnv + "=sleep"}})
		}()
		// Run returns only when the sleeper ends: find it among this
		// process's children.
		for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return "no confined child"
			}
			pid = confinedChild(os.Getpid())
		}
	default:
		cmd := exec.Command(self)
		cmd.Env = []string{modeEnv + "=sleep"}
		if _, err := confine.StartCmd(cmd, confine.Spec{}); err != nil {
			return "StartCmd: " + err.Error()
		}
		pid = cmd.Process.Pid
	}
	fmt.Printf("PID %d\n", pid)
	for {
		time.Sleep(time.Hour) // until killed
	}
}

// confinedChild finds a child of process ppid whose seccomp filter is in
// force, or 0.
func confinedChild(ppid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		s := string(b)
		if strings.Contains(s, "\nPPid:\t"+strconv.Itoa(ppid)+"\n") && strings.Contains(s, "\nSeccomp:\t2\n") {
			return pid
		}
	}
	return 0
}

// udpCounter is a loopback UDP socket counting the datagrams it gets.
func udpCounter(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var n atomic.Int64
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return c.LocalAddr().String(), &n
}

// runNet runs a hostileNet verb confined by Run and returns the result
// (the program may be killed: no exit-code check).
func runNet(t *testing.T, s confine.Spec, args ...string) confine.Result {
	t.Helper()
	s.Path, s.Args, s.Env = self(t), append([]string{}, args...), append(s.Env, modeEnv+"=net")
	return run(t, s)
}

// serveNet asks a StartCmd process (the serve mode) for a verb and returns
// its answer line.
func serveNet(t *testing.T, in io.Writer, out *bufio.Reader, req string) string {
	t.Helper()
	if _, err := io.WriteString(in, req+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := out.ReadString('\n')
	if err != nil {
		return "no answer: " + err.Error()
	}
	return strings.TrimSpace(line)
}

// TestOtherArchitecturesAreKilled: a wrapped CLI's system call by another
// architecture's numbering kills it (SIGSYS), before the filter's checks by
// number could be read under the wrong names: an i386 socketcall (int 0x80;
// 102 is the 64-bit getuid, which the filter lets through) would make the
// UDP socket the filter refuses and send from it, and an x32 call (bit 30)
// matches none of the filter's numbers. Run and StartCmd, with and without
// network. On a kernel that takes no i386 calls (IA32 emulation off: int
// 0x80 faults before any filter is asked) only the x32 calls are made.
func TestOtherArchitecturesAreKilled(t *testing.T) {
	t.Parallel()
	proxy, _ := listener(t)
	target, got := udpCounter(t)
	attacks, served := [][]string{{"i386-udp", target}, {"x32-socket"}}, "i386-udp "+target
	if err := testkit.I386Syscalls(); errors.Is(err, testkit.ErrNoI386) {
		t.Logf("the i386 calls left out: %v", err)
		attacks, served = attacks[1:], "x32-socket"
	} else if err != nil {
		t.Fatal(err)
	}
	for _, s := range []confine.Spec{{}, {ProxyPort: port(proxy)}} {
		for _, attack := range attacks {
			res := runNet(t, s, attack...)
			if res.Signal != "SIGSYS" {
				t.Errorf("proxy port %d: %s: %+v (stdout %q), want killed by SIGSYS", s.ProxyPort, attack[0], res, res.Stdout)
			}
		}
	}
	cmd, in, out := startCmd(t, "serve", confine.Spec{})
	if line := serveNet(t, in, out, served); !strings.HasPrefix(line, "no answer") {
		t.Errorf("StartCmd: %s: %q, want the process killed", served, line)
	}
	in.Close() // a process that survived ends at the end of its input
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "bad system call") {
		t.Errorf("StartCmd: the process ended with %v, want killed by SIGSYS", err)
	}
	if n := got.Load(); n != 0 {
		t.Errorf("the UDP socket got %d datagrams", n)
	}
}

// TestNoSocketWithoutNetwork: a run without a proxy port opens no socket
// at all (EACCES from the filter), not even TCP, whose connect and bind
// Landlock would refuse where it has network rules (ABI 4): on older
// kernels the filter is the wall. With a proxy port, only TCP: a stream
// socket of another protocol (SCTP, MPTCP), netlink, packet and unix
// sockets are refused too.
func TestNoSocketWithoutNetwork(t *testing.T) {
	t.Parallel()
	proxy, _ := listener(t)
	inet := strconv.Itoa(unix.AF_INET)
	stream := strconv.Itoa(unix.SOCK_STREAM)
	noNet := [][]string{{inet, stream, "0"}, {strconv.Itoa(unix.AF_INET6), stream, strconv.Itoa(unix.IPPROTO_TCP)}}
	withNet := [][]string{
		{inet, stream, strconv.Itoa(unix.IPPROTO_SCTP)},
		{inet, stream, strconv.Itoa(unix.IPPROTO_MPTCP)},
		{strconv.Itoa(unix.AF_NETLINK), strconv.Itoa(unix.SOCK_RAW), "0"},
		{strconv.Itoa(unix.AF_PACKET), strconv.Itoa(unix.SOCK_DGRAM), "0"},
		{strconv.Itoa(unix.AF_UNIX), stream, "0"},
	}
	for _, c := range noNet {
		if got := netMode(t, confine.Spec{}, append([]string{"socket"}, c...)...); got != "refused: EACCES" {
			t.Errorf("no network: socket(%s): %q, want refused: EACCES", strings.Join(c, ", "), got)
		}
	}
	for _, c := range withNet {
		if got := netMode(t, confine.Spec{ProxyPort: port(proxy)}, append([]string{"socket"}, c...)...); got != "refused: EACCES" {
			t.Errorf("with network: socket(%s): %q, want refused: EACCES", strings.Join(c, ", "), got)
		}
	}
	_, in, out := startCmd(t, "serve", confine.Spec{})
	if got := serveNet(t, in, out, "socket "+strings.Join(noNet[0], " ")); got != "refused: EACCES" {
		t.Errorf("StartCmd without network: a TCP socket: %q, want refused: EACCES", got)
	}
}

// TestCannotSignalOutsideItsDomain: a wrapped CLI signals no process but
// its own (Landlock's scoping, ABI 6): not maiden, its parent, nor another
// process of the same user.
func TestCannotSignalOutsideItsDomain(t *testing.T) {
	t.Parallel()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	for what, pid := range map[string]int{"maiden": os.Getpid(), "another process of the same user": other.Process.Pid} {
		if got := netMode(t, confine.Spec{}, "signal", strconv.Itoa(pid)); got != "refused: EPERM" {
			t.Errorf("signal 0 to %s (%d): %q, want refused: EPERM", what, pid, got)
		}
	}
	_, in, out := startCmd(t, "serve", confine.Spec{})
	if got := serveNet(t, in, out, "signal "+strconv.Itoa(os.Getpid())); got != "refused: EPERM" {
		t.Errorf("StartCmd: signal 0 to maiden: %q, want refused: EPERM", got)
	}
}

// TestCannotChangeAReadOnlyFile: a file under a read-only path is neither
// emptied nor written over: truncate(2), open with O_TRUNC (which Landlock
// checks as its own right, TRUNCATE, ABI 3) and open for writing without
// it are refused, EACCES, and the file keeps its bytes.
func TestCannotChangeAReadOnlyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "data")
	if err := os.WriteFile(f, []byte("precious"), 0o666); err != nil {
		t.Fatal(err)
	}
	s := confine.Spec{ReadOnly: []string{dir}}
	for _, verb := range []string{"truncate", "open-trunc", "open-write"} {
		if got := netMode(t, s, verb, f); got != "refused: EACCES" {
			t.Errorf("%s on a read-only file: %q, want refused: EACCES", verb, got)
		}
	}
	if b, _ := os.ReadFile(f); string(b) != "precious" {
		t.Errorf("the read-only file holds %q", b)
	}
}

// TestNoDeviceIoctlOnAReadPath: a device under a read path is read, never
// driven: its own ioctls are refused (Landlock's IOCTL_DEV, ABI 5).
func TestNoDeviceIoctlOnAReadPath(t *testing.T) {
	t.Parallel()
	if got := netMode(t, confine.Spec{ReadOnly: []string{"/dev/urandom"}}, "ioctl-entcnt", "/dev/urandom"); got != "refused: EACCES" {
		t.Errorf("RNDGETENTCNT on /dev/urandom, a read path: %q, want refused: EACCES", got)
	}
}

// TestConfinedProgramDiesWithMaiden: a confined program (Run: a wrapped
// CLI; StartCmd: a stdio MCP server) is killed when maiden dies, whatever
// it was doing (here, sleeping a minute): it never outlives the process
// that answers for it.
func TestConfinedProgramDiesWithMaiden(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"run-sleeper", "startcmd-sleeper"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			parent := exec.Command(self(t), how)
			parent.Env = []string{modeEnv + "=net"}
			parent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			stdout, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			// From childproc's thread: a parent-death signal follows the
			// thread that forks, and this package's network namespaces end
			// threads (internal/childproc).
			if err := childproc.Start(parent); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			var pid int
			if _, serr := fmt.Sscanf(line, "PID %d", &pid); serr != nil {
				parent.Process.Kill()
				parent.Wait()
				t.Fatalf("the parent said %q (%v)", line, err)
			}
			parent.Process.Kill()
			parent.Wait()
			deadline := time.Now().Add(10 * time.Second)
			for !testkit.Killed(t, pid) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !testkit.Killed(t, pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the confined program %d outlived its parent by 10 s", pid)
			}
		})
	}
}

// TestNoInheritedDescriptors: a descriptor maiden holds without
// close-on-exec (one a C library opened) does not reach a confined
// program, which could read through it what Landlock keeps it from
// opening: Run's child and StartCmd's trampoline mark every descriptor
// above 2 close-on-exec.
func TestNoInheritedDescriptors(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not parallel: a descriptor without close-on-exec reaches every
	// process this test binary starts meanwhile. Above the descriptors
	// StartCmd hands its trampoline (3 to 7), which would replace it.
	low, err := unix.Open(secret, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.FcntlInt(uintptr(low), unix.F_DUPFD, 100)
	unix.Close(low)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if got := netMode(t, confine.Spec{}, "readfd", strconv.Itoa(fd)); got != "refused: EBADF" {
		t.Errorf("Run: reading maiden's descriptor %d: %q, want refused: EBADF", fd, got)
	}
	_, in, out := startCmd(t, "serve", confine.Spec{})
	if got := serveNet(t, in, out, "readfd "+strconv.Itoa(fd)); got != "refused: EBADF" {
		t.Errorf("StartCmd: reading maiden's descriptor %d: %q, want refused: EBADF", fd, got)
	}
}

// TestLimitsHold: the program runs under the Spec's rlimits with the soft
// limit equal to the hard one (so it cannot raise them), no core dumps,
// and no_new_privs; Run and StartCmd.
func TestLimitsHold(t *testing.T) {
	t.Parallel()
	l := confine.Limits{Memory: 1 << 30, Processes: 77, FileSize: 5 << 20, Files: 99}
	want := fmt.Sprintf("core 0/0, data %d/%d, nproc 77/77, fsize %d/%d, nofile 99/99, nnp 1", l.Memory, l.Memory, l.FileSize, l.FileSize)
	if got := netMode(t, confine.Spec{Limits: l}, "rlimits"); got != want {
		t.Errorf("Run: %q, want %q", got, want)
	}
	_, in, out := startCmd(t, "serve", confine.Spec{Limits: l})
	if got := serveNet(t, in, out, "rlimits"); got != want {
		t.Errorf("StartCmd: %q, want %q", got, want)
	}
}

// TestRelativePathsRefused: a declared path is absolute; a relative one
// (which would be read against maiden's working directory) is refused.
func TestRelativePathsRefused(t *testing.T) {
	t.Parallel()
	for _, s := range []confine.Spec{{ReadOnly: []string{"."}}, {Writable: []string{"."}}, {SystemReadOnly: []string{"."}}} {
		s.Path = "/bin/true"
		if _, err := confine.Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "not absolute") {
			t.Errorf("%+v: %v, want refused as not absolute", s, err)
		}
	}
}
