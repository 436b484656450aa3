package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/maiden-run/maiden"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestServeStdioSurvivesBadInput: through the real command, a malformed
// line and an oversized one are answered and the session goes on to answer
// a ping; before, the first bad line ended `maiden serve`.
func TestServeStdioSurvivesBadInput(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	src, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(src), "version = 1\n", "version = 1\nmax_input_bytes = 1024\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`this is not JSON`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("x", 200<<10) + `"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("y", 2000) + `"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}, "\n") + "\n"
	r := cli(t, in, "serve", "-config", cfg, "-watch=false")
	if r.code != 0 {
		t.Fatalf("serve exited %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"invalid request: message of 204898 bytes refused`,
		`"text":"input: the input is 2014 bytes, more than the 1024-byte limit (max_input_bytes in agent.toml`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %s\nstdout:\n%.2000s", want, r.stdout)
		}
	}
}

// startHTTP runs `maiden serve -http` on a free loopback port until the
// test ends and returns its base URL.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "-http", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("serve did not stop within 60s of cancellation")
		}
	})
	re := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/mcp`)
	// Starting compiles the configuration's tools (from the shared cache,
	// usually): a minute alone, more under a loaded make test (a run with
	// every component built cold at load 20 missed 60 s).
	bound := testkit.Slack(t, 60*time.Second)
	deadline := time.Now().Add(bound)
	for {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return "http://" + m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start in %v: %s", bound.Round(time.Second), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shortTimeouts makes the HTTP server's timeouts short for one test.
func shortTimeouts(t *testing.T) {
	old := httpTimeouts
	httpTimeouts.readHeader, httpTimeouts.read, httpTimeouts.idle = time.Second, 2*time.Second, 2*time.Second
	t.Cleanup(func() { httpTimeouts = old })
}

// closedWithin reports whether the server closes conn within limit (the
// bound is generous: it only has to tell "closed" from "held forever").
func closedWithin(conn net.Conn, limit time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestServeHTTPTimeouts: a client that sends part of a request and stops,
// or keeps an idle connection, is cut off; a client's notification stream
// (SSE GET) outlives those timeouts and still delivers.
func TestServeHTTPTimeouts(t *testing.T) {
	shortTimeouts(t)
	cfg := agentTOML(t, map[string]string{"echo": ""})
	base := startHTTP(t, "-config", cfg)
	addr := strings.TrimPrefix(base, "http://")

	t.Run("slow body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", addr)
		if !closedWithin(conn, 30*time.Second) {
			t.Error("a request whose body never comes held its connection for 30s (read timeout 2s)")
		}
	})
	t.Run("slow headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", addr)
		if !closedWithin(conn, 30*time.Second) {
			t.Error("unfinished headers held the connection for 30s (header timeout 1s)")
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /nothing HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if !closedWithin(conn, 30*time.Second) {
			t.Error("an idle kept-alive connection was held for 30s (idle timeout 2s)")
		}
	})
	t.Run("notification stream outlives the timeouts", func(t *testing.T) {
		session := initHTTP(t, base)
		req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: %s", resp.Status)
		}
		// Longer than every timeout, then make the tool list change.
		time.Sleep(3 * time.Second)
		src, _ := os.ReadFile(cfg)
		add := fmt.Sprintf("\n[tools.echo2]\npath = %q\n", testkit.Component(t, "echo"))
		if err := os.WriteFile(cfg, append(src, add...), 0o644); err != nil {
			t.Fatal(err)
		}
		got := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "notifications/tools/list_changed") {
					got <- true
					return
				}
			}
			got <- false
		}()
		select {
		case ok := <-got:
			if !ok {
				t.Error("the notification stream ended before the list change arrived")
			}
		case <-time.After(60 * time.Second):
			t.Error("no list_changed on the notification stream in 60s")
		}
	})
}

// initHTTP opens a session with raw requests and returns its id.
func initHTTP(t *testing.T, base string) string {
	t.Helper()
	code, session := postHTTP(t, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if code != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d", code)
	}
	if code, _ := postHTTP(t, base, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d", code)
	}
	return session
}

func postHTTP(t *testing.T, base, session, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// TestServeSessionIdleFlag: -session-idle closes sessions nobody uses; a
// request on an expired session is told it is gone (404), so the client
// starts a new one.
func TestServeSessionIdleFlag(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	base := startHTTP(t, "-config", cfg, "-session-idle", "1s", "-watch=false")
	session := initHTTP(t, base)
	// Each ping on a live session restarts its idle time, so ping less
	// often than that.
	deadline := time.Now().Add(60 * time.Second)
	for {
		time.Sleep(2 * time.Second)
		code, _ := postHTTP(t, base, session, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		if code == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session still answers (%d) 60s after it went idle (-session-idle 1s)", code)
		}
	}
}

// endless is stdin that never ends (as `maiden call TOOL - < /dev/zero`).
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '1'
	}
	return len(p), nil
}

// TestCallStdinIsBounded: input read from an endless stdin is cut at the
// largest max_input_bytes and refused as kind input, instead of growing
// the process until it dies.
func TestCallStdinIsBounded(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	var stdout, stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"call", "-config", cfg, "echo", "-"}, endless{}, &stdout, &stderr)
	}()
	select {
	case code := <-done:
		if code == 0 || !strings.Contains(stderr.String(), "input") {
			t.Errorf("exit %d, stderr %q; want an input error", code, stderr.String())
		}
	case <-time.After(120 * time.Second):
		t.Fatal("maiden call was still reading an endless stdin after 120s")
	}
}

// TestCheckWarnsAboutUnsetSecrets: a declared secret with no value on the
// host is a warning naming the variable to set; the check still passes.
func TestCheckWarnsAboutUnsetSecrets(t *testing.T) {
	t.Setenv("MAIDEN_SECRET_SET_ONE", "x")
	cfg := agentTOML(t, map[string]string{"echo": `secrets = ["SET_ONE", "UNSET_ONE"]`})
	r := cli(t, "", "check", "-config", cfg, "-cache", "off")
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.stderr, "MAIDEN_SECRET_UNSET_ONE is not set") || strings.Contains(r.stderr, "MAIDEN_SECRET_SET_ONE is not set") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// TestHelpExitsZero: -h on any command prints its flags and succeeds.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "call", "check", "tools", "build", "new"} {
		r := cli(t, "", cmd, "-h")
		if r.code != exitOK || !strings.Contains(r.stderr, "Usage of maiden "+cmd) {
			t.Errorf("%s -h: %+v", cmd, r)
		}
	}
}

// TestVersion: maiden version names maiden's version and wasmtime's.
func TestVersion(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "version")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "maiden ") || !strings.Contains(r.stdout, "wasmtime "+maiden.WasmtimeVersion) {
		t.Fatalf("%+v", r)
	}
}

// TestServeReloadLog (issue 27, rough edge 4): maiden serve -http names
// every endpoint as it starts, and logs one line per reload of agent.toml:
// what changed, or what is wrong (once), then that the errors are fixed.
// A session with no notification stream open (a client between requests)
// is no reason for a warning when the tool list changes.
func TestServeReloadLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	echo := "version = 1\n[tools.echo]\npath = \"" + testkit.Component(t, "echo") + "\"\n"
	logger := "\n[tools.logger]\npath = \"" + testkit.Component(t, "logger") + "\"\n"
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg+".tmp", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfg+".tmp", cfg); err != nil {
			t.Fatal(err)
		}
	}
	write(echo)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-config", cfg, "-http", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, &stderr)
	}()
	t.Cleanup(func() { cancel(); <-done })
	// Compiles are logged when they happen (a fresh cache): not counted.
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			if !strings.Contains(l, `msg="compiling component`) {
				out = append(out, l)
			}
		}
		return out
	}
	waitLines := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for len(lines()) < n || strings.TrimSpace(stderr.String()) == "" {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d lines in 30s:\n%s", n, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return lines()
	}
	start := regexp.MustCompile(`^maiden serve: MCP over streamable HTTP at (http://127\.0\.0\.1:\d+)/mcp; operators' inbox (\S+)/ui; health (\S+)/healthz; metrics (\S+)/metrics$`)
	m := start.FindStringSubmatch(waitLines(1)[0])
	if m == nil || m[2] != m[1] || m[3] != m[1] || m[4] != m[1] {
		t.Fatalf("start-up line: %q", lines()[0])
	}
	// A session that opened no notification stream.
	req, _ := http.NewRequest("POST", m[1]+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	req, _ = http.NewRequest("POST", m[1]+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if resp, err := http.DefaultClient.Do(req); err != nil || sid == "" {
		t.Fatalf("initialized: %v (session %q)", err, sid)
	} else {
		resp.Body.Close()
	}

	write(echo + logger)
	if l := waitLines(2); len(l) != 2 || !strings.Contains(l[1], `level=INFO msg=reloaded file=`+cfg+` changes="tools added: logger"`) {
		t.Fatalf("the reload adding a tool:\n%s", stderr.String())
	}
	write(echo + "broken = [\n")
	if l := waitLines(3); len(l) != 3 || !strings.Contains(l[2], `level=ERROR msg="reload: agent.toml has errors; keeping the configuration in force" file=`+cfg+` errors="`+cfg+`:4: syntax error`) {
		t.Fatalf("the broken edit:\n%s", stderr.String())
	}
	write(echo)
	if l := waitLines(4); len(l) != 4 || !strings.Contains(l[3], `level=INFO msg=reloaded file=`+cfg+` changes="the errors are fixed; tools removed: logger"`) {
		t.Fatalf("the fix:\n%s", stderr.String())
	}
}
