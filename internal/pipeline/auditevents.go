package pipeline

import (
	"context"
	"github.com/maiden-run/maiden/api"

	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// The records a call's run writes beside its decisions (each http-fetch,
// web_fetch request and wrapped CLI CONNECT, a reveal), on the trail the
// backend is given (the Host's: newBackends), not through the Host.

// auditEvent appends a record about the call that is not a decision
// (a request it made): a failure is logged, not fatal.
func auditEvent(ctx context.Context, trail *callaudit.Trail, inv *invocation, kind string, body any) {
	trail.Event(ctx, inv.auditCall(), kind, body)
}

// auditFetch wraps a call's http-fetch so that each request's decision is
// a record of the trail, with the decisions of the agent's cards about it
// (callaudit.Fetch, callegress.Decisions); the record's room is taken in
// the trail before the request is sent, and a request it cannot have is
// refused (callaudit.Trail.Reserve).
func auditFetch(ctx context.Context, trail *callaudit.Trail, inv *invocation, fetch sandbox.FetchFunc) sandbox.FetchFunc {
	if !inv.audited() {
		return fetch
	}
	return callaudit.Fetch(fetch, callegress.Decisions, func(ctx context.Context, req sandbox.FetchRequest) (*callaudit.Pending, error) {
		return trail.Reserve(ctx, inv.auditCall(), callaudit.FetchRecordSize(req.URL, req.Credential))
	}, func(p *callaudit.Pending, body map[string]any) {
		p.Event(ctx, store.AuditFetch, redactFetchBody(inv, body))
	})
}

// redactFetchBody hides, in the text of a fetch record the tool chose
// (method, host, path, credential), the values revealed to it during the
// call: a tool that reveals a key and puts it in a URL's path (or sends it
// as its method, any HTTP token of up to 32 bytes, or names it as its
// credential) leaves no copy of it in the trail.
func redactFetchBody(inv *invocation, body map[string]any) map[string]any {
	red := inv.secrets.Redactor(nil)
	if red == nil {
		return body
	}
	for _, k := range []string{"method", "host", "path", "credential"} {
		if s, ok := body[k].(string); ok {
			body[k] = red(s)
		}
	}
	redactDecisions(body, red)
	return body
}

// redactDecisions passes the text of a fetch record's card decisions that
// quotes what was asked (its target, the reason, the fix) through red:
// the host and path a decision names are the tool's text as the record's
// own are.
func redactDecisions(body map[string]any, red func(string) string) {
	ds, ok := body["decisions"].([]api.Decision)
	if !ok || red == nil {
		return
	}
	out := make([]api.Decision, len(ds))
	for i, d := range ds {
		d.Target, d.Reason, d.Fix = red(d.Target), red(d.Reason), red(d.Fix)
		out[i] = d
	}
	body["decisions"] = out
}
