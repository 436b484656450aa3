package pipeline

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/budget"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// webFetch runs web_fetch (session.WebFetch: its policy is the
// agent's web_fetch binding, every request through the egress gate with
// the agent's network and secret cards, the session's secret material
// resolved on the host and dropped when the session ends or its boundary
// is downgraded) in the call's session, on the wallet the call was
// authorized on.
func (d *builtinDeps) webFetch(ctx context.Context, inv *invocation, _ store.Store) (any, *store.Session, *ToolError, error) {
	// Marked before the session is read: an end or a downgrade that drops
	// its material after the read refuses this call's material.
	mark := d.materials.Mark()
	s, found, terr, err := lookupSession(ctx, d.sessions, inv)
	if err != nil || terr != nil {
		return nil, found, terr, err
	}
	w := session.WebFetch{Gate: d.gate, Lookup: d.lookupSecret, Materials: d.materials, Observer: d.observer, Mark: mark}
	if audited := inv.audited(); audited || inv.tr != nil {
		// Each request a record of the trail, with the decisions of the
		// agent's cards about it, and a span, as an http-fetch's
		// (auditFetch, traceFetch).
		w.Send = func(ctx context.Context, p *egress.Policy, r egress.Request) (*egress.Response, *egress.FetchError) {
			// The record's room is taken before the request is sent: one
			// its record could not follow is refused (as an http-fetch's,
			// callaudit.Fetch).
			var pending *callaudit.Pending
			if audited {
				var err error
				if pending, err = d.trail.Reserve(ctx, inv.auditCall(), callaudit.FetchRecordSize(r.URL, r.Credential)); err != nil {
					return nil, &egress.FetchError{Kind: egress.FetchDenied, Message: callaudit.RefusalReason("fetch", err), Rule: callaudit.RuleAuditTrail}
				}
				defer pending.Release()
			}
			var noted decisions
			if audited && inv.wallet != nil {
				r.Authorize = callegress.Noting(inv.wallet, noted.add)
			}
			method, host := r.Method, ""
			if method == "" {
				method = "GET"
			}
			if u, err := url.Parse(r.URL); err == nil {
				host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
			}
			ctx, end := inv.egressSpan(ctx, hostfs.ToolWebFetch, method, host)
			if inv.tr != nil && inv.tr.Propagates(host) {
				r.Headers = withEgressTraceContext(ctx, r.Headers)
			}
			resp, ferr := d.gate.Fetch(ctx, p, r)
			switch {
			case ferr != nil:
				end(0, 0, string(ferr.Kind))
			default:
				end(resp.Status, len(resp.Body), "")
			}
			if audited {
				pending.Event(ctx, store.AuditFetch, callaudit.RequestBody(r, noted.list(), resp, ferr))
			}
			return resp, ferr
		}
	}
	if inv.budget != nil {
		// Its requests count against the bytes_out budget of the card that
		// allowed the call, as a tool's http-fetches do.
		send := budget.SendFunc(d.gate.Fetch)
		if w.Send != nil {
			send = w.Send
		}
		w.Send = inv.budget.Send(send)
	}
	out, terr := w.Run(ctx, inv.cfg, inv.agent, s, walletAuthorizer(inv.wallet), []byte(inv.call.Input))
	return out, found, terr, nil
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

// withEgressTraceContext is withTraceContext for a request a host
// built-in sends (egress headers).
func withEgressTraceContext(ctx context.Context, hs []egress.Header) []egress.Header {
	in := make([]sandbox.Header, len(hs))
	for i, h := range hs {
		in[i] = sandbox.Header{Name: h.Name, Value: h.Value}
	}
	out := withTraceContext(ctx, in)
	res := make([]egress.Header, len(out))
	for i, h := range out {
		res[i] = egress.Header{Name: h.Name, Value: h.Value}
	}
	return res
}
