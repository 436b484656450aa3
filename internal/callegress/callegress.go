// Package callegress is the seam between the egress gate and a call: the
// gate knows neither agent.toml, the cards nor the sandbox. It builds
// egress.Rules from a tool's configuration (Rules, with the [secrets.NAME]
// destinations), compiles them once per configuration (Policies, and once
// per narrowing binding), puts the calling agent's pinned wallet in front
// of every request as an egress.Authorizer (Authorizer, asking
// internal/decide), and adapts the gate to the sandbox's http-fetch
// (Fetch: the two sets of types copied field by field, each decision
// reported to the Observer). The root's wasm.go, clis.go and webfetch.go
// wire it into a call.
//
//	set := pols.Of(cfg)                                   // compiled once per configuration
//	pol, err := set.Policy(agent, tool, narrowed)
//	fetch := callegress.Fetch(gate, pol, obs, tool.Name, agent, callegress.Authorizer(wallet))
package callegress

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/credential"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// Rules is what t's agent.toml entry allows http-fetch to reach, plus the
// [secrets.NAME] destinations of the secrets t may use: they bind the
// secret for every tool and agent, the implicit one too.
func Rules(cfg *config.Config, t config.Tool) egress.Rules {
	r := egress.Rules{
		Hosts:            t.HTTPAllow,
		Ports:            t.HTTPPorts,
		AllowCIDRs:       t.HTTPAllowCIDRs,
		Secrets:          t.Secrets,
		CAFiles:          t.HTTPCAFiles,
		MaxResponseBytes: t.HTTPMaxResponseBytes,
	}
	for _, name := range t.Secrets {
		d, ok := cfg.SecretDestination(name)
		if !ok {
			continue
		}
		r.SecretDestinations = append(r.SecretDestinations, egress.SecretDestination{
			Secret:       d.Name,
			Hosts:        d.Hosts,
			Methods:      d.Methods,
			PathPrefixes: d.PathPrefixes,
			Source:       fmt.Sprintf("[secrets.%s] (%s:%d)", d.Name, filepath.Base(cfg.File()), d.Line),
			Credential:   Spec(d),
		})
	}
	return r
}

// Spec is how d's secret is attached (its kind and settings), as the
// gate takes it with the binding.
func Spec(d config.SecretDestination) credential.Spec {
	return credential.Spec{
		Kind: credential.Kind(d.Kind), Header: d.Header, Template: d.Template, Username: d.Username,
		Algorithm: d.Algorithm, SignatureHeader: d.SignatureHeader, TimestampHeader: d.TimestampHeader,
		AccessKeyID: d.AccessKeyID, Region: d.Region, Service: d.Service, SessionToken: d.SessionToken,
		CertFile: d.CertFile, TokenURL: d.TokenURL, ClientID: d.ClientID, Scopes: d.Scopes,
		Grant: d.Grant, ClientSecret: d.ClientSecret,
	}
}

// Rules of the card checks at http-fetch time, as audit events and the
// Observer name them.
const (
	// RuleNetworkCard: no card of the calling agent allows network:connect
	// to the request's host and port.
	RuleNetworkCard = "network-card"
	// RuleSecretCard: no card of the calling agent allows secret:use of the
	// credential the request attaches.
	RuleSecretCard = "secret-card"
)

// Authorizer is the authority of a declared agent's cards over each
// http-fetch of a call: the wallet pinned when the call was authorized (a
// revocation during the call applies from the next call), asked for
// network:connect HOST:PORT and, when a credential is attached,
// secret:use NAME. The gate asks it after agent.toml's own rules passed,
// so cards narrow http_allow and secrets, never widen them. nil (the
// implicit agent, which holds every card) asks nothing.
func Authorizer(w *cards.Wallet) egress.Authorizer {
	if w == nil {
		return nil
	}
	return authorizer(decide.Basis{Wallet: w}, nil)
}

// Noting is Authorizer(w) that also hands each decision to note, as Decide
// returned it (api.Decision: the card, bound, grant and target; on a
// denial the reason, rule and fix), in the order it made them: what a
// CONNECT tunnel's or a web_fetch request's audit record carries, as an
// http-fetch's does (Decisions). nil when w is (nothing is asked).
func Noting(w *cards.Wallet, note func(api.Decision)) egress.Authorizer {
	if w == nil {
		return nil
	}
	return authorizer(decide.Basis{Wallet: w}, func(d cards.Decision) { note(d.API()) })
}

// authorizer is Authorizer over b, handing each decision as Decide
// returned it to note (if not nil) before the gate sees only its reason.
func authorizer(b decide.Basis, note func(cards.Decision)) egress.Authorizer {
	return func(host string, port int, credential string) error {
		d := decide.Decide(b, decide.Connect(host, port))
		if note != nil {
			note(d)
		}
		if !d.Allow {
			return &egress.Refusal{Rule: RuleNetworkCard, Reason: d.Reason}
		}
		if credential != "" {
			d := decide.Decide(b, decide.Use(credential))
			if note != nil {
				note(d)
			}
			if !d.Allow {
				return &egress.Refusal{Rule: RuleSecretCard, Reason: d.Reason}
			}
		}
		return nil
	}
}

// decisionsKey is the context key of a request's Decisions list.
type decisionsKey struct{}

// decisionList is the decisions the wallet made about one request, in the
// order it made them. A request is decided on its own goroutine, but the
// lock keeps the list safe whatever the gate does.
type decisionList struct {
	mu   sync.Mutex
	list []api.Decision
}

// Decisions returns ctx carrying an empty list of decisions and a function
// that returns it: an http-fetch made under that context by Fetch appends
// each decision the calling agent's wallet makes about it (network:connect
// HOST:PORT, then secret:use NAME of each credential), as Decide returned
// it (the card, bound, grant and target; on a denial the reason, rule and
// fix too). The tool still sees only the refusal's kind and message. One
// list per request, so concurrent fetches of a call never share one.
func Decisions(ctx context.Context) (context.Context, func() []api.Decision) {
	l := &decisionList{}
	return context.WithValue(ctx, decisionsKey{}, l), func() []api.Decision {
		l.mu.Lock()
		defer l.mu.Unlock()
		return slices.Clone(l.list)
	}
}

func (l *decisionList) note(d cards.Decision) {
	a := d.API()
	l.mu.Lock()
	l.list = append(l.list, a)
	l.mu.Unlock()
}

// Fetch adapts the gate to the sandbox's http-fetch for tool, whose policy
// is p, and reports each decision to obs (if not nil). w, if not nil, is
// the calling agent's pinned wallet, asked on every request (Authorizer),
// its decisions noted in the request's Decisions list when its context
// carries one; nil (the implicit agent) asks nothing. agent names the
// caller in audit events. The values are copied field by
// field: the two sets of types are separate on purpose, so either side can
// change without the other.
func Fetch(g *egress.Gate, p *egress.Policy, obs api.Observer, tool, agent string, w *cards.Wallet) sandbox.FetchFunc {
	authz := Authorizer(w)
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		authz := authz
		if l, ok := ctx.Value(decisionsKey{}).(*decisionList); ok && w != nil {
			authz = authorizer(decide.Basis{Wallet: w}, l.note)
		}
		resp, ferr := g.Fetch(ctx, p, egress.Request{
			Method:        req.Method,
			URL:           req.URL,
			Headers:       toEgressHeaders(req.Headers),
			Body:          req.Body,
			Credential:    req.Credential,
			HasCredential: req.HasCredential,
			Authorize:     authz,
			Caller:        agent,
			Redact:        recordRedactor(ctx),
		})
		if obs != nil {
			ev := api.FetchEvent{Tool: tool, Allowed: true, Rule: egress.RuleAllowed}
			if ferr != nil {
				ev.Allowed, ev.Rule = ferr.Kind != egress.FetchDenied, ferr.Rule
			}
			obs.Fetch(ev)
		}
		if ferr != nil {
			return nil, &sandbox.FetchError{Kind: sandboxFetchKind(ferr.Kind), Message: ferr.Message}
		}
		return &sandbox.FetchResponse{Status: resp.Status, Headers: toSandboxHeaders(resp.Headers), Body: resp.Body}, nil
	}
}

// sandboxFetchKind maps the gate's error kinds onto the WIT variant's. An
// unknown kind (a new one the sandbox has no case for) is "failed", never
// a trap.
func sandboxFetchKind(k egress.FetchErrorKind) sandbox.FetchErrorKind {
	switch k {
	case egress.FetchDenied:
		return sandbox.FetchDenied
	case egress.FetchTimeout:
		return sandbox.FetchTimeout
	case egress.FetchTooLarge:
		return sandbox.FetchTooLarge
	}
	return sandbox.FetchFailed
}

func toEgressHeaders(hs []sandbox.Header) []egress.Header {
	if hs == nil {
		return nil
	}
	out := make([]egress.Header, len(hs))
	for i, h := range hs {
		out[i] = egress.Header{Name: h.Name, Value: h.Value}
	}
	return out
}

func toSandboxHeaders(hs []egress.Header) []sandbox.Header {
	if hs == nil {
		return nil
	}
	out := make([]sandbox.Header, len(hs))
	for i, h := range hs {
		out[i] = sandbox.Header{Name: h.Name, Value: h.Value}
	}
	return out
}

// Policies holds the compiled egress policies of the configuration in
// force (a Host holds one; the zero value is ready).
type Policies struct {
	cur atomic.Pointer[Set]
	mu  sync.Mutex
}

// Set is the egress policy of each tool of one configuration, compiled
// once (CA files parsed) and replaced when the configuration is.
type Set struct {
	cfg    *config.Config
	byTool map[string]*egress.Policy
	errs   map[string]error
	// narrowed holds the policies of bindings that narrow a tool's egress,
	// compiled on first use (agent + "\x00" + tool → compiled).
	narrowed sync.Map
}

type compiled struct {
	pol *egress.Policy
	err error
}

// Of returns the compiled policies of cfg, building them on first use
// after a configuration change; idle connections made under the set it
// replaces are not reused.
func (ps *Policies) Of(cfg *config.Config) *Set {
	if p := ps.cur.Load(); p != nil && p.cfg == cfg {
		return p
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.cur.Load(); p != nil && p.cfg == cfg {
		return p
	}
	p := &Set{cfg: cfg, byTool: map[string]*egress.Policy{}, errs: map[string]error{}}
	for _, t := range cfg.Tools() {
		pol, err := egress.NewPolicy(t.Name, Rules(cfg, t))
		if err != nil {
			p.errs[t.Name] = err
			continue
		}
		p.byTool[t.Name] = pol
	}
	if old := ps.cur.Swap(p); old != nil {
		for _, pol := range old.byTool {
			pol.CloseIdleConnections()
		}
		old.narrowed.Range(func(_, v any) bool {
			if c := v.(compiled); c.pol != nil {
				c.pol.CloseIdleConnections()
			}
			return true
		})
	}
	return p
}

// Policy returns the compiled egress policy of tool t as agent's binding
// exposes it: the tool's own, or, when the binding narrows its egress
// (narrowed), one compiled once per configuration for agent and t.
func (s *Set) Policy(agent string, t config.Tool, narrowed bool) (*egress.Policy, error) {
	if !narrowed {
		return s.byTool[t.Name], s.errs[t.Name]
	}
	key := agent + "\x00" + t.Name
	if v, ok := s.narrowed.Load(key); ok {
		c := v.(compiled)
		return c.pol, c.err
	}
	pol, err := egress.NewPolicy(t.Name, Rules(s.cfg, t))
	v, _ := s.narrowed.LoadOrStore(key, compiled{pol, err})
	c := v.(compiled)
	return c.pol, c.err
}

// recordRedactorKey carries a call's redactor of the values revealed to
// its tool (WithRecordRedactor).
type recordRedactorKey struct{}

// WithRecordRedactor has Fetch pass redact to the gate for its audit
// event (egress.Request.Redact): a value revealed to the tool during its
// call, put in a URL or as a credential's name, is not logged.
func WithRecordRedactor(ctx context.Context, redact func(string) string) context.Context {
	if redact == nil {
		return ctx
	}
	return context.WithValue(ctx, recordRedactorKey{}, redact)
}

func recordRedactor(ctx context.Context) func(string) string {
	f, _ := ctx.Value(recordRedactorKey{}).(func(string) string)
	return f
}
