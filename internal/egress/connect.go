package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RuleProxyCredential is the rule of a CONNECT refused because its
// Proxy-Authorization named no live session or the wrong token.
const RuleProxyCredential = "proxy-credential"

// RuleServerName is the rule of a tunnel whose first bytes were not a TLS
// ClientHello naming the host its CONNECT was checked for: no SNI, another
// name, an encrypted ClientHello (whose real name the proxy cannot read),
// or no TLS at all. A server holding many names on one address (a CDN,
// a cloud front end, shared hosting) answers for the name the client
// sends, so the CONNECT's host alone would not bound where a CLI reaches.
const RuleServerName = "tls-server-name"

const (
	// helloTimeout bounds the wait for a tunnel's ClientHello.
	helloTimeout = 10 * time.Second
	// maxHelloBytes bounds what is read for it (a ClientHello with
	// post-quantum key shares is a few KiB).
	maxHelloBytes = 64 << 10
)

// ConnectProxy is an HTTPS CONNECT proxy on 127.0.0.1 through which a
// wrapped CLI (operator-chosen native code, confined so that the proxy's
// port is the only TCP port it may connect to) reaches the network. Each
// CONNECT is decided by the same checks as http-fetch, in the same order:
// the target is normalised, the policy's host allowlist and ports apply,
// then the session's Authorizer (the caller's network cards), then one DNS
// lookup whose answers are classified (loopback and private ranges refused
// unless the policy's AllowCIDRs open them) and exactly those addresses are
// dialled. Each CONNECT is one audit event (message "http-fetch", method
// CONNECT, no path), allowed or refused. The bytes of an allowed tunnel are
// opaque to the proxy (TLS end to end between the CLI and the server),
// except the first: they must be a TLS ClientHello whose SNI is the checked
// host (for an IP literal, no name), not encrypted (ECH), or the tunnel is
// refused (rule tls-server-name) before the server gets a byte. A server
// holding many names on one address (a CDN) answers for the name the
// client sends, so without this a CLI allowed one name there reaches all.
//
// Identity is per call: [ConnectProxy.Open] makes a session with a random
// user name and token; the CLI gets them in HTTPS_PROXY and sends them as
// Proxy-Authorization on every CONNECT, and the proxy decides that CONNECT
// under the session's Policy and Authorizer. Concurrent calls with
// different policies share one proxy; a CONNECT without a live session's
// credential is refused (407) before anything else is looked at.
type ConnectProxy struct {
	gate *Gate
	ln   net.Listener
	srv  *http.Server
	port int

	mu       sync.Mutex
	sessions map[string]*ProxySession
	closed   bool
}

// ProxySession is one call's identity at the proxy. Close it when the call
// ends: its credential stops working and its open tunnels are closed.
type ProxySession struct {
	proxy     *ConnectProxy
	user      string
	token     string
	policy    *Policy
	authorize Authorizer
	each      func() (Authorizer, func(Tunnel)) // OpenEach's; nil: authorize decides every CONNECT
	caller    string

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
	refused string // the first CONNECT the gate refused: its reason, rule included
	stopped string // the first tunnel closed for what it could not pay (SetPay)

	sent atomic.Int64 // bytes its tunnels sent to servers (Sent)
	pay  *allotment   // SetPay's (under mu); nil: nothing is paid before it is sent
}

// SetPay makes the session's tunnels pay for what they send before they
// send it: pay(n) spends n bytes (of a bytes_out budget) or says why they
// may not be sent, and a tunnel that cannot pay is closed, both ways (the
// CLI sees its connection end, not a server's answer to half a request),
// the first such refusal the session's Stopped. Bytes are paid in blocks
// of up to tunnelBlock ahead (one payment per block, not per write), so
// what was paid may exceed Sent by a block: the caller, whose pay counts
// what it paid, settles against Sent. Call it before the session's URL is
// handed out.
func (s *ProxySession) SetPay(pay func(n int64) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pay = &allotment{pay: pay}
}

// allotment is SetPay's, or nil.
func (s *ProxySession) allotment() *allotment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pay
}

// tunnelBlock is how many bytes a tunnel pays for ahead of sending them.
const tunnelBlock = 64 << 10

// allotment is what a session's tunnels paid and have not sent yet.
type allotment struct {
	mu   sync.Mutex
	pay  func(n int64) error
	left int64 // paid, not yet sent
	paid int64
}

// take pays for n bytes about to be sent: from what is left of earlier
// payments, else a new block (or, where a block does not fit, exactly
// what is missing).
func (a *allotment) take(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.left >= n {
		a.left -= n
		return nil
	}
	need := n - a.left
	block := max(need, tunnelBlock)
	if err := a.pay(block); err != nil {
		if block == need {
			return err
		}
		if err := a.pay(need); err != nil {
			return err
		}
		block = need
	}
	a.paid += block
	a.left += block - n
	return nil
}

// Sent is how many bytes the session's tunnels have sent to servers: each
// allowed tunnel's ClientHello and everything the CLI sent after it (TLS
// records, opaque to the proxy). The call's bytes_out budget charges them
// as it charges a tool's http-fetch requests; read it after Close, when no
// tunnel sends more.
func (s *ProxySession) Sent() int64 { return s.sent.Load() }

// Refusal is the reason (naming its rule) of the first CONNECT of this
// session the gate refused, or "" if none was: what a CLI that then failed
// was stopped by.
func (s *ProxySession) Refusal() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// NewConnectProxy listens on 127.0.0.1 (an ephemeral port) and serves
// CONNECT requests through g until Close.
func NewConnectProxy(g *Gate) (*ConnectProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("egress proxy: listen on 127.0.0.1: %w", err)
	}
	p := &ConnectProxy{gate: g, ln: ln, sessions: map[string]*ProxySession{}}
	p.port = ln.Addr().(*net.TCPAddr).Port
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Port is the proxy's TCP port on 127.0.0.1: the one port a confined CLI
// may connect to.
func (p *ConnectProxy) Port() int { return p.port }

// Close stops the proxy and closes every session and tunnel.
func (p *ConnectProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ss := make([]*ProxySession, 0, len(p.sessions))
	for _, s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	for _, s := range ss {
		s.Close()
	}
	return p.srv.Close()
}

// Open makes a session for one call: CONNECTs carrying its credential are
// decided under policy (nil: no network) and authorize (nil: the policy
// alone); caller names the calling agent in audit events.
func (p *ConnectProxy) Open(policy *Policy, authorize Authorizer, caller string) (*ProxySession, error) {
	return p.open(policy, authorize, nil, caller)
}

func (p *ConnectProxy) open(policy *Policy, authorize Authorizer, each func() (Authorizer, func(Tunnel)), caller string) (*ProxySession, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("egress proxy: session credential: %w", err)
	}
	if policy == nil {
		policy = noNetwork
	}
	s := &ProxySession{
		proxy: p, user: "c" + hex.EncodeToString(b[:8]), token: hex.EncodeToString(b[8:]),
		policy: policy, authorize: authorize, each: each, caller: caller, tunnels: map[net.Conn]struct{}{},
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("egress proxy: closed")
	}
	p.sessions[s.user] = s
	return s, nil
}

// Tunnel is what the gate decided about one CONNECT of a session opened
// with OpenEach: the target as normalised (the raw authority when it did
// not parse), whether it was allowed, and the rule (RuleAllowed, the
// refusal's rule, or RuleFailed/RuleResolve for an allowed target that
// could not be reached). Reason is the gate's own words for a refusal
// (nothing from a server); empty otherwise.
type Tunnel struct {
	Host         string
	Port         int
	Allowed      bool
	Rule, Reason string
}

// OpenEach is Open for a session whose CONNECTs are each decided and
// reported on their own: for every CONNECT carrying the session's
// credential, each is called once; the Authorizer it returns decides that
// request after the policy (nil: the policy alone), and done is called
// once with the outcome, after the gate decided (the tunnel's ClientHello
// too: a refusal of rule RuleServerName) and before a byte is tunnelled to
// the server. Concurrent CONNECTs of one session never
// share a pair, so what the caller notes per request stays that request's
// (the host's audit records each tunnel with the decisions of the agent's
// cards).
func (p *ConnectProxy) OpenEach(policy *Policy, caller string, each func() (Authorizer, func(Tunnel))) (*ProxySession, error) {
	return p.open(policy, nil, each, caller)
}

// URL is the value for the CLI's HTTPS_PROXY (and https_proxy):
// http://USER:TOKEN@127.0.0.1:PORT. It holds the session's token: pass it
// to the CLI's environment only, never to a log.
func (s *ProxySession) URL() string {
	return "http://" + s.user + ":" + s.token + "@127.0.0.1:" + strconv.Itoa(s.proxy.port)
}

// Close ends the session: its credential is refused from now on and its
// open tunnels are closed.
func (s *ProxySession) Close() {
	s.proxy.mu.Lock()
	if s.proxy.sessions[s.user] == s {
		delete(s.proxy.sessions, s.user)
	}
	s.proxy.mu.Unlock()
	s.mu.Lock()
	s.closed = true
	for c := range s.tunnels {
		c.Close()
	}
	s.mu.Unlock()
}

func (s *ProxySession) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.tunnels[c] = struct{}{}
	return true
}

func (s *ProxySession) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.tunnels, c)
	s.mu.Unlock()
}

// session returns the live session r's Proxy-Authorization names, if its
// token matches (compared in constant time).
func (p *ConnectProxy) session(r *http.Request) *ProxySession {
	user, token, ok := proxyBasicAuth(r.Header.Get("Proxy-Authorization"))
	if !ok {
		return nil
	}
	p.mu.Lock()
	s := p.sessions[user]
	p.mu.Unlock()
	if s == nil || subtle.ConstantTimeCompare([]byte(token), []byte(s.token)) != 1 {
		return nil
	}
	return s
}

func proxyBasicAuth(h string) (user, token string, ok bool) {
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

func (p *ConnectProxy) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ev := event{method: http.MethodConnect, host: rawHost("https://" + r.Host)}
	s := p.session(r)
	if s == nil {
		// No policy is known, so nothing of the request is checked or
		// looked up; the event names no tool.
		d := deny(RuleProxyCredential, "the proxy credential is missing, unknown or expired")
		ev.refuse(d)
		ev.duration = time.Since(start)
		p.gate.record(r.Context(), &ev)
		w.Header().Set("Proxy-Authenticate", `Basic realm="maiden"`)
		http.Error(w, d.Reason, http.StatusProxyAuthRequired)
		return
	}
	ev.tool, ev.caller = s.policy.tool, s.caller
	// A wrapped CLI holds its secrets' values (environment variables), so
	// its CONNECT target, and the gate's words quoting it, may carry one
	// (CONNECT VALUE.example.net:443): kept from the record, the caller's
	// tunnel report (its audit record and span) and the session's
	// refusal (shown to the agent), as the CLI's output is.
	ev.scrub = p.gate.RedactorIfAny(s.policy)
	authz, done := s.authorize, func(Tunnel) {}
	if s.each != nil {
		authz, done = s.each()
	}
	report := func() {
		t := Tunnel{Host: ev.scrubbed(ev.host), Port: ev.port, Allowed: ev.decision != "deny", Rule: ev.rule}
		if !t.Allowed {
			t.Reason = ev.scrubbed(ev.reason)
		}
		done(t)
	}
	refuse := func(d Ruling) {
		s.refuse(w, r, &ev, d, start)
		report()
	}
	if r.Method != http.MethodConnect {
		d := deny(RuleMethod, "the proxy takes only CONNECT (HTTPS through a tunnel), not %s", quote(r.Method))
		ev.method = truncate(r.Method, maxMethodLength)
		refuse(d)
		return
	}
	// The authority as the target of an https URL: the same normalisation
	// (host syntax, IDNA, IP literal forms, port) as http-fetch.
	t, d := normalizeURL("https://" + r.Host + "/")
	if d.Allow && (r.Host == "" || strings.ContainsAny(r.Host, "/?#@")) {
		d = deny(RuleURL, "CONNECT target %s is not host:port", quote(r.Host))
	}
	if d.Allow {
		ev.setTarget(t)
		ev.path = ""
		d = s.policy.checkTarget(t)
	}
	if d.Allow && authz != nil {
		d = authorize(authz, t, "")
	}
	if !d.Allow {
		refuse(d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dialTimeout)
	conn, _, err := (&dialer{p: s.policy, resolver: p.gate.resolver}).dial(ctx, net.JoinHostPort(t.host, strconv.Itoa(int(t.port))), false)
	cancel()
	if err != nil {
		var de *deniedError
		if errors.As(err, &de) {
			refuse(de.d)
			return
		}
		var re *resolveError
		ev.rule = RuleFailed
		if errors.As(err, &re) {
			ev.rule = RuleResolve
		}
		ev.decision, ev.reason = "allow", err.Error()
		ev.duration = time.Since(start)
		p.gate.record(r.Context(), &ev)
		report()
		http.Error(w, "connect to "+t.hostPort()+" failed", http.StatusBadGateway)
		return
	}
	ev.addr = conn.RemoteAddr().String()
	ev.rule = RuleAllowed
	// Reported once the ClientHello below is decided (a tunnel it refuses
	// is a refusal in the caller's record too), or when the tunnel ends
	// before that.
	reported := false
	reportOnce := func() {
		if !reported {
			reported = true
			report()
		}
	}
	defer reportOnce()

	hj, ok := w.(http.Hijacker)
	if !ok {
		conn.Close()
		http.Error(w, "the proxy cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		conn.Close()
		return
	}
	if !s.track(client) || !s.track(conn) {
		client.Close()
		conn.Close()
		return
	}
	defer s.untrack(client)
	defer s.untrack(conn)
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		client.Close()
		conn.Close()
		return
	}
	// Nothing reaches the server before the ClientHello names the host
	// that was checked.
	hello, d, gone := awaitHello(client, buf.Reader, conn, t)
	if gone {
		// The server ended the tunnel before the CLI's TLS began: a
		// failure of an allowed tunnel, not a refusal.
		ev.rule, ev.reason = RuleFailed, "the server closed the connection (or spoke) before the tunnel's TLS ClientHello"
		ev.duration = time.Since(start)
		p.gate.record(r.Context(), &ev)
		reportOnce()
		client.Close()
		conn.Close()
		return
	}
	if !d.Allow {
		// Recorded before the CLI sees its connection end.
		s.refuseTunnel(r, &ev, d, start)
		reportOnce()
		client.Close()
		conn.Close()
		return
	}
	ev.duration = time.Since(start)
	p.gate.record(r.Context(), &ev)
	reportOnce()
	if err := s.take(int64(len(hello))); err != nil {
		client.Close()
		conn.Close()
		return
	}
	n, err := conn.Write(hello)
	s.sent.Add(int64(n))
	if err != nil {
		client.Close()
		conn.Close()
		return
	}
	tunnel(client, buf.Reader, conn, countingWriter{w: conn, n: &s.sent, take: s.take})
}

// errUnpaid marks a tunnel's write that could not be paid for.
var errUnpaid = errors.New("not paid for")

// take pays for n bytes a tunnel is about to send (SetPay), and keeps the
// first refusal as the session's Stopped.
func (s *ProxySession) take(n int64) error {
	a := s.allotment()
	if a == nil {
		return nil
	}
	err := a.take(n)
	if err != nil {
		s.mu.Lock()
		if s.stopped == "" {
			s.stopped = err.Error()
		}
		s.mu.Unlock()
		return fmt.Errorf("%w: %v", errUnpaid, err)
	}
	return nil
}

// Stopped is the reason the first of the session's tunnels that could not
// pay for what it was to send (SetPay) was closed, or "".
func (s *ProxySession) Stopped() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// refuseTunnel records a refusal: the gate's audit event, and the
// session's first refusal. A CONNECT refused before its 200 then gets a
// 403 (refuse); a tunnel refused after it, for its ClientHello, is told
// nothing but a closed connection.
func (s *ProxySession) refuseTunnel(r *http.Request, ev *event, d Ruling, start time.Time) {
	ev.refuse(d)
	ev.duration = time.Since(start)
	s.proxy.gate.record(r.Context(), ev)
	s.mu.Lock()
	if s.refused == "" {
		s.refused = ev.scrubbed(d.Reason)
	}
	s.mu.Unlock()
}

// awaitHello reads the ClientHello of a tunnel to t (readHello) from
// client, whose buffered reader is in, within helloTimeout. A server that
// closes the connection (or speaks first, which a TLS server never does)
// meanwhile ends the wait at once: gone.
func awaitHello(client net.Conn, in io.Reader, server net.Conn, t target) (hello []byte, d Ruling, gone bool) {
	_ = client.SetReadDeadline(time.Now().Add(helloTimeout))
	spoke := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, err := server.Read(b[:])
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() {
			spoke <- false // the wait was ended below
			return
		}
		spoke <- true
		client.Close()
	}()
	hello, d = readHello(in, t)
	_ = server.SetReadDeadline(time.Unix(1, 0))
	gone = <-spoke
	_ = server.SetReadDeadline(time.Time{})
	_ = client.SetReadDeadline(time.Time{})
	return hello, d, gone
}

// TLS extensions that hide the server name from the proxy: Encrypted
// Client Hello, and the draft ESNI before it.
const (
	extECH  = 0xfe0d
	extESNI = 0xffce
)

// readHello reads the ClientHello a tunnel to t starts with from r and
// returns the bytes read (to send on, none consumed) and whether it names
// t: the checked name as SNI, or, for an IP literal, no name (RFC 6066
// has none for an address) or the literal itself.
func readHello(r io.Reader, t target) ([]byte, Ruling) {
	c := &helloConn{r: io.LimitReader(r, maxHelloBytes)}
	var name string
	var seen, hidden bool
	stop := errors.New("seen")
	_ = tls.Server(c, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		seen, name = true, h.ServerName
		hidden = slices.Contains(h.Extensions, extECH) || slices.Contains(h.Extensions, extESNI)
		return nil, stop
	}}).Handshake()
	want := "the name " + quote(t.host)
	if t.ip.IsValid() {
		want = "no name"
	}
	switch name = strings.TrimSuffix(strings.ToLower(name), "."); {
	case !seen:
		return nil, deny(RuleServerName, "the tunnel to %s did not start with a TLS ClientHello; the proxy carries TLS only, to the host its CONNECT named", t.hostPort())
	case hidden:
		return nil, deny(RuleServerName, "the tunnel to %s started with an encrypted ClientHello, which hides the server's name from the proxy", t.hostPort())
	case name == t.host, name == "" && t.ip.IsValid():
		return c.seen, allowed
	case name == "":
		return nil, deny(RuleServerName, "the TLS ClientHello through the tunnel to %s names no server; it must name %s, the host the CONNECT was allowed for", t.hostPort(), quote(t.host))
	}
	return nil, deny(RuleServerName, "the TLS ClientHello through the tunnel to %s names %s; it must name %s, the host the CONNECT was allowed for", t.hostPort(), quote(name), want)
}

// helloConn is the read side of a tunnel's client, for crypto/tls to parse
// a ClientHello from: it keeps every byte read and writes nothing.
type helloConn struct {
	r    io.Reader
	seen []byte
}

func (c *helloConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.seen = append(c.seen, p[:n]...)
	return n, err
}

func (c *helloConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *helloConn) Close() error                     { return nil }
func (c *helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *helloConn) SetDeadline(time.Time) error      { return nil }
func (c *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c *helloConn) SetWriteDeadline(time.Time) error { return nil }

func (s *ProxySession) refuse(w http.ResponseWriter, r *http.Request, ev *event, d Ruling, start time.Time) {
	s.refuseTunnel(r, ev, d, start)
	// The reason is the gate's words about the CLI's own request (nothing
	// from a server): the CLI's error says what was refused and why.
	http.Error(w, d.Reason, http.StatusForbidden)
}

// tunnel copies bytes both ways until either side ends, then closes both.
// in holds what the client sent after the CONNECT head (a TLS ClientHello
// may already be buffered). What reaches the server is added to sent.
func tunnel(client net.Conn, in *bufio.Reader, server net.Conn, up countingWriter) {
	done := make(chan struct{}, 2)
	go func() {
		_, err := io.Copy(up, in)
		if errors.Is(err, errUnpaid) {
			// Not half a request answered: the CLI's connection ends.
			client.Close()
			server.Close()
		} else if tc, ok := server.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, server)
		if tc, ok := client.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
	client.Close()
	server.Close()
}

// countingWriter adds what each Write sent to n, having paid for it with
// take first (nil: nothing to pay); a write that cannot be paid for sends
// nothing and fails, which ends the tunnel.
type countingWriter struct {
	w    io.Writer
	n    *atomic.Int64
	take func(n int64) error
}

func (c countingWriter) Write(p []byte) (int, error) {
	if c.take != nil {
		if err := c.take(int64(len(p))); err != nil {
			return 0, err
		}
	}
	k, err := c.w.Write(p)
	c.n.Add(int64(k))
	return k, err
}
