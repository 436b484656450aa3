package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/maiden-run/maiden/internal/lookupname"
	"github.com/maiden-run/maiden/internal/netguard"
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it; tests use one that answers for names such as api.example.com.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

const (
	// dialTimeout bounds resolution, connect and TLS for one connection.
	// net/http dials with a context detached from the request's
	// cancellation (the connection may serve a later request), so the
	// request's deadline alone would not end a hung dial.
	dialTimeout = 30 * time.Second
	// idleTimeout closes pooled connections nobody used for a while.
	idleTimeout = 30 * time.Second
	// maxResponseHeaderBytes bounds the response head; the body has its own cap.
	maxResponseHeaderBytes = 256 << 10
)

func newTransport(d *dialer, p *Policy) *http.Transport {
	var protos http.Protocols
	protos.SetHTTP1(true)
	return &http.Transport{
		// Never the environment's proxy: a proxy would be a second
		// destination nobody checked, and would see every request.
		Proxy:          nil,
		DialContext:    d.dialPlain,
		DialTLSContext: d.dialTLS,
		Protocols:      &protos,
		// The gate asks for gzip itself and decodes it while the body is
		// read, under the cap (gate.go: onlyGzip, gunzip): the transport's
		// own decoding reads only the first Content-Encoding line and
		// deletes them all, so "gzip" on two lines (gzipped twice) would
		// reach the tool still gzipped once, out of the redactor's sight.
		DisableCompression:     true,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        idleTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
}

// dialer opens connections for one policy. It is the only place addresses
// are checked and the only place they are used, and the two are the same
// values: the answers of one lookup are classified, then exactly those are
// dialled. There is no second lookup for a rebinding DNS server to answer.
type dialer struct {
	p        *Policy
	resolver Resolver
	// cert is the client certificate of a kind "mtls" secret: only the
	// transport of that secret's requests has one (Policy.mtlsTransport).
	cert *tls.Certificate
}

func (d *dialer) dialPlain(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, _, err := d.dial(ctx, addr, true)
	return conn, err
}

// callDeadline is the context key under which Fetch passes the call's
// deadline to the dialer. net/http dials with a context stripped of the
// request's cancellation and deadline (so the connection can serve a later
// request) but keeps its values; without this a hung handshake would hold
// its connection open for dialTimeout after the call ended.
type callDeadline struct{}

// dialContext bounds a dial by dialTimeout and by the deadline of the call
// that asked for it, whichever comes first.
func dialContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	if dl, ok := ctx.Value(callDeadline{}).(time.Time); ok {
		ctx, cancel2 := context.WithDeadline(ctx, dl)
		return ctx, func() { cancel2(); cancel() }
	}
	return ctx, cancel
}

func (d *dialer) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := dialContext(ctx)
	defer cancel()
	conn, host, err := d.dial(ctx, addr, false)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		// The checked host, as normalised: the certificate must be for the
		// name the policy allowed. For an IP literal Go sends no SNI and
		// verifies the certificate's IP addresses.
		ServerName: host,
		RootCAs:    d.p.roots,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	}
	if d.cert != nil {
		cert := d.cert
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// dial resolves addr's host once, checks every answer, and connects to the
// first checked address that accepts. plain means the connection will carry
// plain http, which is only for loopback.
func (d *dialer) dial(ctx context.Context, addr string, plain bool) (net.Conn, string, error) {
	ctx, cancel := dialContext(ctx)
	defer cancel()
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("dial %s: %w", addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, "", fmt.Errorf("dial %s: bad port", addr)
	}
	// Fetch only ever hands the transport a checked target; checking again
	// here keeps that true if another path to the transport ever appears.
	t, dec := normalizeURL("https://" + net.JoinHostPort(host, portText) + "/")
	if dec.Allow && t.host != host {
		dec = deny(RuleHostSyntax, "host %s is not normalised", quote(host))
	}
	if dec.Allow && !d.p.allowsHost(t.host) {
		dec = deny(RuleAllowlist, "host %s is not in this tool's http_allow", quote(host))
	}
	if !dec.Allow {
		return nil, "", &deniedError{dec}
	}

	addrs, err := d.resolve(ctx, t)
	if err != nil {
		return nil, "", err
	}
	for _, a := range addrs {
		c := netguard.Check(a, d.p.cidrs)
		if !c.Allow {
			// Name the key that would change the answer: the operator, not
			// the tool, decides to open an internal range.
			fix := "; to allow it, add the address or its range to the tool's http_allow_cidrs in agent.toml"
			if c.Rule == netguard.RuleMetadata {
				fix = "; a cloud metadata address can only be allowed by its own exact entry in the tool's http_allow_cidrs"
			}
			return nil, "", &deniedError{Ruling{Rule: c.Rule, Reason: c.Describe(host) + fix}}
		}
		if plain && netguard.Classify(a).Rule != netguard.RuleLoopback {
			return nil, "", &deniedError{deny(RuleHTTPSRequired, "plain http is only allowed to loopback, and address %s of %s is not loopback", a, host)}
		}
	}
	var errs []error
	for _, a := range addrs {
		conn, err := connectTCP(ctx, netip.AddrPortFrom(a, uint16(port)))
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		// The kernel connected where it was told; verify anyway, because
		// this is the one invariant the whole gate rests on.
		if ra, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || ra.AddrPort().Addr().Unmap() != a.WithZone("").Unmap() {
			conn.Close()
			return nil, "", fmt.Errorf("dial %s: connected to %v, not the checked address %s", addr, conn.RemoteAddr(), a)
		}
		return conn, t.host, nil
	}
	return nil, "", errors.Join(errs...)
}

// connectTCP opens the TCP connection to an address dial checked. It is a
// variable for the package's tests alone, which refuse any address off
// loopback here (helpers_test.go): a check planted away then fails its
// test without a packet leaving the machine.
var connectTCP = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr.String())
}

// resolve returns the addresses to check and dial: the literal itself, or
// the answers of exactly one lookup of the absolute name (lookupName).
func (d *dialer) resolve(ctx context.Context, t target) ([]netip.Addr, error) {
	if t.ip.IsValid() {
		return []netip.Addr{t.ip}, nil
	}
	answers, err := d.resolver.LookupNetIP(ctx, "ip", lookupName(t.host))
	if err != nil {
		return nil, &resolveError{host: t.host, err: err}
	}
	var addrs []netip.Addr
	for _, a := range answers {
		if !contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, &resolveError{host: t.host, err: errors.New("no addresses")}
	}
	return addrs, nil
}

// lookupName is the name the resolver is asked for the checked host:
// lookupname.For's, the fully qualified name (with its trailing dot)
// unless the hosts file lists the name or it has one label. A relative name
// would go through resolv.conf's search list first (Kubernetes sets ndots:5
// and search domains such as NS.svc.cluster.local), so an allowed
// api.example.com could be answered by api.example.com.NS.svc.cluster.local,
// a name anyone who can create a service or record in that domain chooses.
// The dot is for the lookup alone: the name checked, the TLS server name,
// the Host header and every record keep the host without it (normalizeURL
// strips one trailing dot, so host never ends in one here).
func lookupName(host string) string {
	return lookupname.For(host)
}

func contains(as []netip.Addr, a netip.Addr) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}

// resolveError is a failed lookup, told apart from other failures for the
// audit event.
type resolveError struct {
	host string
	err  error
}

func (e *resolveError) Error() string { return "resolve " + e.host + ": " + e.err.Error() }
func (e *resolveError) Unwrap() error { return e.err }
