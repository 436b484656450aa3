package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// The MCP Inspector (2.12.0, pinned in testdata/inspector) is the client a
// new user tries first; these tests drive its CLI (and mcpdo, its
// connection CLI, for logs) against the real `maiden serve`, over stdio and
// HTTP, in both protocol eras.

// inspectorEnv is the environment the Inspector runs in: its own home (it
// keeps a catalog and an OAuth store there) and secrets kept in memory.
func inspectorEnv(t *testing.T, extra ...string) []string {
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "MCP_INSPECTOR_SECRET_STORE=memory", "NO_COLOR=1"}
	return append(env, extra...)
}

// runInspector runs `inspector --cli ARGS` without a terminal and returns
// its stdout, stderr and exit error.
func runInspector(t *testing.T, dir string, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "inspector"), append([]string{"--cli"}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("inspector --cli %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), err
}

// inspectorResult runs the Inspector CLI with --format json and returns the
// "result" object it prints.
func inspectorResult(t *testing.T, dir string, env []string, args ...string) map[string]any {
	t.Helper()
	out, _, err := runInspector(t, dir, env, append(args, "--format", "json")...)
	if err != nil {
		t.Fatalf("inspector failed: %v", err)
	}
	var v struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Result == nil {
		t.Fatalf("inspector printed no result: %v: %q", err, out)
	}
	return v.Result
}

// inspectedServer is a running `maiden serve -http`.
type inspectedServer struct {
	cmd    *exec.Cmd
	url    string
	stderr *testkit.SyncBuffer
}

func startInspected(t *testing.T, bin string, env []string, args ...string) *inspectedServer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "-http", "127.0.0.1:0"}, args...)...)
	cmd.Env = env
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &inspectedServer{cmd: cmd, stderr: &testkit.SyncBuffer{}}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		re := regexp.MustCompile(`at (http://\S+/mcp)`)
		for sc.Scan() {
			s.stderr.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
	}()
	select {
	case s.url = <-url:
	case <-time.After(30 * time.Second):
		t.Fatalf("maiden serve -http did not report its address: %s", s.stderr.String())
	}
	return s
}

// stop sends SIGTERM, expects a clean exit, and returns what the server
// wrote to stderr.
func (s *inspectedServer) stop(t *testing.T) string {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("maiden serve exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("maiden serve did not stop within 15s of SIGTERM")
	}
	time.Sleep(50 * time.Millisecond) // the scanner's last lines
	return s.stderr.String()
}

var warningRE = regexp.MustCompile(`level=(WARN|ERROR)`)

func inspectorSetup(t *testing.T) (bin, dir, cfg string) {
	bin = buildMaiden(t)
	dir = npmDir(t, "inspector")
	cfg = filepath.Join(t.TempDir(), "agent.toml")
	writeAgentTOML(t, cfg, []toolLine{{"echo", "echo", ""}, {"logger", "logger", ""}})
	return bin, dir, cfg
}

// TestInspectorBothEras: the Inspector CLI lists and calls tools over stdio
// and HTTP, in the legacy (2025-11-25, initialize and a session) and modern
// (2026-07-28, stateless) eras; neither transport logs a warning when the
// client leaves (stdio EOF) or the server is stopped (SIGTERM).
func TestInspectorBothEras(t *testing.T) {
	t.Parallel()
	bin, dir, cfg := inspectorSetup(t)
	cache := testkit.CompileCache(t) // shared: each component compiles once per run
	env := inspectorEnv(t)
	srv := startInspected(t, bin, env, "-config", cfg, "-cache", cache)
	targets := map[string][]string{
		"stdio": {bin, "serve", "-config", cfg, "-cache", cache},
		"http":  {srv.url},
	}
	for _, transport := range []string{"stdio", "http"} {
		for _, era := range []string{"legacy", "modern"} {
			t.Run(transport+"/"+era, func(t *testing.T) {
				target := append(targets[transport], "--protocol-era", era)
				init := inspectorResult(t, dir, env, append(target, "--method", "initialize")...)
				want := legacyProtocol
				if era == "modern" {
					want = ModernProtocol
				}
				if init["protocolVersion"] != want {
					t.Errorf("protocol %v, want %s", init["protocolVersion"], want)
				}
				list := inspectorResult(t, dir, env, append(target, "--method", "tools/list")...)
				if tools, _ := list["tools"].([]any); len(tools) != 2 {
					t.Errorf("tools/list: %v", list)
				}
				res := inspectorResult(t, dir, env, append(target, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hello "+era)...)
				if sc, _ := res["structuredContent"].(map[string]any); sc["message"] != "hello "+era {
					t.Errorf("tools/call echo: %v", res)
				}
				if transport == "stdio" {
					// The Inspector passes the server's stderr through.
					if _, stderr, _ := runInspector(t, dir, env, append(target, "--method", "tools/list")...); warningRE.MatchString(stderr) {
						t.Errorf("maiden serve logged a warning on a clean stdio session:\n%s", stderr)
					}
				}
			})
		}
	}
	if log := srv.stop(t); warningRE.MatchString(log) {
		t.Errorf("maiden serve -http logged a warning on a clean run and SIGTERM:\n%s", log)
	}
}

// TestInspectorStaticToken: against `serve -auth-token-env`, the Inspector
// without the token ends with maiden's message naming the header, and no
// OAuth attempt (MCP_AUTO_OPEN_ENABLED stands in for a person at a
// terminal, to whom it would have offered a browser sign-in); with the
// header, on the command line or in a configuration file's "headers"
// field, it works in both eras.
func TestInspectorStaticToken(t *testing.T) {
	t.Parallel()
	bin, dir, cfg := inspectorSetup(t)
	const token = "tok-4f9a1c0e7b2d"
	env := inspectorEnv(t)
	srv := startInspected(t, bin, append(env, "MAIDEN_TEST_TOKEN="+token), "-config", cfg, "-cache", testkit.CompileCache(t), "-auth-token-env", "MAIDEN_TEST_TOKEN")

	for _, era := range []string{"legacy", "modern"} {
		t.Run("no token/"+era, func(t *testing.T) {
			out, stderr, err := runInspector(t, dir, append(inspectorEnv(t), "MCP_AUTO_OPEN_ENABLED=true", "BROWSER=/bin/false"),
				srv.url, "--protocol-era", era, "--method", "tools/list", "--format", "json")
			if err == nil {
				t.Fatal("the Inspector succeeded without the token")
			}
			all := out + stderr
			// The legacy client shows maiden's message; the modern one's
			// version probe keeps only the status ("the server denied
			// access (HTTP 403)").
			if !strings.Contains(all, `"status":403`) || (era == "legacy" && !strings.Contains(all, `Authorization: Bearer <token>`)) {
				t.Errorf("the Inspector did not show maiden's refusal")
			}
			if regexp.MustCompile(`(?i)registration|authorization server|oauth metadata|authorize`).MatchString(all) {
				t.Errorf("the Inspector went into OAuth")
			}
		})
		t.Run("header flag/"+era, func(t *testing.T) {
			res := inspectorResult(t, dir, env, srv.url, "--protocol-era", era, "--header", "Authorization: Bearer "+token,
				"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=with token")
			if sc, _ := res["structuredContent"].(map[string]any); sc["message"] != "with token" {
				t.Errorf("tools/call with the header: %v", res)
			}
		})
		t.Run("wrong token/"+era, func(t *testing.T) {
			out, stderr, err := runInspector(t, dir, env, srv.url, "--protocol-era", era, "--header", "Authorization: Bearer "+token+"x",
				"--method", "tools/list", "--format", "json")
			if err == nil || !strings.Contains(out+stderr, `"status":403`) || (era == "legacy" && !strings.Contains(out+stderr, "does not carry the bearer token")) {
				t.Errorf("a wrong token: %v", err)
			}
		})
	}
	// The configuration a user writes (README): the "headers" field.
	conf := filepath.Join(t.TempDir(), "mcp.json")
	entry := fmt.Sprintf(`{"mcpServers": {"maiden": {"type": "http", "url": %q, "headers": {"Authorization": "Bearer %s"}}}}`, srv.url, token)
	if err := os.WriteFile(conf, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	list := inspectorResult(t, dir, env, "--config", conf, "--server", "maiden", "--method", "tools/list")
	if tools, _ := list["tools"].([]any); len(tools) != 2 {
		t.Errorf("tools/list through the config file's headers: %v", list)
	}
	if log := srv.stop(t); strings.Contains(log, token) {
		t.Errorf("the token appears in maiden's log:\n%s", log)
	}
}

// TestInspectorShowsLogs: a tool's log lines reach the Inspector: mcpdo
// keeps one connection, `logging/tail` follows its log notifications while
// `tools/call` runs the logger tool, over HTTP in both eras.
func TestInspectorShowsLogs(t *testing.T) {
	t.Parallel()
	bin, dir, cfg := inspectorSetup(t)
	env := inspectorEnv(t)
	daemonDir := t.TempDir()
	env = append(env, "MCP_INSPECTOR_DAEMON_DIR="+daemonDir, "MCP_INSPECTOR_DAEMON_TOKEN=maiden-test-"+strings.Repeat("x", 32))
	srv := startInspected(t, bin, env, "-config", cfg, "-cache", testkit.CompileCache(t))
	mcpdo := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "mcpdo"), args...)
		cmd.Env = env
		return cmd
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := mcpdo(ctx, args...).CombinedOutput()
		t.Logf("mcpdo %s: %s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("mcpdo %s: %v", args[0], err)
		}
		return string(out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		mcpdo(ctx, "daemon", "stop").Run()
	})
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			run("connect", "--era", era, srv.url)
			conn := "--connection=" + srv.url
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tail := mcpdo(ctx, conn, "logging/tail")
			var out testkit.SyncBuffer
			tail.Stdout, tail.Stderr = &out, &out
			if err := tail.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				tail.Wait()
			}()
			// The tail subscribes in its own process, which says nothing
			// when it has: call the tool until its lines show (a call made
			// before the subscription logs to nobody), not once after a
			// fixed wait.
			want := []string{"[info] logger: info line", "[warning] logger: warn line", "[error] logger: error line"}
			deadline := time.Now().Add(90 * time.Second)
			for time.Now().Before(deadline) && !containsAll(out.String(), want) {
				run(conn, "tools/call", "logger")
				for again := time.Now().Add(5 * time.Second); time.Now().Before(again) && !containsAll(out.String(), want); {
					time.Sleep(100 * time.Millisecond)
				}
			}
			if !containsAll(out.String(), want) {
				t.Errorf("mcpdo logging/tail did not show the tool's logs: %q", out.String())
			}
			run("disconnect", srv.url)
		})
	}
	// Stopped while a legacy client holds its session and GET stream open:
	// still no warning.
	run("connect", "--era", "legacy", srv.url)
	if log := srv.stop(t); warningRE.MatchString(log) {
		t.Errorf("maiden serve -http logged a warning on SIGTERM with a client connected:\n%s", log)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
