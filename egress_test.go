package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestFetchThroughHost runs the WAT fetcher through Host.Call against a real
// TLS server: the declared credential is attached by the host, the value the
// server echoes back is redacted before the tool sees it, an undeclared one
// and an unlisted host are refused, and each request leaves one audit event
// without the secret.
func TestFetchThroughHost(t *testing.T) {
	const secret = "tok-s3cret-value-1234"
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
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
secrets = ["API_TOKEN"]
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
		CacheDir: testkit.CompileCache(t),
		Resolver: testkit.Loopback("api.example.com"),
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

	tests := []struct {
		name string
		req  map[string]any
		ok   bool
		want string
	}{
		{"declared credential, echoed back", map[string]any{"url": base + "/echo", "credential": "API_TOKEN"}, true, "200 auth=Bearer [REDACTED:API_TOKEN]"},
		{"undeclared credential", map[string]any{"url": base + "/echo", "credential": "OTHER"}, false, "credential-undeclared"},
		{"own authorization header", map[string]any{"url": base + "/echo", "headers": [][]string{{"authorization", "Bearer x"}}}, false, "header-refused"},
		{"host not allowed", map[string]any{"url": "https://evil.example/"}, false, "rule: allowlist"},
		{"userinfo trick", map[string]any{"url": "https://api.example.com@evil.example/"}, false, "userinfo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, _ := json.Marshal(tc.req)
			res, err := h.Call(context.Background(), maiden.Call{Tool: "fetcher", Input: string(in)})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if strings.Contains(string(b), secret) {
				t.Fatalf("the secret value reached the result: %s", b)
			}
			if res.OK != tc.ok {
				t.Fatalf("got %+v", res)
			}
			got := res.Output
			if !res.OK {
				got = res.Error.Message
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
	events := strings.Count(audit.String(), "\n")
	if events != len(tests) {
		t.Errorf("%d audit events for %d requests:\n%s", events, len(tests), audit.String())
	}
	if strings.Contains(audit.String(), secret) {
		t.Errorf("the secret value reached the audit log")
	}
}
