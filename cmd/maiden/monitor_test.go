package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/metrics"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// httpGet sends a request with the given headers ("Name: value") and
// returns the status, the Content-Type and the body.
func httpGet(t *testing.T, method, u, body string, headers ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
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
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestServeMonitoring runs `maiden serve -http` with a token, makes real MCP
// calls of real tools in workers (a success, a tool's failure, an allowed
// http-fetch to a TLS server on loopback and a refused one), then scrapes
// /metrics over HTTP and parses the text format. Without [agents], /metrics
// sits behind the same checks as /mcp: no token or a wrong one, or a
// foreign Origin, is refused as /mcp refuses it; /healthz takes no token.
func TestServeMonitoring(t *testing.T) {
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from loopback")
	}), "localhost")
	u, _ := url.Parse(srv.URL)
	toml := fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[tools.toolerr]
path = %q
[tools.fetcher]
path = %q
http_allow = ["localhost"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8", "::1/128"]
http_ca_files = [%q]
timeout_ms = 20000
`, testkit.Component(t, "echo"), testkit.Component(t, "toolerr"), testkit.Component(t, "js/fetcher"), u.Port(), ca)
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "monitoring-test-token-5f1c"
	t.Setenv("MAIDEN_TEST_MONITOR_TOKEN", token)
	base := startHTTP(t, "-config", cfg, "-cache", testkit.CompileCache(t), "-watch=false", "-auth-token-env", "MAIDEN_TEST_MONITOR_TOKEN", "-allow-origin", "https://app.example")
	auth := "Authorization: Bearer " + token

	// The checks /mcp applies apply to /metrics.
	mcpCode, _, _ := httpGet(t, http.MethodPost, base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Content-Type: application/json")
	if mcpCode != http.StatusForbidden {
		t.Fatalf("/mcp without the token: %d, want 403", mcpCode)
	}
	// /healthz answers a probe without credentials, and says only "ok".
	for name, headers := range map[string][]string{"no token": nil, "token": {auth}, "wrong token": {"Authorization: Bearer nope"}} {
		if code, _, body := httpGet(t, http.MethodGet, base+"/healthz", "", headers...); code != http.StatusOK || body != "ok\n" {
			t.Errorf("GET /healthz, %s: %d %q, want 200 \"ok\\n\"", name, code, body)
		}
	}
	if code, _, _ := httpGet(t, http.MethodGet, base+"/healthz", "", "Origin: https://evil.example"); code != http.StatusForbidden {
		t.Errorf("GET /healthz from a foreign origin: %d, want 403", code)
	}
	for _, path := range []string{"/metrics"} {
		for _, c := range []struct {
			name    string
			headers []string
			want    int
		}{
			{"no token", nil, mcpCode},
			{"wrong token", []string{"Authorization: Bearer " + token + "x"}, http.StatusForbidden},
			{"token in another scheme", []string{"Authorization: Basic " + token}, http.StatusForbidden},
			{"foreign origin, with the token", []string{auth, "Origin: https://evil.example"}, http.StatusForbidden},
			{"allowed origin, without the token", []string{"Origin: https://app.example"}, http.StatusForbidden},
			{"allowed origin, with the token", []string{auth, "Origin: https://app.example"}, http.StatusOK},
			{"token", []string{auth}, http.StatusOK},
		} {
			code, _, body := httpGet(t, http.MethodGet, base+path, "", c.headers...)
			if code != c.want {
				t.Errorf("GET %s, %s: %d, want %d", path, c.name, code, c.want)
			}
			if code != http.StatusOK && strings.Contains(body, "maiden_") {
				t.Errorf("GET %s, %s: refused, but the body has metrics: %.200s", path, c.name, body)
			}
		}
	}
	if code, _, body := httpGet(t, http.MethodGet, base+"/healthz", "", auth); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 \"ok\\n\"", code, body)
	}
	if code, _, _ := httpGet(t, http.MethodGet, base+"/nothing-here", "", auth); code != http.StatusNotFound {
		t.Errorf("an unknown path: %d, want 404", code)
	}

	// Real calls through a real session.
	mcp := func(session, body string) (string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST /mcp %.100s: %s: %s", body, resp.Status, b)
		}
		return resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	session, _ := mcp("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if session == "" {
		t.Fatal("initialize: no session")
	}
	mcp(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, c := range []struct {
		tool string
		args map[string]string
		want string // in the response
	}{
		{"echo", map[string]string{"message": "hi there"}, `hi there`},
		{"toolerr", map[string]string{}, `"isError":true`},
		{"fetcher", map[string]string{"url": srv.URL + "/"}, `"isError":true`}, // https://127.0.0.1:port: the IP is not in http_allow
		{"fetcher", map[string]string{"url": "https://localhost:" + u.Port() + "/"}, `hello from loopback`},
	} {
		args, _ := json.Marshal(c.args)
		_, body := mcp(session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, i+2, c.tool, args))
		if !strings.Contains(body, c.want) {
			t.Errorf("tools/call %s %s: %.500s", c.tool, args, body)
		}
	}

	code, ct, text := httpGet(t, http.MethodGet, base+"/metrics", "", auth, "Accept: text/plain;version=0.0.4")
	if code != http.StatusOK || !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("/metrics: %d, Content-Type %q", code, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v\n%.2000s", err, text)
	}
	get := func(name string, labels ...string) float64 {
		f := fams[name]
		if f == nil {
			return -1
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for i, lp := range sortedLabels(m) {
				if lp != labels[i] {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		return -1
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{metrics.CallsTotal, []string{"kind=ok", "tool=echo"}, 1},
		{metrics.CallsTotal, []string{"kind=tool", "tool=toolerr"}, 1},
		{metrics.CallsTotal, []string{"kind=ok", "tool=fetcher"}, 1},
		{metrics.CallsTotal, []string{"kind=denied", "tool=fetcher"}, 1},
		{metrics.CallDuration, []string{"tool=fetcher"}, 2},
		{metrics.CallDuration, []string{"tool=echo"}, 1},
		{metrics.HTTPFetchTotal, []string{"decision=allow", "rule=allowed", "tool=fetcher"}, 1},
		{metrics.HTTPFetchTotal, []string{"decision=deny", "rule=ip-literal", "tool=fetcher"}, 1},
		{metrics.CallsActive, nil, 0},
		{metrics.CallsQueued, nil, 0},
	} {
		if got := get(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Error("/metrics lacks the Go or process collectors")
	}
	if strings.Contains(text, token) {
		t.Error("/metrics shows the token")
	}
}

// sortedLabels renders m's labels as "name=value", sorted by name (the
// text format's parser keeps the order of the line).
func sortedLabels(m *dto.Metric) []string {
	var out []string
	for _, lp := range m.GetLabel() {
		out = append(out, lp.GetName()+"="+lp.GetValue())
	}
	slices.Sort(out)
	return out
}

// TestServeMetricsNeedsOperator: with [agents], /metrics takes an
// operator's token or a scraper's metrics token (maiden operators token
// -role metrics) and refuses an agent's with 403 saying so, since the
// metrics name every agent's tools; a revoked metrics token is refused at
// once; the metrics token calls no tool (/mcp) and signs in to no inbox;
// /healthz answers "ok" with no credentials.
func TestServeMetricsNeedsOperator(t *testing.T) {
	t.Parallel()
	cfg, _ := approvalsConfig(t)
	agentTok := strings.TrimSpace(op(t, exitOK, cfg, "agents", "token", "research").stdout)
	var minted struct{ Operator, Token, Role string }
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "operators", "token", "alice", "-role", "metrics", "-json").stdout), &minted); err != nil ||
		minted.Role != "metrics" || !strings.HasPrefix(minted.Token, "mdo_") {
		t.Fatalf("operators token -role metrics -json: %+v %v", minted, err)
	}
	scraper := minted.Token
	operator := strings.TrimSpace(op(t, exitOK, cfg, "operators", "token", "alice").stdout)
	op(t, exitUsage, cfg, "operators", "token", "alice", "-role", "admin")
	base := startHTTP(t, "-config", cfg, "-watch=false")

	if code, _, body := httpGet(t, http.MethodGet, base+"/healthz", ""); code != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz without credentials: %d %q, want 200 \"ok\\n\"", code, body)
	}
	for _, c := range []struct {
		name    string
		headers []string
		want    int
		says    string
	}{
		{"no token", nil, http.StatusForbidden, "takes an operator's bearer token or a metrics token"},
		{"an agent's token", []string{"Authorization: Bearer " + agentTok}, http.StatusForbidden, "not a live operator or metrics token (an agent's token never is"},
		{"the metrics token", []string{"Authorization: Bearer " + scraper}, http.StatusOK, "go_goroutines"},
		{"an operator's token", []string{"Authorization: Bearer " + operator}, http.StatusOK, "go_goroutines"},
		{"the metrics token from a foreign origin", []string{"Authorization: Bearer " + scraper, "Origin: https://evil.example"}, http.StatusForbidden, "not allowed"},
	} {
		code, _, body := httpGet(t, http.MethodGet, base+"/metrics", "", c.headers...)
		if code != c.want || !strings.Contains(body, c.says) {
			t.Errorf("GET /metrics with %s: %d %.300q, want %d saying %q", c.name, code, body, c.want, c.says)
		}
		if code != http.StatusOK && strings.Contains(body, "maiden_") {
			t.Errorf("GET /metrics with %s: refused, but the body has metrics: %.200s", c.name, body)
		}
	}
	// The metrics token is not an agent's: /mcp refuses it.
	if code, _, _ := httpGet(t, http.MethodPost, base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		"Content-Type: application/json", "Authorization: Bearer "+scraper); code != http.StatusForbidden {
		t.Errorf("/mcp with the metrics token: %d, want 403", code)
	}
	// Nor an operator's: it signs in to no inbox.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the login page:\n%s", page)
	}
	resp, err = browser.PostForm(base+"/ui/login", url.Values{"csrf": {string(m[1])}, "token": {scraper}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(page), "not an operator token") {
		t.Errorf("inbox login with the metrics token: %d, want 403 \"not an operator token\"\n%s", resp.StatusCode, page)
	}
	// Revoked: refused at the next scrape.
	var ls []struct{ Tokens []struct{ ID, Role string } }
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "operators", "ls", "-json").stdout), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("operators ls -json: %v", err)
	}
	for _, tok := range ls[0].Tokens {
		if tok.Role == "metrics" {
			op(t, exitOK, cfg, "operators", "revoke-token", tok.ID)
		}
	}
	if code, _, _ := httpGet(t, http.MethodGet, base+"/metrics", "", "Authorization: Bearer "+scraper); code != http.StatusForbidden {
		t.Errorf("GET /metrics with the revoked metrics token: %d, want 403", code)
	}
}
