// Package pipeline is the call path of a maiden Host: one invocation passed
// through stages assembled in one list (pipeline.go), one backend per kind
// of tool (backend.go: WebAssembly, command-tree WebAssembly, wrapped CLI,
// MCP import, built-in), and the state, sessions, approvals and audit the
// stages consult. The root package maiden is the embedding API over it: it
// converts its Options, and every exported method of its Host delegates to
// this package's Host. Nothing here imports the root.
//
//	h, err := pipeline.New(cfg, &pipeline.Options{InProcess: true})
//	if err != nil { ... }
//	defer h.Close(ctx)
//	res, err := h.Call(ctx, api.Call{Tool: "echo", Input: `{"message":"hi"}`})
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/humanwait"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/trace"
)

// Options configure a Host: api.Options, which the root package names
// maiden.Options (its doc comments are the embedder's documentation).
type Options = api.Options

// DefaultApprovalWait is how long a call waits for a human by default.
const DefaultApprovalWait = api.DefaultApprovalWait

// Default admission limits.
const (
	DefaultMaxQueued = 1024
)

// Host runs the tools of one configuration. It is safe for concurrent use.
type Host struct {
	stateHolder // the state store: agents, tokens, cards (authorize.go)

	cfg    atomic.Pointer[config.Config]
	runner sandbox.Runner
	log    *slog.Logger
	// schemas are the compiled input and output schemas of the component
	// versions loaded, and the hashes of their definitions, by digest
	// (schema.go, schemapin.go).
	schemas toolSchemas
	adm     *admission
	crashes crashes // tools in their crash cool-down (backoff.go)
	closed  atomic.Bool
	opts    Options
	// lookupSecret is Options.LookupSecret, else the environment's
	// MAIDEN_SECRET_NAME (secretLookup).
	lookupSecret func(name string) (string, bool)
	// handle is the call pipeline, assembled once in New, for every kind
	// of tool; kinds is each name's backend under the configuration in
	// force (backend.go).
	handle handler
	kinds  kindsHolder

	// http-fetch: the gate, and each tool's compiled egress policy for the
	// configuration in force.
	gate *egress.Gate
	pols callegress.Policies

	// waiters are the calls of this Host waiting for a human's decision,
	// by approval request ID (Decide wakes them).
	waiters humanwait.Waiters
	// human is the one wait for a human's decision, over waiters
	// (humanwait.go), shared by the approve layers and boundary requests.
	human humanWait
	// revocation ends a running call whose agent token is revoked (revocation.go).
	revocation revocationWatch
	// material is the web_fetch secret material of each session.
	material session.Materials
	// sessions is the session stages' work: which session a call runs
	// in (cached), its boundary held.
	sessions session.Gate
	// trail writes the calls' audit records (internal/callaudit).
	trail callaudit.Trail
	// probe is the proof that wrapped CLIs' confinement is in force
	// (clis.go).
	probe probe
	// imports are the imported MCP servers (imports.go).
	imports upstreams
	// pins are the accepted definitions of imported tools (pins.go).
	pins importPins
	// proxy is the CONNECT proxy wrapped CLIs reach the network through
	// (clis.go), started on first need.
	proxy connectProxy
	// noAudit skips the audit records of calls: BenchmarkAuditedCall's
	// baseline only; nothing else sets it.
	noAudit bool
	// tracer makes the calls' spans; nil is tracing off (tracing.go).
	tracer *trace.Tracer
}

// New creates a host for cfg. Tools are compiled lazily, on first use (or by
// Check and Tools); New itself runs no guest code.
func New(cfg *config.Config, opts *Options) (*Host, error) {
	if cfg == nil {
		return nil, fmt.Errorf("maiden.New: %w", ErrNoConfig)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tracer, err := tracerOf(o)
	if err != nil {
		return nil, fmt.Errorf("maiden.New: %w", err)
	}
	h := &Host{log: o.Logger, adm: newAdmission(o.MaxConcurrent, o.MaxQueued), opts: o, tracer: tracer}
	runner, err := newRunner(o, h.adm.turns)
	if err != nil {
		return nil, fmt.Errorf("maiden.New: %w", err)
	}
	h.runner = runner
	h.adm.obs = o.Observer
	h.adm.troubled = firstCalls{crashes: &h.crashes, kinds: &h.kinds}.oneAtATime
	h.stateHolder.optPath, h.stateHolder.current, h.stateHolder.log = o.StatePath, &h.cfg, h.log
	st := &h.stateHolder
	audit := o.Audit
	if audit == nil {
		audit = o.Logger
	}
	var resolver egress.Resolver
	if o.Resolver != nil {
		resolver = o.Resolver
	}
	h.gate = egress.New(&egress.Options{Resolver: resolver, LookupSecret: o.LookupSecret, Audit: audit, Tokens: h.tokenShare()})
	h.sessions.State, h.sessions.ErrState = st.get, ErrState
	h.trail = callaudit.Trail{State: st.get, Log: h.log}
	h.human = humanWait{waiters: &h.waiters, adm: h.adm, timeout: o.ApprovalWait, poll: o.ApprovalPoll,
		principal: principalCheck{cfg: &h.cfg, state: st.get}}
	h.revocation = revocationWatch{principal: principalCheck{cfg: &h.cfg, state: st.get}, every: 4 * o.ApprovalPoll, log: h.log}
	h.lookupSecret = secretLookup(o)
	h.pins = importPins{explicit: o.MCPPinsPath, cfg: &h.cfg, log: h.log}
	h.proxy = connectProxy{gate: h.gate, closed: &h.closed}
	h.imports.opts = h.hubOptions()
	h.cfg.Store(cfg)
	h.kinds.cfg, h.kinds.backends = &h.cfg, h.newBackends()
	h.kinds.set(cfg)
	h.handle = h.pipeline()
	return h, nil
}

// Close stops admitting calls, interrupts every running call (each ends as
// interrupted, or its caller's context error), waits for them to return or
// for ctx, then frees the engine, the workers and every compiled component.
// If ctx ends first, Close returns its error and frees nothing that a
// running call could still touch. Close is safe to call while calls run and
// more than once.
func (h *Host) Close(ctx context.Context) error {
	h.closed.Store(true)
	h.imports.get().Close() // every upstream, retired ones included (calls still running on them fail as unavailable)
	h.proxy.close()
	err := h.runner.Shutdown(ctx)
	return errors.Join(err, h.closeState())
}

// Active is how many calls are running or waiting for a turn, for graceful
// shutdown.
func (h *Host) Active() int { return h.adm.active() }

// Config returns the configuration in force.
func (h *Host) Config() *config.Config { return h.cfg.Load() }

// SetConfig replaces the configuration. Calls already running keep the
// policy they started with; the next call sees the new one. A running
// call of an agent the new configuration no longer declares is stopped,
// denied ("agent removed: …"; revocationWatch.reloaded). An imported MCP
// server whose [mcp.NAME] table is gone or changed is stopped as soon as
// the calls running on it have returned.
func (h *Host) SetConfig(cfg *config.Config) {
	if cfg != nil {
		h.cfg.Store(cfg)
		h.kinds.set(cfg)
		h.revocation.reloaded(cfg)
		h.retireImports(cfg)
	}
}

// Call is one request to run a tool (api.Call).
type Call = api.Call

// Result is the outcome of a call (api.Result).
type Result = api.Result

// LogEntry is one line of a tool's log.
type LogEntry = api.LogEntry

// ToolError describes a failed call (api.ToolError).
type ToolError = api.ToolError

// ErrorKind classifies failures (api.ErrorKind). Every front end (CLI, MCP)
// reports these same kinds.
type ErrorKind = api.ErrorKind

// Error kinds: see package api for what each means.
const (
	KindTool        = api.KindTool
	KindDeadline    = api.KindDeadline
	KindMemory      = api.KindMemory
	KindTrap        = api.KindTrap
	KindDenied      = api.KindDenied
	KindInvalid     = api.KindInvalid
	KindConfig      = api.KindConfig
	KindInput       = api.KindInput
	KindPending     = api.KindPending
	KindUnavailable = api.KindUnavailable
)

// Call runs a tool. A failure of the tool — its own error, a deadline, the
// memory ceiling, a trap, a file that is not a valid tool — or input that does
// not fit the tool's schema is a Result with OK false. The error is non-nil
// only when the call could not be made (ErrClosed, ErrUnknownTool,
// ErrOverloaded, ErrState) or ctx ended it (ctx's error) — except while it
// waits for a human: then the end of ctx ends the wait, and the Result is
// kind pending with the request's ID, which a repeated call picks up.
//
// The call passes through the pipeline New assembled (see pipeline.go):
// admission, policy, input, load and validation, run. No tool code runs
// before the input is validated.
func (h *Host) Call(ctx context.Context, c Call) (Result, error) {
	if h.closed.Load() {
		return Result{Tool: c.Tool}, ErrClosed
	}
	inv := &invocation{call: c, start: time.Now(), noAudit: h.noAudit, tr: h.tracer}
	inv.res.Tool = c.Tool
	if h.tracer != nil {
		ctx = h.startCall(ctx, inv)
	}
	err := h.handle(ctx, inv)
	if err != nil {
		// A call that could not be made, or that ctx ended, returns no
		// output and no log line: one ended during the after phase has
		// them unjudged by the layers that had not run yet.
		inv.res.OK, inv.res.Output, inv.res.Logs = false, "", nil
	}
	inv.res.Duration = time.Since(inv.start)
	if inv.span != nil {
		endCall(inv, err)
	}
	if errors.Is(err, api.ErrClosed) {
		err = ErrClosed
	}
	if h.opts.Observer != nil {
		h.callDone(inv, err)
	}
	return inv.res, err
}

// loadFailure classifies a tool that could not be loaded. A describe() or
// schema() that failed keeps its own kind (a start-up loop is a deadline);
// anything else about the file is invalid.
func loadFailure(err error) (ErrorKind, string) {
	var f *sandbox.Failure
	if errors.As(err, &f) {
		return ErrorKind(f.Kind), err.Error()
	}
	return KindInvalid, err.Error()
}

func limitsOf(t *config.Tool) sandbox.Limits {
	return sandbox.Limits{Timeout: t.Timeout, Memory: t.MemoryBytes}
}

func toolNames(cfg *config.Config) string {
	var names []string
	for _, t := range cfg.Tools() {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return "it defines no tools"
	}
	sort.Strings(names)
	return "tools: " + strings.Join(names, ", ")
}

// jsonProblem explains why input is not JSON, with the byte offset.
func jsonProblem(input string) string {
	if strings.TrimSpace(input) == "" {
		return "input is empty; pass a JSON object such as {}"
	}
	var v any
	err := json.Unmarshal([]byte(input), &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("input is not valid JSON at byte %d: %v", se.Offset, se)
	}
	if err != nil {
		return "input is not valid JSON: " + err.Error()
	}
	return "input is not valid JSON"
}
