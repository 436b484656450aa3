package egress

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
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
)

// testPKI is a private CA, unknown to the system pool, and a leaf for the
// names the tests use. evil.example.net is deliberately not on it.
type testPKI struct {
	caFile string
	leaf   tls.Certificate
}

var (
	pkiOnce sync.Once
	pki     testPKI
	pkiErr  error
)

func getPKI(t testing.TB) testPKI {
	t.Helper()
	pkiOnce.Do(func() { pki, pkiErr = makePKI() })
	if pkiErr != nil {
		t.Fatal(pkiErr)
	}
	return pki
}

func makePKI() (testPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return testPKI{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "maiden egress test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return testPKI{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return testPKI{}, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "api.example.com"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		DNSNames:     []string{"api.example.com", "a.example.com", "other.example.com", "localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("127.0.0.2"), net.ParseIP("::1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return testPKI{}, err
	}
	dir, err := os.MkdirTemp("", "maiden-egress-ca-")
	if err != nil {
		return testPKI{}, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return testPKI{}, err
	}
	return testPKI{caFile: caFile, leaf: tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}, nil
}

// server is a real TLS (or plain) server on loopback that counts what
// reaches it.
type server struct {
	*httptest.Server
	port  uint16
	conns atomic.Int64 // TCP connections accepted
	reqs  atomic.Int64 // requests handled

	mu   sync.Mutex
	last *http.Request // headers etc. of the last request (body not kept)
	body []byte
}

func (s *server) lastRequest() (*http.Request, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.body
}

// startServer starts h on 127.0.0.1 (or on addr, "127.0.0.2:PORT" say)
// with the test leaf certificate; plain starts it without TLS.
func startServer(t testing.TB, h http.HandlerFunc, plain bool, addr ...string) *server {
	t.Helper()
	s := &server{}
	wrapped := func(w http.ResponseWriter, r *http.Request) {
		s.reqs.Add(1)
		body, _ := readAllLimited(r)
		s.mu.Lock()
		s.last, s.body = r.Clone(context.Background()), body
		s.mu.Unlock()
		h(w, r)
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(wrapped))
	if len(addr) > 0 {
		l, err := net.Listen("tcp", addr[0])
		if err != nil {
			t.Skipf("cannot listen on %s: %v", addr[0], err)
		}
		s.Listener.Close()
		s.Listener = l
	}
	// Handshake failures are expected in some tests; keep them out of the output.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if plain {
		s.Start()
	} else {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{getPKI(t).leaf}}
		s.StartTLS()
	}
	t.Cleanup(s.Close)
	ap := netip.MustParseAddrPort(s.Listener.Addr().String())
	s.port = ap.Port()
	return s
}

func readAllLimited(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(nil, r.Body, 1<<20))
	return b.Bytes(), err
}

// resolver answers for test names. answers(n) gives the answer to the
// n-th lookup of a name (from 1), so a test can change its mind the way a
// rebinding DNS server does. It is the only simulated part of these tests.
// Names are set and counted without a trailing dot, as the gate checks
// them; the gate asks for the absolute name (api.example.com.), which
// TestLookupAbsoluteName holds it to.
type resolver struct {
	mu      sync.Mutex
	answers map[string]func(n int) []netip.Addr
	count   map[string]int
	total   atomic.Int64
	block   bool // wait for ctx instead of answering
}

func newResolver() *resolver {
	return &resolver{answers: map[string]func(int) []netip.Addr{}, count: map[string]int{}}
}

// set makes host always resolve to addrs.
func (r *resolver) set(host string, addrs ...string) *resolver {
	as := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		as[i] = netip.MustParseAddr(a)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = func(int) []netip.Addr { return as }
	return r
}

func (r *resolver) setFunc(host string, f func(n int) []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = f
}

func (r *resolver) lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[host]
}

func (r *resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.total.Add(1)
	if r.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r.mu.Lock()
	key := strings.TrimSuffix(host, ".")
	r.count[key]++
	n := r.count[key]
	f := r.answers[key]
	r.mu.Unlock()
	if network != "ip" {
		return nil, fmt.Errorf("unexpected network %q", network)
	}
	if f == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return f(n), nil
}

// auditLog captures audit events as decoded JSON objects.
type auditLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *auditLog) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.Write(p)
}

func (a *auditLog) raw() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

func (a *auditLog) events(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(a.raw()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func (a *auditLog) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(a, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// env is one test's world: a resolver, an audit log, secrets, a gate.
type env struct {
	res     *resolver
	audit   *auditLog
	secrets map[string]string
	gate    *Gate
}

func newEnv(t testing.TB) *env {
	e := &env{res: newResolver(), audit: &auditLog{}, secrets: map[string]string{}}
	e.gate = New(&Options{
		Resolver: e.res,
		Audit:    e.audit.logger(),
		LookupSecret: func(name string) (string, bool) {
			v, ok := e.secrets[name]
			return v, ok
		},
	})
	return e
}

// toolFor is a policy that can reach s as api.example.com (resolved to
// 127.0.0.1, allowed by 127.0.0.0/8), with secret API_TOKEN declared.
func toolFor(t testing.TB, ports ...uint16) Rules {
	return Rules{
		Hosts:            []string{"api.example.com"},
		Secrets:          []string{"API_TOKEN"},
		Ports:            ports,
		AllowCIDRs:       []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		CAFiles:          []string{getPKI(t).caFile},
		MaxResponseBytes: DefaultMaxResponseBytes,
	}
}

func mustPolicy(t testing.TB, rules Rules) *Policy {
	t.Helper()
	p, err := NewPolicy("fetcher", rules)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func urlFor(s *server, host, path string) string {
	scheme := "https"
	if s.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(int(s.port))) + path
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func get(url string) Request { return Request{URL: url} }

func withCred(req Request, name string) Request {
	req.Credential, req.HasCredential = name, true
	return req
}

func header(hs []Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// offLoopback counts the connections the gate tried to open off loopback
// during the package's tests (TestMain fails the run if any): every
// refusal test must refuse before the dial, and a planted bug that lets an
// address through must not send a packet anywhere.
var offLoopback atomic.Int64

// loopbackOnly wraps the gate's TCP connect (connectTCP) so that only
// loopback addresses (127.0.0.0/8, ::1, and their IPv4-mapped forms) are
// connected to; any other is refused before the kernel sees it.
func loopbackOnly(next func(context.Context, netip.AddrPort) (net.Conn, error)) func(context.Context, netip.AddrPort) (net.Conn, error) {
	return func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		if !ap.Addr().Unmap().IsLoopback() {
			offLoopback.Add(1)
			fmt.Fprintf(os.Stderr, "egress test guard: refused a connection to %s: a test connects only to loopback\n", ap)
			return nil, fmt.Errorf("test guard: %s is not loopback; a test connects only to loopback", ap)
		}
		return next(ctx, ap)
	}
}
