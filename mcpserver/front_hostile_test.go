package mcpserver

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// initializeRaw opens a 2025-11-25 session with one raw initialize POST and
// returns the status and the session ID the server gave.
func initializeRaw(t *testing.T, hc *http.Client, base, token string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + legacyProtocol + `","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, base+Path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// TestSessionsPerAgentBounded (the fourth review): one agent's token
// cannot open HTTP sessions without end (each is held for SessionIdle: 30
// minutes by default; 20,000 held 350 MB); past the bound
// (MaxSessionsPerAgent, 1,000 by default, 20 here) an initialize is
// refused with 429, other agents are unaffected, and ending a session
// frees a place.
func TestSessionsPerAgentBounded(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	const bound = 20
	srv := e.httpServer(HTTPOptions{MaxSessionsPerAgent: bound})
	aliceTok, _ := e.token("alice")
	bobTok, _ := e.token("bob")
	hc := &http.Client{}
	var first string
	for i := 0; i < bound; i++ {
		code, sid := initializeRaw(t, hc, srv.URL, aliceTok)
		if code != http.StatusOK || sid == "" {
			t.Fatalf("initialize %d of alice: %d %q", i, code, sid)
		}
		if first == "" {
			first = sid
		}
	}
	if code, sid := initializeRaw(t, hc, srv.URL, aliceTok); code != http.StatusTooManyRequests {
		t.Fatalf("alice's initialize beyond %d sessions: %d (session %q), want 429: one token can hold sessions without bound", bound, code, sid)
	}
	if code, sid := initializeRaw(t, hc, srv.URL, bobTok); code != http.StatusOK || sid == "" {
		t.Errorf("bob, while alice is at her bound: %d %q", code, sid)
	}
	// alice ends one: she may open another.
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+Path, nil)
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	req.Header.Set("Mcp-Session-Id", first)
	req.Header.Set("MCP-Protocol-Version", legacyProtocol)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	var code int
	for i := 0; i < 200; i++ { // the session's end is noticed asynchronously
		if code, _ = initializeRaw(t, hc, srv.URL, aliceTok); code == http.StatusOK {
			break
		}
	}
	if code != http.StatusOK {
		t.Errorf("alice after ending a session: %d, want 200", code)
	}
}

// TestRebindingGETsRefused (the fourth review): a DNS-rebinding page (its own name in Host, the
// server on loopback) reads /metrics and the inbox with same-origin GETs,
// which carry no Origin header; with neither a token nor [agents] /metrics
// is open, so the page read the server's metrics (tool names, call
// counts, http-fetch decisions). A loopback listener now answers only to
// a loopback name in Host, on every path (the SDK's rule for Path).
func TestRebindingGETsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `maiden_calls_total{tool="echo",kind="ok"} 1`)
	})
	srv := e.httpServer(HTTPOptions{Metrics: metrics, Health: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })})
	u, _ := url.Parse(srv.URL)
	for _, p := range []string{MetricsPath, HealthPath, "/ui/login"} {
		for _, tc := range []struct {
			host    string
			refused bool
		}{
			{"evil.example:" + u.Port(), true},
			{u.Host, false},
			{"localhost:" + u.Port(), false},
		} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
			req.Host = tc.host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.StatusCode == http.StatusForbidden; got != tc.refused {
				t.Errorf("GET %s with Host %s: %d %.80q, want refused=%v", p, tc.host, resp.StatusCode, body, tc.refused)
			}
		}
	}
}

// TestRefusedRequestLogsBounded: what a client refused before any token is
// checked writes to the operator's log is bounded, whatever it sends: an
// Origin, a Host, a path or a Sec-Fetch-Site of half a megabyte (net/http
// reads request heads up to a megabyte) was logged whole, so that anyone
// who could reach the listener filled its log's disk at the speed of the
// network. Each refusal still says what was refused, and how long it was.
func TestRefusedRequestLogsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	var logs testkit.SyncBuffer
	e.server = New(e.host, &Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	srv := e.httpServer(HTTPOptions{})
	const huge = 512 << 10
	long := strings.Repeat("a", huge)
	for _, tt := range []struct {
		name, method, path, want string
		set                      func(*http.Request)
	}{
		{"origin", http.MethodPost, Path, "refused request from a foreign origin", func(r *http.Request) { r.Header.Set("Origin", "https://"+long+".example") }},
		{"host", http.MethodPost, Path, "refused a request to a loopback listener", func(r *http.Request) { r.Host = long + ".example" }},
		{"inbox path", http.MethodPost, "/ui/approvals/" + long, "refused a POST without a live session", func(*http.Request) {}},
		{"sec-fetch-site", http.MethodPost, "/ui/login", "refused a POST from another site", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", long) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(logs.String())
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			tt.set(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("status %d, want 403", resp.StatusCode)
			}
			if len(body) > 4<<10 {
				t.Errorf("the refusal's body is %d bytes, want at most 4 KiB", len(body))
			}
			logged := logs.String()[before:]
			if !strings.Contains(logged, tt.want) || !strings.Contains(logged, "bytes)") {
				t.Errorf("logged %.300q; want %q and the value's length", logged, tt.want)
			}
			if len(logged) > 2<<10 {
				t.Errorf("one refused request wrote %d bytes to the operator's log, want at most 2 KiB", len(logged))
			}
		})
	}
}
