package egress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"hash"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/maiden-run/maiden/internal/credential"
)

// credEnv is a gate whose tool may reach api.example.com (and
// other.example.com) on s's port, with secret API_TOKEN of kind spec,
// bound to api.example.com only.
func credEnv(t *testing.T, spec credential.Spec, value string, ports ...uint16) (*env, *Policy) {
	t.Helper()
	e := newEnv(t)
	e.res.set("api.example.com", "127.0.0.1")
	e.res.set("other.example.com", "127.0.0.1")
	e.secrets["API_TOKEN"] = value
	r := toolFor(t, ports...)
	r.Hosts = append(r.Hosts, "other.example.com")
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Source: "[secrets.API_TOKEN] (agent.toml:3)", Credential: spec}}
	return e, mustPolicy(t, r)
}

// echoAll answers with every request header it got, in the body and as
// response headers: the worst server for a credential to meet.
func echoAll(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	for k, vs := range r.Header {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\n")
			w.Header().Add("X-Echo-"+k, v)
		}
	}
	w.Write([]byte(b.String()))
}

// TestHeaderAndBasicKinds: the value reaches the server in the header its
// kind names, and an echo of it comes back redacted.
func TestHeaderAndBasicKinds(t *testing.T) {
	s := startServer(t, echoAll, false)
	for _, tc := range []struct {
		name   string
		spec   credential.Spec
		header string
		want   string
	}{
		{"bearer", credential.Spec{}, "Authorization", "Bearer s3cr3t-value"},
		{"header", credential.Spec{Kind: credential.Header, Header: "X-Api-Key", Template: "token {value}"}, "X-Api-Key", "token s3cr3t-value"},
		{"basic", credential.Spec{Kind: credential.Basic, Username: "alice"}, "Authorization", "Basic YWxpY2U6czNjcjN0LXZhbHVl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, p := credEnv(t, tc.spec, "s3cr3t-value", s.port)
			resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, withCred(get(urlFor(s, "api.example.com", "/")), "API_TOKEN"))
			if ferr != nil {
				t.Fatal(ferr)
			}
			last, _ := s.lastRequest()
			if got := last.Header.Get(tc.header); got != tc.want {
				t.Errorf("server got %s: %q, want %q", tc.header, got, tc.want)
			}
			seen := string(resp.Body) + header(resp.Headers, "X-Echo-"+tc.header)
			if strings.Contains(seen, "s3cr3t-value") || strings.Contains(seen, "YWxpY2U6czNjcjN0LXZhbHVl") {
				t.Errorf("the tool saw the credential: %s", seen)
			}
			if !strings.Contains(seen, "[REDACTED:API_TOKEN]") {
				t.Errorf("no redaction marker in %s", seen)
			}
			if strings.Contains(e.audit.raw(), "s3cr3t") {
				t.Errorf("audit log holds the value: %s", e.audit.raw())
			}
		})
	}
}

// hmacVerify is the test server's own check of an HMAC-signed request,
// written with the standard library from the documented canonical string
// (credential.HMACCanonical's doc comment), not with the package's code.
func hmacVerify(key []byte, newHash func() hash.Hash, r *http.Request, body []byte, sigHeader, tsHeader string) bool {
	ts := r.Header.Get(tsHeader)
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(n, 0)).Abs() > 5*time.Minute {
		return false
	}
	bh := newHash()
	bh.Write(body)
	msg := r.Method + "\n" + r.RequestURI + "\n" + ts + "\n" + hex.EncodeToString(bh.Sum(nil))
	m := hmac.New(newHash, key)
	m.Write([]byte(msg))
	want := hex.EncodeToString(m.Sum(nil))
	return subtle.ConstantTimeCompare([]byte(want), []byte(r.Header.Get(sigHeader))) == 1
}

// TestHMACVerifiedByServer: a server holding the key verifies maiden's
// signature over method, path and query, timestamp and body; the tool's
// own X-Signature is replaced; an echo of the signature comes back
// redacted; a tampered request fails the same verifier.
func TestHMACVerifiedByServer(t *testing.T) {
	const key = "whsec_0123456789abcdef"
	type seen struct {
		r    *http.Request
		body []byte
		ok   bool
	}
	var mu sync.Mutex
	var got seen
	for _, alg := range []struct {
		name string
		h    func() hash.Hash
	}{{"sha256", sha256.New}, {"sha512", sha512.New}} {
		t.Run(alg.name, func(t *testing.T) {
			var s *server
			s = startServer(t, func(w http.ResponseWriter, r *http.Request) {
				_, body := s.lastRequest() // the wrapper read it
				ok := hmacVerify([]byte(key), alg.h, r, body, "X-Sig", "X-Ts")
				mu.Lock()
				got = seen{r.Clone(context.Background()), body, ok}
				mu.Unlock()
				if !ok {
					w.WriteHeader(http.StatusUnauthorized)
				}
				echoAll(w, r)
			}, false)
			spec := credential.Spec{Kind: credential.HMAC, Algorithm: alg.name, SignatureHeader: "X-Sig", TimestampHeader: "X-Ts"}
			e, p := credEnv(t, spec, key, s.port)
			req := withCred(Request{Method: "POST", URL: urlFor(s, "api.example.com", "/v1/orders/a%20b?z=1&a=two"), Body: []byte(`{"qty":3}`),
				Headers: []Header{{Name: "X-Sig", Value: "forged"}, {Name: "Content-Type", Value: "application/json"}}}, "API_TOKEN")
			resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, req)
			if ferr != nil {
				t.Fatal(ferr)
			}
			mu.Lock()
			g := got
			mu.Unlock()
			if resp.Status != 200 || !g.ok {
				t.Fatalf("server refused the signature: status %d, body %s", resp.Status, resp.Body)
			}
			sig := g.r.Header.Get("X-Sig")
			if strings.Contains(string(resp.Body), sig) || strings.Contains(header(resp.Headers, "X-Echo-X-Sig"), sig) || !strings.Contains(string(resp.Body), "X-Sig: [REDACTED:API_TOKEN]") {
				t.Errorf("signature echoed back unredacted: %s", resp.Body)
			}
			if strings.Contains(e.audit.raw(), sig) || strings.Contains(e.audit.raw(), key) {
				t.Errorf("audit log holds the signature or key")
			}
			// The same verifier refuses the request once anything signed changed.
			for name, tamper := range map[string]func(r *http.Request, b []byte) []byte{
				"body":   func(r *http.Request, b []byte) []byte { return []byte(`{"qty":300}`) },
				"method": func(r *http.Request, b []byte) []byte { r.Method = "PUT"; return b },
				"query":  func(r *http.Request, b []byte) []byte { r.RequestURI = "/v1/orders/a%20b?z=2&a=two"; return b },
				"path":   func(r *http.Request, b []byte) []byte { r.RequestURI = "/v1/admin?z=1&a=two"; return b },
				"old timestamp": func(r *http.Request, b []byte) []byte {
					r.Header.Set("X-Ts", strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10))
					return b
				},
			} {
				r := g.r.Clone(context.Background())
				if hmacVerify([]byte(key), alg.h, r, tamper(r, g.body), "X-Sig", "X-Ts") {
					t.Errorf("tampered %s: still verified", name)
				}
			}
		})
	}
}

// sigv4Check recomputes the signature of a request received by a server
// with the AWS SDK for Go v2's signer (the independent implementation)
// from the headers the request says it signed, and compares.
func sigv4Check(r *http.Request, body []byte, secretKey, sessionToken string, s3 bool) (bool, string) {
	m := regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$`).FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return false, "no SigV4 Authorization header"
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return false, "bad X-Amz-Date"
	}
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return false, err.Error()
	}
	u.Scheme, u.Host = "https", r.Host
	vr := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}, ContentLength: int64(len(body))}
	for _, h := range strings.Split(m[5], ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		vr.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	sum := sha256.Sum256(body)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = s3 })
	creds := aws.Credentials{AccessKeyID: m[1], SecretAccessKey: secretKey, SessionToken: sessionToken}
	if err := signer.SignHTTP(context.Background(), creds, vr, hex.EncodeToString(sum[:]), m[4], m[3], when); err != nil {
		return false, err.Error()
	}
	want := vr.Header.Get("Authorization")
	if subtle.ConstantTimeCompare([]byte(want), []byte(r.Header.Get("Authorization"))) != 1 {
		return false, "signature mismatch: SDK computed " + want
	}
	return true, ""
}

// TestSigV4VerifiedByAWSSDK: requests maiden signs are verified by the AWS
// SDK for Go v2's v4 signer in a loopback TLS server, for S3 (path signed
// as sent) and another service (path escaped again), with a session token,
// a body, a query out of order and a tool's own headers; a tampered copy
// of each is refused by the same verifier, and the signature and derived
// key never reach the tool or the audit log.
func TestSigV4VerifiedByAWSSDK(t *testing.T) {
	const secretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	const token = "FQoGZXIvYXdzEXAMPLESESSIONTOKEN"
	type seen struct {
		r    *http.Request
		body []byte
	}
	var mu sync.Mutex
	var got seen
	for _, tc := range []struct {
		name, service, method, path string
		body                        string
		session                     bool
	}{
		{"s3 get", "s3", "GET", "/bucket/a%20b/c~d.txt?versionId=3&list-type=2&prefix=x%2Fy&a-b=1&a=2", "", false},
		{"execute-api post with session", "execute-api", "POST", "/prod/v1/items/it%C3%A9m?b=2&a=1&a=0", `{"name":"x"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *server
			s = startServer(t, func(w http.ResponseWriter, r *http.Request) {
				_, body := s.lastRequest() // the wrapper read it
				mu.Lock()
				got = seen{r.Clone(context.Background()), body}
				mu.Unlock()
				tok := ""
				if tc.session {
					tok = token
				}
				if ok, why := sigv4Check(r, body, secretKey, tok, tc.service == "s3"); !ok {
					http.Error(w, why, http.StatusForbidden)
					return
				}
				echoAll(w, r)
			}, false)
			spec := credential.Spec{Kind: credential.SigV4, AccessKeyID: "AKIDEXAMPLE", Region: "eu-west-1", Service: tc.service, SessionToken: tc.session}
			e, p := credEnv(t, spec, secretKey, s.port)
			e.secrets["API_TOKEN_SESSION_TOKEN"] = token
			req := withCred(Request{Method: tc.method, URL: urlFor(s, "api.example.com", tc.path), Body: []byte(tc.body),
				Headers: []Header{{Name: "X-Amz-Meta-Note", Value: "a   b"}, {Name: "X-Amz-Date", Value: "19700101T000000Z"}, {Name: "Content-Type", Value: "application/json"}}}, "API_TOKEN")
			resp, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, req)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if resp.Status != 200 {
				t.Fatalf("the AWS SDK verifier refused maiden's signature: %d %s", resp.Status, resp.Body)
			}
			mu.Lock()
			g := got
			mu.Unlock()
			auth := g.r.Header.Get("Authorization")
			sig := auth[strings.LastIndex(auth, "=")+1:]
			if strings.Contains(string(resp.Body), sig) || !strings.Contains(string(resp.Body), "[REDACTED:API_TOKEN]") {
				t.Errorf("signature echoed back unredacted: %s", resp.Body)
			}
			if tc.session && (strings.Contains(string(resp.Body), token) || !strings.Contains(string(resp.Body), "[REDACTED:API_TOKEN_SESSION_TOKEN]")) {
				t.Errorf("session token echoed back unredacted: %s", resp.Body)
			}
			if a := e.audit.raw(); strings.Contains(a, sig) || strings.Contains(a, secretKey) || strings.Contains(a, token) {
				t.Errorf("audit log holds a signature, key or token: %s", a)
			}
			for name, tamper := range map[string]func(r *http.Request, b []byte) []byte{
				"body":          func(r *http.Request, b []byte) []byte { return append(b, ' ') },
				"method":        func(r *http.Request, b []byte) []byte { r.Method = "DELETE"; return b },
				"path":          func(r *http.Request, b []byte) []byte { r.RequestURI = "/other" + r.RequestURI; return b },
				"signed header": func(r *http.Request, b []byte) []byte { r.Header.Set("X-Amz-Meta-Note", "changed"); return b },
				"host":          func(r *http.Request, b []byte) []byte { r.Host = "evil.example.net"; return b },
				"date":          func(r *http.Request, b []byte) []byte { r.Header.Set("X-Amz-Date", "20200101T000000Z"); return b },
			} {
				r := g.r.Clone(context.Background())
				tok := ""
				if tc.session {
					tok = token
				}
				if ok, _ := sigv4Check(r, tamper(r, g.body), secretKey, tok, tc.service == "s3"); ok {
					t.Errorf("tampered %s: the verifier still accepted it", name)
				}
			}
		})
	}
}

// clientCert makes a self-signed client certificate and writes its PEM to
// a file; it returns the file and the key's PEM (the secret's value).
func clientCert(t *testing.T) (certFile, keyPEM string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "maiden-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// certServer is a loopback TLS server that asks for a client
// certificate (auth) and reports the subjects it was shown.
func certServer(t *testing.T, auth tls.ClientAuthType) (*httptest.Server, uint16, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var cns []string
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for _, c := range r.TLS.PeerCertificates {
			cns = append(cns, c.Subject.CommonName)
		}
		mu.Unlock()
		w.Write([]byte("certificates: " + strconv.Itoa(len(r.TLS.PeerCertificates))))
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{getPKI(t).leaf}, ClientAuth: auth}
	s.StartTLS()
	t.Cleanup(s.Close)
	port := netip.MustParseAddrPort(s.Listener.Addr().String()).Port()
	return s, port, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(cns) }
}

// TestMTLSOnlyToItsDestination: a loopback server that requires a client
// certificate gets maiden's with the credential; without it (same host,
// same policy) the handshake fails, since the policy's ordinary pool never
// holds a connection that presented it; another allowed server, which
// asks for any certificate, never sees it, and the credential is refused
// for that host before anything is sent.
func TestMTLSOnlyToItsDestination(t *testing.T) {
	certFile, keyPEM := clientCert(t)
	_, port, shown := certServer(t, tls.RequireAnyClientCert)
	_, otherPort, otherShown := certServer(t, tls.RequestClientCert)
	e, p := credEnv(t, credential.Spec{Kind: credential.MTLS, CertFile: certFile}, keyPEM, port, otherPort)
	ctx := ctxTimeout(t, 10*time.Second)
	api := "https://api.example.com:" + strconv.Itoa(int(port)) + "/"
	resp, ferr := e.gate.Fetch(ctx, p, withCred(get(api), "API_TOKEN"))
	if ferr != nil {
		t.Fatal(ferr)
	}
	if string(resp.Body) != "certificates: 1" || !slices.Equal(shown(), []string{"maiden-client"}) {
		t.Fatalf("server got %q, subjects %v", resp.Body, shown())
	}
	// Without the credential: the ordinary pool, no certificate.
	if _, ferr := e.gate.Fetch(ctx, p, get(api)); ferr == nil || ferr.Kind != FetchFailed {
		t.Fatalf("a request without the credential reached a server that requires a certificate: %v", ferr)
	}
	// Another allowed host: its server asks, and sees none.
	other := "https://other.example.com:" + strconv.Itoa(int(otherPort)) + "/"
	resp, ferr = e.gate.Fetch(ctx, p, get(other))
	if ferr != nil || string(resp.Body) != "certificates: 0" {
		t.Fatalf("other host: %v %v", resp, ferr)
	}
	_, ferr = e.gate.Fetch(ctx, p, withCred(get(other), "API_TOKEN"))
	if ferr == nil || ferr.Rule != RuleCredentialDestination {
		t.Fatalf("credential for another host: %v, want rule %s", ferr, RuleCredentialDestination)
	}
	if len(otherShown()) != 0 {
		t.Errorf("the other server saw a client certificate: %v", otherShown())
	}
	// A key that is not the certificate's is refused, naming nothing of it.
	_, wrongKey := clientCert(t)
	e.secrets["API_TOKEN"] = wrongKey
	_, ferr = e.gate.Fetch(ctx, p, withCred(get(api), "API_TOKEN"))
	if ferr == nil || ferr.Rule != RuleCredentialInvalid || strings.Contains(ferr.Message, "PRIVATE") {
		t.Fatalf("wrong key: %v", ferr)
	}
	if strings.Contains(e.audit.raw(), "PRIVATE KEY") {
		t.Error("audit log holds the key")
	}
}

// TestCredentialHostileRequests: a tool trying to make the host sign or
// attach for another host, or to reuse a signing key as a header value,
// is refused with the specific rule before anything is sent.
func TestCredentialHostileRequests(t *testing.T) {
	var otherHits atomic.Int64
	other := startServer(t, func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }, false)
	api := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		// An allowed server that redirects to a host the secret is not bound to.
		http.Redirect(w, r, urlFor(other, "other.example.com", "/steal"), http.StatusFound)
	}, false)
	spec := credential.Spec{Kind: credential.HMAC, Algorithm: "sha256"}
	e, p := credEnv(t, spec, "hmac-key-0123456789", api.port, other.port)
	ctx := ctxTimeout(t, 10*time.Second)
	resp, ferr := e.gate.Fetch(ctx, p, withCred(get(urlFor(api, "api.example.com", "/")), "API_TOKEN"))
	if ferr != nil || resp.Status != http.StatusFound {
		t.Fatalf("redirecting server: %v %v", resp, ferr)
	}
	if otherHits.Load() != 0 {
		t.Fatal("the gate followed a redirect")
	}
	for _, tc := range []struct {
		name string
		req  Request
		rule string
	}{
		{"another host", withCred(get(urlFor(other, "other.example.com", "/")), "API_TOKEN"), RuleCredentialDestination},
		{"Host header", withCred(Request{URL: urlFor(api, "api.example.com", "/"), Headers: []Header{{Name: "Host", Value: "other.example.com"}}}, "API_TOKEN"), RuleHeaderRefused},
		{"userinfo naming the bound host", withCred(get("https://api.example.com@other.example.com:"+strconv.Itoa(int(other.port))+"/"), "API_TOKEN"), RuleUserinfo},
		{"absolute URL as path", withCred(get(urlFor(other, "other.example.com", "/https://api.example.com/")), "API_TOKEN"), RuleCredentialDestination},
		{"signing key as a header secret", Request{URL: urlFor(api, "api.example.com", "/"), Headers: []Header{{Name: "X-Key", Value: "hmac-key-0123456789"}}, HeaderSecrets: []string{"API_TOKEN"}}, RuleCredentialKind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ferr := e.gate.Fetch(ctx, p, tc.req)
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != tc.rule {
				t.Fatalf("got %v, want denied by rule %s", ferr, tc.rule)
			}
		})
	}
	if otherHits.Load() != 0 {
		t.Errorf("the other host got %d requests", otherHits.Load())
	}
}

// TestHMACSignatureNotReplayedByTheTool: a tool that learnt the signature
// and timestamp of a request maiden signed (here: the test hands them over,
// as an API that shows an earlier request to a later caller would) cannot
// send them itself: the signature header, in any spelling a server reads
// as it, is refused on a request that does not attach the credential, to
// the bound host or any other of the tool's, before anything is sent. The
// same request signed by maiden, and a tool's own timestamp header, pass.
func TestHMACSignatureNotReplayedByTheTool(t *testing.T) {
	const key = "whsec_replay_0123456789"
	var mu sync.Mutex
	var verified, got int
	var sig, ts string
	var s *server
	s = startServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, body := s.lastRequest()
		ok := hmacVerify([]byte(key), sha256.New, r, body, "X-Sig", "X-Ts")
		mu.Lock()
		defer mu.Unlock()
		got++
		if ok {
			verified++
			sig, ts = r.Header.Get("X-Sig"), r.Header.Get("X-Ts")
		}
	}, false)
	spec := credential.Spec{Kind: credential.HMAC, Algorithm: "sha256", SignatureHeader: "X-Sig", TimestampHeader: "X-Ts"}
	e, p := credEnv(t, spec, key, s.port)
	ctx := ctxTimeout(t, 10*time.Second)
	signed := Request{Method: "POST", URL: urlFor(s, "api.example.com", "/v1/orders?id=7"), Body: []byte(`{"qty":3}`)}
	if resp, ferr := e.gate.Fetch(ctx, p, withCred(signed, "API_TOKEN")); ferr != nil || resp.Status != 200 {
		t.Fatalf("signed request: %v %v", resp, ferr)
	}
	mu.Lock()
	if verified != 1 || sig == "" {
		mu.Unlock()
		t.Fatalf("the server verified %d requests, want the signed one", verified)
	}
	leaked, when := sig, ts
	mu.Unlock()
	for _, tc := range []struct {
		name, url, header string
	}{
		{"as signed", urlFor(s, "api.example.com", "/v1/orders?id=7"), "X-Sig"},
		{"lower case", urlFor(s, "api.example.com", "/v1/orders?id=7"), "x-sig"},
		{"CGI spelling", urlFor(s, "api.example.com", "/v1/orders?id=7"), "X_Sig"},
		{"to a host the secret is not bound to", urlFor(s, "other.example.com", "/v1/orders?id=7"), "X-Sig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay := signed
			replay.URL = tc.url
			replay.Headers = []Header{{Name: tc.header, Value: leaked}, {Name: "X-Ts", Value: when}}
			_, ferr := e.gate.Fetch(ctx, p, replay)
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != RuleHeaderRefused || !strings.Contains(ferr.Message, `signature of credential "API_TOKEN"`) {
				t.Fatalf("replay with %s: %v, want denied by rule %s naming the credential", tc.header, ferr, RuleHeaderRefused)
			}
		})
	}
	mu.Lock()
	n, v := got, verified
	mu.Unlock()
	if n != 1 || v != 1 {
		t.Fatalf("the server got %d requests (%d verified) after the replays; want only the signed one", n, v)
	}
	// Controls: maiden signs the same request again; a tool's own
	// timestamp header alone is not a signature.
	if resp, ferr := e.gate.Fetch(ctx, p, withCred(signed, "API_TOKEN")); ferr != nil || resp.Status != 200 {
		t.Fatalf("signed again: %v %v", resp, ferr)
	}
	plain := signed
	plain.Headers = []Header{{Name: "X-Ts", Value: when}}
	if resp, ferr := e.gate.Fetch(ctx, p, plain); ferr != nil || resp.Status != 200 {
		t.Fatalf("a request with the tool's own X-Ts: %v %v", resp, ferr)
	}
	mu.Lock()
	defer mu.Unlock()
	if got != 3 || verified != 2 {
		t.Errorf("the server got %d requests (%d verified); want 3 (2)", got, verified)
	}
}

// TestSessionTokenMissing: a SigV4 secret that needs its session token
// part is refused when that part has no value, naming the variable to set.
func TestSessionTokenMissing(t *testing.T) {
	s := startServer(t, echoAll, false)
	spec := credential.Spec{Kind: credential.SigV4, AccessKeyID: "AKID", Region: "r", Service: "s", SessionToken: true}
	e, p := credEnv(t, spec, "secret", s.port)
	_, ferr := e.gate.Fetch(ctxTimeout(t, 10*time.Second), p, withCred(get(urlFor(s, "api.example.com", "/")), "API_TOKEN"))
	if ferr == nil || ferr.Rule != RuleCredentialMissing || !strings.Contains(ferr.Message, "MAIDEN_SECRET_API_TOKEN_SESSION_TOKEN") {
		t.Fatalf("got %v", ferr)
	}
	if s.reqs.Load() != 0 {
		t.Error("request sent")
	}
}

// TestMTLSRotationEvictsOldPool: the same client key, written anew in
// another encoding (PKCS #8), is another value: it gets a pool of its
// own and the old key's pool is dropped, its idle connections closed.
func TestMTLSRotationEvictsOldPool(t *testing.T) {
	certFile, keyPEM := clientCert(t)
	_, port, _ := certServer(t, tls.RequireAnyClientCert)
	e, p := credEnv(t, credential.Spec{Kind: credential.MTLS, CertFile: certFile}, keyPEM, port)
	ctx := ctxTimeout(t, 10*time.Second)
	api := "https://api.example.com:" + strconv.Itoa(int(port)) + "/"
	pools := func() int {
		n := 0
		p.mtls.Range(func(any, any) bool { n++; return true })
		return n
	}
	if _, ferr := e.gate.Fetch(ctx, p, withCred(get(api), "API_TOKEN")); ferr != nil || pools() != 1 {
		t.Fatalf("%v, %d pools", ferr, pools())
	}
	b, _ := pem.Decode([]byte(keyPEM))
	k, err := x509.ParseECPrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	e.secrets["API_TOKEN"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if _, ferr := e.gate.Fetch(ctx, p, withCred(get(api), "API_TOKEN")); ferr != nil {
		t.Fatal(ferr)
	}
	if n := pools(); n != 1 {
		t.Fatalf("%d client-certificate pools after the key was rotated, want 1 (the old one evicted)", n)
	}
}

// TestBasicPairRedactedFromEveryAnswer: the basic kind's encoded pair,
// base64(username:value), is the password in another spelling that any
// server accepts for as long as the password holds, so it is redacted
// from every answer of the policy like the value itself, not only from
// the answer to the request it was attached to: here the API shows a later
// request, which carries no credential, the headers it was sent before.
// (The value's own encodings already hide every character it determines
// alone; without the pair, the characters at its edges were left.)
func TestBasicPairRedactedFromEveryAnswer(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/seen" {
			w.Write([]byte(strings.Join(sent, "\n")))
			return
		}
		sent = append(sent, "Authorization: "+r.Header.Get("Authorization"))
		w.Write([]byte("ok"))
	}, false)
	e, p := credEnv(t, credential.Spec{Kind: credential.Basic, Username: "ann"}, "s3cr3t-value", s.port)
	ctx := ctxTimeout(t, 10*time.Second)
	if _, ferr := e.gate.Fetch(ctx, p, withCred(get(urlFor(s, "api.example.com", "/")), "API_TOKEN")); ferr != nil {
		t.Fatal(ferr)
	}
	// base64("ann:s3cr3t-value"): "ann:" is four bytes, so the characters
	// at the value's edges hold bits of it and of its neighbours.
	const pair = "YW5uOnMzY3IzdC12YWx1ZQ=="
	if last, _ := s.lastRequest(); last.Header.Get("Authorization") != "Basic "+pair {
		t.Fatalf("server got Authorization %q, want the basic pair", last.Header.Get("Authorization"))
	}
	resp, ferr := e.gate.Fetch(ctx, p, get(urlFor(s, "api.example.com", "/seen")))
	if ferr != nil {
		t.Fatal(ferr)
	}
	if strings.Contains(string(resp.Body), pair) {
		t.Fatalf("a request without the credential got the basic pair back: %s", resp.Body)
	}
	if want := "Authorization: Basic [REDACTED:API_TOKEN]"; !strings.Contains(string(resp.Body), want) {
		t.Errorf("the API's log, as the tool got it: %s; want %q", resp.Body, want)
	}
}
