//go:build linux

package confine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pass 51 (docs/security-tests.md, "Fifty-first pass"): the network wall's
// namespace, its relay and the probe, from inside the package.

// TestMutation51NamespaceFailureRefusesTheRun: once this process could make
// network namespaces, a run with a proxy port whose namespace cannot be
// made is refused with that error (Run and StartCmd), never run without one.
func TestMutation51NamespaceFailureRefusesTheRun(t *testing.T) {
	real := netnsMaker
	t.Cleanup(func() { netnsMaker = real })
	boom := errors.New("mutation51: no namespace this time")
	netnsMaker = func() (func(int) (*proxyNetns, error), error) {
		return func(int) (*proxyNetns, error) { return nil, boom }, nil
	}
	res, err := Run(context.Background(), Spec{Path: "/bin/true", ProxyPort: 1})
	if !errors.Is(err, boom) {
		t.Errorf("Run with a proxy port whose namespace could not be made: %+v, %v; want refused with %q", res, err, boom)
	}
	cmd := exec.Command("/bin/true")
	st, err := StartCmd(cmd, Spec{ProxyPort: 1})
	if err == nil {
		_ = cmd.Wait()
	}
	if !errors.Is(err, boom) {
		t.Errorf("StartCmd with a proxy port whose namespace could not be made: %+v, %v; want refused with %q", st, err, boom)
	}
}

// nsLinks counts this process's descriptors whose link starts with each
// prefix ("net:", "user:").
func nsLinks(t *testing.T) map[string]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		for _, p := range []string{"net:", "user:", "socket:"} {
			if strings.HasPrefix(l, p) {
				n[p]++
			}
		}
	}
	return n
}

// TestMutation51CloseReleasesTheNamespacesAtOnce: Close drops the
// namespaces' descriptors and the listener itself, not a finalizer after
// the next collection (garbage collection is off here, so a descriptor
// left to one stays open). The helper's (user and network) and, as root,
// maiden's own.
func TestMutation51CloseReleasesTheNamespacesAtOnce(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	makers := map[string]func(int) (*proxyNetns, error){"helper": newHelperNetns}
	if os.Geteuid() == 0 {
		makers["root"] = newProxyNetns
	}
	for name, mk := range makers {
		before := nsLinks(t)
		p, err := mk(0)
		if err != nil {
			t.Logf("%s: no namespace here: %v", name, err)
			continue
		}
		if err := p.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
		after := nsLinks(t)
		for _, k := range []string{"net:", "user:", "socket:"} {
			if after[k] > before[k] {
				t.Errorf("%s: %d %s descriptors open after Close, %d before; want them closed by Close", name, after[k], k, before[k])
			}
		}
	}
}

// TestMutation51RelayAfterCloseOpensNothing: a connection the relay takes
// once Close has run (accepted as the run ended) is closed, and no
// connection to the proxy is opened for it; the relay does not crash.
func TestMutation51RelayAfterCloseOpensNothing(t *testing.T) {
	mk, why := netnsMaker()
	if mk == nil {
		t.Skipf("no network namespace here: %v", why)
	}
	proxy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var dialed atomic.Int64
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	p, err := mk(proxy.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	ours, theirs := net.Pipe()
	defer theirs.Close()
	panicked := func() (v any) {
		defer func() { v = recover() }()
		p.relay(ours)
		return nil
	}()
	if panicked != nil {
		t.Fatalf("the relay of a connection taken after Close panicked: %v; want it closed and nothing opened", panicked)
	}
	if _, err := theirs.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the program's side of a connection taken after Close: read %v; want it closed (EOF)", err)
	}
	// The relay dials the proxy before it would track the second side: a
	// dial would have been accepted by now (it returned).
	if n := dialed.Load(); n != 0 {
		t.Errorf("the relay opened %d connection(s) to the proxy after Close; want none", n)
	}
}

// TestMutation51ProbeNamesEachHole: without the Fast Open rule, the probe
// names each of the four sends (in a network namespace they still fail,
// with "permission denied" here, but not with the filter's EPERM); without
// the namespace, it says the child ran without one, whether or not
// 127.0.0.2 answers.
func TestMutation51ProbeNamesEachHole(t *testing.T) {
	t.Cleanup(func() { omitRule = "" })
	omitRule = ruleFastOpen
	_, err := Probe(context.Background())
	if !errors.Is(err, ErrNotEnforced) {
		t.Fatalf("Probe without the Fast Open rule: %v; want ErrNotEnforced", err)
	}
	for _, c := range probeChecks {
		if strings.HasPrefix(c.name, "fastopen-") && !strings.Contains(err.Error(), c.what+" ") {
			t.Errorf("Probe without the Fast Open rule: %v; want it to name %q", err, c.what)
		}
	}
	if ok, why := netnsAvailable(); !ok {
		t.Logf("no network namespace here: %v", why)
		return
	}
	omitRule = ruleNetNS
	_, err = Probe(context.Background())
	const want = "the probe's child ran with a network namespace false, want true"
	if !errors.Is(err, ErrNotEnforced) || !strings.Contains(err.Error(), want) {
		t.Errorf("Probe whose child ran without the namespace: %v; want ErrNotEnforced naming %q", err, want)
	}
}

// withThreadFilter runs f on a locked thread under a seccomp filter that
// answers each system call in answers with its errno (allowing the rest),
// and ends the thread afterwards.
func withThreadFilter(t *testing.T, answers map[uintptr]unix.Errno, f func() error) error {
	t.Helper()
	var prog []unix.SockFilter
	prog = append(prog, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0})
	for nr, e := range answers {
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: uint32(nr), Jf: 1},
			unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(e)})
	}
	prog = append(prog, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW})
	type out struct{ err, setup error }
	ch := make(chan out, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, filter and all.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			ch <- out{setup: err}
			return
		}
		fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0); err != nil {
			ch <- out{setup: err}
			return
		}
		ch <- out{err: f()}
	}()
	o := <-ch
	if o.setup != nil {
		t.Fatalf("installing the test's filter: %v", o.setup)
	}
	return o.err
}

// TestMutation51IOUringProbeNeedsAllThree: the probe's io_uring attempt
// passes only when setup, enter and register each answer EPERM: a filter
// that lets enter through (the kernel answers EBADF on fd -1), or answers
// setup otherwise, is reported.
func TestMutation51IOUringProbeNeedsAllThree(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers map[uintptr]unix.Errno
		want    string
	}{
		{"enter let through", map[uintptr]unix.Errno{unix.SYS_IO_URING_SETUP: unix.EPERM, unix.SYS_IO_URING_REGISTER: unix.EPERM}, "io_uring_enter: " + unix.EBADF.Error()},
		{"setup answered ENOSYS", map[uintptr]unix.Errno{unix.SYS_IO_URING_SETUP: unix.ENOSYS, unix.SYS_IO_URING_ENTER: unix.EPERM, unix.SYS_IO_URING_REGISTER: unix.EPERM}, "io_uring_setup: " + unix.ENOSYS.Error()},
		{"all three refused", map[uintptr]unix.Errno{unix.SYS_IO_URING_SETUP: unix.EPERM, unix.SYS_IO_URING_ENTER: unix.EPERM, unix.SYS_IO_URING_REGISTER: unix.EPERM}, unix.EPERM.Error()},
	} {
		err := withThreadFilter(t, c.answers, probeIOUring)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: probeIOUring = %v; want %q", c.name, err, c.want)
		}
	}
}

// TestMutation51ProbeChildReportsMissingLimits: the probe's child, run
// without the confinement (no no_new_privs, core dumps unlimited, the file
// size cap the probe sets), reports both, so a run that lacked them fails
// the probe.
func TestMutation51ProbeChildReportsMissingLimits(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit here")
	}
	exe, err := self()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"ro", "rw"} {
		if err := os.Mkdir(dir+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(prlimit, "--core=unlimited", "--fsize="+strconv.Itoa(probeFileSize), "--", exe,
		dir+"/secret", dir+"/ro", dir+"/rw", "127.0.0.1:1", "127.0.0.1:1", "[::1]:1", "127.0.0.2:1")
	cmd.Env = []string{probeMarker + "=1"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe's child: %v (%q)", err, out)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the probe's child: %v (%q)", err, out)
	}
	for _, c := range []struct{ check, want string }{
		{"rlimits", "core 18446744073709551615, fsize 1048576 "},
		{"no-new-privs", "PR_GET_NO_NEW_PRIVS = 0 (<nil>)"},
	} {
		if got[c.check] != c.want {
			t.Errorf("the probe's child without no_new_privs, with core dumps: %s %q; want %q", c.check, got[c.check], c.want)
		}
	}
}
