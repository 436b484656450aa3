package maiden

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is secret handles (issue 14, "Secrets as ... handles"). A
// WebAssembly tool's input may carry {"$secret": "NAME"} wherever the tool's
// schema allows a string, NAME being a secret the tool (as the agent's
// binding narrows it) may use. The host replaces it:
//
//   - for everything that decides about the call (authorization, middleware,
//     approvals, the audit trail) with the marker "$secret:NAME", so a grant
//     can name it (`tool:invoke t --token=$secret:GH_TOKEN`) and an approval
//     of the call stays the same call when it is asked again;
//   - for the tool alone, with a handle: "maiden-secret-handle:" and 128
//     random bits, issued for this one call (secretRunInput).
//
// The tool passes the handle as http-fetch's credential (the gate resolves
// it to NAME and applies the same checks as for a name: the tool's secrets,
// [secrets.NAME] destinations, the agent's secret:use card), or, built
// against maiden:tool@0.3.0, asks reveal for the value (revealFunc), which
// needs the binding's reveal list and a secret:reveal card and is audited
// either way. A handle of another call resolves to nothing.

// SecretHandlePrefix starts every secret handle a tool receives.
const SecretHandlePrefix = "maiden-secret-handle:"

// SecretMarkerPrefix starts the marker that stands for {"$secret": "NAME"}
// in what decides about a call: its rendering for cards, middleware,
// approvals and the audit trail.
const SecretMarkerPrefix = "$secret:"

// secretRefKey is the one key of a secret reference in a tool's input.
const secretRefKey = "$secret"

// AuditSecretReveal is the audit kind of a reveal (allowed or refused):
// the agent, session, tool, secret name, time and outcome; never the value.
const AuditSecretReveal = "secret-reveal"

// callSecrets is one call's secret handles: issued by secretHandles, looked
// up by the call's http-fetch and reveal. A nil *callSecrets has none.
type callSecrets struct {
	byHandle map[string]string // handle → secret name
	byName   map[string]string // secret name → handle
	refs     []secretRef       // where the input had {"$secret": ...}, in order

	mu       sync.Mutex
	revealed map[string]string                   // name → value revealed to the tool
	extra    atomic.Pointer[func(string) string] // redacts the revealed values
}

// secretRef is one {"$secret": NAME} of the input, for messages.
type secretRef struct {
	pointer string // JSON pointer, "" for the whole input
	name    string
}

// lookup resolves a handle of this call to its secret name.
func (cs *callSecrets) lookup(handle string) (string, bool) {
	if cs == nil {
		return "", false
	}
	name, ok := cs.byHandle[handle]
	return name, ok
}

// addRevealed makes the call's redactor hide value (as NAME) from now on.
func (cs *callSecrets) addRevealed(name, value string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.revealed == nil {
		cs.revealed = map[string]string{}
	}
	cs.revealed[name] = value
	f := egress.ValueRedactor(maps.Clone(cs.revealed))
	cs.extra.Store(&f)
}

// redactor is the call's redactor: base (the values of the tool's secrets
// as the gate looked them up at the call's start), then every value
// revealed to the tool during the call, as it was revealed.
func (cs *callSecrets) redactor(base func(string) string) func(string) string {
	if cs == nil {
		return base
	}
	return func(s string) string {
		s = base(s)
		if f := cs.extra.Load(); f != nil {
			s = (*f)(s)
		}
		return s
	}
}

// secretHandles is the stage that finds {"$secret": "NAME"} in a
// WebAssembly tool's input, checks NAME against the secrets the tool may
// use, and puts the marker "$secret:NAME" in its place for the rest of the
// pipeline (the tool gets a handle instead: secretRunInput). It runs before
// anything renders or validates the input. A schema problem at a place
// that held a reference is explained as such.
func (h *Host) secretHandles(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if !inv.backend.secretHandles() || !mayReferSecret(inv.call.Input) {
			return next(ctx, inv)
		}
		cs, doc, err := issueHandles(inv.input, inv.tool.Secrets)
		if err != nil {
			return inv.fail(KindInput, err.Error())
		}
		if cs == nil {
			return next(ctx, inv)
		}
		text, err := marshalInput(doc)
		if err != nil {
			return inv.fail(KindInput, "input with secret references cannot be re-encoded: "+err.Error())
		}
		inv.call.Input, inv.input, inv.secrets = text, doc, cs
		err = next(ctx, inv)
		cs.explainSchemaProblem(inv)
		return err
	}
}

// mayReferSecret tells whether an input's text can hold the key "$secret":
// literally, or spelt with a \u escape (JSON lets any character be one).
// Most inputs hold neither, and skip the walk.
func mayReferSecret(input string) bool {
	return strings.Contains(input, secretRefKey) || strings.Contains(input, `\u`)
}

// secretRunInput is the stage right before the run: the tool gets its
// input with every marker of a secret this call issued a handle for
// replaced by that handle; everything before and after the run sees the
// markers.
func (h *Host) secretRunInput(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		cs := inv.secrets
		if cs == nil { // none issued (secretHandles), or a kind that takes none
			return next(ctx, inv)
		}
		text, err := marshalInput(cs.withHandles(inv.input))
		if err != nil {
			return inv.fail(KindInput, "input with secret handles cannot be encoded: "+err.Error())
		}
		marked := inv.call.Input
		inv.call.Input = text
		defer func() { inv.call.Input = marked }()
		return next(ctx, inv)
	}
}

// issueHandles walks a parsed input for secret references. It returns nil
// (and doc unchanged) when there are none; otherwise the call's handles
// and the document with each reference replaced by its marker. A
// reference that is malformed or names a secret t may not use is an error
// naming its place; secrets are the names the tool may use.
func issueHandles(doc any, secrets []string) (*callSecrets, any, error) {
	var cs *callSecrets
	var walk func(v any, at string, depth int) (any, error)
	walk = func(v any, at string, depth int) (any, error) {
		if depth > maxInputDepth {
			return v, nil // the schema check refuses an input this deep
		}
		switch v := v.(type) {
		case map[string]any:
			if ref, isRef := v[secretRefKey]; isRef {
				name, err := refName(v, ref, at, secrets)
				if err != nil {
					return nil, err
				}
				if cs == nil {
					cs = &callSecrets{byHandle: map[string]string{}, byName: map[string]string{}}
				}
				if _, ok := cs.byName[name]; !ok {
					handle, err := newHandle()
					if err != nil {
						return nil, err
					}
					cs.byName[name], cs.byHandle[handle] = handle, name
				}
				cs.refs = append(cs.refs, secretRef{pointer: at, name: name})
				return SecretMarkerPrefix + name, nil
			}
			for k, e := range v {
				r, err := walk(e, at+"/"+escapePointer(k), depth+1)
				if err != nil {
					return nil, err
				}
				v[k] = r
			}
		case []any:
			for i, e := range v {
				r, err := walk(e, at+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				v[i] = r
			}
		}
		return v, nil
	}
	out, err := walk(doc, "", 1)
	if err != nil {
		return nil, doc, err
	}
	return cs, out, nil
}

// refName checks one {"$secret": ...} object.
func refName(obj map[string]any, ref any, at string, secrets []string) (string, error) {
	name, ok := ref.(string)
	switch {
	case !ok:
		return "", fmt.Errorf(`input at %s: "$secret" must name a secret (a string), got %s`, where(at), jsonKind(ref))
	case len(obj) != 1:
		keys := slices.Sorted(maps.Keys(obj))
		return "", fmt.Errorf(`input at %s: a secret reference is {"$secret": "NAME"} alone, but this object also has %s`, where(at), strings.Join(slices.DeleteFunc(keys, func(k string) bool { return k == secretRefKey }), ", "))
	case !slices.Contains(secrets, name):
		return "", fmt.Errorf(`input at %s: {"$secret": %s}: not a secret this tool may use`, where(at), strconv.Quote(truncate(name, 64)))
	}
	return name, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// newHandle is a fresh handle: 128 random bits.
func newHandle() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("no randomness for a secret handle: %w", err)
	}
	return SecretHandlePrefix + hex.EncodeToString(b[:]), nil
}

// withHandles returns a copy of doc in which every string that is the
// marker of a secret this call issued a handle for is that handle. A
// marker may have moved (a middleware's rewrite), so it is found by value,
// not by place; a marker the caller typed as text is treated like the
// reference it spells, which the same name check admitted.
func (cs *callSecrets) withHandles(doc any) any {
	var walk func(v any, depth int) any
	walk = func(v any, depth int) any {
		if depth > maxInputDepth {
			return v
		}
		switch v := v.(type) {
		case string:
			if name, ok := strings.CutPrefix(v, SecretMarkerPrefix); ok {
				if handle, ok := cs.byName[name]; ok {
					return handle
				}
			}
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = walk(e, depth+1)
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = walk(e, depth+1)
			}
			return out
		}
		return v
	}
	return walk(doc, 1)
}

// marshalInput encodes a parsed input (numbers as json.Number keep their
// text) without HTML escaping.
func marshalInput(doc any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// explainSchemaProblem rewords a schema refusal at a place that held a
// secret reference: the tool's schema does not admit a string there.
func (cs *callSecrets) explainSchemaProblem(inv *invocation) {
	e := inv.res.Error
	if e == nil || e.Kind != KindInput || !strings.HasPrefix(e.Message, "input does not match the tool's schema") {
		return
	}
	for _, r := range cs.refs {
		if strings.Contains(e.Message, "at "+where(r.pointer)+": ") {
			e.Message = fmt.Sprintf(`{"$secret": %q} at %s: the tool's schema does not admit a string there, so it cannot take a secret handle (%s)`, r.name, where(r.pointer), e.Message)
			return
		}
	}
}

// secretFetch resolves a handle passed as http-fetch's credential to its
// secret name before the gate (and the audit of the request) see it. A
// handle of no secret of this call is refused here, and audited.
func (h *Host) secretFetch(ctx context.Context, inv *invocation, next sandbox.FetchFunc) sandbox.FetchFunc {
	cs := inv.secrets
	return func(fctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		if !req.HasCredential || !strings.HasPrefix(req.Credential, SecretHandlePrefix) {
			return next(fctx, req)
		}
		name, ok := cs.lookup(req.Credential)
		if !ok {
			msg := "credential: not a secret handle of this call (a handle is valid only during the call whose input carried it)"
			if inv.audited() {
				body := map[string]any{"method": req.Method, "credential": "(a handle of no secret of this call)", "allowed": false, "error": string(sandbox.FetchDenied), "rule": RuleSecretHandle}
				if u, err := url.Parse(req.URL); err == nil {
					body["host"], body["path"] = u.Host, u.Path
				}
				h.auditEvent(ctx, inv, store.AuditFetch, body)
			}
			return nil, &sandbox.FetchError{Kind: sandbox.FetchDenied, Message: msg}
		}
		req.Credential = name
		return next(fctx, req)
	}
}

// RuleSecretHandle: a request's credential looked like a secret handle but
// is none of the call's (another call's, or made up).
const RuleSecretHandle = "secret-handle"

// revealRecord is the body of an AuditSecretReveal record.
type revealRecord struct {
	Session string `json:"session,omitempty"`
	Secret  string `json:"secret,omitempty"`
	Outcome string `json:"outcome"` // "allowed" or "denied"
	Reason  string `json:"reason,omitempty"`
	// Decision is the reveal's decision as Decide returned it (absent
	// when the handle was not this call's, which is asked first).
	Decision *api.Decision `json:"decision,omitempty"`
}

// revealFunc decides a tool's reveal (maiden:tool@0.3.0; the component can
// only call it if it imports it). The value is returned only if the handle
// is this call's, the binding allows revealing its secret (reveal in
// agent.toml, within the tool's secrets), and the agent's pinned wallet
// holds secret:reveal NAME (the implicit agent holds every card). Every
// decision is an audit record; an allowed reveal whose record cannot be
// written is refused. The value joins the call's redactor before it is
// returned.
func (h *Host) revealFunc(ctx context.Context, inv *invocation) sandbox.RevealFunc {
	cs := inv.secrets
	return func(_ context.Context, handle string) (string, error) {
		rec := revealRecord{Session: inv.sessionID(), Outcome: "denied"} // the default session by its ID
		deny := func(reason string) (string, error) {
			rec.Reason = reason
			h.recordReveal(ctx, inv, &rec)
			return "", errors.New(reason)
		}
		name, ok := cs.lookup(handle)
		if !ok {
			return deny("not a secret handle of this call (a handle is valid only during the call whose input carried it)")
		}
		rec.Secret = name
		// The binding (reveal, within the tool's secrets), then the
		// agent's pinned wallet (the implicit agent holds every card).
		b := decide.Basis{Wallet: inv.wallet, Implicit: inv.cfg != nil && inv.cfg.Implicit(),
			Binding: decide.Binding{Tool: inv.tool.Name, Secrets: inv.tool.Secrets, Reveal: inv.tool.Reveal}}
		d := decide.Decide(b, decide.Reveal(name))
		a := d.API()
		rec.Decision = &a
		if !d.Allow {
			return deny(d.Reason)
		}
		value, ok := h.lookupSecret(name)
		if !ok || value == "" {
			return deny(fmt.Sprintf("secret %s has no value on the host", name))
		}
		if !utf8.ValidString(value) {
			return deny(fmt.Sprintf("the value of secret %s is not UTF-8 text, which reveal returns", name))
		}
		rec.Outcome = "allowed"
		if err := h.recordReveal(ctx, inv, &rec); err != nil {
			rec.Outcome = "denied"
			return "", fmt.Errorf("the audit record of revealing %s could not be written, so it was refused", name)
		}
		cs.addRevealed(name, value)
		return value, nil
	}
}

// recordReveal writes a reveal's audit record (a configuration without a
// trail logs it instead).
func (h *Host) recordReveal(ctx context.Context, inv *invocation, rec *revealRecord) error {
	if !inv.audited() {
		h.log.Info("secret reveal", "agent", inv.agent, "tool", inv.tool.Name, "secret", rec.Secret, "outcome", rec.Outcome, "reason", rec.Reason)
		return nil
	}
	err := h.appendAudit(context.WithoutCancel(ctx), inv, AuditSecretReveal, rec)
	if err != nil {
		h.log.Error("audit record not written", "kind", AuditSecretReveal, "agent", inv.agent, "tool", inv.tool.Name, "secret", rec.Secret, "err", err)
	}
	return err
}
