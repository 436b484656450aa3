package egress

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/maiden-run/maiden/config"
)

// Policy is one tool's egress policy, compiled once per configuration. It is
// immutable apart from two caches (the connection pools it keeps per Gate,
// the redactor for its secrets' current values), and safe for concurrent
// use.
type Policy struct {
	tool     string
	allow    []string // normalised patterns
	secrets  []string
	ports    []uint16
	cidrs    []netip.Prefix
	roots    *x509.CertPool // nil: the system roots
	maxBytes int64

	pools    sync.Map // *Gate → *http.Transport
	redactor atomic.Pointer[cachedRedactor]
}

// NewPolicy compiles t's egress policy. The CA files are parsed into a pool
// holding the system roots plus the tool's extra certificates (only the
// extras if the system pool cannot be loaded); a tool without extra CA files
// uses the system roots. A zero HTTPMaxResponseBytes means
// config.DefaultMaxResponseBytes. Errors wrap ErrInvalidPolicy.
func NewPolicy(t config.Tool) (*Policy, error) {
	p := &Policy{
		tool:     t.Name,
		allow:    slices.Clone(t.HTTPAllow),
		secrets:  slices.Clone(t.Secrets),
		ports:    slices.Clone(t.HTTPPorts),
		cidrs:    slices.Clone(t.HTTPAllowCIDRs),
		maxBytes: t.HTTPMaxResponseBytes,
	}
	if p.maxBytes <= 0 {
		p.maxBytes = config.DefaultMaxResponseBytes
	}
	for _, pat := range p.allow {
		// MatchHost compares strings; an entry that is not canonical would
		// silently never match (or worse, match something unintended).
		if n, err := config.NormalizeHostPattern(pat); err != nil || n != pat {
			return nil, fmt.Errorf("%w: tool %s: http_allow entry %s is not a normalised host pattern", ErrInvalidPolicy, t.Name, quote(pat))
		}
	}
	if len(t.HTTPCAFiles) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		for _, f := range t.HTTPCAFiles {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("%w: tool %s: read CA file: %v", ErrInvalidPolicy, t.Name, err)
			}
			if !pool.AppendCertsFromPEM(data) {
				return nil, fmt.Errorf("%w: tool %s: CA file %s holds no PEM certificates", ErrInvalidPolicy, t.Name, f)
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
	p.pools.Range(func(_, v any) bool {
		v.(*http.Transport).CloseIdleConnections()
		return true
	})
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
