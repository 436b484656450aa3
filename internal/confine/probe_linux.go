package confine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeMarker in a process's environment makes Main run the probe's checks
// (in the confined child Probe starts) and exit.
const probeMarker = "MAIDEN_CONFINE_PROBE"

// Status is what Probe found.
type Status struct {
	// Landlock is the kernel's Landlock ABI (0: none).
	Landlock int
	// NetNS says network-enabled runs get a network namespace of their own
	// (the probe's child ran in one); unset where this process cannot
	// create one, and NetNSError says why.
	NetNS      bool
	NetNSError string
	// Checks are the probe's attempts, forbidden and allowed, in order.
	Checks []Check
}

// Check is one attempt of the probe's confined child.
type Check struct {
	Name string // e.g. "read-outside"
	// Forbidden says the attempt must fail; otherwise it is a control that
	// must succeed (so that a failure above is the confinement's doing).
	Forbidden bool
	// OK says the attempt went as it must.
	OK bool
	// Detail is the child's error ("" if the attempt succeeded).
	Detail string
}

// probeChecks name the child's attempts: forbidden ones first. A forbidden
// attempt with an errno must fail with exactly that errno, the seccomp
// filter's answer: any other failure (a connection refused, a bad
// descriptor) means the call reached the kernel, so the filter is not in
// force, and the probe fails closed.
var probeChecks = []struct {
	name      string
	forbidden bool
	errno     unix.Errno
	what      string
	netns     bool // tried only where runs get a network namespace
}{
	{"read-outside", true, 0, "reading a file outside the declared paths", false},
	{"write-readonly", true, 0, "writing in a read-only path", false},
	{"connect-other", true, 0, "a TCP connect to a loopback port that is not the proxy's", false},
	{"connect-elsewhere", true, 0, "a TCP connect to the proxy's port on another loopback address (127.0.0.2), which Landlock allows and the network namespace must not have", true},
	{"fastopen-v4", true, unix.EPERM, "a TCP Fast Open send (sendto MSG_FASTOPEN) to a loopback port that is not the proxy's", false},
	{"fastopen-v6", true, unix.EPERM, "a TCP Fast Open send (sendto MSG_FASTOPEN) over IPv6 loopback", false},
	{"fastopen-sendmsg", true, unix.EPERM, "a TCP Fast Open send by sendmsg", false},
	{"fastopen-sendmmsg", true, unix.EPERM, "a TCP Fast Open send by sendmmsg", false},
	{"listen", true, unix.EPERM, "listen on an unbound TCP socket (an implicit bind)", false},
	{"udp-socket", true, 0, "opening a UDP socket", false},
	{"udp-send", true, unix.EACCES, "sending a UDP datagram", false},
	{"raw-send", true, unix.EACCES, "sending on a raw IP socket", false},
	{"unix-socket", true, 0, "opening a unix socket", false},
	{"io_uring", true, unix.EPERM, "io_uring (setup, enter, register)", false},
	{"setsid", true, 0, "a child leaving the process group (setsid, setpgid)", false},
	{"read-declared", false, 0, "reading a file in a read-only path", false},
	{"write-declared", false, 0, "writing in a writable path", false},
	{"connect-proxy", false, 0, "a TCP connect to the proxy port", false},
	{"no-new-privs", false, 0, "no_new_privs set", false},
	{"rlimits", false, 0, "rlimits set (no core dumps, the file size cap)", false},
}

// Probe proves that confinement is in force on this machine: it starts a
// confined child (this program, through Main) that tries a forbidden read,
// write, connect (to a loopback listener Probe opens, not the proxy port),
// TCP Fast Open sends to that listener over IPv4 and IPv6 (sendto, sendmsg,
// sendmmsg), listen on an unbound socket, UDP and raw sends, a unix socket,
// io_uring and setsid, and the allowed counterparts; where runs get a
// network namespace, a connect to the proxy's port on 127.0.0.2 (which
// Landlock allows) must find nothing. It fails closed: any
// attempt that went otherwise (a forbidden one that succeeded, or one the
// seccomp filter must refuse that failed with another errno), or a kernel
// without Landlock (or without its network rules, ABI 4), is an error
// naming what is not enforced.
func Probe(ctx context.Context) (Status, error) {
	abi, why := landlockABI()
	st := Status{Landlock: abi}
	if abi < 1 {
		return st, fmt.Errorf("confine: %w: Landlock is not available on this kernel (%v)", ErrNotEnforced, why)
	}
	if abi < 4 {
		return st, fmt.Errorf("confine: %w: Landlock network rules need ABI 4; this kernel has %d", ErrNotEnforced, abi)
	}
	exe, err := self()
	if err != nil {
		return st, err
	}
	dir, err := os.MkdirTemp("", "maiden-probe-")
	if err != nil {
		return st, fmt.Errorf("confine: probe: %w", err)
	}
	defer os.RemoveAll(dir)
	// Declared paths are named by their real path (a TMPDIR may be a link).
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return st, fmt.Errorf("confine: probe: %w", err)
	}
	ro, rw := filepath.Join(dir, "ro"), filepath.Join(dir, "rw")
	secret := filepath.Join(dir, "secret")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return st, fmt.Errorf("confine: probe: %w", err)
		}
	}
	for _, f := range []string{secret, filepath.Join(ro, "f")} {
		if err := os.WriteFile(f, []byte("probe"), 0o644); err != nil {
			return st, fmt.Errorf("confine: probe: %w", err)
		}
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return st, fmt.Errorf("confine: probe: %w", err)
	}
	defer other.Close()
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return st, fmt.Errorf("confine: probe: %w", err)
	}
	defer proxy.Close()
	for _, l := range []net.Listener{other, proxy} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	// The IPv6 target of Fast Open: a listener on ::1 where there is one,
	// else the same port there (the filter answers before any routing).
	other6 := net.JoinHostPort("::1", strconv.Itoa(other.Addr().(*net.TCPAddr).Port))
	if l6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		defer l6.Close()
		other6 = l6.Addr().String()
		go func() {
			for {
				c, err := l6.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	proxyPort := proxy.Addr().(*net.TCPAddr).Port
	// The proxy's port on another loopback address: Landlock's rule (per
	// port) lets a connect through; only a network namespace stops it.
	elsewhere := net.JoinHostPort("127.0.0.2", strconv.Itoa(proxyPort))
	if l, err := net.Listen("tcp4", elsewhere); err == nil {
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	if ok, why := netnsAvailable(); ok {
		st.NetNS = true
	} else {
		st.NetNSError = why.Error()
	}
	res, err := Run(ctx, Spec{
		Path:      exe,
		Args:      []string{secret, ro, rw, other.Addr().String(), proxy.Addr().String(), other6, elsewhere},
		Env:       []string{probeMarker + "=1"},
		ReadOnly:  []string{ro},
		Writable:  []string{rw},
		ProxyPort: proxyPort,
		Timeout:   30 * time.Second,
		Limits:    Limits{FileSize: probeFileSize},
	})
	if err != nil {
		return st, fmt.Errorf("confine: probe: %w", err)
	}
	var got map[string]string
	if err := json.Unmarshal(res.Stdout, &got); err != nil || res.ExitCode != 0 {
		return st, fmt.Errorf("confine: probe: the confined child (exit %d) did not report: %q", res.ExitCode, truncateBytes(res.Stderr, 512))
	}
	var missing []string
	if res.NetNS != st.NetNS {
		missing = append(missing, fmt.Sprintf("the probe's child ran with a network namespace %v, want %v", res.NetNS, st.NetNS))
	}
	for _, c := range probeChecks {
		if c.netns && !st.NetNS {
			continue
		}
		detail, ran := got[c.name]
		ok := ran && (detail != "") == c.forbidden
		if ok && c.errno != 0 {
			ok = detail == c.errno.Error()
		}
		st.Checks = append(st.Checks, Check{Name: c.name, Forbidden: c.forbidden, OK: ok, Detail: detail})
		switch {
		case !ran:
			missing = append(missing, c.what+": not tried")
		case !ok && c.forbidden && detail == "":
			missing = append(missing, c.what+" succeeded")
		case !ok && c.forbidden:
			missing = append(missing, c.what+" failed with "+detail+", not with the seccomp filter's "+c.errno.Error())
		case !ok:
			missing = append(missing, c.what+" failed ("+detail+"), so the probe proves nothing")
		}
	}
	if len(missing) > 0 {
		return st, fmt.Errorf("confine: %w: %s", ErrNotEnforced, strings.Join(missing, "; "))
	}
	return st, nil
}

const probeFileSize = 1 << 20

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// probeChild runs in the confined child: it tries every check and prints
// the outcomes as JSON (check → error text, "" for success).
func probeChild() {
	a := os.Args[1:]
	out := map[string]string{}
	if len(a) != 7 {
		fmt.Fprintln(os.Stderr, "probe: want 7 arguments")
		os.Exit(2)
	}
	secret, ro, rw, other, proxy, other6, elsewhere := a[0], a[1], a[2], a[3], a[4], a[5], a[6]
	e := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	_, err := os.ReadFile(secret)
	out["read-outside"] = e(err)
	out["write-readonly"] = e(os.WriteFile(filepath.Join(ro, "new"), []byte("x"), 0o644))
	dial := func(addr string) error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	out["connect-other"] = e(dial(other))
	out["connect-proxy"] = e(dial(proxy))
	out["connect-elsewhere"] = e(dial(elsewhere))
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err == nil {
		unix.Close(fd)
		out["udp-socket"] = ""
	} else {
		out["udp-socket"] = err.Error()
	}
	if fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0); err == nil {
		unix.Close(fd)
		out["unix-socket"] = ""
	} else {
		out["unix-socket"] = err.Error()
	}
	out["fastopen-v4"] = e(probeFastOpen("sendto", other))
	out["fastopen-v6"] = e(probeFastOpen("sendto", other6))
	out["fastopen-sendmsg"] = e(probeFastOpen("sendmsg", other))
	out["fastopen-sendmmsg"] = e(probeFastOpen("sendmmsg", other))
	out["listen"] = e(probeListen())
	out["udp-send"] = e(probeSend(unix.SOCK_DGRAM, 0, other))
	out["raw-send"] = e(probeSend(unix.SOCK_RAW, unix.IPPROTO_RAW, other))
	out["io_uring"] = e(probeIOUring())
	out["setsid"] = e(leaveGroup())
	_, err = os.ReadFile(filepath.Join(ro, "f"))
	out["read-declared"] = e(err)
	out["write-declared"] = e(os.WriteFile(filepath.Join(rw, "new"), []byte("x"), 0o644))
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		out["no-new-privs"] = fmt.Sprintf("PR_GET_NO_NEW_PRIVS = %d (%v)", v, err)
	} else {
		out["no-new-privs"] = ""
	}
	var core, fsize unix.Rlimit
	err = errors.Join(unix.Getrlimit(unix.RLIMIT_CORE, &core), unix.Getrlimit(unix.RLIMIT_FSIZE, &fsize))
	if err != nil || core.Max != 0 || fsize.Max != probeFileSize {
		out["rlimits"] = "core " + strconv.FormatUint(core.Max, 10) + ", fsize " + strconv.FormatUint(fsize.Max, 10) + " " + e(err)
	} else {
		out["rlimits"] = ""
	}
	b, _ := json.Marshal(out)
	os.Stdout.Write(b)
	os.Exit(0)
}

// probeLeave is the probe marker's value for the grandchild that tries to
// leave the process group (the confined child itself leads its group, so
// setsid would fail for it anyway).
const probeLeave = "leave-group"

// leaveGroup starts this program as a grandchild that tries setsid and
// setpgid; nil means one of them succeeded.
func leaveGroup() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{probeMarker + "=" + probeLeave}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("the grandchild failed: %v", err)
	}
	if s := string(out); s != "" {
		return errors.New(s)
	}
	return nil
}

func probeLeaveGroup() {
	_, err1 := unix.Setsid()
	err2 := unix.Setpgid(0, 0)
	if err1 != nil && err2 != nil {
		fmt.Printf("setsid: %v; setpgid: %v", err1, err2)
	}
	os.Exit(0)
}

// probeSockaddr parses "ip:port" into its family, Sockaddr and raw bytes.
func probeSockaddr(addr string) (int, unix.Sockaddr, []byte, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return 0, nil, nil, err
	}
	p := ap.Port()
	if ap.Addr().Is4() {
		raw := unix.RawSockaddrInet4{Family: unix.AF_INET, Port: p<<8 | p>>8, Addr: ap.Addr().As4()}
		b := unsafe.Slice((*byte)(unsafe.Pointer(&raw)), unsafe.Sizeof(raw))
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(p), Addr: ap.Addr().As4()}, slices.Clone(b), nil
	}
	raw := unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: p<<8 | p>>8, Addr: ap.Addr().As16()}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&raw)), unsafe.Sizeof(raw))
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(p), Addr: ap.Addr().As16()}, slices.Clone(b), nil
}

// probeFastOpen sends to addr with MSG_FASTOPEN (TCP Fast Open: connect
// inside the send, which Landlock's connect rule does not see) by sendto,
// sendmsg or sendmmsg. nil means it was sent.
func probeFastOpen(how, addr string) error {
	family, sa, raw, err := probeSockaddr(addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	msg := []byte("probe")
	switch how {
	case "sendto":
		return unix.Sendto(fd, msg, unix.MSG_FASTOPEN, sa)
	case "sendmsg":
		_, err := unix.SendmsgN(fd, msg, nil, sa, unix.MSG_FASTOPEN)
		return err
	default:
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
		if _, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&m)), 1, unix.MSG_FASTOPEN, 0, 0); e != 0 {
			return e
		}
		return nil
	}
}

// probeListen calls listen on a TCP socket that was never bound: the
// kernel would bind it to an ephemeral port on every address.
func probeListen() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Listen(fd, 1)
}

// probeSend opens a socket of type typ and sends one datagram to addr.
func probeSend(typ, proto int, addr string) error {
	family, sa, _, err := probeSockaddr(addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte("probe"), 0, sa)
}

// probeIOUring tries io_uring's three calls; the filter answers EPERM to
// each. (On ring fd -1 the kernel itself would answer EBADF, and
// io_uring_setup would succeed.)
func probeIOUring() error {
	var params [120]byte // struct io_uring_params
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if e == 0 {
		unix.Close(int(fd))
		return nil
	}
	if e != unix.EPERM {
		return fmt.Errorf("io_uring_setup: %w", e)
	}
	if _, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, ^uintptr(0), 0, 0, 0, 0, 0); e != unix.EPERM {
		return fmt.Errorf("io_uring_enter: %w", e)
	}
	if _, _, e = unix.Syscall6(unix.SYS_IO_URING_REGISTER, ^uintptr(0), 0, 0, 0, 0, 0); e != unix.EPERM {
		return fmt.Errorf("io_uring_register: %w", e)
	}
	return unix.EPERM
}
