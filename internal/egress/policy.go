package egress

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/maiden-run/maiden/internal/credential"
	"github.com/maiden-run/maiden/internal/regfile"
)

const (
	// HTTPSPort is open to every host a policy allows; Rules.Ports lists
	// the others.
	HTTPSPort = 443
	// DefaultMaxResponseBytes caps a decoded response body when
	// Rules.MaxResponseBytes is zero.
	DefaultMaxResponseBytes = 2 << 20
)

// Rules are what one call's http-fetch may reach: the gate's whole input
// besides the request. Each field narrows: a missing entry is no capability
// (deny by default), never "any". Today the root package builds a tool's
// Rules from its agent.toml entry; a caller's permission cards can narrow
// them per call with [Rules.Intersect].
type Rules struct {
	// Hosts are normalised host patterns (see [NormalizeHostPattern]): an
	// exact host, an IP literal, or "*.example.com" for exactly one more
	// label. None means no network at all.
	Hosts []string
	// Ports are destination ports allowed besides HTTPSPort.
	Ports []uint16
	// AllowCIDRs are special-purpose ranges (loopback, private, ...) a
	// resolved address may fall in; every other special address is refused.
	AllowCIDRs []netip.Prefix
	// Secrets are the names of secrets a request may ask to attach.
	Secrets []string
	// SecretDestinations bind secrets to where their values may be sent.
	// A request attaching a secret must be allowed by every entry naming
	// it; a secret no entry names may go to any host the rules allow.
	SecretDestinations []SecretDestination
	// CAFiles are PEM files of extra trust anchors, on top of the system
	// roots.
	CAFiles []string
	// MaxResponseBytes caps the decoded response body; 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Intersect returns the rules that allow a request only if both r and o
// allow it: hosts, ports, ranges, secrets and CA files are intersected and
// the body cap is the smaller one. It never widens either side, so the rules
// of a call can be computed as tool policy ∩ what the caller may do.
//
// Host patterns intersect by coverage: a wildcard and an exact host it
// matches give the exact host; two different wildcards give nothing (a host
// matches both only if they are the same). Prefixes likewise: two
// overlapping prefixes give the narrower one.
func (r Rules) Intersect(o Rules) Rules {
	var out Rules
	for _, a := range r.Hosts {
		for _, b := range o.Hosts {
			var h string
			switch {
			case a == b, matchHost(b, a):
				h = a
			case matchHost(a, b):
				h = b
			default:
				continue
			}
			if !slices.Contains(out.Hosts, h) {
				out.Hosts = append(out.Hosts, h)
			}
		}
	}
	out.Ports = intersect(r.Ports, o.Ports)
	for _, a := range r.AllowCIDRs {
		for _, b := range o.AllowCIDRs {
			a, b := a.Masked(), b.Masked()
			if !a.Overlaps(b) {
				continue
			}
			// Two prefixes that overlap are nested: the longer one is the
			// intersection.
			p := a
			if b.Bits() > a.Bits() {
				p = b
			}
			if !slices.Contains(out.AllowCIDRs, p) {
				out.AllowCIDRs = append(out.AllowCIDRs, p)
			}
		}
	}
	out.Secrets = intersect(r.Secrets, o.Secrets)
	// Every binding of either side must allow a request, so keeping both
	// lists narrows by construction.
	for _, d := range append(slices.Clone(r.SecretDestinations), o.SecretDestinations...) {
		if slices.Contains(out.Secrets, d.Secret) {
			out.SecretDestinations = append(out.SecretDestinations, d.clone())
		}
	}
	out.CAFiles = intersect(r.CAFiles, o.CAFiles)
	out.MaxResponseBytes = min(r.maxBytes(), o.maxBytes())
	return out
}

func (r Rules) maxBytes() int64 {
	if r.MaxResponseBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return r.MaxResponseBytes
}

// intersect returns the elements of a that are also in b, in a's order,
// without repeats.
func intersect[T comparable](a, b []T) []T {
	var out []T
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// Policy is one tool's egress policy, compiled once from its Rules. It is
// immutable apart from two caches (the connection pools it keeps per Gate,
// the redactor for its secrets' current values), and safe for concurrent
// use.
type Policy struct {
	tool     string
	allow    []string // normalised patterns
	secrets  []string
	ports    []uint16
	cidrs    []netip.Prefix
	dests    []SecretDestination
	roots    *x509.CertPool // nil: the system roots
	maxBytes int64

	pools    sync.Map // *Gate → *http.Transport
	redactor atomic.Pointer[cachedRedactor]

	specs map[string]credential.Spec // secret → how it is attached (absent: bearer)
	certs map[string][]byte          // kind mtls: secret → its cert_file's PEM
	mtls  sync.Map                   // mtlsKey → *http.Transport
}

// NewPolicy compiles the policy of tool (a name, for audit events and
// messages) from r. The CA files are parsed into a pool holding the system
// roots plus the extra certificates (only the extras if the system pool
// cannot be loaded); without CA files the system roots are used. Errors
// wrap ErrInvalidPolicy.
func NewPolicy(tool string, r Rules) (*Policy, error) {
	p := &Policy{
		tool:     tool,
		allow:    slices.Clone(r.Hosts),
		secrets:  slices.Clone(r.Secrets),
		ports:    slices.Clone(r.Ports),
		cidrs:    slices.Clone(r.AllowCIDRs),
		maxBytes: r.maxBytes(),
	}
	for _, d := range r.SecretDestinations {
		if err := d.check(); err != nil {
			return nil, fmt.Errorf("%w: tool %s: %v", ErrInvalidPolicy, tool, err)
		}
		p.dests = append(p.dests, d.clone())
		if err := p.addSpec(d); err != nil {
			return nil, fmt.Errorf("%w: tool %s: %v", ErrInvalidPolicy, tool, err)
		}
	}
	for _, pat := range p.allow {
		// matchHost compares strings; an entry that is not canonical would
		// silently never match (or worse, match something unintended).
		if n, why := normalizeHostPattern(pat); why != "" || n != pat {
			return nil, fmt.Errorf("%w: tool %s: host pattern %s is not a normalised host pattern", ErrInvalidPolicy, tool, quote(pat))
		}
	}
	if len(r.CAFiles) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		for _, f := range r.CAFiles {
			data, err := readCAFile(f)
			if err != nil {
				return nil, fmt.Errorf("%w: tool %s: read CA file: %v", ErrInvalidPolicy, tool, err)
			}
			if !pool.AppendCertsFromPEM(data) {
				return nil, fmt.Errorf("%w: tool %s: CA file %s holds no PEM certificates", ErrInvalidPolicy, tool, f)
			}
		}
		p.roots = pool
	}
	return p, nil
}

// Tool returns the name of the tool the policy belongs to.
func (p *Policy) Tool() string { return p.tool }

// CloseIdleConnections closes the idle connections of every pool the policy
// holds, e.g. when a configuration is replaced.
func (p *Policy) CloseIdleConnections() {
	for _, m := range []*sync.Map{&p.pools, &p.mtls} {
		m.Range(func(_, v any) bool {
			v.(*http.Transport).CloseIdleConnections()
			return true
		})
	}
}

func (p *Policy) declares(secret string) bool {
	return slices.Contains(p.secrets, secret)
}

// transport returns the connection pool g uses for p, creating it on first
// use. Pools are never shared between policies: a connection is checked
// against one policy's address rules when it is dialled.
func (p *Policy) transport(g *Gate) *http.Transport {
	if t, ok := p.pools.Load(g); ok {
		return t.(*http.Transport)
	}
	t, loaded := p.pools.LoadOrStore(g, newTransport(&dialer{p: p, resolver: g.resolver}, p))
	_ = loaded // a transport that lost the race never dialled anything
	return t.(*http.Transport)
}

// maxCAFileBytes bounds a CA file: a bundle of every public root is ~250 KB.
const maxCAFileBytes = 4 << 20

// readCAFile reads a PEM file the operator named: a regular file only (a
// FIFO would block, /dev/zero never end) and at most maxCAFileBytes.
func readCAFile(name string) ([]byte, error) {
	// The same reader as agent.toml's: regular files only (no FIFO, no
	// device, no /proc file that claims a size of 0), size capped.
	return regfile.Read(name, maxCAFileBytes)
}
