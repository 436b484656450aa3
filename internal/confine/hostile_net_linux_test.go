//go:build linux

package confine_test

import (
	"bufio"
	"fmt"
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
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The attacks of issue 22 (findings 1-3), as a hostile CLI makes them: raw
// system calls, no library in between. Each reports "ok ..." when the
// attempt worked and "refused: ERRNO-NAME" (unix.ErrnoName) when a call
// failed, so a test asserts the errno the seccomp filter returns (EPERM or
// EACCES), not just "it failed".

func errnoReport(err error) string {
	if e, ok := err.(unix.Errno); ok {
		return "refused: " + unix.ErrnoName(e)
	}
	return "refused: " + err.Error()
}

// sockaddr parses "ip:port" into a Sockaddr, its raw form and the family.
func sockaddr(addr string) (unix.Sockaddr, []byte, int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, nil, 0, err
	}
	p := ap.Port()
	if ap.Addr().Is4() {
		raw := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().As4()}
		raw.Port = p<<8 | p>>8
		b := unsafe.Slice((*byte)(unsafe.Pointer(&raw)), unsafe.Sizeof(raw))
		return &unix.SockaddrInet4{Port: int(p), Addr: ap.Addr().As4()}, b, unix.AF_INET, nil
	}
	raw := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	raw.Port = p<<8 | p>>8
	b := unsafe.Slice((*byte)(unsafe.Pointer(&raw)), unsafe.Sizeof(raw))
	return &unix.SockaddrInet6{Port: int(p), Addr: ap.Addr().As16()}, b, unix.AF_INET6, nil
}

// fastOpen connects to addr with TCP Fast Open's implicit connect (no
// connect(2)): via sendto, sendmsg or sendmmsg carrying MSG_FASTOPEN, then
// reads the server's reply.
func fastOpen(how, addr string) string {
	sa, raw, family, err := sockaddr(addr)
	if err != nil {
		return "bad address: " + err.Error()
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM, 0)
	if err != nil {
		return errnoReport(err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10})
	msg := []byte("hello")
	switch how {
	case "sendto":
		err = unix.Sendto(fd, msg, unix.MSG_FASTOPEN, sa)
	case "sendmsg":
		_, err = unix.SendmsgN(fd, msg, nil, sa, unix.MSG_FASTOPEN)
	case "sendmmsg":
		iov := unix.Iovec{Base: &msg[0]}
		iov.SetLen(len(msg))
		var m struct {
			hdr unix.Msghdr
			len uint32
			_   [4]byte
		}
		m.hdr.Name = &raw[0]
		m.hdr.Namelen = uint32(len(raw))
		m.hdr.Iov = &iov
		m.hdr.SetIovlen(1)
		_, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&m)), 1, unix.MSG_FASTOPEN, 0, 0)
		if e != 0 {
			err = e
		}
	default:
		return "unknown way " + how
	}
	if err != nil {
		return errnoReport(err)
	}
	buf := make([]byte, 64)
	n, err := readReply(fd, buf)
	if err != nil {
		return "ok, sent, but no reply: " + errnoReport(err)
	}
	return "ok, reply " + string(buf[:n])
}

// listenUnbound calls listen(2) on a socket that was never bound (the
// kernel binds it to an ephemeral port on every address).
func listenUnbound(family int) string {
	fd, err := unix.Socket(family, unix.SOCK_STREAM, 0)
	if err != nil {
		return errnoReport(err)
	}
	defer unix.Close(fd)
	if err := unix.Listen(fd, 1); err != nil {
		return errnoReport(err)
	}
	sa, _ := unix.Getsockname(fd)
	return fmt.Sprintf("ok, listening on %v", sa)
}

// ioUring tries io_uring's three calls. The ring fd -1 makes enter and
// register fail with EBADF in the kernel: only a filter answers EPERM.
func ioUring() string {
	var params [120]byte // struct io_uring_params
	var out []string
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if e == 0 {
		unix.Close(int(fd))
		out = append(out, "setup ok")
	} else {
		out = append(out, "setup "+unix.ErrnoName(e))
	}
	_, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, ^uintptr(0), 0, 0, 0, 0, 0)
	out = append(out, "enter "+unix.ErrnoName(e))
	_, _, e = unix.Syscall6(unix.SYS_IO_URING_REGISTER, ^uintptr(0), 0, 0, 0, 0, 0)
	out = append(out, "register "+unix.ErrnoName(e))
	return strings.Join(out, ", ")
}

// readReply reads the reply on fd, again after a signal: with SO_RCVTIMEO
// set, a read the Go runtime's preemption signal interrupts fails with
// EINTR whatever SA_RESTART says (signal(7)), which a full run once
// reported as "connected, no reply: refused: EINTR".
func readReply(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// connectTo connects to addr with connect(2) and reads the reply.
func connectTo(addr string) string {
	sa, _, family, err := sockaddr(addr)
	if err != nil {
		return "bad address: " + err.Error()
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM, 0)
	if err != nil {
		return errnoReport(err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10})
	if err := unix.Connect(fd, sa); err != nil {
		return errnoReport(err)
	}
	buf := make([]byte, 64)
	n, err := readReply(fd, buf)
	if err != nil {
		return "ok, connected, no reply: " + errnoReport(err)
	}
	return "ok, reply " + string(buf[:n])
}

// fastOpenConnect uses TCP_FASTOPEN_CONNECT: connect(2) returns at once
// and the connection is made with the first write. Landlock still sees the
// connect(2), so it is refused there.
func fastOpenConnect(addr string) string {
	sa, _, family, err := sockaddr(addr)
	if err != nil {
		return "bad address: " + err.Error()
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM, 0)
	if err != nil {
		return errnoReport(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1); err != nil {
		return "setsockopt " + errnoReport(err)
	}
	if err := unix.Connect(fd, sa); err != nil {
		return errnoReport(err)
	}
	if _, err := unix.Write(fd, []byte("hello")); err != nil {
		return "connect ok, write " + errnoReport(err)
	}
	return "ok, sent"
}

// dgramSend opens a socket of type typ (SOCK_DGRAM, SOCK_RAW) and sends one
// datagram to addr.
func dgramSend(typ, proto int, addr string) string {
	sa, _, family, err := sockaddr(addr)
	if err != nil {
		return "bad address: " + err.Error()
	}
	fd, err := unix.Socket(family, typ, proto)
	if err != nil {
		return errnoReport(err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, []byte("x"), 0, sa); err != nil {
		return errnoReport(err)
	}
	return "ok, sent"
}

// hostileNet runs the attacks above in the confined child (modes of
// hostile, and verbs of the serve mode).
func hostileNet(verb string, args []string) (string, bool) {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch verb {
	case "fastopen":
		return fastOpen(arg(0), arg(1)), true
	case "listen":
		if arg(0) == "6" {
			return listenUnbound(unix.AF_INET6), true
		}
		return listenUnbound(unix.AF_INET), true
	case "iouring":
		return ioUring(), true
	case "tcpconnect":
		return connectTo(arg(0)), true
	case "caps":
		// The effective capabilities (capget, version 3).
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return errnoReport(err), true
		}
		return fmt.Sprintf("%x", uint64(data[1].Effective)<<32|uint64(data[0].Effective)), true
	case "fastopen-connect":
		return fastOpenConnect(arg(0)), true
	case "udpsend":
		return dgramSend(unix.SOCK_DGRAM, 0, arg(0)), true
	case "rawsend":
		return dgramSend(unix.SOCK_RAW, unix.IPPROTO_RAW, arg(0)), true
	}
	return hostileBuild(verb, args)
}

// replier is a loopback TCP server (network "tcp4" or "tcp6") that answers
// "pong" to whoever connects, counting connections.
func replier(t *testing.T, network, addr string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s loopback here: %v", network, err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Write([]byte("pong"))
			c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// netMode runs a hostileNet verb in a confined child started by Run.
func netMode(t *testing.T, s confine.Spec, args ...string) string {
	t.Helper()
	return mode(t, "net", s, args...)
}

// Finding 1: a network-enabled CLI cannot reach a port other than the
// proxy's with TCP Fast Open (the implicit connect of a send carrying
// MSG_FASTOPEN, which Landlock's connect rule does not see), over IPv4 or
// IPv6, by any of the three send calls: seccomp answers EPERM, and the
// server never sees a connection.
func TestNoFastOpenAroundTheProxy(t *testing.T) {
	t.Parallel()
	proxy, _ := listener(t)
	s := confine.Spec{ProxyPort: port(proxy)}
	for _, network := range []struct{ name, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(network.name, func(t *testing.T) {
			target, hits := replier(t, network.name, network.addr)
			for _, how := range []string{"sendto", "sendmsg", "sendmmsg"} {
				if got := netMode(t, s, "fastopen", how, target); got != "refused: EPERM" {
					t.Errorf("%s MSG_FASTOPEN to %s: %q, want refused: EPERM", how, target, got)
				}
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the server was reached %d times", n)
			}
		})
	}
	// TCP_FASTOPEN_CONNECT defers the connection to the first write, but
	// connect(2) is still called, and Landlock refuses it.
	if got := netMode(t, s, "fastopen-connect", proxy[:strings.LastIndexByte(proxy, ':')]+":1"); got != "refused: EACCES" {
		t.Errorf("TCP_FASTOPEN_CONNECT then connect to another port: %q, want refused: EACCES", got)
	}
	// The proxy's own port is no exception: the proxy is reached by
	// connect(2), which Landlock checks.
	if got := netMode(t, s, "fastopen", "sendto", proxy); got != "refused: EPERM" {
		t.Errorf("MSG_FASTOPEN to the proxy port: %q, want refused: EPERM", got)
	}
}

// Finding 2: listen(2) on an unbound socket binds it implicitly (bind(2),
// which Landlock refuses, is never called): refused with EPERM, IPv4 and
// IPv6.
func TestCannotListen(t *testing.T) {
	t.Parallel()
	proxy, _ := listener(t)
	s := confine.Spec{ProxyPort: port(proxy)}
	for _, family := range []string{"4", "6"} {
		if got := netMode(t, s, "listen", family); got != "refused: EPERM" {
			t.Errorf("listen on an unbound IPv%s socket: %q, want refused: EPERM", family, got)
		}
	}
}

// Finding 3: io_uring (which can create sockets, connect and bind without
// the system calls the filter and Landlock see) is refused: setup, enter
// and register all answer EPERM, with and without network.
func TestNoIOUring(t *testing.T) {
	t.Parallel()
	proxy, _ := listener(t)
	const want = "setup EPERM, enter EPERM, register EPERM"
	for _, s := range []confine.Spec{{}, {ProxyPort: port(proxy)}} {
		if got := netMode(t, s, "iouring"); got != want {
			t.Errorf("proxy port %d: io_uring %q, want %q", s.ProxyPort, got, want)
		}
	}
}

// UDP and raw sends (the canary tries them too): the socket is refused
// with EACCES, with and without network.
func TestNoDatagramSends(t *testing.T) {
	t.Parallel()
	proxy, _ := listener(t)
	target, _ := replier(t, "tcp4", "127.0.0.1:0")
	for _, s := range []confine.Spec{{}, {ProxyPort: port(proxy)}} {
		for _, verb := range []string{"udpsend", "rawsend"} {
			if got := netMode(t, s, verb, target); got != "refused: EACCES" {
				t.Errorf("proxy port %d: %s: %q, want refused: EACCES", s.ProxyPort, verb, got)
			}
		}
	}
}

// The same holes for a long-running process started by StartCmd (a stdio
// MCP import) given a proxy port.
func TestStartCmdNoFastOpenListenIOUring(t *testing.T) {
	t.Parallel()
	proxy, _ := listener(t)
	target, hits := replier(t, "tcp4", "127.0.0.1:0")
	target6, hits6 := replier(t, "tcp6", "[::1]:0")
	_, in, out := startCmd(t, "serve", confine.Spec{ProxyPort: port(proxy)})
	for _, c := range []struct{ req, want string }{
		{"fastopen sendto " + target, "refused: EPERM"},
		{"fastopen sendmsg " + target6, "refused: EPERM"},
		{"fastopen sendmmsg " + target, "refused: EPERM"},
		{"listen 4", "refused: EPERM"},
		{"iouring", "setup EPERM, enter EPERM, register EPERM"},
		{"udpsend " + target, "refused: EACCES"},
	} {
		if _, err := in.Write([]byte(c.req + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(line); got != c.want {
			t.Errorf("%s: %q, want %q", c.req, got, c.want)
		}
	}
	if n := hits.Load() + hits6.Load(); n != 0 {
		t.Errorf("the servers were reached %d times", n)
	}
}

// The structural fix of issue 22: a network-enabled run is in a network
// namespace of its own where only the proxy exists. Landlock's rule is per
// port, so outside such a namespace the proxy's port number on another
// loopback address (127.0.0.2, ::1) is reachable; inside it there is
// nothing there (ECONNREFUSED), while 127.0.0.1 at that port reaches the
// proxy (through maiden's relay).
func TestOnlyTheProxyInTheNetworkNamespace(t *testing.T) {
	t.Parallel()
	if !wantNetNS() {
		t.Skip("not root: TestNetworkNamespaceWithoutRoot runs this as nobody from a root run (CI)")
	}
	proxy, proxyHits := replier(t, "tcp4", "127.0.0.1:0")
	p := port(proxy)
	other, otherHits := replier(t, "tcp4", "127.0.0.2:"+strconv.Itoa(p))
	s := confine.Spec{ProxyPort: p, Path: self(t), Args: []string{"tcpconnect", other}, Env: []string{modeEnv + "=net"}}
	res := run(t, s)
	if !res.NetNS {
		t.Errorf("a run with a proxy port had no network namespace: %+v", res)
	}
	if got := string(res.Stdout); got != "refused: ECONNREFUSED" {
		t.Errorf("the proxy's port on 127.0.0.2: %q, want refused: ECONNREFUSED", got)
	}
	if l6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(p)); err == nil {
		l6.Close()
		_, hits6 := replier(t, "tcp6", "[::1]:"+strconv.Itoa(p))
		if got := netMode(t, confine.Spec{ProxyPort: p}, "tcpconnect", "[::1]:"+strconv.Itoa(p)); got != "refused: ECONNREFUSED" {
			t.Errorf("the proxy's port on ::1: %q, want refused: ECONNREFUSED", got)
		}
		if n := hits6.Load(); n != 0 {
			t.Errorf("the ::1 listener was reached %d times", n)
		}
	}
	if os.Geteuid() != 0 {
		// In the user namespace that carries it, the program is the same
		// user and has no capability (execve dropped them).
		if got := netMode(t, confine.Spec{ProxyPort: p}, "caps"); got != "0" {
			t.Errorf("effective capabilities in the user namespace: %q, want 0", got)
		}
	}
	if got := netMode(t, confine.Spec{ProxyPort: p}, "tcpconnect", proxy); got != "ok, reply pong" {
		t.Errorf("the proxy through the relay: %q, want ok, reply pong", got)
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the listener on 127.0.0.2 was reached %d times", n)
	}
	if n := proxyHits.Load(); n != 1 {
		t.Errorf("the proxy was reached %d times, want 1", n)
	}
}

// The same for a long-running process (StartCmd, a stdio MCP import with a
// proxy port): only the proxy in its network namespace, for as long as it
// runs.
func TestStartCmdOnlyTheProxyInTheNetworkNamespace(t *testing.T) {
	t.Parallel()
	if !wantNetNS() {
		t.Skip("not root: TestNetworkNamespaceWithoutRoot runs this as nobody from a root run (CI)")
	}
	proxy, proxyHits := replier(t, "tcp4", "127.0.0.1:0")
	p := port(proxy)
	other, otherHits := replier(t, "tcp4", "127.0.0.2:"+strconv.Itoa(p))
	cmd := exec.Command(self(t))
	cmd.Env = []string{modeEnv + "=serve"}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	st, err := confine.StartCmd(cmd, confine.Spec{ProxyPort: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !st.NetNS {
		t.Errorf("started with a proxy port, but no network namespace: %+v", st)
	}
	out := bufio.NewReader(outPipe)
	for _, c := range []struct{ req, want string }{
		{"tcpconnect " + other, "refused: ECONNREFUSED"},
		{"tcpconnect " + proxy, "ok, reply pong"},
		{"tcpconnect " + proxy, "ok, reply pong"},
	} {
		if _, err := in.Write([]byte(c.req + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(line); got != c.want {
			t.Errorf("%s: %q, want %q", c.req, got, c.want)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the listener on 127.0.0.2 was reached %d times", n)
	}
	if n := proxyHits.Load(); n != 2 {
		t.Errorf("the proxy was reached %d times, want 2", n)
	}
}

// The network namespace and its relay are released with the run (Run) or
// when the process exits (StartCmd): no namespace or socket descriptor is
// left behind. (Pipes are not counted: io.Copy between TCP connections
// splices through pipes Go keeps in a pool.)
func TestNetworkNamespaceIsReleased(t *testing.T) {
	proxy, _ := replier(t, "tcp4", "127.0.0.1:0")
	s := confine.Spec{ProxyPort: port(proxy)}
	before := openFDs(t)
	for range 5 {
		if got := netMode(t, s, "tcpconnect", proxy); got != "ok, reply pong" {
			t.Fatalf("through the relay: %q", got)
		}
	}
	// The replier and the relay's goroutines close their ends as they
	// notice the other side went: wait for the count, within a bound.
	settle(t, before)
	if after := openFDs(t); after > before {
		t.Fatalf("%d descriptors open after 5 runs, %d before", after, before)
	}
	cmd := exec.Command(self(t))
	cmd.Env = []string{modeEnv + "=serve"}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := confine.StartCmd(cmd, s); err != nil {
		t.Fatal(err)
	}
	in.Close() // the serve mode exits at the end of its input
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// The relay is closed by a goroutine woken by the process's exit.
	settle(t, before)
	if after := openFDs(t); after > before {
		t.Fatalf("%d descriptors open after a StartCmd process exited, %d before", after, before)
	}
}

// settle waits (up to 10 s) for the number of open socket and namespace
// descriptors to be at most n.
func settle(t *testing.T, n int) {
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) > n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if strings.HasPrefix(l, "socket:") || strings.HasPrefix(l, "net:") {
			n++
		}
	}
	return n
}

// requireNetNS, set by TestNetworkNamespaceWithoutRoot for the copy of this
// test binary it runs as nobody, makes the network namespace tests run
// there (a user namespace carries it) instead of skipping.
const requireNetNS = "CONFINE_TEST_REQUIRE_NETNS"

func wantNetNS() bool { return os.Geteuid() == 0 || os.Getenv(requireNetNS) != "" }

// Without root, the network namespace comes in a user namespace that maps
// only maiden's own user (netns_helper_linux.c): this runs the namespace
// tests, the probe and Fast Open's as nobody, from a copy of this test
// binary nobody may execute.
func TestNetworkNamespaceWithoutRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("runs the tests as nobody from a root run")
	}
	if os.Getenv(requireNetNS) != "" {
		return
	}
	dir, err := os.MkdirTemp("", "confine-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(self(t))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "confine.test")
	testkit.WriteExecutable(t, exe, b) // never "text file busy" to the exec below
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []string{"TestOnlyTheProxyInTheNetworkNamespace", "TestStartCmdOnlyTheProxyInTheNetworkNamespace", "TestProbe", "TestNoFastOpenAroundTheProxy", "TestNetworkNamespaceIsReleased"}
	cmd := exec.Command(exe, "-test.run=^("+strings.Join(tests, "|")+")$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{requireNetNS + "=1", "HOME=" + dir, "TMPDIR=/tmp", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("as nobody, %s did not pass:\n%s", name, out)
		}
	}
}
