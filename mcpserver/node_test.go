package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/testkit"
)

// buildMaiden builds the maiden binary the way a user would, once per run
// (shared with the other test binaries: testkit.Binary).
func buildMaiden(t testing.TB) string {
	t.Helper()
	return testkit.Binary(t, "./cmd/maiden")
}

// nodeClientDir installs the pinned @modelcontextprotocol/sdk (npm ci from
// the committed lockfile) once per lockfile version and returns a directory
// holding node_modules and client.mjs.
func nodeClientDir(t *testing.T) string {
	return npmDir(t, "node-client", "client.mjs")
}

// npmDir installs testdata/NAME (package.json, package-lock.json, .npmrc and
// extra files) at the locked versions, without install scripts, into the user cache,
// once per lockfile version, and returns that directory. Tests running in
// parallel (and test binaries of other checkouts) share the directory: a lock
// serialises the install, and a file is replaced whole (never truncated under
// a node process reading it) and only when its content differs.
func npmDir(t *testing.T, name string, extra ...string) string {
	t.Helper()
	src := filepath.Join(testkit.RepoRoot(t), "mcpserver", "testdata", name)
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "maiden", "testkit", name+"-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	unlock, err := atomicfile.Lock(ctx, dir+".lock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	for _, f := range append([]string{"package.json", "package-lock.json", ".npmrc"}, extra...) {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if old, err := os.ReadFile(filepath.Join(dir, f)); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := atomicfile.Write(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(dir, ".installed")
	if _, err := os.Stat(marker); err == nil {
		return dir
	}
	// npm install with the lockfile in place installs the locked versions,
	// as npm ci does; npm ci itself refuses the Inspector's lockfile, which
	// names an optional dependency of vite (the web client's) that the
	// registry does not have, and so cannot be in the lockfile.
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install of testdata/%s (needs npm and the npm registry): %v\n%s", name, err, out)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func nodeAgentTOML(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.toml")
	writeAgentTOML(t, path, []toolLine{{"echo", "echo", ""}, {"logger", "logger", ""}, {"loop", "loop", "timeout_ms = 300"}})
	return path
}

func runNodeClient(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("node client.mjs %s:\n%s", args[0], out)
	if err != nil {
		t.Fatalf("node client failed: %v", err)
	}
	if !regexp.MustCompile(`\d+ passed, 0 failed`).Match(out) {
		t.Fatalf("node client did not report success")
	}
}

// TestNodeClient drives `maiden serve` with the official TypeScript MCP SDK,
// over stdio and over streamable HTTP, then stops the HTTP server with
// SIGTERM and expects a clean exit.
func TestNodeClient(t *testing.T) {
	t.Parallel()
	bin := buildMaiden(t)
	dir := nodeClientDir(t)
	cfg := nodeAgentTOML(t)
	cache := testkit.CompileCache(t) // shared: each component compiles once per run
	// Warm the compile cache so the clients' calls do not wait on it.
	if out, err := exec.Command(bin, "check", "-config", cfg, "-cache", cache).CombinedOutput(); err != nil {
		t.Fatalf("maiden check: %v\n%s", err, out)
	}

	t.Run("stdio", func(t *testing.T) {
		runNodeClient(t, dir, "stdio", bin, cfg)
	})

	t.Run("http", func(t *testing.T) {
		srv := exec.Command(bin, "serve", "-config", cfg, "-cache", cache, "-http", "127.0.0.1:0")
		stderr, err := srv.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer srv.Process.Kill()
		url := make(chan string, 1)
		var logLines strings.Builder
		go func() {
			sc := bufio.NewScanner(stderr)
			re := regexp.MustCompile(`at (http://\S+/mcp)`)
			for sc.Scan() {
				logLines.WriteString(sc.Text() + "\n")
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					url <- m[1]
				}
			}
		}()
		var endpoint string
		select {
		case endpoint = <-url:
		case <-time.After(30 * time.Second):
			t.Fatal("maiden serve -http did not report its address")
		}
		runNodeClient(t, dir, "http", endpoint)

		if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("maiden serve exited with %v after SIGTERM", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("maiden serve did not stop within 10s of SIGTERM")
		}
	})
}

// TestNodeClientStaticToken: the TypeScript SDK, with an OAuth provider
// as real clients have, is refused with maiden's message and starts no
// OAuth discovery without the token, and works with the "Authorization"
// header.
func TestNodeClientStaticToken(t *testing.T) {
	t.Parallel()
	bin := buildMaiden(t)
	dir := nodeClientDir(t)
	srv := startInspected(t, bin, append(os.Environ(), "MAIDEN_NODE_TOKEN=node-tok-93b1"), "-config", nodeAgentTOML(t), "-auth-token-env", "MAIDEN_NODE_TOKEN")
	runNodeClient(t, dir, "http-token", srv.url, "node-tok-93b1")
	srv.stop(t)
}

// TestServeRefusesOpenBindWithoutToken: a non-loopback address without
// -auth-token-env is refused before anything listens. A server that
// listens instead of refusing is stopped after two minutes, and the test
// fails (its output lacks the refusal) rather than hanging until go test's
// -timeout.
func TestServeRefusesOpenBindWithoutToken(t *testing.T) {
	t.Parallel()
	bin := buildMaiden(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "-config", nodeAgentTOML(t), "-http", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without authentication") {
		t.Fatalf("got %v: %s", err, out)
	}
}

// TestNodeClientAgents: two agents with their own tokens (maiden agents
// token) in the TypeScript SDK client's headers see their own tools; a call
// no card allows is an isError result with the grant to paste; maiden
// cards revoke and maiden agents revoke-token, run while maiden serve -http
// runs, hold from the next request of an open session; maiden serve -agent
// over stdio.
func TestNodeClientAgents(t *testing.T) {
	t.Parallel()
	bin := buildMaiden(t)
	dir := npmDir(t, "node-client", "client.mjs", "agents.mjs")
	cfg := nodeAgentTOML(t)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(agentsTOML)
	f.Close()
	cache := testkit.CompileCache(t) // shared: each component compiles once per run
	maiden := func(args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("maiden %s: %v\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String(), e.String()
	}
	tokenID := regexp.MustCompile(`token (\S+) for agent`)
	mint := func(agent string) (token, id string) {
		out, errOut := maiden("agents", "token", "-config", cfg, agent)
		m := tokenID.FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("maiden agents token: no token ID in %q", errOut)
		}
		return strings.TrimSpace(out), m[1]
	}
	aliceTok, aliceID := mint("alice")
	bobTok, _ := mint("bob")
	var card struct {
		ID string `json:"id"`
	}
	out, _ := maiden("cards", "grant", "-config", cfg, "-agent", "alice", "-json", "tool:invoke echo --...")
	if err := json.Unmarshal([]byte(out), &card); err != nil || card.ID == "" {
		t.Fatalf("maiden cards grant -json: %q: %v", out, err)
	}
	maiden("cards", "grant", "-config", cfg, "-agent", "bob", "tool:invoke echo --message=hi")
	maiden("check", "-config", cfg, "-cache", cache) // warm the compile cache

	t.Run("http", func(t *testing.T) {
		srv := startInspected(t, bin, os.Environ(), "-config", cfg, "-cache", cache)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", "agents.mjs", "http", srv.url, aliceTok, bobTok)
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
		var log strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			switch line {
			case "PAUSE card":
				maiden("cards", "revoke", "-config", cfg, card.ID)
				io.WriteString(stdin, "go\n")
			case "PAUSE token":
				maiden("agents", "revoke-token", "-config", cfg, aliceID)
				io.WriteString(stdin, "go\n")
			}
		}
		err = cmd.Wait()
		t.Logf("node agents.mjs http:\n%s", log.String())
		if err != nil || !regexp.MustCompile(`[1-9]\d* passed, 0 failed`).MatchString(log.String()) {
			t.Fatalf("node agents.mjs http: %v", err)
		}
		srv.stop(t)
	})

	t.Run("stdio", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", "agents.mjs", "stdio", bin, cfg, "bob")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		t.Logf("node agents.mjs stdio:\n%s", out)
		if err != nil || !regexp.MustCompile(`[1-9]\d* passed, 0 failed`).Match(out) {
			t.Fatalf("node agents.mjs stdio: %v", err)
		}
	})
}
