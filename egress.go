package maiden

import (
	"context"
	"net/netip"
	"sync"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// This file is the seam between the egress gate and the rest of maiden:
// the gate knows neither agent.toml nor the sandbox. It takes egress.Rules
// (built here from a config.Tool) and its own request and response types
// (adapted here from and to the sandbox's). A later stage can narrow a
// tool's Rules per call (Rules.Intersect) before compiling a policy.

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

// fetchFunc adapts the gate to the sandbox's http-fetch for tool, whose
// policy is p, and reports each decision to obs (if not nil). The values
// are copied field by field: the two sets of types are separate on
// purpose, so either side can change without the other.
func fetchFunc(g *egress.Gate, p *egress.Policy, obs Observer, tool string) sandbox.FetchFunc {
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		resp, ferr := g.Fetch(ctx, p, egress.Request{
			Method:        req.Method,
			URL:           req.URL,
			Headers:       toEgressHeaders(req.Headers),
			Body:          req.Body,
			Credential:    req.Credential,
			HasCredential: req.HasCredential,
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
		pol, err := egress.NewPolicy(t.Name, egressRules(t))
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
