package maiden

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// This file is the seam between the egress gate and the rest of maiden:
// the gate knows neither agent.toml nor the sandbox. It takes egress.Rules
// (built here from a config.Tool) and its own request and response types
// (adapted here from and to the sandbox's). The calling agent's cards reach
// the gate as a per-request egress.Authorizer built here from the wallet
// the authorize stage pinned (walletAuthorizer): egress knows no cards.

// Resolver looks up host names for http-fetch. *net.Resolver satisfies it.
// Tests and embedders that run their own DNS supply one in Options; maiden
// resolves each allowed name once per connection and dials only the
// addresses it checked.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// egressRules is what t's agent.toml entry allows http-fetch to reach.
func egressRules(t config.Tool) egress.Rules {
	return egress.Rules{
		Hosts:            t.HTTPAllow,
		Ports:            t.HTTPPorts,
		AllowCIDRs:       t.HTTPAllowCIDRs,
		Secrets:          t.Secrets,
		CAFiles:          t.HTTPCAFiles,
		MaxResponseBytes: t.HTTPMaxResponseBytes,
	}
}

// toolRules is egressRules plus the [secrets.NAME] destinations of the
// secrets t may use: they bind the secret for every tool and agent, the
// implicit one too.
func toolRules(cfg *config.Config, t config.Tool) egress.Rules {
	r := egressRules(t)
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
		})
	}
	return r
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

// walletAuthorizer is the authority of a declared agent's cards over each
// http-fetch of a call: the wallet pinned when the call was authorized (a
// revocation during the call applies from the next call), asked for
// network:connect HOST:PORT and, when a credential is attached,
// secret:use NAME. The gate asks it after agent.toml's own rules passed,
// so cards narrow http_allow and secrets, never widen them. nil (the
// implicit agent, which holds every card) asks nothing.
func walletAuthorizer(w *cards.Wallet) egress.Authorizer {
	if w == nil {
		return nil
	}
	b := decide.Basis{Wallet: w}
	return func(host string, port int, credential string) error {
		if d := decide.Decide(b, decide.Connect(host, port)); !d.Allow {
			return &egress.Refusal{Rule: RuleNetworkCard, Reason: d.Reason}
		}
		if credential != "" {
			if d := decide.Decide(b, decide.Use(credential)); !d.Allow {
				return &egress.Refusal{Rule: RuleSecretCard, Reason: d.Reason}
			}
		}
		return nil
	}
}

// fetchFunc adapts the gate to the sandbox's http-fetch for tool, whose
// policy is p, and reports each decision to obs (if not nil). authz, if
// not nil, is the calling agent's authority (walletAuthorizer), asked on
// every request; agent names the caller in audit events. The values are copied field by field: the two sets of
// types are separate on purpose, so either side can change without the
// other.
func fetchFunc(g *egress.Gate, p *egress.Policy, obs Observer, tool, agent string, authz egress.Authorizer) sandbox.FetchFunc {
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		resp, ferr := g.Fetch(ctx, p, egress.Request{
			Method:        req.Method,
			URL:           req.URL,
			Headers:       toEgressHeaders(req.Headers),
			Body:          req.Body,
			Credential:    req.Credential,
			HasCredential: req.HasCredential,
			Authorize:     authz,
			Caller:        agent,
		})
		if obs != nil {
			ev := FetchEvent{Tool: tool, Allowed: true, Rule: egress.RuleAllowed}
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

// policies holds the egress policy of each tool of one configuration,
// compiled once (CA files parsed) and replaced when the configuration is.
type policies struct {
	cfg    *config.Config
	byTool map[string]*egress.Policy
	errs   map[string]error
	// narrowed holds the policies of bindings that narrow a tool's egress,
	// compiled on first use (agent + "\x00" + tool → compiledPolicy).
	narrowed sync.Map
}

// policySet returns the compiled policies of cfg, building them on first
// use after a configuration change.
func (h *Host) policySet(cfg *config.Config) *policies {
	if p := h.pols.Load(); p != nil && p.cfg == cfg {
		return p
	}
	h.polsMu.Lock()
	defer h.polsMu.Unlock()
	if p := h.pols.Load(); p != nil && p.cfg == cfg {
		return p
	}
	p := &policies{cfg: cfg, byTool: map[string]*egress.Policy{}, errs: map[string]error{}}
	for _, t := range cfg.Tools() {
		pol, err := egress.NewPolicy(t.Name, toolRules(cfg, t))
		if err != nil {
			p.errs[t.Name] = err
			continue
		}
		p.byTool[t.Name] = pol
	}
	if old := h.pols.Swap(p); old != nil {
		// Idle connections made under the old policy are not reused under
		// the new one.
		for _, pol := range old.byTool {
			pol.CloseIdleConnections()
		}
		old.narrowed.Range(func(_, v any) bool {
			if c := v.(compiledPolicy); c.pol != nil {
				c.pol.CloseIdleConnections()
			}
			return true
		})
	}
	return p
}
