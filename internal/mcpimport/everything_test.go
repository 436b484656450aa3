package mcpimport_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/mcpimport"
)

// everythingDir installs testdata/everything (the reference MCP server
// "everything", pinned in package.json and package-lock.json) at the locked
// versions, without install scripts, into the user cache once per lockfile,
// and returns the server's entry point. It needs npm and the npm registry;
// make test provides node and npm (scripts/deps), so it fails rather than skips.
func everythingDir(t testing.TB) string {
	t.Helper()
	src := filepath.Join("testdata", "everything")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "maiden", "testkit", "mcpimport-everything-"+hex.EncodeToString(sum[:8]))
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(filepath.Join(dir, ".installed")); err == nil {
		return entry
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"package.json", "package-lock.json", ".npmrc"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install of testdata/everything (needs npm and the npm registry): %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".installed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return entry
}

func nodePath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (needed to run the npm MCP server; make test installs it, see scripts/deps): %v", err)
	}
	return p
}

// testLogger writes the upstream's operator log into the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startEverything(t *testing.T, o mcpimport.Options) *mcpimport.Upstream {
	t.Helper()
	entry := everythingDir(t)
	o.Name = "everything"
	o.Command = []string{nodePath(t), entry, "stdio"}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	u, err := mcpimport.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	return u
}

func toolNames(ts []mcpimport.Tool) []string {
	var out []string
	for _, tl := range ts {
		out = append(out, tl.Name)
	}
	return out
}

func findTool(ts []mcpimport.Tool, name string) (mcpimport.Tool, bool) {
	for _, tl := range ts {
		if tl.Name == name {
			return tl, true
		}
	}
	return mcpimport.Tool{}, false
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEverythingListAndCall(t *testing.T) {
	u := startEverything(t, mcpimport.Options{})
	changed := make(chan struct{}, 16)
	u.OnChange(func() { changed <- struct{}{} })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tools := u.Tools()
	echo, ok := findTool(tools, "echo")
	if !ok {
		t.Fatalf("no echo tool in %v", toolNames(tools))
	}
	if !echo.Available || echo.Description == "" {
		t.Errorf("echo = %+v: want available with a description", echo)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["message"] == nil {
		t.Errorf("echo's input schema %s: want an object with a message property (%v)", echo.InputSchema, err)
	}
	if echo.Annotations == nil || !echo.Annotations.ReadOnlyHint {
		t.Errorf("echo's annotations %+v: the server declares readOnlyHint", echo.Annotations)
	}
	if st, ok := findTool(tools, "get-structured-content"); !ok || st.OutputSchema == nil {
		t.Errorf("get-structured-content: want an output schema, got %+v (found %v)", st, ok)
	}

	res, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"hello from maiden"}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Text != "Echo: hello from maiden" {
		t.Errorf("echo result %+v", res)
	}
	res, err = u.Call(ctx, "get-sum", json.RawMessage(`{"a":2,"b":40}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "42") {
		t.Errorf("get-sum(2,40) = %q: want 42 in it", res.Text)
	}
	res, err = u.Call(ctx, "get-structured-content", json.RawMessage(`{"location":"New York"}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var weather map[string]any
	if err := json.Unmarshal(res.Structured, &weather); err != nil || len(weather) == 0 {
		t.Errorf("get-structured-content: structured %s (%v)", res.Structured, err)
	}

	// The upstream's own refusal of bad arguments is a tool error or a
	// protocol error, never a success.
	res, err = u.Call(ctx, "echo", json.RawMessage(`{"message":7}`), nil, nil)
	if err == nil && !res.IsError {
		t.Errorf("echo with a number: %+v, want an error", res)
	}
	if errors.Is(err, mcpimport.ErrUnavailable) {
		t.Errorf("a bad argument reported as unavailable: %v", err)
	}
	// An unknown tool is not "unavailable" either.
	res, err = u.Call(ctx, "no-such-tool", nil, nil, nil)
	if (err == nil && !res.IsError) || errors.Is(err, mcpimport.ErrUnavailable) {
		t.Errorf("unknown tool: %+v, %v", res, err)
	}

	// list_changed: the server registers its conditional tools (e.g.
	// simulate-research-query) after initialization and announces them.
	waitFor(t, 20*time.Second, "the conditional tool simulate-research-query never listed", func() bool {
		_, ok := findTool(u.Tools(), "simulate-research-query")
		return ok
	})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("OnChange never called")
	}
}

func TestEverythingProgressAndLogs(t *testing.T) {
	u := startEverything(t, mcpimport.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Simulated logging: one message now, then one every 5 seconds.
	if _, err := u.Call(ctx, "toggle-simulated-logging", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress []mcpimport.Progress
	var logs []api.LogEntry
	res, err := u.Call(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":6,"steps":3}`),
		func(e api.LogEntry) { mu.Lock(); logs = append(logs, e); mu.Unlock() },
		func(p mcpimport.Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "Long running operation completed") {
		t.Errorf("result %q", res.Text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) != 3 {
		t.Fatalf("progress %+v: want 3 notifications", progress)
	}
	for i, p := range progress {
		if p.Progress != float64(i+1) || p.Total != 3 {
			t.Errorf("progress[%d] = %+v", i, p)
		}
	}
	if len(logs) == 0 {
		t.Fatal("no upstream log message relayed during a 6 s call (the server logs every 5 s)")
	}
	for _, e := range logs {
		if !strings.Contains(e.Message, "message") || e.Source != api.SourceLog {
			t.Errorf("log entry %+v", e)
		}
		switch e.Level {
		case api.LevelDebug, api.LevelInfo, api.LevelWarn, api.LevelError:
		default:
			t.Errorf("log level %q is not one of maiden's", e.Level)
		}
	}
	t.Logf("relayed %d progress notifications and %d log messages", len(progress), len(logs))
}

// TestEverythingRestart kills the upstream process (the PID this test
// started) and checks that calls fail as unavailable, that Tools keeps the
// list marked unavailable, and that the upstream comes back (a new process).
func TestEverythingRestart(t *testing.T) {
	u := startEverything(t, mcpimport.Options{BackoffInitial: 500 * time.Millisecond, BackoffMax: 2 * time.Second})
	var mu sync.Mutex
	changes := 0
	u.OnChange(func() { mu.Lock(); changes++; mu.Unlock() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := u.PID()
	if pid <= 0 {
		t.Fatalf("PID %d", pid)
	}
	before := len(u.Tools())

	// A call in flight when the process dies fails as unavailable.
	// It is in flight once the upstream reports its first step (a second
	// in): a fixed wait could kill the process before the call reached it,
	// and the call then run on the restarted one.
	inflight := make(chan error, 1)
	running := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := u.Call(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":30,"steps":30}`), nil,
			func(mcpimport.Progress) { once.Do(func() { close(running) }) })
		inflight <- err
	}()
	select {
	case <-running:
	case err := <-inflight:
		t.Fatalf("the long-running call ended before its first progress report: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no progress from the long-running call in 30s")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-inflight:
		if !errors.Is(err, mcpimport.ErrUnavailable) {
			t.Errorf("call in flight at the kill: %v, want unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight did not end when the upstream died")
	}

	waitFor(t, 5*time.Second, "the upstream was never marked down", func() bool { return !u.Available() })
	_, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"x"}`), nil, nil)
	var ue *mcpimport.UnavailableError
	if !errors.As(err, &ue) || ue.Upstream != "everything" {
		t.Fatalf("call while down: %v, want an *UnavailableError", err)
	}
	if !strings.Contains(err.Error(), `"everything" is unavailable`) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("message %q: want the upstream's name and why it is down", err)
	}
	t.Logf("while down: %v", err)
	down := u.Tools()
	if len(down) != before {
		t.Errorf("tools while down: %d, want the last list (%d)", len(down), before)
	}
	for _, tl := range down {
		if tl.Available {
			t.Errorf("tool %q reports available while the upstream is down", tl.Name)
		}
	}

	waitFor(t, 30*time.Second, "the upstream never came back", func() bool { return u.Available() })
	if u.PID() == pid || u.PID() <= 0 {
		t.Errorf("PID after restart %d (was %d)", u.PID(), pid)
	}
	res, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"back"}`), nil, nil)
	if err != nil || res.Text != "Echo: back" {
		t.Fatalf("after restart: %+v, %v", res, err)
	}
	if slices.ContainsFunc(u.Tools(), func(tl mcpimport.Tool) bool { return !tl.Available }) {
		t.Error("tools still marked unavailable after the restart")
	}
	mu.Lock()
	defer mu.Unlock()
	if changes < 2 { // the kill and the restart
		t.Errorf("OnChange called %d times, want at least 2", changes)
	}
}

// TestCloseKillsUpstream: Close ends the process it started.
func TestCloseKillsUpstream(t *testing.T) {
	u := startEverything(t, mcpimport.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := u.PID()
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	// The process was reaped by Close; signal 0 fails on a gone PID.
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still exists after Close", pid)
	}
	if _, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"x"}`), nil, nil); !errors.Is(err, api.ErrClosed) {
		t.Errorf("call after Close: %v, want api.ErrClosed", err)
	}
}

// TestCommandEnvAndStartHook: the command gets exactly Options.Env (none of
// maiden's own environment, which here holds a secret), and is started
// through Options.Start with its own process group.
func TestCommandEnvAndStartHook(t *testing.T) {
	t.Setenv("MAIDEN_TEST_HOST_SECRET", "host-secret-value")
	var hooked int
	var pgid bool
	u := startEverything(t, mcpimport.Options{
		Env: []string{"UPSTREAM_ONLY=yes"},
		Start: func(c *exec.Cmd) error {
			hooked++
			pgid = c.SysProcAttr != nil && c.SysProcAttr.Setpgid
			return c.Start()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if hooked != 1 || !pgid {
		t.Errorf("Start hook called %d times, Setpgid %v", hooked, pgid)
	}
	if pg, err := syscall.Getpgid(u.PID()); err != nil || pg != u.PID() {
		t.Errorf("upstream's process group %d (%v), want its own (%d)", pg, err, u.PID())
	}
	res, err := u.Call(ctx, "get-env", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "UPSTREAM_ONLY") {
		t.Errorf("get-env %q: the upstream's own variable is missing", res.Text)
	}
	if strings.Contains(res.Text, "MAIDEN_TEST_HOST_SECRET") || strings.Contains(res.Text, "host-secret-value") {
		t.Errorf("the upstream inherited maiden's environment: %s", res.Text)
	}
}

func TestStartHookFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refuse := errors.New("confinement canary failed: landlock not in force")
	u := startEverything(t, mcpimport.Options{BackoffInitial: time.Hour, Start: func(*exec.Cmd) error { return refuse }})
	if err := u.Start(ctx); !errors.Is(err, refuse) {
		t.Errorf("Start with a refusing hook: %v", err)
	}
	if _, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"x"}`), nil, nil); !errors.Is(err, mcpimport.ErrUnavailable) || !strings.Contains(err.Error(), "landlock") {
		t.Errorf("call: %v", err)
	}
	// A hook that takes the upstream out of its own process group (so that
	// a kill would miss its children) is refused and the process killed.
	var pid int
	u2 := startEverything(t, mcpimport.Options{BackoffInitial: time.Hour, Start: func(c *exec.Cmd) error {
		c.SysProcAttr.Setpgid = false
		err := c.Start()
		if c.Process != nil {
			pid = c.Process.Pid
		}
		return err
	}})
	if err := u2.Start(ctx); err == nil || !strings.Contains(err.Error(), "Setpgid") {
		t.Errorf("Start with a hook that cleared Setpgid: %v", err)
	}
	if pid == 0 || syscall.Kill(pid, 0) == nil {
		t.Errorf("process %d still exists", pid)
	}
	// A command that does not exist.
	u3, err := mcpimport.New(mcpimport.Options{Name: "missing", Command: []string{"/nonexistent/mcp-server"}, BackoffInitial: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer u3.Close()
	if err := u3.Start(ctx); err == nil || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Errorf("missing command: %v", err)
	}
}

// TestMessageCap: an upstream message over MaxMessageBytes fails the call as
// unavailable and the upstream is restarted, instead of maiden buffering it.
func TestMessageCap(t *testing.T) {
	u := startEverything(t, mcpimport.Options{MaxMessageBytes: 64 << 10, BackoffInitial: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := u.PID()
	big, _ := json.Marshal(map[string]string{"message": strings.Repeat("x", 100<<10)})
	_, err := u.Call(ctx, "echo", big, nil, nil)
	if !errors.Is(err, mcpimport.ErrUnavailable) {
		t.Fatalf("a 100 KiB answer under a 64 KiB cap: %v, want unavailable", err)
	}
	waitFor(t, 30*time.Second, "never restarted", func() bool { return u.Available() && u.PID() != pid })
	if res, err := u.Call(ctx, "echo", json.RawMessage(`{"message":"small"}`), nil, nil); err != nil || res.Text != "Echo: small" {
		t.Fatalf("after the restart: %+v, %v", res, err)
	}
}
