package secret

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// AuditReveal is the audit kind of a reveal (allowed or refused): the
// agent, session, tool, secret name, time and outcome; never the value.
const AuditReveal = "secret-reveal"

// RuleHandle: a request's credential looked like a secret handle but is
// none of the call's (another call's, or made up).
const RuleHandle = "secret-handle"

// Fetch resolves a handle passed as http-fetch's credential to its secret
// name before the gate (and the audit of the request) see it. A handle of
// no secret of this call is refused here; refused is given the fetch
// audit record's body of that refusal to write.
func Fetch(hs *Handles, next sandbox.FetchFunc, refused func(body map[string]any)) sandbox.FetchFunc {
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		if !req.HasCredential || !strings.HasPrefix(req.Credential, HandlePrefix) {
			return next(ctx, req)
		}
		name, ok := hs.Lookup(req.Credential)
		if !ok {
			body := map[string]any{"method": req.Method, "credential": "(a handle of no secret of this call)", "allowed": false, "error": string(sandbox.FetchDenied), "rule": RuleHandle}
			if u, err := url.Parse(req.URL); err == nil {
				body["host"], body["path"] = u.Host, u.Path
			}
			refused(body)
			return nil, &sandbox.FetchError{Kind: sandbox.FetchDenied, Message: "credential: not a secret handle of this call (a handle is valid only during the call whose input carried it)"}
		}
		req.Credential = name
		return next(ctx, req)
	}
}

// RevealRecord is the body of an AuditReveal record.
type RevealRecord struct {
	Session string `json:"session,omitempty"`
	Secret  string `json:"secret,omitempty"`
	Outcome string `json:"outcome"` // "allowed" or "denied"
	Reason  string `json:"reason,omitempty"`
	// Decision is the reveal's decision as Decide returned it (absent
	// when the handle was not this call's, which is asked first).
	Decision *api.Decision `json:"decision,omitempty"`
}

// Revealer is what a call's reveal needs: its handles, the basis the
// call was authorized on (the pinned wallet, the implicit agent, the
// binding's secrets and reveal list), its session, where secret values
// come from, and how a reveal's record is written (an error refuses an
// allowed reveal).
type Revealer struct {
	Handles *Handles
	Basis   decide.Basis
	Session string
	Lookup  func(name string) (string, bool)
	Record  func(*RevealRecord) error
}

// Func decides a tool's reveal (maiden:tool@0.3.0; the component can only
// call it if it imports it). The value is returned only if the handle is
// this call's, the binding allows revealing its secret (reveal in
// agent.toml, within the tool's secrets), and the agent's pinned wallet
// holds secret:reveal NAME (the implicit agent holds every card). Every
// decision is an audit record; an allowed reveal whose record cannot be
// written is refused. The value joins the call's redactor before it is
// returned.
func (r Revealer) Func() sandbox.RevealFunc {
	return func(_ context.Context, handle string) (string, error) {
		rec := RevealRecord{Session: r.Session, Outcome: "denied"}
		deny := func(reason string) (string, error) {
			rec.Reason = reason
			r.Record(&rec)
			return "", errors.New(reason)
		}
		name, ok := r.Handles.Lookup(handle)
		if !ok {
			return deny("not a secret handle of this call (a handle is valid only during the call whose input carried it)")
		}
		rec.Secret = name
		// The binding (reveal, within the tool's secrets), then the
		// agent's pinned wallet (the implicit agent holds every card).
		d := decide.Decide(r.Basis, decide.Reveal(name))
		a := d.API()
		rec.Decision = &a
		if !d.Allow {
			return deny(d.Reason)
		}
		value, ok := r.Lookup(name)
		if !ok || value == "" {
			return deny(fmt.Sprintf("secret %s has no value on the host", name))
		}
		if !utf8.ValidString(value) {
			return deny(fmt.Sprintf("the value of secret %s is not UTF-8 text, which reveal returns", name))
		}
		rec.Outcome = "allowed"
		if err := r.Record(&rec); err != nil {
			rec.Outcome = "denied"
			return "", fmt.Errorf("the audit record of revealing %s could not be written, so it was refused", name)
		}
		r.Handles.AddRevealed(name, value)
		return value, nil
	}
}
