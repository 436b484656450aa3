package confine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// probeMarker in a process's environment makes Main run the probe's checks
// (in the confined child Probe starts) and exit.
const probeMarker = "MAIDEN_CONFINE_PROBE"

// Status is what Probe found.
type Status struct {
	// Landlock is the kernel's Landlock ABI (0: none).
	Landlock int
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

// probeChecks name the child's attempts: forbidden ones first.
var probeChecks = []struct {
	name      string
	forbidden bool
	what      string
}{
	{"read-outside", true, "reading a file outside the declared paths"},
	{"write-readonly", true, "writing in a read-only path"},
	{"connect-other", true, "a TCP connect to a loopback port that is not the proxy's"},
	{"udp-socket", true, "opening a UDP socket"},
	{"unix-socket", true, "opening a unix socket"},
	{"setsid", true, "a child leaving the process group (setsid, setpgid)"},
	{"read-declared", false, "reading a file in a read-only path"},
	{"write-declared", false, "writing in a writable path"},
	{"connect-proxy", false, "a TCP connect to the proxy port"},
	{"no-new-privs", false, "no_new_privs set"},
	{"rlimits", false, "rlimits set (no core dumps, the file size cap)"},
}

// Probe proves that confinement is in force on this machine: it starts a
// confined child (this program, through Main) that tries a forbidden read,
// write, connect (to a loopback listener Probe opens, not the proxy port),
// UDP and unix socket and setsid, and the allowed counterparts. It fails
// closed: any attempt that went otherwise, or a kernel without Landlock (or
// without its network rules, ABI 4), is an error naming what is not
// enforced.
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
	proxyPort := proxy.Addr().(*net.TCPAddr).Port
	res, err := Run(ctx, Spec{
		Path:      exe,
		Args:      []string{secret, ro, rw, other.Addr().String(), proxy.Addr().String()},
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
	for _, c := range probeChecks {
		detail, ran := got[c.name]
		ok := ran && (detail != "") == c.forbidden
		st.Checks = append(st.Checks, Check{Name: c.name, Forbidden: c.forbidden, OK: ok, Detail: detail})
		switch {
		case !ran:
			missing = append(missing, c.what+": not tried")
		case !ok && c.forbidden:
			missing = append(missing, c.what+" succeeded")
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
	if len(a) != 5 {
		fmt.Fprintln(os.Stderr, "probe: want 5 arguments")
		os.Exit(2)
	}
	secret, ro, rw, other, proxy := a[0], a[1], a[2], a[3], a[4]
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
