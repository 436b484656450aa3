package confine

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/internal/childproc"
)

// A network-enabled run (Spec.ProxyPort set) gets a network namespace of
// its own, where nothing but the proxy exists: the loopback interface, up,
// and on it one listener, 127.0.0.1:ProxyPort, which maiden created there
// and serves from outside, relaying each connection to the real proxy
// (127.0.0.1:ProxyPort in maiden's namespace). No other interface, no
// route, no other listener: whatever gets past Landlock and seccomp (a
// connect to the proxy's port number on another address, a way into the
// network the filter does not know) finds nothing to reach. The program
// joins it (setns) in the vfork child, or in the trampoline, before
// Landlock and seccomp.
//
// maiden as root (CAP_SYS_ADMIN) creates the namespace on a thread of its
// own. Otherwise a helper (this program again: netns_helper_linux.c, a C
// constructor) creates a user namespace that maps only maiden's own user
// and group, with the network namespace, and hands back the listener and
// both namespaces; the program then joins the user namespace first (as
// the same user, so it gains nothing outside it, and execve drops the
// capabilities it had inside). Where neither is possible (user namespaces
// disabled), the run goes ahead with Landlock's port rule and the seccomp
// filter alone, and Result.NetNS / Started.NetNS / Status.NetNS say so.
// How is decided once per process; once it was possible, a failure to
// create one is an error (the run does not silently go without).

// netnsMaker is how this process makes namespaces (nil: it cannot), and
// why not.
var netnsMaker = sync.OnceValues(func() (func(int) (*proxyNetns, error), error) {
	var errs []error
	for _, mk := range []func(int) (*proxyNetns, error){newProxyNetns, newHelperNetns} {
		ns, err := mk(0)
		if err == nil {
			ns.Close()
			return mk, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
})

// netnsAvailable says whether runs with network get a namespace, and why
// not.
func netnsAvailable() (bool, error) {
	mk, err := netnsMaker()
	return mk != nil, err
}

// proxyNetns is one network namespace with the proxy's relay in it.
type proxyNetns struct {
	file *os.File // the namespace (an nsfs descriptor, close-on-exec)
	// user is the user namespace to join first (the helper's), or nil.
	user *os.File
	ln   net.Listener
	dst  string // the proxy, in maiden's namespace

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// newProxyNetns creates the namespace and its listener on
// 127.0.0.1:port (port 0: an ephemeral one, to try) and starts relaying
// to 127.0.0.1:port outside.
func newProxyNetns(port int) (*proxyNetns, error) {
	type made struct {
		ns, ln int
		err    error
	}
	ch := make(chan made, 1)
	go func() {
		// unshare changes this thread's namespace only. It stays locked:
		// when this goroutine returns, the runtime ends the thread rather
		// than let another goroutine run in the new namespace.
		runtime.LockOSThread()
		ns, ln, err := makeNetns(port)
		ch <- made{ns, ln, err}
	}()
	m := <-ch
	if m.err != nil {
		return nil, fmt.Errorf("network namespace: %w", m.err)
	}
	lf := os.NewFile(uintptr(m.ln), "proxy-relay")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		unix.Close(m.ns)
		return nil, fmt.Errorf("network namespace: relay listener: %w", err)
	}
	p := &proxyNetns{
		file: os.NewFile(uintptr(m.ns), "netns"), ln: ln,
		dst:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		conns: map[net.Conn]struct{}{},
	}
	go p.serve()
	return p, nil
}

// makeNetns runs on a locked thread: a new network namespace, loopback up,
// a listener on 127.0.0.1:port in it; it returns both descriptors.
func makeNetns(port int) (ns, ln int, err error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return -1, -1, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
	}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return -1, -1, err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return -1, -1, fmt.Errorf("bringing lo up: %w", err)
	}
	ln, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, -1, err
	}
	if err := unix.Bind(ln, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(ln)
		return -1, -1, fmt.Errorf("relay bind: %w", err)
	}
	if err := unix.Listen(ln, 128); err != nil {
		unix.Close(ln)
		return -1, -1, fmt.Errorf("relay listen: %w", err)
	}
	ns, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(ln)
		return -1, -1, err
	}
	return ns, ln, nil
}

// fd is the namespace's descriptor, for setns in the child.
func (p *proxyNetns) fd() int { return int(p.file.Fd()) }

func (p *proxyNetns) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.relay(c)
	}
}

// track adds c to the connections Close ends; false if already closed.
func (p *proxyNetns) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxyNetns) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// relay copies c to a new connection to the proxy and back, until either
// side closes.
func (p *proxyNetns) relay(c net.Conn) {
	defer c.Close()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	up, err := net.DialTimeout("tcp", p.dst, 10*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	<-done
}

// Close ends the relay (listener and connections) and drops maiden's
// reference to the namespace; the kernel frees it when no process is in it.
func (p *proxyNetns) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	err := errors.Join(p.ln.Close(), p.file.Close())
	if p.user != nil {
		err = errors.Join(err, p.user.Close())
	}
	return err
}

// userFd is the user namespace's descriptor, or -1.
func (p *proxyNetns) userFd() int {
	if p.user == nil {
		return -1
	}
	return int(p.user.Fd())
}

// helperMarker makes netns_helper_linux.c act, with the port as its value.
const helperMarker = "MAIDEN_CONFINE_NETNS"

// newHelperNetns has the helper create a user and a network namespace with
// the relay's listener on 127.0.0.1:port in it.
func newHelperNetns(port int) (*proxyNetns, error) {
	exe, err := self()
	if err != nil {
		return nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("network namespace helper: %w", err)
	}
	defer unix.Close(pair[0])
	theirs := os.NewFile(uintptr(pair[1]), "netns-helper")
	cmd := exec.Command(exe)
	cmd.Env = []string{helperMarker + "=" + strconv.Itoa(port)}
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runErr := childproc.Start(cmd) // Pdeathsig follows the forking thread: internal/childproc
	if runErr == nil {
		runErr = cmd.Wait()
	}
	theirs.Close()
	// The helper has exited: its message (descriptors, or why not) is
	// waiting, or there is none.
	buf, oob := make([]byte, 256), make([]byte, unix.CmsgSpace(3*4))
	// MSG_CMSG_CLOEXEC: the descriptors are held for the whole run, and
	// every process maiden starts meanwhile would inherit them otherwise
	// (as the root path opens its own O_CLOEXEC).
	n, oobn, _, _, err := unix.Recvmsg(pair[0], buf, oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	var fds []int
	if err == nil && oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil && len(msgs) == 1 {
			fds, _ = unix.ParseUnixRights(&msgs[0])
		}
	}
	if len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		why := string(buf[:max(n, 0)])
		if why == "" {
			why = fmt.Sprint(runErr, err)
		}
		return nil, fmt.Errorf("network namespace helper: %s", why)
	}
	lf := os.NewFile(uintptr(fds[0]), "proxy-relay")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		unix.Close(fds[1])
		unix.Close(fds[2])
		return nil, fmt.Errorf("network namespace: relay listener: %w", err)
	}
	p := &proxyNetns{
		file: os.NewFile(uintptr(fds[1]), "netns"), user: os.NewFile(uintptr(fds[2]), "userns"), ln: ln,
		dst:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		conns: map[net.Conn]struct{}{},
	}
	go p.serve()
	return p, nil
}

// runNetns makes the namespace of a run that asks for network, or none:
// nil when ProxyPort is 0 or the kernel does not let this process create
// one.
func runNetns(ws *wireSpec) (*proxyNetns, error) {
	if ws.ProxyPort == 0 || omitRule == ruleNetNS {
		return nil, nil
	}
	mk, _ := netnsMaker()
	if mk == nil {
		return nil, nil
	}
	return mk(ws.ProxyPort)
}
