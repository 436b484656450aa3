package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/budget"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/chain"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/jsonparse"
	"github.com/maiden-run/maiden/internal/jsonschema"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/secret"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/trace"
	"github.com/maiden-run/maiden/internal/worker"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// The call path is a pipeline: one invocation value passes through stages,
// each a func(handler) handler that does its part and calls the next. New
// assembles them once, in order; a new policy (authorization, approval,
// audit, quotas) is a new stage here, not an edit of Host.Call. A stage
// ends a call early by setting the invocation's result (a tool-level
// failure the caller sees) or by returning an error (the call could not be
// made). Every kind of tool, built-ins included, passes the same stages;
// what differs by kind is asked of the tool's backend (backend.go).

// invocation is one call on its way through the stages.
type invocation struct {
	call  Call
	start time.Time
	res   Result

	// Set by the stages, in order.
	backend  backend // the tool's kind (policy.resolve)
	bindName string  // the name the agent binds: the tool's, an import's NAME
	cfg      *config.Config
	agent    string // resolved: DefaultAgent when the configuration declares none
	// tool is the tool as the agent's binding narrows it: shared with
	// every call of the same configuration, agent and tool (exposures),
	// so read, never written through; nil until the policy stage.
	tool   *config.Tool
	policy *egress.Policy
	// The call's input is checked once (input.check: scanned as
	// jsonparse.ParseStrict reads it, strictly, so that every JSON reader
	// reads its text as one value) and decoded at most once, by the first
	// stage that needs the value (value: a declared agent's rendering,
	// secret references, middleware, a command tool's parse, a schema the
	// fast check cannot decide on), and every view of it derives from
	// that value: input is the value (when decoded); inputText the text
	// it is of and scanned that text's scan (what the schema check reads
	// while the value is not decoded: validateInput); call.Input the text
	// the tool receives (inputText, or with secret handles the value
	// encoded again: secretRunInput); rendered its canonical arguments,
	// what cards, conditions, approvals and the audit see (render, or a
	// command tool's parse: nil until then, and for the implicit agent
	// with no middleware); renderedText their text (renderText); digest
	// the SHA-256 of the text, what an approval is bound to (digest). A
	// middleware's rewrite is decoded once in turn and re-derives them all
	// (rewrite).
	input     any
	decoded   bool // input holds inputText's value
	inputText string
	scanned   jsonparse.Scanned
	rendered  []grant.Arg
	// renderedText caches grant.Rendering(rendered); "" until asked
	// (renderText), reset when a layer rewrites the input.
	renderedText string
	digested     inputDigest
	wallet       *cards.Wallet // the wallet the call was authorized on, pinned for its http-fetches (nil for the implicit agent)
	opened       *sandbox.Tool
	schema       *inputSchema
	output       *inputSchema // the tool's output schema; nil if it declares none

	// cmd is a wrapped CLI's or a command-tree WebAssembly tool's parsed
	// call (parse); nil for a JSON-input tool.
	cmd *command.Invocation
	// toolCmd is the command description of a command-tree WebAssembly
	// tool the call was parsed with (wasmcommand.go); openErr is why
	// parse could not open the tool, which loadAndValidate reports
	// (opened holds the version it did open).
	toolCmd *toolCommand
	openErr error
	// upstreamTool is an imported tool's name on its MCP server.
	upstreamTool string
	// decision is the cards' answer about the call (authorize; a rewrite
	// or a long approval wait decides again): what its audit records say.
	// nil when the cards were not asked (the implicit agent, a built-in
	// decided by its own grant): a Decision is ~490 bytes, a third of the
	// invocation, which every call allocates (issue 23). Replaced, never
	// written through.
	decision *cards.Decision
	// credentialDecision is the cards' answer about secret:use of the
	// credential the host itself attaches to the call (an import's:
	// decideCredential), asked once tool:invoke allowed it; nil when the
	// call has none or it was not asked.
	credentialDecision *cards.Decision
	// beforeRewrite are the decisions on each input a layer then rewrote
	// (rewrite), the agent's own first, within callaudit.KeepRewrite's
	// caps (rewritesCut: more were made); fsDecisions the cards' decisions
	// about the session's preopens (sessions.hold, recheck): what the
	// audit records carry beside decision, for a replay.
	beforeRewrite []callaudit.Rewritten
	rewritesCut   bool
	fsDecisions   []cards.Decision
	// The middleware chain (middleware.go): whether its layers decided
	// already (a stale tool version retried does not ask them again before
	// the run; their after phase sees the run that ends the call), their
	// verdicts in order, and the approval(s) the call runs under.
	chainDone      bool
	trail          []verdict
	approval       string
	extraApprovals []string
	started        bool     // the approval was consumed (runApproved)
	startedIDs     []string // the approvals it consumed
	ran            bool     // the run stage was reached (markDone)
	// approvedDigests are the input digests approve layers let through
	// (by a human or an always-card): the input that runs must be that.
	approvedDigests []string
	// approvedBinding is the tool code and policy the approve layers let
	// through (approvalBinding): the tool that runs must still be that.
	approvedBinding *store.Binding
	// toolDigest is an imported tool's upstream schema digest, as
	// loadAndValidate loaded it (toolIdentity).
	toolDigest string
	// liveRedact are the redact layers that apply to this call, for its
	// live log lines (wrapLogs).
	liveRedact []config.Middleware
	// watched: a middleware component's when held for the call before
	// it ran, so its log lines and progress are the component's to judge
	// before the caller sees any (wrapLogs): heldOnLog is the caller's
	// OnLog, given the result's lines once the after (or failed) phase
	// let them through (deliverHeld).
	watched   bool
	heldOnLog func(api.LogEntry)
	// judged are the rules of the components whose condition held before
	// the run: each judges the result too, whatever a rewrite made of its
	// condition since (after).
	judged  []string
	reasked int // times the approval was asked again because the cards changed during a wait
	// admitted: the call-admitted record is written (audit.admit) and the
	// tool may run; trailAtAdmit is how many verdicts it holds.
	admitted     bool
	trailAtAdmit int
	// turn is the admission the call holds a turn of; nil while it holds
	// none (before admission, and waiting for a human: suspend, resume).
	// releaseTurn gives it back.
	turn *admission

	// builtinWallet is the wallet a built-in's visibility was decided on
	// (builtins.go), which its card operation acts with.
	builtinWallet *cards.Wallet

	noAudit bool // Host.noAudit
	// humanWaiting is set while the call waits for a human (humanWait.wait,
	// which asks principalCheck at every poll): the revocation watch leaves
	// such a call to the wait's own check and its words. Read and written
	// with sync/atomic (an atomic.Bool would make the struct uncopyable).
	humanWaiting int32

	// tr makes the call's spans (nil: tracing off); span is the call's
	// own, the parent of its stages' (tracing.go).
	tr   *trace.Tracer
	span oteltrace.Span

	// budget meters the call on its card's budgets (budgetStage); nil
	// when none applies. Reserved once per call: a stale version's retry
	// (loadAndValidate, which sets staleRetry while another attempt may
	// follow) runs on the same meter, ended once after the last attempt.
	budget     *budget.Meter
	staleRetry bool

	// secrets are the call's secret handles (internal/secret); nil if its
	// input had no {"$secret": ...}.
	secrets *secret.Handles

	// sess is the call's session once looked up (sessions.go).
	sess *store.Session
	// preopens are the directories a tool with fs gets (sessions.hold).
	preopens []sandbox.Preopen
}

// renderText is the call's arguments as rendered, computed once.
func (inv *invocation) renderText() string {
	if inv.renderedText == "" && len(inv.rendered) > 0 {
		inv.renderedText = grant.Rendering(inv.rendered)
	}
	return inv.renderedText
}

// value is the call's decoded input, decoded on first use from the text
// input.check scanned. The scan refused everything ParseStrict refuses, so
// an error here is a bug: an internal error (the call could not be made),
// never a verdict on the input.
func (inv *invocation) value() (any, error) {
	if !inv.decoded {
		v, err := parseInput(inv.inputText)
		if err != nil {
			return nil, fmt.Errorf("internal error: the input's scan accepted what its parse refuses: %w", err)
		}
		inv.input, inv.decoded = v, true
	}
	return inv.input, nil
}

// scanInput checks the call's input text (input.check): nil, or the
// *jsonparse.SyntaxError of ParseStrict. The value is decoded later, if
// a stage needs it (value).
func (inv *invocation) scanInput() error {
	sc, err := jsonschema.ScanInput(inv.call.Input)
	if err != nil {
		return err
	}
	inv.inputText, inv.scanned, inv.input, inv.decoded = inv.call.Input, sc, nil, false
	return nil
}

// setInput makes text, whose value is doc, the call's input (secret
// markers in place of references, a middleware's rewrite).
func (inv *invocation) setInput(text string, doc any) {
	inv.call.Input, inv.inputText, inv.input, inv.decoded = text, text, doc, true
	inv.scanned = jsonparse.Scanned{}
}

// validateInput checks the call's input against s under ctx and an extra
// timeout: on its scan while the value is not decoded (the fast check
// decodes only the members it reads; a value the check decodes is kept),
// else on the value.
func (inv *invocation) validateInput(ctx context.Context, s *inputSchema, timeout time.Duration) error {
	if s.err != nil {
		return s.err
	}
	if inv.decoded {
		return s.checker.Validate(ctx, timeout, inv.input)
	}
	v, decoded, err := s.checker.ValidateScanned(ctx, timeout, inv.inputText, &inv.scanned)
	if decoded {
		inv.input, inv.decoded = v, true
	}
	return err
}

// render derives the call's canonical arguments from its decoded input,
// once: a command tool's parse has them already.
func (inv *invocation) render() error {
	if inv.rendered != nil || inv.cmd != nil {
		return nil
	}
	v, err := inv.value()
	if err != nil {
		return err
	}
	args, err := grant.RenderJSONInput(v)
	if err != nil {
		return err
	}
	inv.rendered = args
	return nil
}

// useCommand makes cmd, a command tool's parsed call (backend.parse), the
// call's: its rendering is what the cards, conditions, approvals and audit
// see.
func (inv *invocation) useCommand(cmd *command.Invocation) {
	inv.cmd, inv.rendered, inv.renderedText = cmd, cmd.Render(), cmd.String()
}

// inputDigest is the SHA-256 (hex) of an input's text, kept with the text
// it is of.
type inputDigest struct{ text, sum string }

// digest is the SHA-256 (hex) of the exact input the tool will receive
// (the text, with secret markers where secretRunInput puts handles): what
// an approval is bound to. It is computed once per text (a 1 MiB input
// costs ~0.7 ms), again only if a layer rewrote the input.
func (inv *invocation) digest() string {
	if d := &inv.digested; d.sum == "" || d.text != inv.call.Input {
		sum := sha256.Sum256([]byte(inv.call.Input))
		*d = inputDigest{text: inv.call.Input, sum: hex.EncodeToString(sum[:])}
	}
	return inv.digested.sum
}

// suspend gives the call's admission turn back while it waits for a human,
// so waiting calls do not hold the slots running calls need (humanWait.resume
// takes one again).
func (inv *invocation) suspend() { inv.releaseTurn() }

// releaseTurn gives the call's admission turn back, if it holds one.
func (inv *invocation) releaseTurn() {
	if a := inv.turn; a != nil {
		inv.turn = nil
		a.give(inv.call.Tool, inv.call.Agent)
	}
}

// handler runs (the rest of) a call.
type handler func(ctx context.Context, inv *invocation) error

// stage wraps the rest of the pipeline.
type stage func(next handler) handler

// pipeline assembles the call path, one stage a line, in order; each says
// what it reads → writes of the invocation (ARCHITECTURE.md, "The call path
// is a pipeline", has the same list). A stage's work lives with its
// concern (the file or package named); the list is the one place that
// orders them.
//
// Each stage is a value holding what it needs of the Host, named here (a
// field, a function), never the Host itself: a reader sees every stage's
// dependencies in this one function. A stage with none is a function.
func (h *Host) pipeline() handler {
	st, limit := &h.stateHolder, inputLimit{override: h.opts.MaxInputBytes}
	admit := admitStage{adm: h.adm}
	policy := policyStage{cfg: &h.cfg, kinds: &h.kinds, trail: &h.trail}
	audit := auditStages{trail: &h.trail, schemaHash: h.schemas.hash}
	approvals := approvalStages{state: st.get, log: h.log}
	input := inputStage{limit: limit.of}
	var secrets secretStages
	authorize := authorizeStage{wallet: st.wallet}
	sessions := sessionStages{gate: &h.sessions}
	coolDown := coolDownStage{crashes: &h.crashes}
	budgets := budgetStage{state: st.get, log: h.log}
	middleware := middlewareStage{
		layers:     chain.Layers{State: chainState(st.get), ErrState: ErrState},
		components: chain.Components{Runner: h.runner, Log: h.log},
		approve:    approveLayer{state: st.get, wallet: st.wallet, trail: &h.trail, human: &h.human},
		rewrite:    rewriteCheck{limit: limit.of},
	}
	stages := []namedStage{
		{"maiden.admission", admit.enter},       // call.Tool → an admission turn, release (admission.go)
		{"maiden.policy", policy.resolve},       // the configuration in force → backend; cfg, agent, tool, policy, bindName (agents.go, backend.go)
		{"", audit.call},                        // how the call ended → the call-refused / call-failed / call-succeeded record (internal/callaudit)
		{"", approvals.markDone},                // the approvals the run consumed → marked done after it (middleware_approve.go)
		{"maiden.input", input.check},           // call.Input → refused over MaxInputBytes or ambiguous, else inputText, scanned (checked strictly, not decoded: input, which every view derives from, is decoded once by the first stage that needs it: value)
		{"", secrets.handles},                   // input → {"$secret": NAME} → its marker in input, the call's handles in secrets; refused for a secret the tool may not use (internal/secret)
		{"", parse},                             // a command tool's input → cmd and its rendering (backend.parse → useCommand); a WebAssembly tool's opened version
		{"maiden.decision", authorize.decide},   // input or cmd → rendered (render), wallet, decision; refused by the cards (authorize.go, internal/decide)
		{"maiden.session", sessions.hold},       // tool, backend, wallet, the call's session → sess, preopens; refused by its boundary (internal/session Gate.Hold)
		{"maiden.load", loadAndValidate},        // the tool's file / upstream → opened, the schema check, stale-version retry (backend.open)
		{"", coolDown.refuse},                   // opened's digest → refused during its crash cool-down (backoff.go)
		{"maiden.middleware", middleware.chain}, // bindName's chain → trail, approvals, a rewritten input re-decided (internal/chain; the traversal, approve and the rewrite's check: middleware.go, middleware_approve.go)
		{"", sessions.recheck},                  // sess again after a human's wait → sess, preopens; refused by its boundary now (internal/session Gate.Recheck)
		{"", approvals.runApproved},             // approvals → consumed with the call's start, bound to the tool's code and policy (middleware_approve.go)
		{"maiden.budget", budgets.spend},        // decision's card → budget: a call and its cost reserved on its budgets, wall time and bytes charged at the end; refused when exhausted (budgets.go, internal/budget)
		{"maiden.audit", audit.admit},           // rendering, decision, trail, approval → the call-admitted record, admitted; refused if it cannot be written (internal/callaudit)
		{"", h.revocation.watch},                // an agent token's call → watched while it runs; stopped, denied, if the token is revoked (revocation.go)
		{"", checkOutput},                       // res.Output → held to a declared output schema
		{"", secrets.runInput},                  // input, secrets → the tool's input with each marker its handle, during the run (internal/secret)
	}
	next := handler(run) // backend.run → res
	if h.tracer != nil {
		next = tracedRun(next)
	}
	for i := len(stages) - 1; i >= 0; i-- {
		s := stages[i].stage
		if h.tracer != nil && stages[i].span != "" {
			s = traced(stages[i].span, s)
		}
		next = s(next)
	}
	return next
}

// namedStage is a stage and the name of its span when tracing is on (""
// for a stage whose own work is a check of a field or happens after the
// run: no span of its own).
type namedStage struct {
	span  string
	stage stage
}

// fail ends an invocation with a tool-level failure the caller sees.
func (inv *invocation) fail(kind ErrorKind, msg string) error {
	inv.res.Error = &ToolError{Kind: kind, Message: msg}
	return nil
}

// admitStage takes a turn among MaxConcurrent, or waits (up to
// MaxQueued), or refuses with ErrOverloaded.
type admitStage struct{ adm *admission }

func (s admitStage) enter(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if err := s.adm.take(ctx, inv.call.Tool, inv.call.Agent); err != nil {
			return err
		}
		inv.turn = s.adm
		defer inv.releaseTurn()
		return next(ctx, inv)
	}
}

// policyStage reads the policy once from the configuration in force (cfg),
// so an edit to agent.toml never changes a call halfway: the tool's
// backend (its kind, decided once per configuration: kinds, backend.go),
// then the call's agent and the tool as that agent's binding exposes it
// (an unbound tool does not exist): the backend's resolve finds them and
// this stage writes them into the invocation.
//
// A call of a tool its agent has not (a name the agent guessed, or one
// bound to another agent) is recorded too, as a refused call naming the
// tool it asked for (unknownTool): the trail shows an agent probing for
// tools, which the refusal alone (ErrUnknownTool) does not.
type policyStage struct {
	cfg   *atomic.Pointer[config.Config]
	kinds *kindsHolder
	trail *callaudit.Trail
}

func (s policyStage) resolve(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		cfg := s.cfg.Load()
		inv.backend = s.kinds.of(cfg).of(inv.call.Tool)
		r, terr, err := inv.backend.resolve(ctx, cfg, inv.call, inv.start)
		if err != nil {
			if errors.Is(err, ErrUnknownTool) && !errors.Is(err, ErrUnknownAgent) && !inv.noAudit {
				s.unknownTool(ctx, cfg, inv)
			}
			return err
		}
		if terr != nil {
			inv.res.Error = terr
			return nil
		}
		inv.cfg, inv.agent, inv.tool, inv.policy, inv.bindName = cfg, r.agent, r.tool, r.policy, r.bindName
		inv.call.Input, inv.builtinWallet = r.input, r.wallet
		return next(ctx, inv)
	}
}

// maxUnknownToolName is how much of a tool name no tool has the record of
// its refusal keeps (MCP's own limit on a tool's name is 128 characters).
const maxUnknownToolName = 128

// unknownTool records the refusal of inv's call, whose tool its agent does
// not have (recordUnknownTool).
func (s policyStage) unknownTool(ctx context.Context, cfg *config.Config, inv *invocation) {
	recordUnknownTool(ctx, s.trail, cfg, inv.call, inv.traceID())
}

// recordUnknownTool writes the call-refused record of call, whose tool its
// agent does not have, when cfg keeps a trail: the agent, the session and
// the name asked for (valid UTF-8, at most maxUnknownToolName bytes, "…"
// marking a cut), and the error the caller got without the list of the
// agent's tools.
func recordUnknownTool(ctx context.Context, trail *callaudit.Trail, cfg *config.Config, call Call, traceID string) {
	if !cfg.UsesState() {
		return
	}
	agent := call.Agent
	if agent == "" {
		agent = DefaultAgent
	}
	name := strings.ToValidUTF8(call.Tool, "\uFFFD")
	if len(name) > maxUnknownToolName {
		cut := maxUnknownToolName
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "…"
	}
	rec := callRecord{Session: call.Session, Error: fmt.Sprintf("%v %q for agent %q", ErrUnknownTool, name, agent), TraceID: traceID}
	c := callaudit.Call{Cfg: cfg, Agent: agent, Tool: name}
	if err := callaudit.AppendRecord(context.WithoutCancel(ctx), trail, c, store.AuditCallRefused, &rec); err != nil {
		trail.Log.Error("audit record not written", "kind", store.AuditCallRefused, "agent", agent, "err", err)
	}
}

// RefuseUnknownTool is for a front end that refuses a call of a tool it
// does not serve before the call reaches Call (the MCP SDK answers a
// tools/call of a name it does not list itself): if c's agent has no tool
// c.Tool under the configuration in force, the refusal is recorded as
// Call would record it and the error is ErrUnknownTool; nil if the agent
// has it after all (a list not yet brought up to date), and for an
// unknown agent (ErrUnknownAgent, returned). The record takes an admission
// turn; ErrOverloaded (not recorded) when none can be had.
func (h *Host) RefuseUnknownTool(ctx context.Context, c Call) error {
	if h.closed.Load() {
		return ErrClosed
	}
	cfg := h.cfg.Load()
	_, _, err := h.kindsOf(cfg).of(c.Tool).resolve(ctx, cfg, c, time.Now())
	if err == nil || !errors.Is(err, ErrUnknownTool) {
		return err
	}
	if !errors.Is(err, ErrUnknownAgent) && !h.noAudit {
		// Through admission as any call, so that writing these records is
		// no cheaper a flood than calls the cards deny: a turn while the
		// record is written, ErrOverloaded (nothing written) when none is
		// free and the queue is full.
		if aerr := h.adm.take(ctx, c.Tool, c.Agent); aerr != nil {
			return aerr
		}
		recordUnknownTool(ctx, &h.trail, cfg, c, "")
		h.adm.give(c.Tool, c.Agent)
	}
	return err
}

// parse is the tool's backend reading the input before the cards decide
// (backend.parse, which writes nothing): this stage writes what it
// returns, a command tool's parsed command and its rendering (clis.go,
// wasmcommand.go: useCommand) and a WebAssembly tool's opened version (or
// why it did not open) and command description; nothing for JSON input,
// which authorize renders.
func parse(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		p, terr, err := inv.backend.parse(ctx, inv)
		// The version opened is the call's even when its input does not
		// fit: the refusal's record names it (auditStages.provenance).
		inv.opened, inv.openErr, inv.toolCmd = p.opened, p.openErr, p.toolCmd
		if err != nil {
			return err
		}
		if terr != nil {
			inv.res.Error = terr
			return nil
		}
		if p.cmd != nil {
			inv.useCommand(p.cmd)
		}
		return next(ctx, inv)
	}
}

// inputStage refuses input over the size cap (limit: Options.MaxInputBytes,
// else the configuration's) before reading it, then scans it (scanInput):
// input JSON readers would read differently (a duplicate key, two keys of
// one object differing only in case, which Go's encoding/json takes one
// for the other, invalid UTF-8, a lone surrogate escape) is refused here,
// for every tool and agent, since the schema check, the cards, the
// middleware's conditions and components and the tool must all read one
// value. That value is decoded later, once, by the first stage that needs
// it (value); a call that needs none (the implicit agent, a plain schema,
// no secret, no middleware) builds no tree of it.
type inputStage struct{ limit func(*config.Config) int64 }

func (s inputStage) check(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		limit := s.limit(inv.cfg)
		if n := int64(len(inv.call.Input)); n > limit {
			return inv.fail(KindInput, InputTooLarge(n, limit))
		}
		if err := inv.scanInput(); err != nil {
			return inv.fail(KindInput, inputProblem(inv.call.Input, err))
		}
		return next(ctx, inv)
	}
}

// MaxInputBytes is the largest call input this host accepts now:
// Options.MaxInputBytes if set, else max_input_bytes of the configuration in
// force. Call refuses a larger input before parsing it; a front end that
// reads messages (MCP over stdio or HTTP) bounds them by it plus its own
// envelope, so the one limit applies however the call arrives.
func (h *Host) MaxInputBytes() int64 { return h.maxInputBytes(h.cfg.Load()) }

// InputTooLarge is the one message for an input of n bytes over limit, in
// every front end.
func InputTooLarge(n, limit int64) string {
	return fmt.Sprintf("the input is %d bytes, more than the %d-byte limit (max_input_bytes in agent.toml, or Options.MaxInputBytes); send less, or raise the limit", n, limit)
}

// maxInputBytes is Options.MaxInputBytes, else the configuration's.
func (h *Host) maxInputBytes(cfg *config.Config) int64 {
	return inputLimit{override: h.opts.MaxInputBytes}.of(cfg)
}

// inputLimit is the one input limit: Options.MaxInputBytes (override) if
// set, else max_input_bytes of the configuration.
type inputLimit struct{ override int64 }

func (l inputLimit) of(cfg *config.Config) int64 {
	if l.override > 0 {
		return l.override
	}
	return cfg.MaxInputBytes()
}

// loadAndValidate is the tool's backend loading the version that will run
// and checking the input against it (wasm.go: under the call's deadline;
// imports.go: the upstream's schema), written into the invocation here;
// the rest of the pipeline runs inside it. A version replaced as it
// started (sandbox.ErrStale, from the run) is opened again, at most three
// times; if that opened another component than the cards were asked
// about (a grant may name one), they are asked again for it.
func loadAndValidate(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		for attempt := 0; ; attempt++ {
			before := inv.component() // what the last attempt opened ("" before the first)
			l, refusal, err := inv.backend.open(ctx, inv, attempt > 0)
			inv.useLoaded(l)
			if err != nil {
				return err
			}
			if refusal != nil {
				inv.res.Error = refusal
				return nil
			}
			if attempt > 0 && inv.wallet != nil && (inv.decision == nil || inv.decision.Asked.Component != inv.component()) {
				d := inv.decideInvoke(inv.wallet)
				if !d.Allow {
					return inv.fail(KindDenied, d.Reason)
				}
			}
			if attempt > 0 && inv.component() != before {
				// The call-admitted record written for the stale version
				// names that component and the decision about it; the
				// run is of another, decided again above: it gets a
				// call-admitted record of its own (audit.admit), written
				// before it runs as any is, naming what does run. (The
				// stale version never started: its record has no outcome.)
				inv.admitted = false
			}
			inv.staleRetry = attempt < maxStaleRetries
			err = next(ctx, inv)
			if errors.Is(err, sandbox.ErrStale) && attempt < maxStaleRetries {
				inv.res.Logs, inv.res.Error = nil, nil
				continue
			}
			return err
		}
	}
}

// maxStaleRetries is how many times loadAndValidate opens a stale version
// again.
const maxStaleRetries = 3

// useLoaded writes what a backend's open found (each field it set).
func (inv *invocation) useLoaded(l loaded) {
	if l.version != nil {
		inv.opened = l.version
	}
	if l.schema != nil {
		inv.schema, inv.output = l.schema, l.output
	}
	if l.digest != "" {
		inv.toolDigest = l.digest
	}
	if l.upstreamTool != "" {
		inv.upstreamTool = l.upstreamTool
	}
	if l.cmd != nil {
		inv.cmd, inv.toolCmd = l.cmd, l.toolCmd
	}
}

// checkOutput holds a tool that declares an output schema (maiden:tool@0.2.0
// output-schema()) to it: output that is not JSON or does not match is the
// tool's failure (kind tool, the problems listed), never passed on as if
// it were what the tool promised. Front ends (MCP's structuredContent)
// can then trust a successful output.
func checkOutput(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if err := next(ctx, inv); err != nil || inv.output == nil || !inv.res.OK {
			return err
		}
		var msg string
		doc, err := parseOutput(inv.res.Output)
		if err != nil {
			msg = "output is not JSON, but the tool declares an output schema"
		} else if err = inv.output.validateWithin(ctx, inv.tool.Timeout, doc); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			msg = strings.Replace(err.Error(), "input does not match the tool's schema", "output does not match the tool's output schema", 1)
		} else {
			return nil
		}
		inv.res.OK, inv.res.Output = false, ""
		return inv.fail(KindTool, msg)
	}
}

// run is the end of the pipeline: the tool's backend runs the call
// (wasm.go, clis.go, imports.go, builtins.go), and what it returns is the
// result.
func run(ctx context.Context, inv *invocation) error {
	inv.ran = true
	r, refusal, err := inv.backend.run(ctx, inv)
	if r.sess != nil {
		inv.sess = r.sess
	}
	if r.logs != nil {
		inv.res.Logs = r.logs
	}
	if r.unconfined {
		inv.res.Unconfined = true
	}
	switch {
	case err != nil:
		return err
	case refusal != nil:
		inv.res.Error = refusal
	default:
		inv.res.OK, inv.res.Output = true, r.output
	}
	return nil
}

// newRunner makes the runner Options ask for: the in-process sandbox, or a
// pool of worker processes (size workers).
func newRunner(o Options, size int) (sandbox.Runner, error) {
	if o.Isolation == api.InProcess {
		return sandbox.New(&sandbox.Options{CacheDir: o.CacheDir, Logger: o.Logger, MaxCacheBytes: o.MaxCacheBytes, OnCompile: o.OnCompile})
	}
	dir := o.CacheDir
	switch dir {
	case "off":
		dir = ""
	case "":
		dir = compcache.DefaultDir()
	}
	return worker.New(&worker.Options{Command: o.WorkerCommand, Size: size, Logger: o.Logger, CacheDir: dir, MaxCacheBytes: o.MaxCacheBytes, OnCompile: o.OnCompile})
}

// refusalLog remembers the first http-fetch a policy refused during a call,
// so that a tool failing because of it is reported as kind denied.
type refusalLog struct {
	mu  sync.Mutex
	msg string
}

func (r *refusalLog) watch(fetch sandbox.FetchFunc) sandbox.FetchFunc {
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		resp, ferr := fetch(ctx, req)
		if ferr != nil && ferr.Kind == sandbox.FetchDenied {
			r.mu.Lock()
			if r.msg == "" {
				r.msg = ferr.Message
			}
			r.mu.Unlock()
		}
		return resp, ferr
	}
}

func (r *refusalLog) first() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}
