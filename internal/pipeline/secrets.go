package pipeline

import (
	"context"

	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/secret"
	"github.com/maiden-run/maiden/internal/store"
)

// This file wires a call's secret handles (internal/secret: issued for
// {"$secret": NAME}, the marker for what decides, the handle for the tool,
// http-fetch's credential and reveal) into the pipeline.

// SecretHandlePrefix starts every secret handle a tool receives.
const SecretHandlePrefix = secret.HandlePrefix

// SecretMarkerPrefix starts the marker that stands for {"$secret": "NAME"}
// in what decides about a call: its rendering for cards, middleware,
// approvals and the audit trail.
const SecretMarkerPrefix = secret.MarkerPrefix

// AuditSecretReveal is the audit kind of a reveal (allowed or refused):
// the agent, session, tool, secret name, time and outcome; never the value.
const AuditSecretReveal = secret.AuditReveal

// RuleSecretHandle: a request's credential looked like a secret handle but
// is none of the call's (another call's, or made up).
const RuleSecretHandle = secret.RuleHandle

// secretStages are the two stages of a call's secret handles. They need
// nothing of the Host: what they read and write is the invocation's.
type secretStages struct{}

// handles is the stage that finds {"$secret": "NAME"} in the input of a
// tool whose backend takes handles (WebAssembly), checks NAME against the
// secrets the tool may use, and puts the marker "$secret:NAME" in its
// place for the rest of the pipeline (the tool gets a handle instead:
// runInput). It runs before anything renders or validates the input. A
// schema problem at a place that held a reference is explained as such.
func (secretStages) handles(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if !inv.backend.secretHandles() || !secret.MayRefer(inv.call.Input) {
			return next(ctx, inv)
		}
		v, err := inv.value()
		if err != nil {
			return err
		}
		hs, doc, err := secret.Issue(v, inv.tool.Secrets)
		if err != nil {
			return inv.fail(KindInput, err.Error())
		}
		if hs == nil {
			return next(ctx, inv)
		}
		text, err := secret.Marshal(doc)
		if err != nil {
			return inv.fail(KindInput, "input with secret references cannot be re-encoded: "+err.Error())
		}
		inv.setInput(text, doc)
		inv.secrets = hs
		err = next(ctx, inv)
		hs.ExplainSchemaProblem(inv.res.Error)
		return err
	}
}

// runInput is the stage right before the run: the tool gets its input
// with every marker of a secret this call issued a handle for replaced by
// that handle; everything before and after the run sees the markers.
func (secretStages) runInput(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		hs := inv.secrets
		if hs == nil { // none issued (handles), or a kind that takes none
			return next(ctx, inv)
		}
		text, err := secret.Marshal(hs.WithHandles(inv.input))
		if err != nil {
			return inv.fail(KindInput, "input with secret handles cannot be encoded: "+err.Error())
		}
		marked := inv.call.Input
		inv.call.Input = text
		defer func() { inv.call.Input = marked }()
		return next(ctx, inv)
	}
}

// callSecrets is what a call's secret handles need of the Host at run
// time (a WebAssembly tool's http-fetch and reveal): the trail their
// records go to, and the host's secrets (Host.lookupSecret).
type callSecrets struct {
	trail  *callaudit.Trail
	lookup func(name string) (string, bool)
}

// fetch resolves a handle passed as http-fetch's credential
// (secret.Fetch); a handle of no secret of this call is audited.
func (c callSecrets) fetch(ctx context.Context, inv *invocation, next sandbox.FetchFunc) sandbox.FetchFunc {
	return secret.Fetch(inv.secrets, next, func(body map[string]any) {
		if inv.audited() {
			auditEvent(ctx, c.trail, inv, store.AuditFetch, redactFetchBody(inv, body))
		}
	})
}

// reveal is the call's reveal (secret.Revealer): decided on the wallet
// the call was authorized on, the value from the host's secrets, every
// decision recorded.
func (c callSecrets) reveal(ctx context.Context, inv *invocation) sandbox.RevealFunc {
	return secret.Revealer{
		Handles: inv.secrets,
		Basis: decide.Basis{Wallet: inv.wallet, Implicit: inv.cfg != nil && inv.cfg.Implicit(),
			Binding: decide.Binding{Tool: inv.tool.Name, Secrets: inv.tool.Secrets, Reveal: inv.tool.Reveal}},
		Session: inv.sessionID(), // the default session by its ID
		Lookup:  c.lookup,
		Record:  func(rec *secret.RevealRecord) error { return c.record(ctx, inv, rec) },
	}.Func()
}

// record writes a reveal's audit record (a configuration without a trail
// logs it, to the trail's logger, instead).
func (c callSecrets) record(ctx context.Context, inv *invocation, rec *secret.RevealRecord) error {
	if !inv.audited() {
		c.trail.Log.Info("secret reveal", "agent", inv.agent, "tool", inv.tool.Name, "secret", rec.Secret, "outcome", rec.Outcome, "reason", rec.Reason)
		return nil
	}
	err := c.trail.Append(context.WithoutCancel(ctx), inv.auditCall(), AuditSecretReveal, rec)
	if err != nil {
		c.trail.Log.Error("audit record not written", "kind", AuditSecretReveal, "agent", inv.agent, "tool", inv.tool.Name, "secret", rec.Secret, "err", err)
	}
	return err
}
