package maiden

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// The audit trail of calls (X3). Every decision is a record in the state
// store's hash-chained trail: a call admitted (with the cards and the
// middleware verdicts that let it through) is recorded before its tool
// runs, and if the record cannot be written the call is refused, never run
// unaudited; a call refused, each http-fetch decision and the outcome are
// recorded too. A configuration that uses no state (no [agents], no
// middleware, no operators) has no trail, as before.

// audited reports whether calls under the invocation's configuration are
// audited: whenever the configuration uses the state store.
func (inv *invocation) audited() bool { return inv.cfg != nil && inv.cfg.UsesState() && !inv.noAudit }

// auditCall records how a call ended when it was refused before running
// (the admitted record is written by admitRecord, before the run), and
// the outcome of one that ran.
func (h *Host) auditCall(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		err := next(ctx, inv)
		if !inv.audited() || inv.agent == "" {
			return err
		}
		body := map[string]any{"session": inv.call.Session, "rendered": grant.Rendering(inv.rendered)}
		if len(inv.trail) > 0 {
			body["middleware"] = inv.trail
		}
		if inv.res.Error != nil {
			body["kind"], body["message"] = inv.res.Error.Kind, inv.res.Error.Message
			if inv.res.Error.Approval != "" {
				body["approval"] = inv.res.Error.Approval
			}
		} else if err != nil {
			body["error"] = err.Error()
		}
		kind := store.AuditCallRefused
		if inv.admitted {
			kind = AuditCallDone
			body["ok"] = inv.res.OK
			body["duration_ms"] = time.Since(inv.start).Milliseconds()
			delete(body, "middleware") // in the admitted record, except the after-phase ones below
			if len(inv.trail) > inv.trailAtAdmit {
				body["middleware"] = inv.trail[inv.trailAtAdmit:]
			}
		}
		if aerr := h.appendAudit(context.WithoutCancel(ctx), inv, kind, body); aerr != nil {
			h.log.Error("audit record not written", "kind", kind, "agent", inv.agent, "tool", inv.tool.Name, "err", aerr)
		}
		return err
	}
}

// AuditCallDone is the audit kind of a call's outcome (after its
// call-admitted record).
const AuditCallDone = "call-done"

// admitRecord writes the call-admitted record right before the tool runs;
// if it cannot be written, the call is refused.
func (h *Host) admitRecord(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if !inv.audited() || inv.admitted {
			inv.admitted = true
			return next(ctx, inv)
		}
		body := map[string]any{"session": inv.call.Session, "rendered": grant.Rendering(inv.rendered)}
		if inv.decidedBy != "" {
			body["card"] = inv.decidedBy
		}
		if len(inv.trail) > 0 {
			body["middleware"] = inv.trail
		}
		if inv.approval != "" {
			body["approval"] = inv.approval
		}
		if err := h.appendAudit(ctx, inv, store.AuditCallAdmitted, body); err != nil {
			return fmt.Errorf("%w: the audit record of the call could not be written, so the call was refused: %v", ErrState, err)
		}
		inv.admitted, inv.trailAtAdmit = true, len(inv.trail)
		return next(ctx, inv)
	}
}

// auditEvent appends a record about the call that is not a decision
// (an approval requested): a failure is logged, not fatal.
func (h *Host) auditEvent(ctx context.Context, inv *invocation, kind string, body map[string]any) {
	if err := h.appendAudit(context.WithoutCancel(ctx), inv, kind, body); err != nil {
		h.log.Error("audit record not written", "kind", kind, "agent", inv.agent, "tool", inv.tool.Name, "err", err)
	}
}

// appendAudit writes one record of the call to the trail.
func (h *Host) appendAudit(ctx context.Context, inv *invocation, kind string, body map[string]any) error {
	st, err := h.state(ctx, inv.cfg)
	if err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	rec := store.AuditRecord{At: time.Now(), Kind: kind, Actor: "agent:" + inv.agent, Agent: inv.agent, Tool: inv.tool.Name, Body: b}
	_, err = h.auditSink(st).append(ctx, rec)
	return err
}

// auditWriter is how records reach the trail: group commit in the store.
type auditWriter interface {
	append(ctx context.Context, r store.AuditRecord) (store.AuditRecord, error)
}

type storeAudit struct{ st store.Store }

func (s storeAudit) append(ctx context.Context, r store.AuditRecord) (store.AuditRecord, error) {
	if g, ok := s.st.(interface {
		AppendAuditGroup(context.Context, store.AuditRecord) (store.AuditRecord, error)
	}); ok {
		return g.AppendAuditGroup(ctx, r)
	}
	return s.st.AppendAudit(ctx, r)
}

func (h *Host) auditSink(st store.Store) auditWriter { return storeAudit{st} }

// auditFetch wraps a call's http-fetch so that each request's decision is
// a record of the trail (method, host, path without the query, the
// credential's name, allowed or the rule that refused, the status; never a
// secret value, never the body).
func (h *Host) auditFetch(ctx context.Context, inv *invocation, fetch sandbox.FetchFunc) sandbox.FetchFunc {
	if !inv.audited() {
		return fetch
	}
	return func(fctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		resp, ferr := fetch(fctx, req)
		body := map[string]any{"method": req.Method, "credential": req.Credential}
		if u, err := url.Parse(req.URL); err == nil {
			body["host"], body["path"] = u.Host, u.Path
		}
		switch {
		case ferr != nil:
			body["allowed"] = ferr.Kind != sandbox.FetchDenied
			body["error"] = string(ferr.Kind)
		default:
			body["allowed"], body["status"] = true, resp.Status
		}
		h.auditEvent(ctx, inv, store.AuditFetch, body)
		return resp, ferr
	}
}

// AuditRecord is one record of the audit trail.
type AuditRecord = store.AuditRecord

// AuditTail returns up to limit records after sequence number after
// (limit <= 0: all), oldest first.
func (h *Host) AuditTail(ctx context.Context, after int64, limit int) ([]AuditRecord, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	recs, err := st.AuditTail(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return recs, nil
}

// VerifyAudit checks the trail's hash chain: the number of records and the
// head hash, or an error naming the first bad record (edited, deleted,
// inserted or reordered).
func (h *Host) VerifyAudit(ctx context.Context) (n int64, head string, err error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return 0, "", err
	}
	return st.VerifyAudit(ctx)
}
