package builtin

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/egress"
)

// The secret material of these tests. Long and distinctive, so any echo of it is visible.
const (
	connSecret   = "conn-s3cr3t-7f1e9a2b4c6d8e0f"
	headerSecret = "hdr-s3cr3t-a1b2c3d4e5f60718"
	proxySecret  = "proxy-s3cr3t-99887766"
)

// webEnv is a real TLS server on loopback (under a private CA), a real egress gate whose resolver maps
// api.example.com to it, and counters for what reached the network.
type webEnv struct {
	srv     *httptest.Server
	conns   atomic.Int64 // TCP connections the server accepted
	lookups atomic.Int64 // names the gate resolved
	fetches atomic.Int64 // calls of the Fetcher
	audit   bytes.Buffer
	auditMu sync.Mutex
	fetch   Fetcher

	mu   sync.Mutex
	seen http.Header // headers of the last request the server got
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// newWebEnv's gate declares the secrets CONN_TOKEN and API_KEY, as the Fetcher contract asks; declared, if given,
// replaces that list.
func newWebEnv(t *testing.T, declared ...string) *webEnv {
	t.Helper()
	if declared == nil {
		declared = []string{"CONN_TOKEN", "API_KEY"}
	}
	caFile, leaf := testPKI(t)
	e := &webEnv{}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(e.handle))
	e.srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	_, portStr, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	p, err := egress.NewPolicy(ToolWebFetch, egress.Rules{
		Hosts:      []string{"api.example.com"},
		Ports:      []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Secrets:    declared,
		CAFiles:    []string{caFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.CloseIdleConnections)
	g := egress.New(&egress.Options{
		Resolver: resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
			e.lookups.Add(1)
			if host == "api.example.com." { // the gate asks for the absolute name
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("no such host %s in the test resolver", host)
		}),
		// The host's secret store, which resolved the material too.
		LookupSecret: func(name string) (string, bool) {
			v, ok := map[string]string{"CONN_TOKEN": connSecret, "API_KEY": headerSecret}[name]
			return v, ok
		},
		Audit: slog.New(slog.NewJSONHandler(lockedWriter{&e.auditMu, &e.audit}, nil)),
	})
	e.fetch = func(ctx context.Context, r egress.Request) (*egress.Response, *egress.FetchError) {
		e.fetches.Add(1)
		r.Caller = "coder"
		return g.Fetch(ctx, p, r)
	}
	return e
}

func (e *webEnv) url(path string) string {
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	return "https://api.example.com:" + port + path
}

func (e *webEnv) lastHeaders() http.Header {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen
}

// handle echoes what it got in many forms, or misbehaves on request.
func (e *webEnv) handle(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.seen = r.Header.Clone()
	e.mu.Unlock()
	auth, key := r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")
	switch r.URL.Path {
	case "/echo":
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Key", key)
		w.Header().Set("X-Echo-Auth", auth)
		j, _ := json.Marshal(map[string]string{"auth": auth, "key": key, "body": string(body), "escaped": strings.ReplaceAll(key, "-", `\u002d`)})
		fmt.Fprintf(w, "%s\nraw %s %s\nb64 %s\nhex %x\n", j, auth, key, base64.StdEncoding.EncodeToString([]byte(key)), key)
	case "/bad-encoding":
		// Server text that the gate quotes in its error: the secret header's value.
		w.Header().Set("Content-Encoding", "x-"+key)
		io.WriteString(w, "body")
	case "/redirect":
		http.Redirect(w, r, "https://evil.example.net/", http.StatusFound)
	case "/big":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Write(bytes.Repeat([]byte("é"), n/2))
	case "/binary":
		w.Write([]byte{0xff, 0xfe, 0, 1})
	case "/binbig":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Write(bytes.Repeat([]byte{0xff}, n))
	case "/echo-name":
		// The secret header's value as a response header's name.
		w.Header().Set("X-Echo-"+key, "1")
		io.WriteString(w, "named")
	case "/status":
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "teapot")
	}
}

func testPKI(t *testing.T) (string, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "builtin test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "api.example.com"}, DNSNames: []string{"api.example.com"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}

var (
	netOn  = boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Network: true}
	netOff = boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted}
	fullM  = Material{Connection: &Credential{Name: "CONN_TOKEN", Value: connSecret}, Headers: []SecretHeader{{Name: "X-Api-Key", Secret: "API_KEY", Value: headerSecret}}}
)

func webCall(t *testing.T, e *webEnv, b boundary.Boundary, m Material, in any) (*WebFetchOutput, error) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := WebFetch(context.Background(), b, raw, e.fetch, m)
	if err != nil {
		if out != nil {
			t.Errorf("an error came with an output")
		}
		return nil, err
	}
	checkOutput(t, ToolWebFetch, out)
	return out.(*WebFetchOutput), nil
}

// With the network off in the boundary, web_fetch fails with the structured error before anything: the Fetcher is
// not called, no name is resolved, the server accepts no connection.
func TestWebFetchNetworkOffNeverDials(t *testing.T) {
	e := newWebEnv(t)
	for _, m := range []Material{{}, fullM, {Proxy: &ProxySecret{Value: proxySecret}}} {
		_, err := webCall(t, e, netOff, m, map[string]any{"url": e.url("/echo")})
		ce := wantRequired(t, err, DomainNetwork, ToolWebFetch, boundary.Expansion{Network: true})
		raw, _ := json.Marshal(ce)
		if !strings.Contains(string(raw), `"requiredExpansion":{"network":{"enabled":true}}`) {
			t.Fatalf("structuredContent = %s", raw)
		}
		// The model's request with exactly that expansion validates.
		x, _ := json.Marshal(ce.RequiredExpansion)
		if _, verr := boundary.Validate(x); verr != nil {
			t.Fatal(verr)
		}
	}
	_, err := webCall(t, e, boundary.Boundary{Kind: boundary.External, Filesystem: boundary.Restricted, Network: true}, Material{}, map[string]any{"url": e.url("/echo")})
	wantRefused(t, err, ReasonNotManaged)
	if n := e.fetches.Load() + e.lookups.Load() + e.conns.Load(); n != 0 {
		t.Fatalf("%d fetches, %d lookups, %d connections with the network off", e.fetches.Load(), e.lookups.Load(), e.conns.Load())
	}
	// Control: the same call with the network on does reach the server, so the counters can count.
	if _, err := webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/echo")}); err != nil {
		t.Fatal(err)
	}
	if e.conns.Load() == 0 || e.lookups.Load() == 0 {
		t.Fatal("the counters saw nothing of an allowed fetch")
	}
}

// The material reaches the server; the output, the errors and the audit never show it.
func TestWebFetchMaterial(t *testing.T) {
	e := newWebEnv(t)
	out, err := webCall(t, e, netOn, fullM, map[string]any{"url": e.url("/echo"), "method": "POST", "body": "hello", "headers": map[string]string{"X-Trace": "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := e.lastHeaders()
	if seen.Get("Authorization") != "Bearer "+connSecret || seen.Get("X-Api-Key") != headerSecret || seen.Get("X-Trace") != "t1" {
		t.Fatalf("the server got %v", seen)
	}
	if out.Status != 200 || out.Truncated || out.Encoding != "text" {
		t.Fatalf("out = %+v", out)
	}
	all, _ := json.Marshal(out)
	for _, leak := range leaks() {
		if bytes.Contains(all, []byte(leak)) {
			t.Fatalf("output holds %q: %s", leak, all)
		}
	}
	for _, marker := range []string{"[REDACTED:CONN_TOKEN]", "[REDACTED:API_KEY]"} {
		if !strings.Contains(out.Body, marker) {
			t.Errorf("body lacks %s: %s", marker, out.Body)
		}
	}
	if got := out.Headers["X-Echo-Key"]; len(got) != 1 || got[0] != "[REDACTED:API_KEY]" {
		t.Errorf("X-Echo-Key = %q", got)
	}
	if !strings.Contains(out.Body, `"body":"hello"`) {
		t.Errorf("the request body did not arrive: %s", out.Body)
	}

	// Server text quoted in an error is redacted too.
	_, err = webCall(t, e, netOn, fullM, map[string]any{"url": e.url("/bad-encoding")})
	fe := wantError(t, err, ReasonFetchFailed)
	if fe.Rule != egress.RuleContentEncoding || !strings.Contains(fe.Message, "[REDACTED:API_KEY]") {
		t.Fatalf("error = %+v", fe)
	}
	for _, leak := range leaks() {
		if strings.Contains(err.Error(), leak) {
			t.Fatalf("error text holds %q: %v", leak, err)
		}
	}
	// The gate's audit names the credential, never a value.
	e.auditMu.Lock()
	audit := e.audit.String()
	e.auditMu.Unlock()
	if !strings.Contains(audit, `"credential":"CONN_TOKEN"`) {
		t.Fatalf("audit = %s", audit)
	}
	for _, leak := range leaks() {
		if strings.Contains(audit, leak) {
			t.Fatalf("audit holds %q", leak)
		}
	}
	// Material never prints.
	j, _ := json.Marshal(Material{Connection: fullM.Connection, Headers: fullM.Headers, Proxy: &ProxySecret{Value: proxySecret}})
	s := fmt.Sprintf("%v %+v %#v %v %s %s", fullM, fullM, fullM, *fullM.Connection, fullM.Headers, j)
	for _, leak := range leaks() {
		if strings.Contains(s, leak) {
			t.Fatalf("fmt prints material: %s", s)
		}
	}
}

func leaks() []string {
	return []string{connSecret, headerSecret, proxySecret,
		base64.StdEncoding.EncodeToString([]byte(headerSecret)), fmt.Sprintf("%x", headerSecret),
		strings.ReplaceAll(headerSecret, "-", `\u002d`)}
}

// The caller cannot override or add to the material: a header of the same name (in any spelling) is refused before
// anything is sent, and credentials it writes itself are refused by the gate.
func TestWebFetchCallerCannotOverrideMaterial(t *testing.T) {
	e := newWebEnv(t)
	for _, name := range []string{"X-Api-Key", "x-api-key", "X_API_KEY"} {
		_, err := webCall(t, e, netOn, fullM, map[string]any{"url": e.url("/echo"), "headers": map[string]string{name: "mine"}})
		wantError(t, err, ReasonInvalidInput)
	}
	if e.fetches.Load() != 0 || e.conns.Load() != 0 {
		t.Fatal("a refused override reached the fetcher")
	}
	for _, name := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
		_, err := webCall(t, e, netOn, fullM, map[string]any{"url": e.url("/echo"), "headers": map[string]string{name: "Bearer mine"}})
		fe := wantError(t, err, ReasonFetchDenied)
		if fe.Rule != egress.RuleHeaderRefused {
			t.Fatalf("%s: %+v", name, fe)
		}
	}
	if e.conns.Load() != 0 {
		t.Fatal("a refused header reached the server")
	}
}

func TestWebFetchMaterialRefusals(t *testing.T) {
	e := newWebEnv(t)
	cases := []struct {
		m      Material
		reason string
	}{
		{Material{Proxy: &ProxySecret{Value: proxySecret}}, ReasonProxyNotSupported},
		{Material{Connection: &Credential{Name: "CONN_TOKEN"}}, ReasonCredentialNotConfigured},
		{Material{Headers: []SecretHeader{{Name: "X-Api-Key"}}}, ReasonCredentialNotConfigured},
	}
	for _, c := range cases {
		_, err := webCall(t, e, netOn, c.m, map[string]any{"url": e.url("/echo")})
		ce := wantRefused(t, err, c.reason)
		if ce.Domain != DomainNetwork || strings.Contains(ce.Error(), proxySecret) {
			t.Fatalf("%+v", ce)
		}
	}
	if e.fetches.Load() != 0 || e.conns.Load() != 0 {
		t.Fatal("refused material reached the fetcher")
	}
	// A connection secret the policy does not declare is refused by the gate, before any dial.
	_, err := webCall(t, e, netOn, Material{Connection: &Credential{Name: "OTHER", Value: "v-other-secret"}}, map[string]any{"url": e.url("/echo")})
	if fe := wantError(t, err, ReasonFetchDenied); fe.Rule != egress.RuleCredentialUndeclared || strings.Contains(fe.Message, "v-other-secret") {
		t.Fatalf("%+v", fe)
	}
	if e.conns.Load() != 0 {
		t.Fatal("an undeclared credential reached the server")
	}
}

func TestWebFetchResponses(t *testing.T) {
	e := newWebEnv(t)
	// Redirects are returned, not followed.
	out, err := webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/redirect")})
	if err != nil || out.Status != http.StatusFound || out.Headers["Location"][0] != "https://evil.example.net/" {
		t.Fatalf("redirect: %+v %v", out, err)
	}
	if e.lookups.Load() != 1 {
		t.Fatalf("%d lookups: the redirect was followed", e.lookups.Load())
	}
	out, err = webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/status")})
	if err != nil || out.Status != http.StatusTeapot || out.Body != "teapot" {
		t.Fatalf("status: %+v %v", out, err)
	}
	out, err = webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/binary")})
	if err != nil || out.Encoding != "base64" || out.Body != base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0, 1}) {
		t.Fatalf("binary: %+v %v", out, err)
	}
	// Over MaxFetchBody and under the gate's cap: cut at a character boundary, marked.
	out, err = webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/big?n=" + strconv.Itoa(MaxFetchBody+1001))})
	if err != nil || !out.Truncated || len(out.Body) > MaxFetchBody || len(out.Body) < MaxFetchBody-1 || out.Encoding != "text" {
		t.Fatalf("big: truncated %v, %d bytes, %v", out != nil && out.Truncated, len(out.Body), err)
	}
	out, err = webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/big?n=" + strconv.Itoa(MaxFetchBody))})
	if err != nil || out.Truncated || len(out.Body) != MaxFetchBody {
		t.Fatalf("at the cap: %v %v", out.Truncated, err)
	}
	// Over the gate's cap: refused whole.
	_, err = webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/big?n=" + strconv.Itoa(egress.DefaultMaxResponseBytes+2))})
	wantError(t, err, ReasonFetchTooLarge)
	// A host off the allowlist: refused by the gate, never resolved; the error names the URL without its query.
	before := e.lookups.Load()
	_, err = webCall(t, e, netOn, Material{}, map[string]any{"url": "https://evil.example.net/p?key=caller-key#frag"})
	if fe := wantError(t, err, ReasonFetchDenied); fe.Rule != egress.RuleAllowlist || fe.Target != "https://evil.example.net/p" {
		t.Fatalf("%+v", fe)
	}
	if e.lookups.Load() != before {
		t.Fatal("a refused host was resolved")
	}
	// Plain http is refused (https only, except loopback the policy does not list).
	_, err = webCall(t, e, netOn, Material{}, map[string]any{"url": "http://api.example.com/echo"})
	wantError(t, err, ReasonFetchDenied)
}

func TestWebFetchInvalidInput(t *testing.T) {
	e := newWebEnv(t)
	for _, in := range []string{`{}`, `{"url":""}`, `{"url":"https://api.example.com/","follow":true}`, `{"url":"https://api.example.com/","headers":{"a":1}}`, `[]`} {
		_, err := WebFetch(context.Background(), netOn, []byte(in), e.fetch, Material{})
		wantError(t, err, ReasonInvalidInput)
	}
	big := strings.Repeat("x", MaxFetchRequestBody+1)
	_, err := webCall(t, e, netOn, Material{}, map[string]any{"url": e.url("/echo"), "body": big})
	wantError(t, err, ReasonInvalidInput)
	if e.fetches.Load() != 0 {
		t.Fatal("invalid input reached the fetcher")
	}
	_, err = WebFetch(context.Background(), netOn, []byte(`{"url":"https://api.example.com/"}`), nil, Material{})
	wantError(t, err, ReasonFetchFailed)
}

// WebFetch's own redaction holds when the gate does not know a value: a Fetcher whose policy does not declare the
// secret header (against the contract) still returns no value in the output or the error.
func TestWebFetchRedactsWhatTheGateDoesNotKnow(t *testing.T) {
	e := newWebEnv(t, "CONN_TOKEN")
	// Named as a secret the policy declares (the gate checks it by name),
	// whose value the gate resolves to something else: only WebFetch
	// knows this value.
	m := Material{Headers: []SecretHeader{{Name: "X-Api-Key", Secret: "CONN_TOKEN", Value: headerSecret}}}
	out, err := webCall(t, e, netOn, m, map[string]any{"url": e.url("/echo")})
	if err != nil {
		t.Fatal(err)
	}
	if e.lastHeaders().Get("X-Api-Key") != headerSecret {
		t.Fatal("the secret header did not reach the server")
	}
	all, _ := json.Marshal(out)
	for _, leak := range leaks() {
		if bytes.Contains(all, []byte(leak)) {
			t.Fatalf("output holds %q: %s", leak, all)
		}
	}
	if !strings.Contains(out.Body, "[REDACTED:CONN_TOKEN]") {
		t.Fatalf("body = %s", out.Body)
	}
	_, err = webCall(t, e, netOn, m, map[string]any{"url": e.url("/bad-encoding")})
	fe := wantError(t, err, ReasonFetchFailed)
	if strings.Contains(err.Error(), headerSecret) || !strings.Contains(fe.Message, "[REDACTED:CONN_TOKEN]") {
		t.Fatalf("error = %v", err)
	}
	// (The gate's own audit event of that exchange quotes the value here: that is why the Fetcher contract asks
	// for the material's secrets in the policy; TestWebFetchMaterial checks the audit under the contract.)
}
