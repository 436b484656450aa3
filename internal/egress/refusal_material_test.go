package egress

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// TestRefusalsHoldNoKeyMaterial (issue 26, hostile): whatever a tool does
// to a credential of any kind, no refusal or failure it is told, and no
// audit event, holds the key, a value derived from it (an encoded header,
// a signature, a SigV4 credential line) or a token. The derived values are
// the ones a server hanging up on the request received, so the check
// covers what was really computed.
func TestRefusalsHoldNoKeyMaterial(t *testing.T) {
	var mu sync.Mutex
	var received []string // every header value the hanging-up server saw
	hangup := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for _, vs := range r.Header {
			received = append(received, vs...)
		}
		mu.Unlock()
		panic(http.ErrAbortHandler) // close the connection, no answer
	}, false)
	other := startServer(t, echoAll, false)
	certFile, _ := clientCert(t)
	_, wrongKey := clientCert(t)
	const key = "k3y-material-7f3a9c0d"
	for _, kc := range []struct {
		name  string
		spec  credential.Spec
		value string
	}{
		{"bearer", credential.Spec{Kind: credential.Bearer}, key},
		{"header", credential.Spec{Kind: credential.Header, Header: "X-Api-Key", Template: "token {value}"}, key},
		{"basic", credential.Spec{Kind: credential.Basic, Username: "alice"}, key},
		{"hmac", credential.Spec{Kind: credential.HMAC, Algorithm: "sha256"}, key},
		{"sigv4", credential.Spec{Kind: credential.SigV4, AccessKeyID: "AKIDEXAMPLE", Region: "us-east-1", Service: "execute-api"}, key},
		{"mtls", credential.Spec{Kind: credential.MTLS, CertFile: certFile}, wrongKey},
	} {
		t.Run(kc.name, func(t *testing.T) {
			e, p := credEnv(t, kc.spec, kc.value, hangup.port, other.port)
			ctx := ctxTimeout(t, 10*time.Second)
			api := urlFor(hangup, "api.example.com", "/v1/x")
			reqs := map[string]Request{
				"another host":     withCred(get(urlFor(other, "other.example.com", "/")), "API_TOKEN"),
				"Host header":      withCred(Request{URL: api, Headers: []Header{{Name: "Host", Value: "other.example.com"}}}, "API_TOKEN"),
				"userinfo":         withCred(get("https://api.example.com@other.example.com:"+strconv.Itoa(int(other.port))+"/"), "API_TOKEN"),
				"as header secret": {URL: api, Headers: []Header{{Name: "X-Key", Value: kc.value}}, HeaderSecrets: []string{"API_TOKEN"}},
				"server hangs up":  withCred(get(api), "API_TOKEN"),
			}
			var said []string
			for name, req := range reqs {
				_, ferr := e.gate.Fetch(ctx, p, req)
				if ferr == nil {
					continue // allowed (a bearer token as a header secret): nothing refused
				}
				said = append(said, name+": "+ferr.Error()+" "+ferr.Message)
			}
			if kc.spec.Kind != credential.MTLS && kc.spec.Kind != credential.HMAC && kc.spec.Kind != credential.SigV4 {
				// A value that cannot go in a header.
				e.secrets["API_TOKEN"] = key + "\n"
				_, ferr := e.gate.Fetch(ctx, p, withCred(get(api), "API_TOKEN"))
				if ferr == nil || ferr.Rule != RuleCredentialInvalid {
					t.Fatalf("a value with a line break: %v", ferr)
				}
				said = append(said, ferr.Error())
			}
			if len(said) < 4 {
				t.Fatalf("only %d refusals: %q", len(said), said)
			}
			mu.Lock()
			material := append([]string{kc.value, key, base64.StdEncoding.EncodeToString([]byte("alice:" + key))}, received...)
			mu.Unlock()
			var derived []string
			for _, m := range material {
				// Header values of the request (Authorization's signature,
				// the HMAC's hex) less the ones that are not secret.
				if len(m) >= 16 && !strings.HasPrefix(m, "Go-http-client") {
					derived = append(derived, m)
					if i := strings.LastIndex(m, "Signature="); i >= 0 {
						derived = append(derived, m[i+len("Signature="):])
					}
				}
			}
			for _, s := range said {
				assertNoKeyMaterial(t, "a refusal", s, derived...)
			}
			assertNoKeyMaterial(t, "the audit log", e.audit.raw(), derived...)
			t.Logf("%d refusals checked against %d values", len(said), len(derived))
		})
	}
}
