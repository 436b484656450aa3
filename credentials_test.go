package maiden_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestSignedCredentialWithRealTool: a real WebAssembly tool (js/fetcher)
// names an HMAC secret; the host signs its request and a server that
// verifies with the standard library accepts it; the server echoes every
// header back and the tool gets the signature redacted; asking the host to
// sign for another host or to set Host, or to send the signature itself,
// is refused with its rule; the audit log names the secret and holds
// neither key nor signature.
func TestSignedCredentialWithRealTool(t *testing.T) {
	t.Parallel()
	const key = "hmac-key-never-logged-0123"
	var mu sync.Mutex
	var sigs, stamps []string
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		bh := sha256.Sum256(body)
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(r.Method + "\n" + r.RequestURI + "\n" + r.Header.Get("X-Timestamp") + "\n" + hex.EncodeToString(bh[:])))
		ok := subtle.ConstantTimeCompare([]byte(hex.EncodeToString(m.Sum(nil))), []byte(r.Header.Get("X-Signature"))) == 1
		mu.Lock()
		sigs = append(sigs, r.Header.Get("X-Signature"))
		stamps = append(stamps, r.Header.Get("X-Timestamp"))
		mu.Unlock()
		fmt.Fprintf(w, "verified=%v host=%s X-Signature: %s", ok, r.Host, r.Header.Get("X-Signature"))
	}), "api.example.com", "other.example.com")
	u, _ := url.Parse(srv.URL)
	audit := &testkit.SyncBuffer{}
	h := newHostWith(t, `version = 1
[tools.fetcher]
path = %[1]q
http_allow = ["api.example.com", "other.example.com"]
http_ports = [`+u.Port()+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
secrets = ["SIG"]

[secrets.SIG]
hosts = ["api.example.com"]
kind = "hmac"
algorithm = "sha256"
`, maiden.Options{
		Resolver:     testkit.Loopback("api.example.com", "other.example.com"),
		LookupSecret: func(n string) (string, bool) { return key, n == "SIG" },
		Audit:        slog.New(slog.NewJSONHandler(audit, nil)),
	}, "js/fetcher")
	call := func(in map[string]any) maiden.Result {
		b, _ := json.Marshal(in)
		res, err := h.Call(context.Background(), maiden.Call{Tool: "fetcher", Input: string(b)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	base := "https://api.example.com:" + u.Port()
	res := call(map[string]any{"url": base + "/v1/orders?id=7", "method": "POST", "body": `{"qty":3}`, "credential": "SIG"})
	if !res.OK || !strings.Contains(res.Output, "verified=true") {
		t.Fatalf("signed request: %+v", res)
	}
	mu.Lock()
	sig, stamp := sigs[len(sigs)-1], stamps[len(stamps)-1]
	mu.Unlock()
	if strings.Contains(res.Output, sig) || !strings.Contains(res.Output, "X-Signature: [REDACTED:SIG]") {
		t.Errorf("the tool saw the signature: %s", res.Output)
	}
	for _, tc := range []struct {
		name string
		in   map[string]any
		want string
	}{
		{"another host", map[string]any{"url": "https://other.example.com:" + u.Port() + "/", "credential": "SIG"}, "rule: credential-destination"},
		{"Host header", map[string]any{"url": base + "/", "credential": "SIG", "headers": [][]string{{"Host", "other.example.com"}}}, "rule: header-refused"},
		{"userinfo", map[string]any{"url": "https://api.example.com@other.example.com:" + u.Port() + "/", "credential": "SIG"}, "rule: userinfo"},
		// The signed request again, its signature and timestamp set by the
		// tool (one that learnt them): only maiden signs.
		{"replayed signature", map[string]any{"url": base + "/v1/orders?id=7", "method": "POST", "body": `{"qty":3}`,
			"headers": [][]string{{"X-Signature", sig}, {"X-Timestamp", stamp}}}, `rule: header-refused`},
	} {
		res := call(tc.in)
		if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, tc.want) {
			t.Errorf("%s: %+v, want denied with %q", tc.name, res, tc.want)
		}
	}
	mu.Lock()
	n := len(sigs)
	mu.Unlock()
	if n != 1 {
		t.Errorf("server got %d requests, want only the allowed one", n)
	}
	log := audit.String()
	if !strings.Contains(log, `"credential":"SIG"`) || strings.Contains(log, key) || strings.Contains(log, sig) {
		t.Errorf("audit log: want the name, never the key or signature:\n%s", log)
	}
}

// TestWebFetchSigningKeyNotAHeader: web_fetch's secret_headers name a
// secret of kind hmac; the host refuses to send the signing key as a
// header value (rule credential-kind) and the server sees nothing.
func TestWebFetchSigningKeyNotAHeader(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Api-Key"))
		mu.Unlock()
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	h := newHostWith(t, `version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
secrets = ["KEY_ONE"]

[secrets.KEY_ONE]
hosts = ["api.example.com"]
kind = "hmac"
algorithm = "sha256"

[agents.b]
grants = ["tool:invoke web_fetch --...", "network:connect api.example.com", "secret:use KEY_ONE"]
[agents.b.boundary]
network = true
[agents.b.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [`+u.Port()+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
secret_headers = { "X-Api-Key" = "KEY_ONE" }
`, maiden.Options{
		Isolation:    maiden.InProcess,
		Resolver:     testkit.Loopback("api.example.com"),
		LookupSecret: func(name string) (string, bool) { return "hmac-signing-key", name == "KEY_ONE" },
	}, "js/fetcher")
	res, err := h.Call(context.Background(), maiden.Call{Agent: "b", Tool: "web_fetch", Input: `{"url":"https://api.example.com:` + u.Port() + `/x"}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "credential-kind") || strings.Contains(res.Error.Message, "hmac-signing-key") {
		t.Fatalf("got %+v", res.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Errorf("the server got the key as a header: %v", seen)
	}
}
