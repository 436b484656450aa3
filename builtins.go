package maiden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/maiden-run/maiden/config"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the built-in tools (config.BuiltinTools): card operations an
// agent performs on its own wallet over MCP, so a parent agent can hand a
// sub-agent a narrower card and take it back. The store acts as the agent
// (store.AgentActor), so its attenuation and authority rules hold exactly
// as for the CLI's operator, minus the operator's privileges.

// builtin describes one built-in tool.
type builtin struct {
	verb        string // the card:VERB grant it needs
	description string
	input       string // JSON Schema
	output      string // JSON Schema
	readOnly    bool
	destructive bool
	idempotent  bool
	run         func(h *Host, ctx context.Context, cfg *config.Config, st store.Store, w *cards.Wallet, input []byte) (any, *ToolError, error)

	// A session built-in (sessionbuiltins.go: fs_*, web_fetch,
	// request_sandbox_boundary, session_open) is authorized like a tool,
	// by a tool:invoke NAME card matching its rendered arguments, runs in
	// the call's session, and is listed for an agent whenever bound. It
	// has runInv instead of verb and run.
	session bool
	runInv  func(h *Host, ctx context.Context, inv *invocation, st store.Store) (any, *ToolError, error)
}

var builtins = map[string]builtin{
	"cards_list": {
		verb:        "inspect",
		description: "List the permission cards in your own wallet (revoked ones included) that a card:inspect grant lets you see: each card's ID, grants, expiry and lineage.",
		input:       `{"type":"object","properties":{},"additionalProperties":false}`,
		output:      `{"type":"object","properties":{"cards":{"type":"array","items":{"type":"object"}}},"required":["cards"]}`,
		readOnly:    true, idempotent: true,
		run: (*Host).builtinList,
	},
	"cards_derive": {
		verb: "derive",
		description: "Derive a narrower card from a card you hold and put it in another agent's wallet (attenuation only: every grant must be under the parent card's, and the parent's exceptions, ceiling and expiry are kept). " +
			"Grants are strings like \"tool:invoke weather --city=Paris\".",
		input: `{"type":"object","properties":{` +
			`"card":{"type":"string","description":"the ID of the parent card, which you hold"},` +
			`"to":{"type":"string","description":"the agent that receives the new card"},` +
			`"grants":{"type":"array","items":{"type":"string"},"minItems":1,"description":"what the new card allows, each as class:verb resource, e.g. tool:invoke weather --city=Paris"},` +
			`"expires_in":{"type":"string","description":"how long the new card lasts, a duration such as 30m or 1h (default: as long as the parent)"}},` +
			`"required":["card","to","grants"],"additionalProperties":false}`,
		output: `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`,
		run:    (*Host).builtinDerive,
	},
	"cards_transfer": {
		verb:        "transfer",
		description: "Move a card you hold to another agent's wallet (system cards stay put).",
		input: `{"type":"object","properties":{` +
			`"card":{"type":"string","description":"the ID of the card, which you hold"},` +
			`"to":{"type":"string","description":"the agent that receives it"}},"required":["card","to"],"additionalProperties":false}`,
		output:      `{"type":"object","properties":{"card":{"type":"string"},"to":{"type":"string"}},"required":["card","to"]}`,
		destructive: true,
		run:         (*Host).builtinTransfer,
	},
	"cards_revoke": {
		verb:        "revoke",
		description: "Revoke a card you hold or derived (directly or not), and with it every card derived from it; returns how many cards were revoked.",
		input: `{"type":"object","properties":{` +
			`"card":{"type":"string","description":"the ID of the card to revoke"}},"required":["card"],"additionalProperties":false}`,
		output:      `{"type":"object","properties":{"revoked":{"type":"integer"}},"required":["revoked"]}`,
		destructive: true, idempotent: true,
		run: (*Host).builtinRevoke,
	},
}

// BuiltinsFor returns the built-in tools agent sees: those bound to it in
// agent.toml whose card:VERB grant (card:inspect for cards_list,
// card:derive, card:transfer, card:revoke) one of its live cards allows on
// a card it holds. The answer follows the store: a grant or revocation
// changes it at the next call. A configuration without [agents] has none.
func (h *Host) BuiltinsFor(ctx context.Context, agent string) ([]ToolInfo, error) {
	cfg := h.cfg.Load()
	if cfg.Implicit() {
		return nil, nil
	}
	a, ok := cfg.Agent(agent)
	if !ok {
		return nil, fmt.Errorf("%w %q in %s (%s)", ErrUnknownAgent, agent, cfg.File(), agentNames(cfg))
	}
	var names []string
	for _, b := range a.Bindings {
		if b.Builtin {
			names = append(names, b.Tool)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	w, err := h.wallet(ctx, cfg, agent, time.Now())
	if err != nil {
		return nil, err
	}
	var out []ToolInfo
	for _, name := range names {
		bi, ok := builtins[name]
		if !ok || (!bi.session && !mayUse(w, bi.verb)) {
			continue
		}
		info, _ := (&builtinBackend{name: name, op: bi}).describe(ctx, cfg, config.Tool{})
		out = append(out, info...)
	}
	return out, nil
}

// mayUse reports whether the wallet allows card:verb on some card it holds.
func mayUse(w *cards.Wallet, verb string) bool {
	for _, c := range w.Cards() {
		if w.Decide(grant.CardTarget(verb, c.ID)).Allow {
			return true
		}
	}
	return false
}

// CallBuiltin runs the built-in tool call.Tool for call.Agent. A built-in
// the agent does not see (not bound, or no card allows its verb) is
// ErrUnknownTool, as for any tool that does not exist for it. A refused
// operation is a Result of kind denied whose message names the store's
// rule (not-allowed, lower-bound-too-broad, card-expired, system-card,
// ...); malformed input (a grant that does not parse: where and what was
// expected) is kind input. A store that cannot answer is ErrState.
//
// A built-in's call is a call like any tool's (Call): the same pipeline,
// its backend (builtinBackend) deciding what differs. CallBuiltin only
// refuses a name that is not a built-in here (a [tools] entry of the same
// name shadows it).
func (h *Host) CallBuiltin(ctx context.Context, call Call) (Result, error) {
	if h.closed.Load() {
		return Result{Tool: call.Tool}, ErrClosed
	}
	if _, ok := h.kindsOf(h.cfg.Load()).of(call.Tool).(*builtinBackend); !ok {
		return Result{}, fmt.Errorf("%w %q for agent %q", ErrUnknownTool, call.Tool, call.Agent)
	}
	return h.Call(ctx, call)
}

// builtinBackend is one built-in's backend: an operation maiden performs
// itself (no tool file, no [tools] entry: the agent's binding is its whole
// policy).
type builtinBackend struct {
	h    *Host
	name string
	op   builtin
}

// resolve finds the built-in for the call's agent: one it does not see
// (not bound, or no card allows its verb) is ErrUnknownTool.
func (b *builtinBackend) resolve(ctx context.Context, cfg *config.Config, inv *invocation) error {
	call := inv.call
	bnd, agentOK, bound := cfg.AgentBinding(call.Agent, call.Tool)
	if cfg.Implicit() || !agentOK || !bound || !bnd.Builtin {
		// An agent agent.toml does not declare (removed, misspelt, "")
		// has no built-ins, whatever cards the store still holds for it.
		return fmt.Errorf("%w %q for agent %q", ErrUnknownTool, call.Tool, call.Agent)
	}
	w, err := b.h.wallet(ctx, cfg, call.Agent, inv.start)
	if err != nil {
		return err
	}
	if !b.op.session && !mayUse(w, b.op.verb) {
		return fmt.Errorf("%w %q for agent %q (no card of it allows card:%s)", ErrUnknownTool, call.Tool, call.Agent, b.op.verb)
	}
	if len(bytes.TrimSpace([]byte(inv.call.Input))) == 0 {
		inv.call.Input = "{}"
	}
	// No tool:invoke card decides a card built-in (its card:VERB grants
	// do, in the store), so a middleware rewrite is not re-authorized
	// here; the operation checks the rewritten input itself.
	inv.cfg, inv.agent, inv.tool, inv.bindName = cfg, call.Agent, config.Tool{Name: call.Tool, Timeout: config.DefaultTimeout}, call.Tool
	inv.builtinWallet = w
	return nil
}

// carded: a session built-in is decided like a tool, by a tool:invoke
// card matching its rendered arguments (authorize); a card built-in by its
// card:VERB grant (resolve) and the store's rules in the operation.
func (b *builtinBackend) carded() bool { return b.op.session }

func (b *builtinBackend) secretHandles() bool                      { return false }
func (b *builtinBackend) preopens() bool                           { return false }
func (b *builtinBackend) confined(config.Tool) bool                { return false }
func (b *builtinBackend) typedCommands(ToolInfo) bool              { return false }
func (b *builtinBackend) parse(context.Context, *invocation) error { return nil }

// open: nothing to load; the operation reads its input strictly itself
// (decodeInput).
func (b *builtinBackend) open(ctx context.Context, inv *invocation, next handler) error {
	return next(ctx, inv)
}

func (b *builtinBackend) reparse(_ *invocation, input string) ([]grant.Arg, *command.Invocation, error) {
	args, err := grant.Render([]byte(input))
	return args, nil, err
}

func (b *builtinBackend) identity(*invocation) string { return "builtin:" + b.name }

// approvalPolicy is its binding's (web_fetch's hosts and secret
// material); the others reach nothing.
func (b *builtinBackend) approvalPolicy(inv *invocation) ApprovalPolicy {
	bnd, _, _ := inv.cfg.AgentBinding(inv.agent, b.name)
	t := config.Tool{Name: b.name, Timeout: inv.tool.Timeout}
	if b.name == hostfs.ToolWebFetch {
		t.HTTPAllow, t.HTTPPorts, t.HTTPAllowCIDRs, t.HTTPCAFiles = bnd.HTTPAllow, bnd.HTTPPorts, bnd.HTTPAllowCIDRs, bnd.HTTPCAFiles
		t.Secrets = materialNames(bnd)
		if bnd.ProxySecret != "" {
			t.Secrets = append(t.Secrets, bnd.ProxySecret)
		}
	}
	return basePolicy(inv.cfg, t)
}

// describe is the built-in as tools/list shows it (BuiltinsFor lists the
// ones an agent sees).
func (b *builtinBackend) describe(context.Context, *config.Config, config.Tool) ([]ToolInfo, error) {
	bi := b.op
	return []ToolInfo{{
		Name: b.name, Description: bi.description, InputSchema: bi.input, OutputSchema: bi.output,
		Hints: Hints{ReadOnly: bi.readOnly, Destructive: bi.destructive, Idempotent: bi.idempotent},
	}}, nil
}

func (b *builtinBackend) check(context.Context, config.Tool) (LoadReport, error) {
	return LoadReport{Tool: b.name}, nil
}

func (b *builtinBackend) commandSpec(context.Context, config.Tool) (*command.Spec, error) {
	return nil, fmt.Errorf("%w %q", ErrUnknownTool, b.name)
}

// run performs the built-in's operation.
func (b *builtinBackend) run(ctx context.Context, inv *invocation) error {
	h := b.h
	st, err := h.state(ctx, inv.cfg)
	if err != nil {
		return err
	}
	var out any
	var terr *ToolError
	if b.op.session {
		out, terr, err = b.op.runInv(h, ctx, inv, st)
	} else {
		out, terr, err = b.op.run(h, ctx, inv.cfg, st, inv.builtinWallet, []byte(inv.call.Input))
	}
	inv.res.Logs = []LogEntry{}
	switch {
	case err != nil:
		return err
	case terr != nil:
		inv.res.Error = terr
		return nil
	}
	text, err := json.Marshal(out)
	if err != nil {
		return err
	}
	inv.res.OK, inv.res.Output = true, string(text)
	return nil
}

// decodeInput reads a built-in's input strictly: unknown fields are an
// error, as its schema says.
func decodeInput(tool string, input []byte, v any) *ToolError {
	d := json.NewDecoder(bytes.NewReader(input))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return &ToolError{Kind: KindInput, Message: fmt.Sprintf("%s: the input does not fit its schema: %v", tool, err)}
	}
	return nil
}

// storeRefusal sorts a store error: a refusal by the card rules or an
// unknown name is the caller's (a ToolError), anything else is the store's.
func storeRefusal(op string, err error) (*ToolError, error) {
	for _, e := range []error{store.ErrNotAllowed, cards.ErrLowerBoundTooBroad, cards.ErrUpperBoundTooBroad, cards.ErrCardExpired,
		cards.ErrCardRevoked, cards.ErrInstallRecipientMismatch, cards.ErrSystemCard, cards.ErrEmptyCard} {
		if errors.Is(err, e) {
			return &ToolError{Kind: KindDenied, Message: op + ": " + err.Error()}, nil
		}
	}
	for _, e := range []error{store.ErrUnknownCard, store.ErrUnknownAgent, store.ErrBadInput} {
		if errors.Is(err, e) {
			return &ToolError{Kind: KindInput, Message: op + ": " + err.Error()}, nil
		}
	}
	return nil, fmt.Errorf("%w: %s: %v", ErrState, op, err)
}

// heldCard returns card id if agent holds it; a card held by another agent
// is answered exactly like one that does not exist.
func heldCard(ctx context.Context, st store.Store, agent, id string) (cards.Card, *ToolError, error) {
	c, err := st.Card(ctx, id)
	if errors.Is(err, store.ErrUnknownCard) || (err == nil && c.Holder != agent) {
		return cards.Card{}, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("%s: agent %q holds no card %q", store.ErrNotAllowed, agent, id)}, nil
	}
	if err != nil {
		return cards.Card{}, nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return c, nil, nil
}

// declaredRecipient checks that to is an agent of the configuration.
func declaredRecipient(cfg *config.Config, to string) *ToolError {
	if _, ok := cfg.Agent(to); !ok {
		return &ToolError{Kind: KindInput, Message: fmt.Sprintf("no agent %q in %s (%s)", to, cfg.File(), agentNames(cfg))}
	}
	return nil
}

func (h *Host) builtinList(ctx context.Context, _ *config.Config, st store.Store, w *cards.Wallet, input []byte) (any, *ToolError, error) {
	var in struct{}
	if terr := decodeInput("cards_list", input, &in); terr != nil {
		return nil, terr, nil
	}
	all, err := st.Cards(ctx, w.Agent())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	out := []cards.Card{}
	for _, c := range all {
		if w.Decide(grant.CardTarget("inspect", c.ID)).Allow {
			out = append(out, c)
		}
	}
	return map[string]any{"cards": out}, nil, nil
}

func (h *Host) builtinDerive(ctx context.Context, cfg *config.Config, st store.Store, w *cards.Wallet, input []byte) (any, *ToolError, error) {
	var in struct {
		Card      string   `json:"card"`
		To        string   `json:"to"`
		Grants    []string `json:"grants"`
		ExpiresIn string   `json:"expires_in"`
	}
	if terr := decodeInput("cards_derive", input, &in); terr != nil {
		return nil, terr, nil
	}
	if len(in.Grants) == 0 {
		return nil, &ToolError{Kind: KindInput, Message: "cards_derive: grants is empty; name at least one grant, e.g. \"tool:invoke weather --city=Paris\""}, nil
	}
	gs := make([]grant.Grant, len(in.Grants))
	for i, s := range in.Grants {
		g, err := grant.Parse(s)
		if err != nil {
			return nil, &ToolError{Kind: KindInput, Message: fmt.Sprintf("cards_derive: grants[%d]: %v", i, err)}, nil
		}
		gs[i] = g
	}
	var expires time.Time
	if in.ExpiresIn != "" {
		d, err := time.ParseDuration(in.ExpiresIn)
		if err != nil || d <= 0 {
			return nil, &ToolError{Kind: KindInput, Message: fmt.Sprintf("cards_derive: expires_in %q: want a positive duration such as 30m or 1h", in.ExpiresIn)}, nil
		}
		expires = time.Now().Add(d)
	}
	if terr := declaredRecipient(cfg, in.To); terr != nil {
		return nil, terr, nil
	}
	parent, terr, err := heldCard(ctx, st, w.Agent(), in.Card)
	if terr != nil || err != nil {
		return nil, terr, err
	}
	c, err := st.Derive(ctx, store.AgentActor(w.Agent()), parent.ID, in.To, cards.Child(parent, gs, expires))
	if err != nil {
		terr, err := storeRefusal(fmt.Sprintf("deriving from card %s for agent %q", parent.ID, in.To), err)
		return nil, terr, err
	}
	return map[string]any{"id": c.ID}, nil, nil
}

func (h *Host) builtinTransfer(ctx context.Context, cfg *config.Config, st store.Store, w *cards.Wallet, input []byte) (any, *ToolError, error) {
	var in struct {
		Card string `json:"card"`
		To   string `json:"to"`
	}
	if terr := decodeInput("cards_transfer", input, &in); terr != nil {
		return nil, terr, nil
	}
	if terr := declaredRecipient(cfg, in.To); terr != nil {
		return nil, terr, nil
	}
	if _, terr, err := heldCard(ctx, st, w.Agent(), in.Card); terr != nil || err != nil {
		return nil, terr, err
	}
	if err := st.Transfer(ctx, store.AgentActor(w.Agent()), in.Card, in.To); err != nil {
		terr, err := storeRefusal(fmt.Sprintf("transferring card %s to agent %q", in.Card, in.To), err)
		return nil, terr, err
	}
	return map[string]any{"card": in.Card, "to": in.To}, nil, nil
}

func (h *Host) builtinRevoke(ctx context.Context, _ *config.Config, st store.Store, w *cards.Wallet, input []byte) (any, *ToolError, error) {
	var in struct {
		Card string `json:"card"`
	}
	if terr := decodeInput("cards_revoke", input, &in); terr != nil {
		return nil, terr, nil
	}
	if strings.TrimSpace(in.Card) == "" {
		return nil, &ToolError{Kind: KindInput, Message: "cards_revoke: card is empty; name the ID of the card to revoke"}, nil
	}
	n, err := st.Revoke(ctx, store.AgentActor(w.Agent()), in.Card)
	if errors.Is(err, store.ErrUnknownCard) {
		// Worded as for a card outside the agent's reach.
		return nil, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("revoking card %s: %s: agent %q holds neither it nor any card it was derived from", in.Card, store.ErrNotAllowed, w.Agent())}, nil
	}
	if err != nil {
		terr, err := storeRefusal(fmt.Sprintf("revoking card %s", in.Card), err)
		return nil, terr, err
	}
	return map[string]any{"revoked": n}, nil, nil
}
