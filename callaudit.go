package maiden

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
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

// callRecord is the body of a call's audit records.
type callRecord struct {
	Session  string `json:"session,omitempty"`
	Rendered string `json:"rendered"`
	Card     string `json:"card,omitempty"`
	// Decision is the cards' answer about the call as Decide returned it
	// (authorize, or the last re-decision of a rewrite or a long approval
	// wait): the deciding card, bound and grant; on a denial also the
	// reason, rule, target and fix. An allowed call's record leaves out
	// its target and rule, which are its tool and rendering and its card,
	// bound and grant. Absent when the cards were not asked (the implicit
	// agent, a card built-in, a call refused before authorization).
	Decision   *api.Decision `json:"decision,omitempty"`
	Middleware []verdict     `json:"middleware,omitempty"`
	Approval   string        `json:"approval,omitempty"`
	Kind       ErrorKind     `json:"kind,omitempty"`
	Message    string        `json:"message,omitempty"`
	Error      string        `json:"error,omitempty"`
	DurationMS int64         `json:"duration_ms,omitempty"`
}

// appendJSON encodes r as JSON onto b: by hand on the path every call
// takes (json.Marshal of this struct costs about a microsecond, a
// twentieth of the tiny call), by encoding/json for the verdicts.
func (r *callRecord) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	field := func(name, v string) {
		if v == "" {
			return
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = appendJSONString(b, v)
	}
	field("session", r.Session)
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `"rendered":`...)
	b = appendJSONString(b, r.Rendered)
	field("card", r.Card)
	if d := r.Decision; d != nil {
		b = append(b, `,"decision":{"allow":`...)
		b = strconv.AppendBool(b, d.Allow)
		field("reason", d.Reason)
		field("rule", d.Rule)
		field("card", d.Card)
		field("bound", d.Bound)
		field("grant", d.Grant)
		field("target", d.Target)
		field("fix", d.Fix)
		b = append(b, '}')
	}
	if len(r.Middleware) > 0 {
		v, err := json.Marshal(r.Middleware)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"middleware":`...)
		b = append(b, v...)
	}
	field("approval", r.Approval)
	field("kind", string(r.Kind))
	field("message", r.Message)
	field("error", r.Error)
	if r.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendInt(b, r.DurationMS, 10)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does, without its HTML escaping).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				switch c {
				case '\n':
					b = append(b, '\\', 'n')
				case '\r':
					b = append(b, '\\', 'r')
				case '\t':
					b = append(b, '\\', 't')
				default:
					b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
				}
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// auditCall records a call refused before it ran (call-refused: the
// verdicts so far and the refusal) and one that failed after it was
// admitted (call-failed: the after-phase verdicts and the failure). A
// call that succeeded has its call-admitted record only: one record per
// call on the common path.
func (h *Host) auditCall(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		err := next(ctx, inv)
		if !inv.audited() || inv.agent == "" || (inv.admitted && err == nil && inv.res.OK) {
			return err
		}
		rec := callRecord{Session: inv.call.Session, Rendered: inv.renderText(), Decision: inv.recordedDecision(), Middleware: inv.trail}
		if inv.res.Error != nil {
			rec.Kind, rec.Message, rec.Approval = inv.res.Error.Kind, inv.res.Error.Message, inv.res.Error.Approval
		} else if err != nil {
			rec.Error = err.Error()
		}
		kind := store.AuditCallRefused
		if inv.admitted {
			kind = AuditCallFailed
			rec.Middleware = inv.trail[inv.trailAtAdmit:] // the rest are in its call-admitted record
			rec.DurationMS = time.Since(inv.start).Milliseconds()
		}
		if aerr := h.appendCallRecord(context.WithoutCancel(ctx), inv, kind, &rec); aerr != nil {
			h.log.Error("audit record not written", "kind", kind, "agent", inv.agent, "tool", inv.tool.Name, "err", aerr)
		}
		return err
	}
}

// AuditCallFailed is the audit kind of a call that failed after its
// call-admitted record (a deadline, a trap, a refused fetch, an output a
// layer withheld).
const AuditCallFailed = "call-failed"

// admitRecord writes the call-admitted record right before the tool runs;
// if it cannot be written, the call is refused.
func (h *Host) admitRecord(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if !inv.audited() || inv.admitted {
			inv.admitted = true
			return next(ctx, inv)
		}
		rec := callRecord{Session: inv.call.Session, Rendered: inv.renderText(), Card: inv.decision.Card, Decision: inv.recordedDecision(), Middleware: inv.trail, Approval: inv.approval}
		if err := h.appendCallRecord(ctx, inv, store.AuditCallAdmitted, &rec); err != nil {
			return fmt.Errorf("%w: the audit record of the call could not be written, so the call was refused: %v", ErrState, err)
		}
		inv.admitted, inv.trailAtAdmit = true, len(inv.trail)
		return next(ctx, inv)
	}
}

// recordedDecision is the call's decision as its record carries it (nil
// when the cards were not asked): as Decide returned it, less the target
// and rule of an allowed call, which the record holds already (callRecord).
func (inv *invocation) recordedDecision() *api.Decision {
	d := &inv.decision
	if !d.Allow && d.Reason == "" {
		return nil // not decided: a denial always says why
	}
	if d.Allow {
		return &api.Decision{Allow: true, Card: d.Card, Bound: d.Bound, Grant: d.GrantText(), Fix: d.Fix}
	}
	a := d.API()
	return &a
}

// auditEvent appends a record about the call that is not a decision
// (an approval requested): a failure is logged, not fatal.
func (h *Host) auditEvent(ctx context.Context, inv *invocation, kind string, body any) {
	if err := h.appendAudit(context.WithoutCancel(ctx), inv, kind, body); err != nil {
		h.log.Error("audit record not written", "kind", kind, "agent", inv.agent, "tool", inv.tool.Name, "err", err)
	}
}

// appendAudit writes one record of the call to the trail.
func (h *Host) appendAudit(ctx context.Context, inv *invocation, kind string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return h.appendRaw(ctx, inv, kind, b)
}

// appendCallRecord writes a call's own record.
func (h *Host) appendCallRecord(ctx context.Context, inv *invocation, kind string, rec *callRecord) error {
	var buf [256]byte
	b, err := rec.appendJSON(buf[:0])
	if err != nil {
		return err
	}
	return h.appendRaw(ctx, inv, kind, b)
}

func (h *Host) appendRaw(ctx context.Context, inv *invocation, kind string, body []byte) error {
	st, err := h.state(ctx, inv.cfg)
	if err != nil {
		return err
	}
	rec := store.AuditRecord{At: time.Now(), Kind: kind, Actor: "agent:" + inv.agent, Agent: inv.agent, Tool: inv.tool.Name, Body: body}
	return h.auditSink(st).append(ctx, rec)
}

// auditWriter is how records reach the trail: the store's audit journal
// (an append that survives kill -9 once it returns, ingested into the
// chain in batches: internal/store journal.go), or a transaction per
// record for a store without one.
type auditWriter interface {
	append(ctx context.Context, r store.AuditRecord) error
}

type journalAudit struct{ j *store.Journal }

func (a journalAudit) append(_ context.Context, r store.AuditRecord) error { return a.j.Append(r) }

type storeAudit struct{ st store.Store }

func (s storeAudit) append(ctx context.Context, r store.AuditRecord) error {
	_, err := s.st.AppendAudit(ctx, r)
	return err
}

func (h *Host) auditSink(st store.Store) auditWriter {
	if j, ok := st.(interface{ Journal() *store.Journal }); ok && j.Journal() != nil {
		return journalAudit{j.Journal()}
	}
	return storeAudit{st}
}

// flushAudit waits until every record this process appended is in the
// chain.
func flushAudit(ctx context.Context, st store.Store) error {
	if j, ok := st.(interface{ Journal() *store.Journal }); ok && j.Journal() != nil {
		return j.Journal().Flush(ctx)
	}
	return nil
}

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

// AuditRecord is one record of the audit trail (api.AuditRecord).
type AuditRecord = api.AuditRecord

// AuditTail returns up to limit records after sequence number after
// (limit <= 0: all), oldest first.
func (h *Host) AuditTail(ctx context.Context, after int64, limit int) ([]AuditRecord, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := flushAudit(ctx, st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	recs, err := adminOver(st, cfg).AuditTail(ctx, after, limit)
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
	if err := flushAudit(ctx, st); err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrState, err)
	}
	return adminOver(st, cfg).VerifyAudit(ctx)
}
