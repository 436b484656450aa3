package maiden

import (
	"context"
	"net/netip"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/egress"
)

// Resolver looks up host names for http-fetch. *net.Resolver satisfies it.
// Tests and embedders that run their own DNS supply one in Options; maiden
// resolves each allowed name once per connection and dials only the
// addresses it checked.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// policies holds the egress policy of each tool of one configuration,
// compiled once (CA files parsed) and replaced when the configuration is.
type policies struct {
	cfg    *config.Config
	byTool map[string]*egress.Policy
	errs   map[string]error
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
		pol, err := egress.NewPolicy(t)
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
	}
	return p
}
