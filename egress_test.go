package maiden_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// fakeDNS answers for the names a test uses; every other name fails. It is
// the only simulated part: the servers are real TLS servers on loopback.
type fakeDNS map[string]netip.Addr

func (d fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := d[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// syncBuffer is a bytes.Buffer safe for the audit logger's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFetchThroughHost runs the WAT fetcher through Host.Call against a real
// TLS server: the declared credential is attached by the host, the value the
// server echoes back is redacted before the tool sees it, an undeclared one
// and an unlisted host are refused, and each request leaves one audit event
// without the secret.
func TestFetchThroughHost(t *testing.T) {
	const secret = "tok-s3cret-value-1234"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
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
	audit := &syncBuffer{}
	h, err := maiden.New(cfg, &maiden.Options{
		CacheDir: testkit.CompileCache(t),
		Resolver: fakeDNS{"api.example.com": netip.MustParseAddr("127.0.0.1")},
		LookupSecret: func(name string) (string, bool) {
			// OTHER exists on the host too; the tool never declared it.
			return secret, name == "API_TOKEN" || name == "OTHER"
		},
		Audit: slog.New(slog.NewJSONHandler(audit, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
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
