//go:build linux

package confine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The confined programs of these tests are this test binary itself, in a
// mode chosen by an environment variable: real native code doing the
// hostile thing, under the same trampoline a wrapped CLI gets.
const modeEnv = "CONFINE_TEST_MODE"

func TestMain(m *testing.M) {
	confine.Main()
	if mode := os.Getenv(modeEnv); mode != "" {
		// syscall.Exit, not os.Exit: a race-detector build that exits 0
		// through os.Exit sleeps a second first (GORACE's atexit_sleep_ms,
		// which the scrubbed environment cannot set), and most of this
		// package's time went to those seconds. What the child prints is
		// written unbuffered, and a race in it is still reported as it
		// happens.
		syscall.Exit(hostile(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// hostile runs in the confined child. It prints "ok" if the attempt
// succeeded and "refused: ERR" if not, and exits 0 either way (so a test
// can tell a refusal from a crash).
func hostile(mode string, args []string) int {
	report := func(err error) int {
		if err != nil {
			fmt.Printf("refused: %v", err)
		} else {
			fmt.Print("ok")
		}
		return 0
	}
	switch mode {
	case "read":
		_, err := os.ReadFile(args[0])
		return report(err)
	case "list":
		_, err := os.ReadDir(args[0])
		return report(err)
	case "write":
		return report(os.WriteFile(args[0], []byte("written"), 0o644))
	case "connect":
		c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		if err == nil {
			c.Close()
		}
		return report(err)
	case "udp":
		c, err := net.Dial("udp", args[0])
		if err == nil {
			_, err = c.Write([]byte("x"))
			c.Close()
		}
		return report(err)
	case "env":
		fmt.Print(strings.Join(os.Environ(), "\n"))
		return 0
	case "net":
		if len(args) == 0 {
			return 2
		}
		out, ok := hostileNet(args[0], args[1:])
		if !ok {
			fmt.Fprintln(os.Stderr, "unknown net verb", args[0])
			return 2
		}
		fmt.Print(out)
		return 0
	case "spew":
		n, _ := strconv.Atoi(args[0])
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = 'a'
		}
		os.Stdout.Write(buf)
		os.Stderr.Write(buf)
		return 0
	case "fork-sleeper":
		// A child in the same process group that would outlive us.
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = []string{modeEnv + "=sleep"}
		if err := cmd.Start(); err != nil {
			fmt.Printf("refused: %v", err)
			return 0
		}
		fmt.Printf("%d\n", cmd.Process.Pid)
		os.Stdout.Sync()
		time.Sleep(time.Minute)
		return 0
	case "fork-sleeper-exit":
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = []string{modeEnv + "=sleep"}
		if err := cmd.Start(); err != nil {
			fmt.Printf("refused: %v", err)
			return 0
		}
		fmt.Printf("%d\n", cmd.Process.Pid)
		return 0
	case "alloc":
		n, _ := strconv.Atoi(args[0])
		b := make([]byte, n<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Print("ok")
		return 0
	case "bigfile":
		n, _ := strconv.Atoi(args[1])
		return report(os.WriteFile(args[0], make([]byte, n), 0o644))
	case "serve":
		// A line protocol on stdin/stdout, as a stdio server has.
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			verb, arg, _ := strings.Cut(sc.Text(), " ")
			var err error
			switch verb {
			case "read":
				_, err = os.ReadFile(arg)
			case "connect":
				var c net.Conn
				if c, err = net.DialTimeout("tcp", arg, 5*time.Second); err == nil {
					c.Close()
				}
			case "env":
				fmt.Println(strings.Join(os.Environ(), " "))
				continue
			default:
				if out, ok := hostileNet(verb, strings.Fields(arg)); ok {
					fmt.Println(out)
					continue
				}
				err = fmt.Errorf("unknown verb %q", verb)
			}
			if err != nil {
				fmt.Printf("refused: %v\n", err)
			} else {
				fmt.Println("ok")
			}
		}
		return 0
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "exit":
		n, _ := strconv.Atoi(args[0])
		return n
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	return 2
}

func self(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs s confined.
func run(t *testing.T, s confine.Spec) confine.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := confine.Run(ctx, s)
	if err != nil {
		t.Fatalf("Run: %v (stderr %q)", err, res.Stderr)
	}
	if res.Unconfined || res.Landlock < -1 {
		t.Fatalf("the run was not confined: %+v", res)
	}
	return res
}

func mode(t *testing.T, m string, s confine.Spec, args ...string) string {
	t.Helper()
	s.Path = self(t)
	s.Args = args
	s.Env = append(s.Env, modeEnv+"="+m)
	res := run(t, s)
	if res.ExitCode != 0 {
		t.Fatalf("mode %s exited %d: %s", m, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

func mustRefuse(t *testing.T, what, out string) {
	t.Helper()
	if !strings.HasPrefix(out, "refused: ") {
		t.Fatalf("%s: %q, want a refusal", what, out)
	}
}

func mustAllow(t *testing.T, what, out string) {
	t.Helper()
	if out != "ok" {
		t.Fatalf("%s: %q, want ok", what, out)
	}
}

// Files outside the declared paths cannot be read, even ones every user
// may read; the declared ones can (the control).
func TestCannotReadOutsideItsPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	allowed, secret := filepath.Join(dir, "allowed"), filepath.Join(dir, "secret")
	os.Mkdir(allowed, 0o755)
	os.WriteFile(filepath.Join(allowed, "f"), []byte("x"), 0o644)
	os.WriteFile(secret, []byte("s3cret"), 0o644)
	s := confine.Spec{ReadOnly: []string{allowed}}
	mustAllow(t, "declared file", mode(t, "read", s, filepath.Join(allowed, "f")))
	mustRefuse(t, "sibling of a declared path", mode(t, "read", s, secret))
	mustRefuse(t, "/etc/passwd", mode(t, "read", s, "/etc/passwd"))
	mustRefuse(t, "/proc/1/environ", mode(t, "read", s, "/proc/self/environ"))
	mustRefuse(t, "listing /", mode(t, "list", s, "/"))
	mustRefuse(t, "through .. from a declared path", mode(t, "read", s, filepath.Join(allowed, "..", "secret")))
	// A symbolic link inside a declared path that points outside it.
	link := filepath.Join(allowed, "link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, "a link to outside", mode(t, "read", s, link))
}

func TestCannotWriteToReadOnlyPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ro, rw := filepath.Join(dir, "ro"), filepath.Join(dir, "rw")
	os.Mkdir(ro, 0o755)
	os.Mkdir(rw, 0o755)
	existing := filepath.Join(ro, "existing")
	os.WriteFile(existing, []byte("original"), 0o644)
	s := confine.Spec{ReadOnly: []string{ro}, Writable: []string{rw}}
	mustAllow(t, "writable path", mode(t, "write", s, filepath.Join(rw, "new")))
	mustRefuse(t, "new file in a read-only path", mode(t, "write", s, filepath.Join(ro, "new")))
	mustRefuse(t, "existing file in a read-only path", mode(t, "write", s, existing))
	mustRefuse(t, "the temp dir", mode(t, "write", s, filepath.Join(dir, "new")))
	if b, _ := os.ReadFile(existing); string(b) != "original" {
		t.Fatalf("read-only file now holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(ro, "new")); err == nil {
		t.Fatal("a file was created in the read-only path")
	}
}

// listener is a loopback listener counting accepted connections.
func listener(t *testing.T) (string, *hits) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h := &hits{accepted: make(chan struct{}, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.n.Add(1)
			select {
			case h.accepted <- struct{}{}:
			default:
			}
			c.Close()
		}
	}()
	return ln.Addr().String(), h
}

// hits counts a listener's accepted connections. A client's connect
// returns once the kernel queued the connection, before the listener's
// Accept returns it: a count read right after a connect may not have it
// yet, so a test waits for the accept (waitFor) before it counts.
type hits struct {
	n        atomic.Int64
	accepted chan struct{}
}

func (h *hits) Load() int64 { return h.n.Load() }

// waitFor waits until the listener accepted n connections.
func (h *hits) waitFor(t *testing.T, n int64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for h.n.Load() < n {
		select {
		case <-h.accepted:
		case <-deadline:
			t.Fatalf("the listener accepted %d connections in 30 s, want %d", h.n.Load(), n)
		}
	}
}

func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

func TestCannotConnectButToTheProxyPort(t *testing.T) {
	t.Parallel()
	proxy, proxyHits := listener(t)
	other, otherHits := listener(t)
	s := confine.Spec{ProxyPort: port(proxy)}
	mustAllow(t, "the proxy port", mode(t, "connect", s, proxy))
	mustRefuse(t, "another loopback port", mode(t, "connect", s, other))
	mustRefuse(t, "IPv6 loopback, another port", mode(t, "connect", s, "[::1]:"+strconv.Itoa(port(other))))
	mustRefuse(t, "UDP", mode(t, "udp", s, other))
	// No proxy port: not even the proxy.
	mustRefuse(t, "no network: the proxy port", mode(t, "connect", confine.Spec{}, proxy))
	mustRefuse(t, "no network: UDP", mode(t, "udp", confine.Spec{}, other))
	proxyHits.waitFor(t, 1) // the one connection the proxy port allowed
	if n := otherHits.Load(); n != 0 {
		t.Fatalf("the other listener accepted %d connections", n)
	}
	if n := proxyHits.Load(); n != 1 {
		t.Fatalf("the proxy listener accepted %d connections, want 1", n)
	}
}

// The environment is exactly Spec.Env: nothing of the caller's leaks,
// and not the trampoline's marker.
func TestEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("CONFINE_TEST_SECRET", "leak")
	out := mode(t, "env", confine.Spec{Env: append(confine.AllowEnv("CONFINE_TEST_SECRET_NOT_SET", "HOME"), "A=1")})
	lines := strings.Split(out, "\n")
	want := []string{}
	if h, ok := os.LookupEnv("HOME"); ok {
		want = append(want, "HOME="+h)
	}
	want = append(want, "A=1", modeEnv+"=env")
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("environment %q, want %q", lines, want)
	}
}

func TestOutputIsCapped(t *testing.T) {
	t.Parallel()
	res := run(t, confine.Spec{Path: self(t), Args: []string{"100000"}, Env: []string{modeEnv + "=spew"}, MaxOutput: 1000})
	if len(res.Stdout) != 1000 || res.StdoutDropped != 99000 || len(res.Stderr) != 1000 || res.StderrDropped != 99000 {
		t.Fatalf("stdout %d (+%d dropped), stderr %d (+%d dropped)", len(res.Stdout), res.StdoutDropped, len(res.Stderr), res.StderrDropped)
	}
	res = run(t, confine.Spec{Path: self(t), Args: []string{"1000"}, Env: []string{modeEnv + "=spew"}, MaxOutput: 1000})
	if len(res.Stdout) != 1000 || res.StdoutDropped != 0 {
		t.Fatalf("exactly the cap: stdout %d (+%d dropped)", len(res.Stdout), res.StdoutDropped)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie is dead; its parent (init here) has not reaped it yet.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// At the deadline the whole process group dies: the program and the
// sleeper it started.
func TestKilledWithChildrenAtDeadline(t *testing.T) {
	t.Parallel()
	start := time.Now()
	res := run(t, confine.Spec{Path: self(t), Env: []string{modeEnv + "=fork-sleeper"}, Timeout: 2 * time.Second})
	if !res.TimedOut || res.Signal != "SIGKILL" {
		t.Fatalf("result %+v, want timed out by SIGKILL", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Run returned after %v", d)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("the program did not start its sleeper: %q %q", res.Stdout, res.Stderr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		syscallKill(pid)
		t.Fatalf("the sleeper %d outlived the deadline", pid)
	}
}

// A program that exits leaving a child behind: the child is killed when
// the program ends, and Run does not wait for it.
func TestLeftoverChildrenKilled(t *testing.T) {
	t.Parallel()
	start := time.Now()
	res := run(t, confine.Spec{Path: self(t), Env: []string{modeEnv + "=fork-sleeper-exit"}, Timeout: 30 * time.Second})
	if res.TimedOut || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(start); d > 15*time.Second { // the sleeper sleeps a minute
		t.Fatalf("Run returned after %v: it waited for the leftover child", d)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("the program did not start its sleeper: %q %q", res.Stdout, res.Stderr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		syscallKill(pid)
		t.Fatalf("the sleeper %d outlived the program", pid)
	}
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	// 1 GiB: room for the race detector's shadow memory, which counts.
	lim := confine.Limits{Memory: 1 << 30}
	res := run(t, confine.Spec{Path: self(t), Args: []string{"64"}, Env: []string{modeEnv + "=alloc"}, Limits: lim})
	if res.ExitCode != 0 || string(res.Stdout) != "ok" {
		t.Fatalf("64 MiB under a 1 GiB limit: exit %d, %s", res.ExitCode, res.Stderr)
	}
	res = run(t, confine.Spec{Path: self(t), Args: []string{"2048"}, Env: []string{modeEnv + "=alloc"}, Limits: lim})
	if res.ExitCode == 0 || string(res.Stdout) == "ok" {
		t.Fatalf("2 GiB under a 1 GiB limit: exit %d, %q", res.ExitCode, res.Stdout)
	}
}

func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := confine.Spec{Path: self(t), Env: []string{modeEnv + "=bigfile"}, Writable: []string{dir}, Limits: confine.Limits{FileSize: 1 << 20}}
	s.Args = []string{filepath.Join(dir, "small"), strconv.Itoa(1 << 20)}
	if res := run(t, s); res.ExitCode != 0 || string(res.Stdout) != "ok" {
		t.Fatalf("a file at the limit: %+v", res)
	}
	s.Args = []string{filepath.Join(dir, "big"), strconv.Itoa(4 << 20)}
	res := run(t, s)
	if res.ExitCode == 0 && string(res.Stdout) == "ok" {
		t.Fatalf("a file over the limit was written: %+v", res)
	}
	if fi, err := os.Stat(filepath.Join(dir, "big")); err == nil && fi.Size() > 1<<20 {
		t.Fatalf("the file has %d bytes", fi.Size())
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	res := run(t, confine.Spec{Path: self(t), Args: []string{"7"}, Env: []string{modeEnv + "=exit"}})
	if res.ExitCode != 7 || res.TimedOut {
		t.Fatalf("%+v", res)
	}
}

func TestBadSpecs(t *testing.T) {
	t.Parallel()
	for _, s := range []confine.Spec{
		{Path: "true"},
		{Path: "/nonexistent/program"},
		{Path: "/bin/true", ReadOnly: []string{"relative"}},
		{Path: "/bin/true", Writable: []string{"/nonexistent"}},
	} {
		if _, err := confine.Run(context.Background(), s); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}

// An executable outside the system paths runs: its own file is readable
// and executable without being declared.
func TestExecutableOutsideSystemPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteExecutable(t, exe, b) // never "text file busy" to the run below (full run 190)
	res, err := confine.Run(context.Background(), confine.Spec{Path: exe})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("a copy of /bin/true: %+v %v", res, err)
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	st, err := confine.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Landlock < 4 || len(st.Checks) < 19 {
		t.Fatalf("status %+v", st)
	}
	if wantNetNS() && !st.NetNS {
		t.Errorf("runs with network get no network namespace: %s", st.NetNSError)
	}
	for _, c := range st.Checks {
		if !c.OK {
			t.Errorf("check %s: %+v", c.Name, c)
		}
		if c.Name == "connect-elsewhere" {
			// Nothing is there in the run's network namespace.
			if !st.NetNS || !strings.Contains(c.Detail, "connection refused") {
				t.Errorf("check %s: %+v (network namespace %v)", c.Name, c, st.NetNS)
			}
			continue
		}
		if c.Forbidden && !strings.Contains(c.Detail, "permission denied") && !strings.Contains(c.Detail, "operation not permitted") {
			t.Errorf("check %s was refused for another reason: %q", c.Name, c.Detail)
		}
	}
}

func syscallKill(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

// TestWritableSymlinkRefused (security review of the fs cards): a writable path is decided by its name (a wrapped
// CLI's write_paths, lexically, by the session's boundary and the agent's fs:write cards), while a Landlock rule
// binds whatever the name resolves to when the run starts. A writable path that is a symlink, or has one on its way
// (which a CLI writing the parent directory, or any tool writing there, can make between two runs), would make the
// link's target writable: the run is refused with an error naming the path, and nothing is written there. A
// symlink inside a writable path still leads nowhere (the control), and SystemReadOnly paths still follow links (as
// the start paths do: the system's library directories are links on merged-/usr systems; TestReadPathSymlinkRefused
// has the declared read-only paths).
func TestWritableSymlinkRefused(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := filepath.Join(dir, "mine"), filepath.Join(dir, "theirs")
	for _, d := range []string{mine, filepath.Join(theirs, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache, alink := filepath.Join(mine, "cache"), filepath.Join(dir, "alink")
	if err := os.Symlink("../theirs", cache); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("theirs", alink); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, writable, write string }{
		{"the path is a symlink", cache, filepath.Join(cache, "planted")},
		{"a symlink on its way", filepath.Join(alink, "sub"), filepath.Join(alink, "sub", "planted")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := confine.Run(ctx, confine.Spec{Path: self(t), Args: []string{c.write}, Env: []string{modeEnv + "=write"},
				Writable: []string{mine, c.writable}})
			if err == nil || !strings.Contains(err.Error(), c.writable) || !strings.Contains(err.Error(), "symlink") {
				t.Errorf("writable %s: err %v (stdout %q), want the run refused naming the path and its symlink", c.writable, err, res.Stdout)
			}
			for _, d := range []string{theirs, filepath.Join(theirs, "sub")} {
				if _, err := os.Lstat(filepath.Join(d, "planted")); !os.IsNotExist(err) {
					t.Fatalf("%s/planted: %v, want nothing written through the link", d, err)
				}
			}
		})
	}
	// The control: a link inside a writable path is not its target.
	mustRefuse(t, "through a link inside a writable path", mode(t, "write", confine.Spec{Writable: []string{mine}}, filepath.Join(cache, "planted")))
	// The system paths the caller adds follow links, as the start paths do.
	if err := os.WriteFile(filepath.Join(theirs, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustAllow(t, "a system read-only path through a link", mode(t, "read", confine.Spec{SystemReadOnly: []string{alink}}, filepath.Join(alink, "f")))
}

// TestReadPathSymlinkRefused (security review of the fs cards, its read half): a declared read-only path (a wrapped
// CLI's read_paths, an MCP server's read_paths and dir) is decided by its name, the operator's, while a Landlock rule
// binds whatever the name resolves to when the run starts. One beneath a directory the agent can write (through a
// CLI's write_paths) it can replace with a symlink to anything maiden can read (~/.ssh, /etc): a read path that is a
// symlink, or has one on its way, refuses the run with an error naming it, and the file behind the link is not read.
// The controls: the same tree named by its real path is readable, and SystemReadOnly (the CA bundle, the paths the
// caller adds itself) follows links as the start paths do.
func TestReadPathSymlinkRefused(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mine, secret := filepath.Join(dir, "mine"), filepath.Join(dir, "secret")
	for _, d := range []string{mine, filepath.Join(secret, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(secret, "key"), filepath.Join(secret, "sub", "key")} {
		if err := os.WriteFile(f, []byte("s3cret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref, alink, flink := filepath.Join(mine, "ref"), filepath.Join(dir, "alink"), filepath.Join(mine, "key")
	for link, target := range map[string]string{ref: "../secret", alink: "secret", flink: "../secret/key"} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, readable, read string }{
		{"the path is a symlink", ref, filepath.Join(ref, "key")},
		{"a symlink on its way", filepath.Join(alink, "sub"), filepath.Join(alink, "sub", "key")},
		{"a symlink to a file", flink, flink},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := confine.Run(ctx, confine.Spec{Path: self(t), Args: []string{c.read}, Env: []string{modeEnv + "=read"},
				ReadOnly: []string{mine, c.readable}})
			if string(res.Stdout) == "ok" {
				t.Errorf("read path %s: %s was read through the link", c.readable, c.read)
			}
			if err == nil || !strings.Contains(err.Error(), "read path "+c.readable) || !strings.Contains(err.Error(), "symlink") {
				t.Errorf("read path %s: err %v (stdout %q), want the run refused naming the path and its symlink", c.readable, err, res.Stdout)
			}
		})
	}
	// The controls: the real path reads; a system path through a link too.
	mustAllow(t, "the real path", mode(t, "read", confine.Spec{ReadOnly: []string{secret}}, filepath.Join(secret, "sub", "key")))
	mustAllow(t, "a system path through a link", mode(t, "read", confine.Spec{SystemReadOnly: []string{ref}}, filepath.Join(ref, "key")))
	// A link inside a declared read path still leads nowhere.
	mustRefuse(t, "through a link inside a read path", mode(t, "read", confine.Spec{ReadOnly: []string{mine}}, filepath.Join(ref, "key")))
	// StartCmd (a stdio MCP server's read_paths and dir) refuses it too.
	cmd := exec.Command(self(t))
	cmd.Env = []string{modeEnv + "=serve"}
	if _, err := confine.StartCmd(cmd, confine.Spec{ReadOnly: []string{ref}}); err == nil || !strings.Contains(err.Error(), "read path "+ref) || !strings.Contains(err.Error(), "symlink") {
		if err == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		t.Errorf("StartCmd with read path %s: %v, want it refused naming the path and its symlink", ref, err)
	}
}

// A failure of the child before the program runs is an error naming the
// step and wrapping its errno: a file that is not executable is EACCES at
// execve.
func TestChildFailureWrapsErrno(t *testing.T) {
	t.Parallel()
	exe := filepath.Join(t.TempDir(), "notexec")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := confine.Run(context.Background(), confine.Spec{Path: exe})
	want := "confine: " + exe + ": execve: permission denied"
	if err == nil || err.Error() != want || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("a file without its execute bit: %v (errors.Is EACCES: %v); want %q, wrapping EACCES", err, errors.Is(err, syscall.EACCES), want)
	}
}
