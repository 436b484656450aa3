package maiden

import (
	"context"

	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// This file wires the web_fetch built-in (internal/builtin.WebFetch) into
// the host: its policy is the agent's web_fetch binding (there is no
// [tools] entry: the binding is the whole policy, and without http_allow it
// reaches nothing), every request goes through the same egress gate as
// http-fetch with the agent's network and secret cards, and the session's
// secret material (the binding's credential and secret headers) is
// resolved on the host, used only inside web_fetch, and dropped when the
// session ends or its boundary is downgraded.

func init() {
	builtins[hostfs.ToolWebFetch] = builtin{
		session: true,
		description: "Fetch a URL over HTTPS through maiden's egress gate (the hosts this agent's web_fetch binding allows; no redirects followed; the body capped). " +
			"Needs network enabled in this session's sandbox boundary: otherwise it fails with sandbox_boundary_required and the requiredExpansion to ask for.",
		input: hostfs.WebFetchInputSchema, output: hostfs.WebFetchOutputSchema,
		readOnly: false, idempotent: false,
		runInv: (*Host).builtinWebFetch,
	}
}

func (h *Host) builtinWebFetch(ctx context.Context, inv *invocation, _ store.Store) (any, *ToolError, error) {
	sess, terr, err := h.session(ctx, inv)
	if err != nil || terr != nil {
		return nil, terr, err
	}
	b, _, _ := inv.cfg.AgentBinding(inv.agent, hostfs.ToolWebFetch)
	m, terr := h.material.Resolve(sess, b, h.opts.LookupSecret)
	if terr != nil {
		return nil, terr, nil
	}
	pol, err := egress.NewPolicy(hostfs.ToolWebFetch, session.WebFetchRules(inv.cfg, b))
	if err != nil {
		return nil, &ToolError{Kind: KindConfig, Message: "web_fetch's policy: " + err.Error()}, nil
	}
	authz := walletAuthorizer(inv.wallet)
	fetch := func(ctx context.Context, r egress.Request) (*egress.Response, *egress.FetchError) {
		r.Authorize, r.Caller = authz, inv.agent
		resp, ferr := h.gate.Fetch(ctx, pol, r)
		if h.opts.Observer != nil {
			ev := FetchEvent{Tool: hostfs.ToolWebFetch, Allowed: true, Rule: egress.RuleAllowed}
			if ferr != nil {
				ev.Allowed, ev.Rule = ferr.Kind != egress.FetchDenied, ferr.Rule
			}
			h.opts.Observer.Fetch(ev)
		}
		return resp, ferr
	}
	out, err := hostfs.WebFetch(ctx, sess.Boundary, []byte(inv.call.Input), fetch, m)
	if err != nil {
		return nil, session.Failure(err), nil
	}
	return out, nil, nil
}
