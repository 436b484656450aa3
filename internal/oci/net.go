package oci

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/maiden-run/maiden/internal/lookupname"
	"github.com/maiden-run/maiden/internal/netguard"
)

// This file is the network half's limits: how long a registry may take
// (the deadline), where a registry may send maiden (the redirect and
// address rules), and the dialer that enforces the address rule.

// DefaultTimeout bounds one Resolve, Pull, Push or Sign (PullOptions.Timeout):
// every request it makes, the bodies read to the end. A component is at
// most MaxLayerBytes; at 10 minutes that is some 450 KB/s for the largest,
// and a typical component (a few MB) needs a few KB/s.
const DefaultTimeout = 10 * time.Minute

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it; tests use testkit.Hosts.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Errors of the network rules; callers test with errors.Is.
var (
	// ErrDeadline means the registry did not finish within the deadline
	// (PullOptions.Timeout): a registry that answers slowly, or a trickle
	// of bytes, cannot hold maiden for ever. A *DeadlineError names the
	// registry, the stage and the artifact.
	ErrDeadline = errors.New("not finished within the deadline")
	// ErrRedirect means a registry's redirect was refused: a redirect
	// leaves TLS only when the registry itself is on loopback.
	ErrRedirect = errors.New("redirect refused")
	// ErrAddress means a host maiden was sent to (a redirect, a token
	// service) resolved to an address maiden refuses to connect to: a
	// loopback, private, link-local or other special-purpose address
	// that is not of the registry's own kind. It is refused before any
	// connection is made.
	ErrAddress = errors.New("address refused")
)

// Rules named in refusals, for an operator to grep.
const (
	// RuleRedirectTLS: a redirect goes to https (plain http only from a
	// loopback registry to loopback).
	RuleRedirectTLS = "oci-redirect-https"
	// RuleAddress: any host but the registry's own connects only to
	// global addresses or to addresses of the registry's own kind.
	RuleAddress = "oci-address"
)

// Stages a DeadlineError names.
const (
	StageManifest  = "manifest"
	StageSignature = "signature"
	StageBlob      = "blob"
	StageUpload    = "upload"
)

// DeadlineError is an operation the registry did not finish within the
// deadline; it matches ErrDeadline.
type DeadlineError struct {
	Registry string        // host[:port]
	Stage    string        // StageManifest, StageSignature, StageBlob, StageUpload
	Artifact string        // what was being fetched: a reference, a tag, a digest
	Timeout  time.Duration // the deadline that passed
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("registry %s: %s %s: %v of %s", e.Registry, e.Stage, e.Artifact, ErrDeadline, e.Timeout)
}

func (e *DeadlineError) Is(target error) bool { return target == ErrDeadline }

// errDeadlineCause is the cause of a context the deadline ended: only it
// (not a caller's own cancellation or deadline) becomes a DeadlineError.
var errDeadlineCause = errors.New("oci: the deadline passed")

// withDeadline bounds ctx by opts' timeout.
func (o *PullOptions) withDeadline(ctx context.Context) (context.Context, context.CancelFunc, time.Duration) {
	d := DefaultTimeout
	if o != nil && o.Timeout > 0 {
		d = o.Timeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, d, errDeadlineCause)
	return ctx, cancel, d
}

// overdue is err, or a *DeadlineError when ctx's deadline ended the
// operation (whatever go-containerregistry made of the cancellation: an
// error, or a 404 it read as "no signature").
func overdue(ctx context.Context, err error, d time.Duration, registry, stage, artifact string) error {
	if err == nil || !errors.Is(context.Cause(ctx), errDeadlineCause) {
		return err
	}
	return &DeadlineError{Registry: registry, Stage: stage, Artifact: artifact, Timeout: d}
}

// guard is the dialer of one operation's transport. The registry the
// operator named is connected to whatever its name resolves to; every
// other host (a redirect's, a token service's) is resolved once, each
// address classified with netguard, and refused unless it is global or of
// the same kind as one of the registry's own addresses (a loopback
// registry's storage on loopback, a registry on a private network's
// storage on that network); the addresses checked are the ones dialled.
// The environment's proxy (HTTPS_PROXY), the operator's choice like the
// registry, is connected to as it is; the proxy then resolves and
// connects, so behind a proxy the address rule is the proxy's to enforce.
type guard struct {
	registry string // the registry's host name, lower case, no port
	resolver Resolver
	connect  func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex
	kinds   []string        // netguard rules of the registry's special addresses
	known   bool            // kinds has been worked out
	proxies map[string]bool // host:port of the proxies the transport used
}

func newGuard(registry string, o *PullOptions) *guard {
	g := &guard{registry: hostOnly(registry), resolver: net.DefaultResolver, proxies: map[string]bool{}}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	g.connect = d.DialContext
	if o != nil && o.Resolver != nil {
		g.resolver = o.Resolver
	}
	if o != nil && o.dial != nil {
		g.connect = o.dial
	}
	return g
}

// hostOnly is hostport's host, lower case, without brackets.
func hostOnly(hostport string) string {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	return strings.ToLower(strings.Trim(h, "[]"))
}

// lookup is host's addresses: the literal itself, or the resolver's answer
// for name (host, or host made absolute: see dial).
func (g *guard) lookup(ctx context.Context, host, name string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	// A copy: the resolver's slice may be its own (a cache, a test's map).
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = a.Unmap()
	}
	return out, nil
}

// note records the kinds of the registry's own addresses.
func (g *guard) note(addrs []netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known = true
	for _, a := range addrs {
		if v := netguard.Classify(a); v.Special && !slices.Contains(g.kinds, v.Rule) {
			g.kinds = append(g.kinds, v.Rule)
		}
	}
}

// registryKinds is the kinds of the registry's addresses, resolving it if
// nothing has connected to it yet.
func (g *guard) registryKinds(ctx context.Context) ([]string, error) {
	g.mu.Lock()
	known := g.known
	g.mu.Unlock()
	if !known {
		addrs, err := g.lookup(ctx, g.registry, g.registry)
		if err != nil {
			return nil, fmt.Errorf("resolve the registry %s: %w", g.registry, err)
		}
		g.note(addrs)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.kinds), nil
}

func (g *guard) proxy(req *http.Request) (*url.URL, error) {
	u, err := http.ProxyFromEnvironment(req)
	if u != nil {
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "socks5": "1080"}[u.Scheme]
			if port == "" {
				port = "80"
			}
		}
		g.mu.Lock()
		g.proxies[net.JoinHostPort(hostOnly(u.Host), port)] = true
		g.mu.Unlock()
	}
	return u, err
}

// dial resolves addr's host once, checks every address, and dials those.
func (g *guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	host := hostOnly(h)
	g.mu.Lock()
	viaProxy := g.proxies[net.JoinHostPort(host, port)]
	g.mu.Unlock()
	// The registry and the proxy are names the operator chose, resolved as
	// the operator's system resolves them (a cluster's short name such as
	// registry.infra is theirs to use). Any other host is a name the
	// registry chose, meant as it is in public DNS: it is looked up as
	// the absolute name, so a resolv.conf search list (Kubernetes: ndots:5,
	// search NS.svc.cluster.local) cannot answer cdn.example.com with an
	// in-cluster service named cdn.example.com.NS.svc.cluster.local.
	name := host
	if host != g.registry && !viaProxy {
		name = lookupname.For(host)
	}
	addrs, err := g.lookup(ctx, host, name)
	if err != nil {
		return nil, err
	}
	switch {
	case host == g.registry:
		g.note(addrs)
	case viaProxy:
	default:
		kinds, err := g.registryKinds(ctx)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			v := netguard.Classify(a)
			if !v.Special || slices.Contains(kinds, v.Rule) {
				continue
			}
			own := "global"
			if len(kinds) > 0 {
				own = strings.Join(kinds, ", ")
			}
			return nil, fmt.Errorf("%w (rule: %s): %s; the registry %s is %s, and any other host it sends maiden to must be a public address or one of the registry's own kind",
				ErrAddress, RuleAddress, netguard.Check(a, nil).Describe(host), g.registry, own)
		}
	}
	var first error
	for _, a := range addrs {
		c, err := g.connect(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// transport is the HTTP transport of one operation against registry:
// base's TLS settings and timeouts, the guard's dialer, the environment's
// proxy. close releases its idle connections.
func (o *PullOptions) transport(registry string) (*http.Transport, *guard) {
	var base *http.Transport
	if o != nil && o.Transport != nil {
		base = o.Transport.Clone()
	} else {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	g := newGuard(registry, o)
	base.Proxy = g.proxy
	base.DialContext = g.dial
	base.DialTLSContext = nil
	return base, g
}

// registryHost is the registry's host:port as go-containerregistry names
// it (docker.io is index.docker.io), for comparing with requests' hosts.
func registryHost(registry string) string {
	if reg, err := name.NewRegistry(registry, name.Insecure); err == nil {
		return reg.RegistryStr()
	}
	return registry
}

// checkRedirect applies the redirect rules to req, a request
// go-containerregistry's client makes after a redirect: https only (plain
// http only from a loopback registry to loopback), and no Authorization
// header to any host but the registry's own. It returns the request to
// send (a copy when a header was removed).
func (t capTransport) checkRedirect(req *http.Request) (*http.Request, error) {
	if req.Response == nil {
		return req, nil
	}
	if req.URL.Scheme != "https" && !(t.loopback && (Ref{Registry: req.URL.Host}).Loopback()) {
		return nil, fmt.Errorf("%w (rule: %s): the registry %s redirected to %s://%s; a redirect must go to https", ErrRedirect, RuleRedirectTLS, t.registry, req.URL.Scheme, req.URL.Host)
	}
	if hostOnly(req.URL.Host) != hostOnly(t.registry) || portOf(req.URL.Host, req.URL.Scheme) != portOf(t.registry, req.URL.Scheme) {
		if _, ok := req.Header["Authorization"]; ok {
			req = req.Clone(req.Context())
			req.Header.Del("Authorization")
		}
	}
	return req, nil
}

// portOf is hostport's port, or the scheme's default.
func portOf(hostport, scheme string) string {
	if _, p, err := net.SplitHostPort(hostport); err == nil {
		return p
	}
	if scheme == "http" {
		return "80"
	}
	return "443"
}
