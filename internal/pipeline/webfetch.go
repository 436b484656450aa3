package pipeline

import (
	"context"

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
	out, terr := w.Run(ctx, inv.cfg, inv.agent, s, walletAuthorizer(inv.wallet), []byte(inv.call.Input))
	return out, terr, nil
}
