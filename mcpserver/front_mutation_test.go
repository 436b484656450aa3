package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/internal/store"
)

// The HTTP front end's authentication (guard, metricsGuard, mixedEra),
// written when planted bugs in it left the package's own suite green
// (docs/security-tests.md, "Fourth pass: the inbox and mcpserver's
// authentication"): each test fails with one of those bugs.

// send sends one request to url with the headers given ("Name: value")
// and returns the status and body.
func send(t *testing.T, method, url string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// countingMetrics is a /metrics handler that counts the scrapes it served.
func countingMetrics(n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.WriteString(w, "maiden_calls_total 1\n")
	})
}

// TestMetricsNeedsAnOperator: /metrics, served by mcpserver's own guard,
// takes an operator's token or a metrics token and nothing else: with
// [agents], no token, an empty one, an agent's token or a token in
// another scheme is 403 and the metrics are not served; without
// [agents] and with a static token, the static token (as a bearer) or an
// operator's reads them, a wrong one does not; with neither, the path is
// open (loopback only).
func TestMetricsNeedsAnOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAgentsEnv(t, agentsTOML+"\n[operators.ann]\n")
	var scrapes atomic.Int64
	srv := e.httpServer(HTTPOptions{Metrics: countingMetrics(&scrapes)})
	agentTok, _ := e.token("alice")
	opTok, _, err := e.st.MintOperatorToken(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	scraper, _, err := e.st.MintOperatorTokenRole(ctx, "ann", store.RoleMetrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, header string
		want         int
		says         string
	}{
		{"no token", "", http.StatusForbidden, "takes an operator's bearer token or a metrics token"},
		{"an empty bearer token", "Bearer ", http.StatusForbidden, "takes an operator's bearer token or a metrics token"},
		{"an agent's token", "Bearer " + agentTok, http.StatusForbidden, "not a live operator or metrics token"},
		{"an operator's token as Basic", "Basic " + opTok, http.StatusForbidden, "takes an operator's bearer token or a metrics token"},
		{"an operator's token", "Bearer " + opTok, http.StatusOK, "maiden_calls_total"},
		{"a metrics token", "Bearer " + scraper, http.StatusOK, "maiden_calls_total"},
	} {
		before := scrapes.Load()
		code, body := send(t, http.MethodGet, srv.URL+MetricsPath, "Authorization: "+c.header)
		if code != c.want || !strings.Contains(body, c.says) {
			t.Errorf("/metrics with %s: %d %q, want %d saying %q", c.name, code, body, c.want, c.says)
		}
		if served := scrapes.Load() > before; served != (c.want == http.StatusOK) {
			t.Errorf("/metrics with %s: the metrics handler ran: %v", c.name, served)
		}
	}

	// Without [agents], behind a static token.
	implicit := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv = implicit.httpServer(HTTPOptions{AuthToken: "s3cret-token", Metrics: countingMetrics(&scrapes)})
	for _, c := range []struct {
		name, header string
		want         int
	}{
		{"no token", "", http.StatusForbidden},
		{"a wrong token", "Bearer s3cret-tokeN", http.StatusForbidden},
		{"a token of another length", "Bearer s3cret", http.StatusForbidden},
		{"the static token", "Bearer s3cret-token", http.StatusOK},
	} {
		if code, body := send(t, http.MethodGet, srv.URL+MetricsPath, "Authorization: "+c.header); code != c.want {
			t.Errorf("/metrics without [agents], with %s: %d %q, want %d", c.name, code, body, c.want)
		}
	}
	// Without [agents] and without a static token: open, as /mcp is.
	srv = implicit.httpServer(HTTPOptions{Metrics: countingMetrics(&scrapes)})
	if code, body := send(t, http.MethodGet, srv.URL+MetricsPath); code != http.StatusOK {
		t.Errorf("/metrics with neither [agents] nor a static token: %d %q, want 200", code, body)
	}
}

// TestFrontRefusesWhenTheStoreCannotAnswer: a valid token presented when
// the state store cannot be asked (here: the Host closed) is answered 503
// naming why, at /mcp and at /metrics alike; the request goes no further
// (no session, no scrape), rather than on as an agent nobody
// authenticated.
func TestFrontRefusesWhenTheStoreCannotAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAgentsEnv(t, agentsTOML+"\n[operators.ann]\n")
	var scrapes atomic.Int64
	srv := e.httpServer(HTTPOptions{Metrics: countingMetrics(&scrapes)})
	tok, _ := e.token("alice")
	opTok, _, err := e.st.MintOperatorToken(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if code, sid := initializeRaw(t, http.DefaultClient, srv.URL, tok); code != http.StatusOK || sid == "" {
		t.Fatalf("initialize while the store answers: %d %q", code, sid)
	}
	if code, body := send(t, http.MethodGet, srv.URL+MetricsPath, "Authorization: Bearer "+opTok); code != http.StatusOK {
		t.Fatalf("/metrics while the store answers: %d %q", code, body)
	}
	if err := e.host.Close(ctx); err != nil {
		t.Fatal(err)
	}
	const unavailable = "cannot check the bearer token now: the state store is unavailable"
	code, body := rawLegacy(t, srv.URL, http.MethodPost, tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyProtocol+`","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, unavailable) {
		t.Errorf("initialize with a valid token, the store unavailable: %d %q, want 503 saying %q", code, body, unavailable)
	}
	before := scrapes.Load()
	if code, body := send(t, http.MethodGet, srv.URL+MetricsPath, "Authorization: Bearer "+opTok); code != http.StatusServiceUnavailable || !strings.Contains(body, unavailable) {
		t.Errorf("/metrics with an operator's token, the store unavailable: %d %q, want 503 saying %q", code, body, unavailable)
	}
	if scrapes.Load() != before {
		t.Error("the metrics were served with a token the store could not check")
	}
}

// TestMixedEraEitherSignal: a request naming a 2025-11-25 session
// (Mcp-Session-Id) is of the sessionless era too if either its header or
// its _meta names that protocol, and is refused 400 before it reaches
// either handler: the session's own version in the header with a
// 2026-07-28 _meta, and a 2026-07-28 header with no _meta at all.
func TestMixedEraEitherSignal(t *testing.T) {
	t.Parallel()
	e, dir := aliceReadsADir(t, "")
	srv := e.httpServer(HTTPOptions{})
	tok, _ := e.token("alice")
	code, sid := initializeRaw(t, http.DefaultClient, srv.URL, tok)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", code, sid)
	}
	args, _ := json.Marshal(map[string]any{"path": filepath.Join(dir, "f.txt")})
	meta := `,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + ModernProtocol + `","io.modelcontextprotocol/clientInfo":{"name":"mixed","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct{ name, version, meta string }{
		{"the session's version in the header, the sessionless protocol in _meta", legacyProtocol, meta},
		{"the sessionless protocol in the header, no _meta", ModernProtocol, ""},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_read","arguments":`+string(args)+c.meta+`}}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", c.version)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "one protocol era") {
			t.Errorf("%s, on a session: %d %.300s; want 400 (one protocol era)", c.name, resp.StatusCode, body)
		}
	}
}
