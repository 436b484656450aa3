package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/cardtools"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the built-ins' backend (config.BuiltinTools): tools maiden
// performs itself, bound by an agent like any tool and called through the
// same pipeline. The card built-ins (internal/cardtools) are operations an
// agent performs on its own wallet; the session built-ins
// (sessionbuiltins.go, webfetch.go) run in the call's session.

// builtin describes one built-in tool.
type builtin struct {
	verb        string // the card:VERB grant it needs
	description string
	input       string // JSON Schema
	output      string // JSON Schema
	readOnly    bool
	destructive bool
	idempotent  bool
	// card is a card built-in's operation (internal/cardtools).
	card func(ctx context.Context, c cardtools.Cards, input []byte) (any, *cardtools.Refusal, error)

	// A session built-in (sessionbuiltins.go: fs_*, web_fetch,
	// request_sandbox_boundary, session_open) is authorized like a tool,
	// by a tool:invoke NAME card matching its rendered arguments, runs in
	// the call's session, and is listed for an agent whenever bound. It
	// has runInv instead of verb and card.
	session bool
	runInv  sessionRun
	// files: a file built-in (fs_read, fs_write, fs_list), whose path the
	// agent's fs:read / fs:write cards decide besides its tool:invoke.
	files bool
}

// sessionRun is a session built-in's operation, given what it needs of the
// Host (d), the call, and the state store.
// It returns the session it looked up (if any) beside its output, which
// the run stage keeps in the invocation (the audit record names it).
type sessionRun func(d *builtinDeps, ctx context.Context, inv *invocation, st store.Store) (any, *store.Session, *ToolError, error)

// builtinDeps are what the built-ins need of the Host, built once in
// newBackends and shared by every built-in's backend.
type builtinDeps struct {
	// state is the state store of a configuration (stateHolder.get); wallet an
	// agent's pinned wallet from it (stateHolder.wallet).
	state  func(ctx context.Context, cfg *config.Config) (store.Store, error)
	wallet func(ctx context.Context, cfg *config.Config, agent string, at time.Time) (*cards.Wallet, error)
	// sessions is the Host's session gate (the call's session); human the
	// one wait for a human (a boundary request's).
	sessions *session.Gate
	human    *humanWait
	// web_fetch's: the egress gate, Options.LookupSecret, the sessions'
	// secret material, Options.Observer, and the trail each request's
	// record goes to.
	gate         *egress.Gate
	lookupSecret func(name string) (string, bool)
	materials    *session.Materials
	observer     Observer
	trail        *callaudit.Trail
	log          *slog.Logger
	// maxSessions bounds the live sessions an agent holds for
	// session_open (store.OpenSessionWithin); 0 is
	// store.DefaultMaxSessions. Only tests set it.
	maxSessions int
}

var builtins = map[string]builtin{}

func init() {
	for name, t := range cardtools.Tools {
		builtins[name] = builtin{
			verb: t.Verb, description: t.Description, input: t.Input, output: t.Output,
			readOnly: t.ReadOnly, destructive: t.Destructive, idempotent: t.Idempotent, card: t.Run,
		}
	}
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
		if !ok || (!bi.session && !cardtools.MayUse(w, bi.verb)) {
			continue
		}
		info, _ := (&builtinBackend{name: name, op: bi}).describe(ctx, cfg, config.Tool{})
		out = append(out, info...)
	}
	return out, nil
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
// policy). It holds what it needs of the Host (deps), not the Host.
type builtinBackend struct {
	deps *builtinDeps
	name string
	op   builtin
}

// resolve finds the built-in for the call's agent: one it does not see
// (not bound, or no card allows its verb) is ErrUnknownTool.
func (b *builtinBackend) resolve(ctx context.Context, cfg *config.Config, call Call, at time.Time) (resolved, *ToolError, error) {
	bnd, agentOK, bound := cfg.AgentBinding(call.Agent, call.Tool)
	if cfg.Implicit() || !agentOK || !bound || !bnd.Builtin {
		// An agent agent.toml does not declare (removed, misspelt, "")
		// has no built-ins, whatever cards the store still holds for it.
		return resolved{}, nil, fmt.Errorf("%w %q for agent %q", ErrUnknownTool, call.Tool, call.Agent)
	}
	w, err := b.deps.wallet(ctx, cfg, call.Agent, at)
	if err != nil {
		return resolved{}, nil, err
	}
	if !b.op.session && !cardtools.MayUse(w, b.op.verb) {
		return resolved{}, nil, fmt.Errorf("%w %q for agent %q (no card of it allows card:%s)", ErrUnknownTool, call.Tool, call.Agent, b.op.verb)
	}
	input := call.Input
	if len(bytes.TrimSpace([]byte(input))) == 0 {
		input = "{}"
	}
	// No tool:invoke card decides a card built-in (its card:VERB grants
	// do, in the store), so a middleware rewrite is not re-authorized
	// here; the operation checks the rewritten input itself.
	return resolved{agent: call.Agent, tool: &config.Tool{Name: call.Tool, Timeout: config.DefaultTimeout}, bindName: call.Tool, input: input, wallet: w}, nil, nil
}

// carded: a session built-in is decided like a tool, by a tool:invoke
// card matching its rendered arguments (authorize); a card built-in by its
// card:VERB grant (resolve) and the store's rules in the operation.
func (b *builtinBackend) carded() bool { return b.op.session }

func (b *builtinBackend) secretHandles() bool         { return false }
func (b *builtinBackend) preopens() bool              { return false }
func (b *builtinBackend) files() bool                 { return b.op.files }
func (b *builtinBackend) pooled() bool                { return false }
func (b *builtinBackend) confined(config.Tool) bool   { return false }
func (b *builtinBackend) typedCommands(ToolInfo) bool { return false }

// credential: none the host attaches itself; web_fetch's secrets are
// decided by its gate per request (webfetch.go).
func (b *builtinBackend) credential(*config.Tool) (string, string) { return "", "" }

func (b *builtinBackend) parse(context.Context, *invocation) (parsed, *ToolError, error) {
	return parsed{}, nil, nil
}

// open: nothing to load; the operation reads its input strictly itself
// (decodeInput).
func (b *builtinBackend) open(context.Context, *invocation, bool) (loaded, *ToolError, error) {
	return loaded{}, nil, nil
}

func (b *builtinBackend) reparse(_ *invocation, doc any) ([]grant.Arg, *command.Invocation, error) {
	args, err := grant.RenderJSONInput(doc)
	return args, nil, err
}

func (b *builtinBackend) identity(*invocation) string { return "builtin:" + b.name }

// approvalPolicy is its binding's (web_fetch's hosts and secret
// material); a file built-in's, the path it would touch as resolved in the
// call's session (a relative path is beneath the session's workspace, so
// the same input is another file in another session, or after a reset:
// an approval is not bound to the session, so it is bound to the path);
// the others reach nothing.
func (b *builtinBackend) approvalPolicy(inv *invocation) ApprovalPolicy {
	bnd, _, _ := inv.cfg.AgentBinding(inv.agent, b.name)
	t := config.Tool{Name: b.name, Timeout: inv.tool.Timeout}
	if b.name == hostfs.ToolWebFetch {
		t.HTTPAllow, t.HTTPPorts, t.HTTPAllowCIDRs, t.HTTPCAFiles = bnd.HTTPAllow, bnd.HTTPPorts, bnd.HTTPAllowCIDRs, bnd.HTTPCAFiles
		t.Secrets = session.MaterialNames(bnd)
		if bnd.ProxySecret != "" {
			t.Secrets = append(t.Secrets, bnd.ProxySecret)
		}
	}
	p := basePolicy(inv.cfg, t)
	if b.op.files && inv.sess != nil {
		// inv.sess is the session the session stages held (and held
		// again after the wait): the boundary the run resolves the path in.
		if path, a, ok := hostfs.Target(b.name, inv.sess.Boundary, []byte(inv.call.Input)); ok {
			if a == boundary.Write {
				p.WritePaths = []string{path}
			} else {
				p.ReadPaths = []string{path}
			}
		}
	}
	return p
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
func (b *builtinBackend) run(ctx context.Context, inv *invocation) (ran, *ToolError, error) {
	st, err := b.deps.state(ctx, inv.cfg)
	if err != nil {
		return ran{}, nil, err
	}
	r := ran{logs: []LogEntry{}}
	var out any
	var terr *ToolError
	if b.op.session {
		out, r.sess, terr, err = b.op.runInv(b.deps, ctx, inv, st)
	} else {
		// The card rules are admin's, acting as the agent on the wallet
		// its visibility was decided on (the same code as maiden cards).
		as := adminlink.As(st, inv.cfg, inv.builtinWallet).(cardtools.Cards)
		var rf *cardtools.Refusal
		if out, rf, err = b.op.card(ctx, as, []byte(inv.call.Input)); err != nil {
			err = fmt.Errorf("%w: %v", ErrState, err)
		} else if rf != nil {
			terr = &ToolError{Kind: rf.Kind, Message: rf.Message}
		}
	}
	if err != nil || terr != nil {
		return r, terr, err
	}
	text, err := json.Marshal(out)
	if err != nil {
		return r, nil, err
	}
	r.output = string(text)
	return r, nil, nil
}

// decodeInput reads a built-in's input strictly: unknown fields are an
// error, as its schema says.
func decodeInput(tool string, input []byte, v any) *ToolError {
	if r := cardtools.DecodeInput(tool, input, v); r != nil {
		return &ToolError{Kind: r.Kind, Message: r.Message}
	}
	return nil
}
