package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The CONNECT proxy is tested from outside the package, with real servers
// on loopback and a resolver that answers for test names (the only
// simulated part). Nothing here dials anything but 127.0.0.1.

type proxyEnv struct {
	proxy   *egress.ConnectProxy
	audit   *lockedBuf
	lookups *countingResolver
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) events(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	s := l.b.String()
	l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
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

type countingResolver struct {
	hosts testkit.Hosts
	n     atomic.Int64
}

func (r *countingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.n.Add(1)
	return r.hosts.LookupNetIP(ctx, network, host)
}

func newProxyEnv(t *testing.T, hosts testkit.Hosts) *proxyEnv {
	t.Helper()
	e := &proxyEnv{audit: &lockedBuf{}, lookups: &countingResolver{hosts: hosts}}
	g := egress.New(&egress.Options{Resolver: e.lookups, Audit: slogJSON(e.audit)})
	p, err := egress.NewConnectProxy(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	e.proxy = p
	return e
}

func policy(t *testing.T, r egress.Rules) *egress.Policy {
	t.Helper()
	p, err := egress.NewPolicy("cli", r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// countingListener is a loopback TCP listener that counts connections
// and closes them.
func countingListener(t *testing.T) (port int, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

// rawConnect sends one CONNECT with the given Proxy-Authorization value
// ("" for none) and returns the proxy's status and body.
func rawConnect(t *testing.T, proxyPort int, target, auth string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(proxyPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body)
}

func basic(s *egress.ProxySession) string {
	u, err := url.Parse(s.URL())
	if err != nil {
		panic(err)
	}
	pw, _ := u.User.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
}

func lastEvent(t *testing.T, e *proxyEnv) map[string]any {
	t.Helper()
	evs := e.audit.events(t)
	if len(evs) == 0 {
		t.Fatal("no audit event")
	}
	return evs[len(evs)-1]
}

// An allowed host is tunnelled end to end to a real TLS server: the
// client verifies the server's certificate for the name it asked for, so
// the proxy cannot have terminated TLS, and the audit event names the
// checked address.
func TestConnectProxyTunnelsAllowedHost(t *testing.T) {
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}), "api.example.com")
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	e := newProxyEnv(t, testkit.Loopback("api.example.com"))
	s, err := e.proxy.Open(policy(t, egress.Rules{
		Hosts: []string{"api.example.com"}, Ports: []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}), nil, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	proxyURL, _ := url.Parse(s.URL())
	client := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(proxyURL),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}, Timeout: 10 * time.Second}
	resp, err := client.Get("https://api.example.com:" + strconv.Itoa(port) + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello /x" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	ev := lastEvent(t, e)
	if ev["msg"] != "http-fetch" || ev["method"] != "CONNECT" || ev["decision"] != "allow" || ev["host"] != "api.example.com" ||
		ev["addr"] != "127.0.0.1:"+strconv.Itoa(port) || ev["agent"] != "agent-1" || ev["tool"] != "cli" {
		t.Fatalf("audit event %v", ev)
	}
	if strings.Contains(e.audit.b.String(), strings.TrimPrefix(basic(s), "Basic ")) {
		t.Fatal("the audit log holds the session's credential")
	}
}

// The same with curl from the distribution, the way a wrapped CLI would
// use HTTPS_PROXY (curl asks the proxy to resolve the name).
func TestConnectProxyWithCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("MAIDEN_CI") != "" {
			t.Fatal("curl is not installed (make test installs it, see scripts/deps)")
		}
		t.Skip("curl is not installed")
	}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "through the gate")
	}), "api.example.com")
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	e := newProxyEnv(t, testkit.Loopback("api.example.com"))
	s, err := e.proxy.Open(policy(t, egress.Rules{
		Hosts: []string{"api.example.com"}, Ports: []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(host string) (string, error) {
		cmd := exec.Command(curl, "-sS", "--max-time", "10", "--cacert", ca, "https://"+host+":"+strconv.Itoa(port)+"/")
		cmd.Env = []string{"HTTPS_PROXY=" + s.URL()}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("api.example.com")
	if err != nil || out != "through the gate" {
		t.Fatalf("allowed host: %v: %s", err, out)
	}
	before := e.lookups.n.Load()
	out, err = run("other.example.com")
	if err == nil || !strings.Contains(out, "403") {
		t.Fatalf("host off the list: %v: %s", err, out)
	}
	if e.lookups.n.Load() != before {
		t.Fatal("a host off the list was looked up")
	}
}

func TestConnectProxyRefusals(t *testing.T) {
	lport, accepted := countingListener(t)
	hosts := testkit.Loopback("api.example.com", "loop.example.com")
	hosts["internal.example.com"] = []netip.Addr{netip.MustParseAddr("10.1.2.3")}
	e := newProxyEnv(t, hosts)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	open := func(r egress.Rules, a egress.Authorizer) *egress.ProxySession {
		s, err := e.proxy.Open(policy(t, r), a, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	ports := []uint16{uint16(lport)}
	allowed := open(egress.Rules{Hosts: []string{"api.example.com", "internal.example.com"}, Ports: ports, AllowCIDRs: loopback}, nil)
	noCIDR := open(egress.Rules{Hosts: []string{"loop.example.com"}, Ports: ports}, nil)
	denier := open(egress.Rules{Hosts: []string{"api.example.com"}, Ports: ports, AllowCIDRs: loopback},
		func(host string, port int, cred string) error {
			return &egress.Refusal{Rule: "card", Reason: "no card grants net:connect " + host}
		})
	closed := open(egress.Rules{Hosts: []string{"api.example.com"}, Ports: ports, AllowCIDRs: loopback}, nil)
	closedAuth := basic(closed)
	closed.Close()
	wrongToken := basic(allowed)
	wrongToken = wrongToken[:len(wrongToken)-4] + "AAAA"
	target := func(h string) string { return h + ":" + strconv.Itoa(lport) }

	cases := []struct {
		name, target, auth string
		status             int
		rule               string
		lookups            int64
	}{
		{"no credential", target("api.example.com"), "", 407, egress.RuleProxyCredential, 0},
		{"wrong token", target("api.example.com"), wrongToken, 407, egress.RuleProxyCredential, 0},
		{"closed session", target("api.example.com"), closedAuth, 407, egress.RuleProxyCredential, 0},
		{"not basic", target("api.example.com"), "Bearer x", 407, egress.RuleProxyCredential, 0},
		{"host off the list", target("evil.example.com"), basic(allowed), 403, egress.RuleAllowlist, 0},
		{"ip literal off the list", target("127.0.0.1"), basic(allowed), 403, egress.RuleIPLiteral, 0},
		{"port off the list", "api.example.com:22", basic(allowed), 403, egress.RulePort, 0},
		{"private address", target("internal.example.com"), basic(allowed), 403, "private-range", 1},
		{"loopback without a CIDR", target("loop.example.com"), basic(noCIDR), 403, "loopback", 1},
		{"caller's cards", target("api.example.com"), basic(denier), 403, "card", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.lookups.n.Load()
			status, body := rawConnect(t, e.proxy.Port(), c.target, c.auth)
			if status != c.status {
				t.Fatalf("status %d (%s), want %d", status, body, c.status)
			}
			ev := lastEvent(t, e)
			if ev["decision"] != "deny" || (c.rule != "" && ev["rule"] != c.rule) {
				t.Fatalf("audit event %v, want a denial by %q", ev, c.rule)
			}
			if got := e.lookups.n.Load() - before; got != c.lookups {
				t.Fatalf("%d lookups, want %d", got, c.lookups)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the listener behind refused CONNECTs accepted %d connections", n)
	}
	// The positive control: the same listener through the allowed session
	// is reached, so the zero above is not an unreachable listener.
	if status, body := rawConnect(t, e.proxy.Port(), target("api.example.com"), basic(allowed)); status != 200 {
		t.Fatalf("allowed CONNECT: %d %s", status, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for accepted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if accepted.Load() != 1 {
		t.Fatalf("allowed CONNECT reached the listener %d times", accepted.Load())
	}
}

// Two sessions with different policies share the proxy: each credential
// carries exactly its own policy, even when used concurrently.
func TestConnectProxySessionsAreSeparate(t *testing.T) {
	lport, _ := countingListener(t)
	e := newProxyEnv(t, testkit.Loopback("a.example.com", "b.example.com"))
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	mk := func(host string) *egress.ProxySession {
		s, err := e.proxy.Open(policy(t, egress.Rules{Hosts: []string{host}, Ports: []uint16{uint16(lport)}, AllowCIDRs: loopback}), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := mk("a.example.com"), mk("b.example.com")
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for i := 0; i < 10; i++ {
		for _, c := range []struct {
			s      *egress.ProxySession
			host   string
			status int
		}{{a, "a.example.com", 200}, {a, "b.example.com", 403}, {b, "b.example.com", 200}, {b, "a.example.com", 403}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := rawConnect(t, e.proxy.Port(), c.host+":"+strconv.Itoa(lport), basic(c.s))
				if status != c.status {
					errs <- fmt.Sprintf("%s: %d %s, want %d", c.host, status, body, c.status)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Closing a session (the call ended) closes its open tunnels and refuses
// its credential from then on.
func TestConnectProxySessionCloseEndsTunnels(t *testing.T) {
	// An echo server speaking TLS as echo.example.com: the proxy carries
	// only a tunnel whose ClientHello names the host it checked.
	named, ca := testkit.TLSServer(t, http.NotFoundHandler(), "echo.example.com")
	pemCA, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemCA)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(raw, &tls.Config{Certificates: named.TLS.Certificates})
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	lport := ln.Addr().(*net.TCPAddr).Port
	e := newProxyEnv(t, testkit.Loopback("echo.example.com"))
	s, err := e.proxy.Open(policy(t, egress.Rules{
		Hosts: []string{"echo.example.com"}, Ports: []uint16{uint16(lport)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	auth := basic(s)
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(e.proxy.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	target := "echo.example.com:" + strconv.Itoa(lport)
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+auth+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(&readerConn{c, br}, &tls.Config{ServerName: "echo.example.com", RootCAs: roots})
	tr := bufio.NewReader(tc)
	io.WriteString(tc, "ping\n")
	if line, err := tr.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("through the tunnel: %q %v", line, err)
	}
	s.Close()
	if _, err := tr.ReadString('\n'); err == nil {
		t.Fatal("the tunnel is still open after the session closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the tunnel is still open after the session closed (read timed out)")
	}
	if status, _ := rawConnect(t, e.proxy.Port(), target, auth); status != 407 {
		t.Fatalf("a closed session's credential: %d", status)
	}
}

// readerConn is a connection whose reads come through r (which may hold
// bytes already read from it).
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
