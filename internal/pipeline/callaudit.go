package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// The audit trail of calls (X3; the records and their writing are
// internal/callaudit's). A configuration that uses no state (no [agents],
// no middleware, no operators) has no trail, as before.

// audited reports whether calls under the invocation's configuration are
// audited: whenever the configuration uses the state store.
func (inv *invocation) audited() bool { return inv.cfg != nil && inv.cfg.UsesState() && !inv.noAudit }

// callRecord is the body of a call's audit records.
type callRecord = callaudit.Record[verdict]

// auditCall is whose records the call writes (no tool's name before the
// policy stage found the tool).
func (inv *invocation) auditCall() callaudit.Call {
	c := callaudit.Call{Cfg: inv.cfg, Agent: inv.agent}
	if inv.tool != nil {
		c.Tool = inv.tool.Name
	}
	return c
}

// auditStages are the two stages of the call's audit records, holding
// what they need (the Host's trail: its store getter and logger; the hash
// of a loaded component's definition, toolSchemas.hash), not the Host.
type auditStages struct {
	trail      *callaudit.Trail
	schemaHash func(sandbox.LoadInfo) string
}

// call records a call refused before it ran (call-refused: the verdicts
// so far and the refusal), one that failed after it was admitted
// (call-failed: the after-phase verdicts and the failure) and one that
// succeeded (call-succeeded: its duration, the tool's kind, the output's
// size, the after-phase verdicts). An admitted call thus has two records,
// its admission before the run and its outcome after; the outcome is
// written through the same journal (a mapped append, no transaction).
func (a auditStages) call(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		err := next(ctx, inv)
		if !inv.audited() || inv.agent == "" {
			return err
		}
		if inv.admitted && err == nil && inv.res.OK {
			rec := callRecord{Session: inv.call.Session, Rendered: inv.renderText(), Middleware: inv.trail[inv.trailAtAdmit:],
				DurationMS: time.Since(inv.start).Milliseconds(), ToolKind: toolKind(inv.backend), OutputBytes: int64(len(inv.res.Output)), TraceID: inv.traceID()}
			a.provenance(inv, &rec)
			if aerr := callaudit.AppendRecord(context.WithoutCancel(ctx), a.trail, inv.auditCall(), AuditCallSucceeded, &rec); aerr != nil {
				a.trail.Log.Error("audit record not written", "kind", AuditCallSucceeded, "agent", inv.agent, "tool", inv.tool.Name, "err", aerr)
			}
			return err
		}
		rec := callRecord{Session: inv.call.Session, Rendered: inv.renderText(), Decision: inv.recordedDecision(), Middleware: inv.trail, Budget: inv.budget.Record(), TraceID: inv.traceID()}
		a.provenance(inv, &rec)
		if !inv.admitted {
			rec.BeforeRewrite, rec.RewritesTruncated = inv.beforeRewrite, inv.rewritesCut
			// The fs decisions made before the refusal: a file built-in's
			// path its cards refused is one (the session stage).
			rec.FS, rec.FSTruncated = recordedFS(inv.fsDecisions)
			// The credential's secret:use, allowed or the refusal.
			rec.SecretUse = recordedWhole(inv.credentialDecision)
		}
		if inv.res.Error != nil {
			rec.Kind, rec.Message, rec.Approval = inv.res.Error.Kind, inv.res.Error.Message, inv.res.Error.Approval
		} else if err != nil {
			rec.Error = err.Error()
		}
		if inv.sess != nil {
			rev := inv.sess.Boundary.Revision // the boundary the call was decided under
			rec.BoundaryRevision = &rev
		}
		// A refused call's kind too: a replay of a boundary expansion
		// must not take a [tools] entry named like a built-in for it.
		rec.ToolKind = toolKind(inv.backend)
		kind := store.AuditCallRefused
		if inv.admitted {
			kind = AuditCallFailed
			rec.Middleware = inv.trail[inv.trailAtAdmit:] // the rest are in its call-admitted record
			rec.DurationMS = time.Since(inv.start).Milliseconds()
		}
		if aerr := callaudit.AppendRecord(context.WithoutCancel(ctx), a.trail, inv.auditCall(), kind, &rec); aerr != nil {
			a.trail.Log.Error("audit record not written", "kind", kind, "agent", inv.agent, "tool", inv.tool.Name, "err", aerr)
		}
		return err
	}
}

// AuditCallFailed is the audit kind of a call that failed after its
// call-admitted record (a deadline, a trap, a refused fetch, an output a
// layer withheld).
const AuditCallFailed = callaudit.KindCallFailed

// AuditCallSucceeded is the audit kind of a call's outcome when its tool
// returned output (callaudit.KindCallSucceeded).
const AuditCallSucceeded = callaudit.KindCallSucceeded

// toolKind names a backend's kind as the outcome records say it.
func toolKind(b backend) string {
	switch b.(type) {
	case *wasmBackend:
		return "wasm"
	case *cliBackend:
		return "cli"
	case *importBackend:
		return "mcp"
	case *builtinBackend:
		return "builtin"
	}
	return ""
}

// admit writes the call-admitted record right before the tool runs; if it
// cannot be written, the call is refused.
func (a auditStages) admit(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if !inv.audited() || inv.admitted {
			inv.admitted = true
			return next(ctx, inv)
		}
		rec := callRecord{Session: inv.call.Session, Rendered: inv.renderText(), Card: inv.decidedCard(), Decision: inv.recordedDecision(), Middleware: inv.trail, Approval: inv.approval, Budget: inv.budget.Record(), TraceID: inv.traceID()}
		a.provenance(inv, &rec)
		rec.BeforeRewrite, rec.RewritesTruncated = inv.beforeRewrite, inv.rewritesCut
		rec.FS, rec.FSTruncated = recordedFS(inv.fsDecisions)
		rec.SecretUse = recordedWhole(inv.credentialDecision)
		if err := callaudit.AppendRecord(ctx, a.trail, inv.auditCall(), store.AuditCallAdmitted, &rec); err != nil {
			return fmt.Errorf("%w: the audit record of the call could not be written, so the call was refused: %v", ErrState, err)
		}
		inv.admitted, inv.trailAtAdmit = true, len(inv.trail)
		return next(ctx, inv)
	}
}

// provenance sets what rec says of the call's WebAssembly component:
// its digest as the cards are asked it (inv.component: an oci:// tool's
// pinned manifest digest, with the signer that verified it; a local
// file's SHA-256 as opened, marked local) and the hash of the definition
// the opened version reported (the one a schema pin compares). Nothing
// for a wrapped CLI, an MCP import or a built-in: they have no component
// (their approvals bind a hash of their configuration instead,
// toolIdentity); of a file that did not open, no schema, and no digest
// unless it is an oci:// tool's pinned one.
func (a auditStages) provenance(inv *invocation, rec *callRecord) {
	rec.Component = inv.component()
	if o := inv.tool.OCI; o != nil {
		rec.Signer = o.Signer
	} else {
		rec.ComponentLocal = rec.Component != ""
	}
	if inv.opened != nil {
		rec.Schema = a.schemaHash(inv.opened.LoadInfo)
	}
}

// recordedDecision is the call's decision as its record carries it (nil
// when the cards were not asked): as Decide returned it, less the target
// and rule of an allowed call, which the record holds already (callRecord);
// the component it was asked about stays, which a replay asks again.
func (inv *invocation) recordedDecision() *api.Decision {
	d := inv.decision
	if d == nil || !d.Allow && d.Reason == "" {
		return nil // not decided: a denial always says why
	}
	if d.Allow {
		return &api.Decision{Allow: true, Card: d.Card, Bound: d.Bound, Grant: d.GrantText(), Fix: d.Fix, Wallet: d.Wallet, Component: d.Asked.Component}
	}
	a := d.API()
	return &a
}

// recordedFS is the call's fs decisions as its call-admitted record
// carries them (at most callaudit.MaxFSDecisions, and whether more were
// made): each with its target, which is the question a replay asks again;
// an allowed one without its rule (its card, bound and grant).
func recordedFS(ds []cards.Decision) ([]api.Decision, bool) {
	if len(ds) == 0 {
		return nil, false
	}
	ds, cut := callaudit.Capped(ds, callaudit.MaxFSDecisions)
	out := make([]api.Decision, len(ds))
	for i := range ds {
		out[i] = *recordedWhole(&ds[i])
	}
	return out, cut
}

// recordedWhole is a decision as a record carries one whose question the
// record names nowhere else (an fs decision, an import credential's
// secret:use): whole, with its target, which is the question a replay asks
// again; an allowed one without its rule (its card, bound and grant). nil
// for nil.
func recordedWhole(d *cards.Decision) *api.Decision {
	if d == nil {
		return nil
	}
	a := d.API()
	if d.Allow {
		a.Rule = ""
	}
	return &a
}

// AuditRecord is one record of the audit trail (api.AuditRecord).
type AuditRecord = api.AuditRecord
