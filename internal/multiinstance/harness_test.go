package multiinstance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/pgtest"
	"github.com/maiden-run/maiden/internal/testkit"
)

func TestMain(m *testing.M) {
	if os.Getenv(envNative) == "1" {
		os.Exit(serveNative())
	}
	os.Exit(pgtest.Run(m))
}

// maidenBin builds ./cmd/maiden as a user would, once per run (shared with
// the other test binaries: testkit.Binary).
func maidenBin(t testing.TB) string {
	t.Helper()
	return testkit.Binary(t, "./cmd/maiden")
}

// nodeDir installs the official TypeScript SDK at the version pinned by
// mcpserver/testdata/node-client's lockfile (the same client the
// other MCP tests use) next to testdata/driver.mjs, once per lockfile and
// driver, in the user cache, and returns that directory.
func nodeDir(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("MAIDEN_CI") != "" {
			t.Fatal("node is not installed: make test installs it (scripts/deps)")
		}
		t.Skip("node is not installed; the multi-instance tests drive maiden with the TypeScript MCP client")
	}
	root := testkit.RepoRoot(t)
	src := filepath.Join(root, "mcpserver", "testdata", "node-client")
	files := map[string][]byte{}
	h := sha256.New()
	for _, f := range []string{"package.json", "package-lock.json", ".npmrc"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
		h.Write(b)
	}
	driver, err := os.ReadFile(filepath.Join(root, "internal", "multiinstance", "testdata", "driver.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	files["driver.mjs"] = driver
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "maiden", "testkit", "multi-"+hex.EncodeToString(h.Sum(nil)[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(dir, ".installed")
	if _, err := os.Stat(marker); err == nil {
		return dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install of the TypeScript MCP SDK (needs npm and the npm registry): %v\n%s", err, out)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// counter is a loopback HTTPS server that counts the fetches of each path:
// the fetcher tool's executions.
type counter struct {
	mu    sync.Mutex
	hits  map[string]int
	hold  string        // a path whose first request hangs until release
	held  chan struct{} // closed when that request arrived
	relse chan struct{}
	base  string // https://localhost:PORT
	ca    string
	port  string
}

func newCounter(t testing.TB) *counter {
	c := &counter{hits: map[string]int{}, held: make(chan struct{}), relse: make(chan struct{})}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.hits[r.URL.Path]++
		n := c.hits[r.URL.Path]
		hold := c.hold != "" && r.URL.Path == c.hold && n == 1
		c.mu.Unlock()
		if hold {
			close(c.held)
			select {
			case <-c.relse:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprintf(w, "hit %d", n)
	}), "localhost")
	t.Cleanup(func() {
		select {
		case <-c.relse:
		default:
			close(c.relse)
		}
	})
	u, _ := url.Parse(srv.URL)
	c.port, c.ca, c.base = u.Port(), ca, "https://localhost:"+u.Port()
	return c
}

func (c *counter) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[path]
}

func (c *counter) url(path string) map[string]any { return map[string]any{"url": c.base + path} }

// env is one state store (a fresh PostgreSQL database), an agent.toml on
// it, and the CLI against both.
type env struct {
	bin, cfg, db, cache string
	ctr                 *counter
	token               string // agent alice's bearer token
	opToken             string // operator ops's token (the inbox's sign-in)
}

// rateLimit is the limited tool's calls per minute.
const rateLimit = 5

func newEnv(t testing.TB, db string) *env {
	t.Helper()
	e := &env{bin: maidenBin(t), db: db, cache: testkit.CompileCache(t), ctr: newCounter(t)}
	e.cfg = filepath.Join(t.TempDir(), "agent.toml")
	toml := fmt.Sprintf(`version = 1

[tools.echo]
path = %[1]q

[tools.limited]
path = %[1]q
middleware = [{ use = "ratelimit", limit = %[6]d, per = "1m" }]

[tools.fetcher]
path = %[2]q
http_allow = ["localhost"]
http_ports = [%[3]s]
http_allow_cidrs = ["127.0.0.0/8", "::1/128"]
http_ca_files = [%[4]q]
timeout_ms = 60000
middleware = [{ use = "approve", reason = "fetches from the network" }]

[tools.counted]
path = %[2]q
http_allow = ["localhost"]
http_ports = [%[3]s]
http_allow_cidrs = ["127.0.0.0/8", "::1/128"]
http_ca_files = [%[4]q]

[agents.alice]
tools = ["echo", "limited", "fetcher", "counted"]
grants = ["tool:invoke limited --...", "tool:invoke fetcher --...", "tool:invoke counted --...", "network:connect *"]

[operators.ops]

[state]
%[7]s = %[5]q
`, testkit.Component(t, "echo"), testkit.Component(t, "js/fetcher"), e.ctr.port, e.ctr.ca, db, rateLimit, stateKey(db))
	if err := os.WriteFile(e.cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	e.maiden(t, "check", "-cache", e.cache) // compiles once for every instance
	e.token = strings.TrimSpace(e.maiden(t, "agents", "token", "alice"))
	e.opToken = strings.TrimSpace(e.maiden(t, "operators", "token", "ops"))
	return e
}

// stateKey is the [state] key for a store location.
func stateKey(loc string) string {
	if strings.HasPrefix(loc, "postgres://") {
		return "url"
	}
	return "path"
}

// maiden runs the CLI on the env's configuration (and so its store); a
// failure fails the test.
func (e *env) maiden(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := e.try(args...)
	if err != nil {
		t.Fatalf("maiden %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// try runs the CLI and returns its outputs and error.
func (e *env) try(args ...string) (string, string, error) {
	full := append(append([]string{}, args...), "-config", e.cfg)
	cmd := exec.Command(e.bin, full...)
	var o, eb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &eb
	err := cmd.Run()
	return o.String(), eb.String(), err
}

// instance is one `maiden serve -http` process.
type instance struct {
	name   string
	cmd    *exec.Cmd
	url    string
	stderr *testkit.SyncBuffer
}

var serveAddr = regexp.MustCompile(`at (http://\S+/mcp)`)

func (e *env) serve(t testing.TB, name string, extra ...string) *instance {
	t.Helper()
	args := append([]string{"serve", "-http", "127.0.0.1:0", "-config", e.cfg, "-cache", e.cache, "-approval-wait", "30s", "-watch=false"}, extra...)
	return startInstance(t, name, exec.Command(e.bin, args...))
}

// startInstance starts cmd, a server that says on stderr where it serves
// ("at http://…/mcp", as maiden serve does), and waits for that line; the
// process is killed at the test's end if it still runs.
func startInstance(t testing.TB, name string, cmd *exec.Cmd) *instance {
	t.Helper()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{name: name, cmd: cmd, stderr: &testkit.SyncBuffer{}}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() // only the process this test started, by its PID
			cmd.Wait()
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			in.stderr.Write([]byte(sc.Text() + "\n"))
			if m := serveAddr.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case in.url = <-found:
	case <-time.After(60 * time.Second):
		t.Fatalf("instance %s did not report its address:\n%s", name, in.stderr.String())
	}
	return in
}

// stop ends the instance with SIGTERM (it flushes its audit journal) and
// waits for it.
func (in *instance) stop(t testing.TB) {
	t.Helper()
	if in.cmd.ProcessState != nil {
		return
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- in.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("instance %s exited with %v after SIGTERM:\n%s", in.name, err, in.stderr.String())
		}
	case <-time.After(30 * time.Second):
		in.cmd.Process.Kill()
		<-done
		t.Errorf("instance %s ignored SIGTERM for 30 s:\n%s", in.name, in.stderr.String())
	}
}

func (in *instance) kill(t testing.TB) {
	t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	in.cmd.Wait()
}

// driver is a running testdata/driver.mjs.
type driver struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	calls map[string]*call
	conns map[string]chan string
	seq   int
}

// call is one tools/call in flight.
type call struct {
	progress chan string
	done     chan struct{}
	res      result
}

type result struct {
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
	Error   string `json:"error"` // a protocol or transport error
}

func (r result) ok() bool { return r.Error == "" && !r.IsError }

func (r result) String() string {
	if r.Error != "" {
		return "error: " + r.Error
	}
	return fmt.Sprintf("isError=%v %s", r.IsError, r.Text)
}

func newDriver(t testing.TB) *driver {
	t.Helper()
	dir := nodeDir(t)
	cmd := exec.Command("node", "driver.mjs")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &driver{cmd: cmd, stdin: stdin, calls: map[string]*call{}, conns: map[string]chan string{}}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m struct {
				Op, C, ID, Message string
				result             // its Error is also a connect's error
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				continue
			}
			d.mu.Lock()
			switch m.Op {
			case "connected":
				if ch := d.conns[m.C]; ch != nil {
					ch <- m.Error
				}
			case "progress":
				if c := d.calls[m.ID]; c != nil {
					select {
					case c.progress <- m.Message:
					default:
					}
				}
			case "result":
				if c := d.calls[m.ID]; c != nil {
					c.res = m.result
					close(c.done)
				}
			}
			d.mu.Unlock()
		}
	}()
	return d
}

func (d *driver) send(t testing.TB, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := d.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("driver: %v", err)
	}
}

// connect opens an MCP session named c to the instance as agent alice.
func (d *driver) connect(t testing.TB, c string, in *instance, token string) {
	t.Helper()
	ch := make(chan string, 1)
	d.mu.Lock()
	d.conns[c] = ch
	d.mu.Unlock()
	d.send(t, map[string]any{"op": "connect", "c": c, "url": in.url, "token": token})
	select {
	case msg := <-ch:
		if msg != "" {
			t.Fatalf("connect %s to %s: %s", c, in.name, msg)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("connect %s to %s: no answer in 30 s", c, in.name)
	}
}

// start begins a call on session c.
func (d *driver) start(t testing.TB, c, tool string, args map[string]any) *call {
	t.Helper()
	d.mu.Lock()
	d.seq++
	id := fmt.Sprintf("%s-%d", c, d.seq)
	cl := &call{progress: make(chan string, 64), done: make(chan struct{})}
	d.calls[id] = cl
	d.mu.Unlock()
	d.send(t, map[string]any{"op": "call", "id": id, "c": c, "tool": tool, "args": args})
	return cl
}

// call makes a call and waits for its result.
func (d *driver) call(t testing.TB, c, tool string, args map[string]any) result {
	t.Helper()
	return d.start(t, c, tool, args).wait(t)
}

func (c *call) wait(t testing.TB) result {
	t.Helper()
	select {
	case <-c.done:
		return c.res
	case <-time.After(2 * time.Minute):
		t.Fatal("a call had no result after 2 minutes")
	}
	return result{}
}

var waitingRE = regexp.MustCompile(`waiting for approval (\S+)`)

// approvalID waits for the progress message naming the call's approval.
func (c *call) approvalID(t testing.TB) (string, string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case m := <-c.progress:
			if g := waitingRE.FindStringSubmatch(m); g != nil {
				return strings.TrimSuffix(g[1], ":"), m
			}
		case <-c.done:
			t.Fatalf("the call ended without waiting for approval: %s", c.res)
		case <-deadline:
			t.Fatal("no progress naming an approval within 60 s")
		}
	}
}

// auditRecord is one line of `maiden audit export`.
type auditRecord struct {
	Seq  int64           `json:"seq"`
	Kind string          `json:"kind"`
	Tool string          `json:"tool"`
	Body json.RawMessage `json:"body"`
}

func (e *env) auditExport(t testing.TB) []auditRecord {
	t.Helper()
	out := e.maiden(t, "audit", "export")
	var recs []auditRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r auditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit export line %q: %v", line, err)
		}
		if r.Kind != "" {
			recs = append(recs, r)
		}
	}
	return recs
}

// psql runs SQL on the env's database.
func (e *env) psql(t testing.TB, sql string) string { return pgtest.Exec(t, e.db, sql) }

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// inboxApprove signs in to the instance's approval inbox (/ui) as operator
// ops and approves request id there, as a human at a browser would (the
// login form's and the page's CSRF tokens, the server's own Origin).
func (e *env) inboxApprove(t testing.TB, in *instance, id string) {
	t.Helper()
	base := strings.TrimSuffix(in.url, "/mcp")
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, base+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", base)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("inbox %s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, page := do("GET", "/ui/login", nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("%s's inbox: no login form:\n%s", in.name, page)
	}
	if code, body := do("POST", "/ui/login", url.Values{"csrf": {m[1]}, "token": {e.opToken}}); code != http.StatusSeeOther {
		t.Fatalf("%s's inbox: login %d\n%s", in.name, code, body)
	}
	code, page := do("GET", "/ui/approvals/"+id, nil)
	m = csrfRE.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("%s's inbox: request %s: %d\n%s", in.name, id, code, page)
	}
	if code, body := do("POST", "/ui/approvals/"+id, url.Values{"csrf": {m[1]}, "action": {"approve"}}); code != http.StatusSeeOther {
		t.Fatalf("%s's inbox: approving %s: %d\n%s", in.name, id, code, body)
	}
}
