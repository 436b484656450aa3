package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestFetchThroughHost runs the JS fetcher through Host.Call against a real
// TLS server: the declared credential is attached by the host, the value the
// server echoes back is redacted before the tool sees it (also escaped, and
// also where the gate quotes the server in an error), an undeclared one and
// an unlisted host are refused, hostile answers (a 101 upgrade, a header
// that is not UTF-8) come back as fetch errors rather than a stall or a
// trap, and each request leaves one audit event without the secret.
func TestFetchThroughHost(t *testing.T) {
	t.Parallel()
	const secret = "tok-s3cret-value-1234"
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/encoding":
			// An unasked-for coding the gate refuses, quoting it.
			w.Header().Set("Content-Encoding", auth)
			io.WriteString(w, "x")
			return
		case "/escaped":
			// As a JSON API would echo it, every character \u-escaped.
			for _, c := range auth {
				fmt.Fprintf(w, `\u%04x`, c)
			}
			return
		case "/upgrade":
			// 101 and then silence, holding the connection open.
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			brw.Flush()
			io.Copy(io.Discard, c)
			return
		case "/latin1":
			w.Header().Set("Content-Disposition", "attachment; filename=\"caf\xe9.txt\"")
		}
		w.Header().Set("X-Echo", auth)
		fmt.Fprintf(w, "auth=%s", auth)
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	dir := t.TempDir()
	toml := fmt.Sprintf(`version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
secrets = ["API_TOKEN", "MISSING_TOKEN"]
timeout_ms = 10000
`, testkit.Component(t, "js/fetcher"), port, ca)
	cfgPath := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfgPath, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	audit := &testkit.SyncBuffer{}
	h, err := maiden.New(cfg, &maiden.Options{
		Isolation: maiden.InProcess,
		CacheDir:  testkit.CompileCache(t),
		Resolver:  testkit.Loopback("api.example.com"),
		LookupSecret: func(name string) (string, bool) {
			// OTHER exists on the host too; the tool never declared it.
			return secret, name == "API_TOKEN" || name == "OTHER"
		},
		Audit: slog.New(slog.NewJSONHandler(audit, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	base := "https://api.example.com:" + port

	// A refused request the tool then fails on is kind denied (the policy is
	// the cause, and the refusal names the key to change); a request that
	// was sent and went wrong stays the tool's failure.
	const denied, tool = maiden.KindDenied, maiden.KindTool
	tests := []struct {
		name string
		req  map[string]any
		kind maiden.ErrorKind // "" for success
		want string
	}{
		{"declared credential, echoed back", map[string]any{"url": base + "/echo", "credential": "API_TOKEN"}, "", "200 auth=Bearer [REDACTED:API_TOKEN]"},
		{"undeclared credential", map[string]any{"url": base + "/echo", "credential": "OTHER"}, denied, "credential-undeclared"},
		{"declared credential without a value", map[string]any{"url": base + "/echo", "credential": "MISSING_TOKEN"}, denied, "set MAIDEN_SECRET_MISSING_TOKEN"},
		{"own authorization header", map[string]any{"url": base + "/echo", "headers": [][]string{{"authorization", "Bearer x"}}}, denied, "header-refused"},
		{"host not allowed", map[string]any{"url": "https://evil.example/"}, denied, "rule: allowlist"},
		{"userinfo trick", map[string]any{"url": "https://api.example.com@evil.example/"}, denied, "userinfo"},
		{"secret echoed \\u-escaped", map[string]any{"url": base + "/escaped", "credential": "API_TOKEN"}, "", `\u0020[REDACTED:API_TOKEN]`},
		{"secret reflected into Content-Encoding", map[string]any{"url": base + "/encoding", "credential": "API_TOKEN"}, tool, "content-encoding \"Bearer [REDACTED:API_TOKEN]\""},
		{"101 then silence", map[string]any{"url": base + "/upgrade", "credential": "API_TOKEN"}, tool, "failed: server answered 101"},
		{"header value not UTF-8", map[string]any{"url": base + "/latin1"}, tool, `response header "Content-Disposition" has a value that is not valid UTF-8`},
	}
	// Compile and describe first: the timing below is of the calls alone.
	if _, err := h.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, _ := json.Marshal(tc.req)
			res, err := h.Call(context.Background(), maiden.Call{Tool: "fetcher", Input: string(in)})
			if err != nil {
				t.Fatal(err)
			}
			// A 101 stalled the call until the 10 s deadline (60 s before
			// the deadline reached the gate); it is refused at once now.
			// Generous, for a loaded machine.
			if strings.HasPrefix(tc.name, "101") && res.Duration > 8*time.Second {
				t.Errorf("call took %v", res.Duration)
			}
			b, _ := json.Marshal(res)
			if strings.Contains(string(b), secret) || strings.Contains(string(b), "s3cret") {
				t.Fatalf("the secret value reached the result: %s", b)
			}
			if res.OK != (tc.kind == "") || (!res.OK && res.Error.Kind != tc.kind) {
				t.Fatalf("want kind %q, got %+v", tc.kind, res)
			}
			got := res.Output
			if !res.OK {
				got = res.Error.Message
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
			// The refusal, said once (issue 27, rough edge 6): the tool
			// only passed it on.
			if tc.kind == denied && (!strings.HasPrefix(got, "http-fetch was refused: ") || strings.Count(got, tc.want) != 1 || strings.Contains(got, "the tool then reported")) {
				t.Errorf("the refusal is not said once: %q", got)
			}
		})
	}
	events := strings.Count(audit.String(), "\n")
	if events != len(tests) {
		t.Errorf("%d audit events for %d requests:\n%s", events, len(tests), audit.String())
	}
	if strings.Contains(audit.String(), "s3cret") {
		t.Errorf("the secret value reached the audit log")
	}
}
