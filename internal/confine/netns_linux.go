package confine

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
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
// Creating a network namespace needs CAP_SYS_ADMIN (maiden running as
// root, or with that capability). Where the kernel refuses, the run goes
// ahead with Landlock's port rule and the seccomp filter alone, and
// Result.NetNS / Started.NetNS / Status.NetNS say so. Whether it is
// possible is decided once per process; once it was, a failure to create
// one is an error (the run does not silently go without).

// netnsAvailable says whether this process can create network namespaces
// (it tries once), and why not.
var netnsAvailable = sync.OnceValues(func() (bool, error) {
	ns, err := newProxyNetns(0)
	if err != nil {
		return false, err
	}
	ns.Close()
	return true, nil
})

// proxyNetns is one network namespace with the proxy's relay in it.
type proxyNetns struct {
	file *os.File // the namespace (an nsfs descriptor, close-on-exec)
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
	return errors.Join(p.ln.Close(), p.file.Close())
}

// runNetns makes the namespace of a run that asks for network, or none:
// nil when ProxyPort is 0 or the kernel does not let this process create
// one.
func runNetns(ws *wireSpec) (*proxyNetns, error) {
	if ws.ProxyPort == 0 || omitRule == ruleNetNS {
		return nil, nil
	}
	if ok, _ := netnsAvailable(); !ok {
		return nil, nil
	}
	return newProxyNetns(ws.ProxyPort)
}
