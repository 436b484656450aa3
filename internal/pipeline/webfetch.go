package pipeline

import (
	"context"
	"slices"
	"sync"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// builtinWebFetch runs web_fetch (session.WebFetch: its policy is the
// agent's web_fetch binding, every request through the egress gate with
// the agent's network and secret cards, the session's secret material
// resolved on the host and dropped when the session ends or its boundary
// is downgraded) in the call's session, on the wallet the call was
// authorized on.
func (h *Host) builtinWebFetch(ctx context.Context, inv *invocation, _ store.Store) (any, *ToolError, error) {
	s, terr, err := h.session(ctx, inv)
	if err != nil || terr != nil {
		return nil, terr, err
	}
	w := session.WebFetch{Gate: h.gate, Lookup: h.opts.LookupSecret, Materials: &h.material, Observer: h.opts.Observer}
	if inv.audited() {
		// Each request a record of the trail, with the decisions of the
		// agent's cards about it, as an http-fetch's is (auditFetch).
		w.Send = func(ctx context.Context, p *egress.Policy, r egress.Request) (*egress.Response, *egress.FetchError) {
			var noted decisions
			if inv.wallet != nil {
				r.Authorize = callegress.Noting(inv.wallet, noted.add)
			}
			resp, ferr := h.gate.Fetch(ctx, p, r)
			h.auditEvent(ctx, inv, store.AuditFetch, callaudit.RequestBody(r, noted.list(), resp, ferr))
			return resp, ferr
		}
	}
	out, terr := w.Run(ctx, inv.cfg, inv.agent, s, walletAuthorizer(inv.wallet), []byte(inv.call.Input))
	return out, terr, nil
}

// decisions collects the decisions of one request's Authorizer
// (callegress.Noting), whatever goroutine the gate asks it on.
type decisions struct {
	mu sync.Mutex
	ds []api.Decision
}

func (d *decisions) add(x api.Decision) {
	d.mu.Lock()
	d.ds = append(d.ds, x)
	d.mu.Unlock()
}

func (d *decisions) list() []api.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ds)
}
