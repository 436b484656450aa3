package maiden

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/worker"
)

// The call path is a pipeline: one invocation value passes through stages,
// each a func(handler) handler that does its part and calls the next. New
// assembles them once, in order; a new policy (authorization, approval,
// audit, quotas) is a new stage here, not an edit of Host.Call. A stage
// ends a call early by setting the invocation's result (a tool-level
// failure the caller sees) or by returning an error (the call could not be
// made).

// invocation is one call on its way through the stages.
type invocation struct {
	call  Call
	start time.Time
	res   Result

	// Set by the stages, in order.
	cfg      *config.Config
	agent    string      // resolved: DefaultAgent when the configuration declares none
	tool     config.Tool // as the agent's binding narrows it
	policy   *egress.Policy
	input    any         // the parsed input
	rendered []grant.Arg // the input's canonical arguments, once authorized (nil for the implicit agent)
	// renderedText caches grant.Rendering(rendered); "" until asked
	// (renderText), reset when a layer rewrites the input.
	renderedText string
	wallet       *cards.Wallet // the wallet the call was authorized on, pinned for its http-fetches (nil for the implicit agent)
	opened       *sandbox.Tool
	schema       *inputSchema
	output       *inputSchema // the tool's output schema; nil if it declares none

	// cmd is a wrapped CLI's parsed call (parseCommand), or a command-tree
	// WebAssembly tool's (parseToolCommand); nil for a JSON-input tool.
	cmd *command.Invocation
	// toolCmd is the command description of a command-tree WebAssembly
	// tool the call was parsed with (wasmcommand.go); openErr is why
	// parseToolCommand could not open the tool, which loadAndValidate
	// reports (opened holds the version it did open).
	toolCmd *toolCommand
	openErr error
	// upstreamTool is an imported tool's name on its MCP server.
	upstreamTool string
	// decidedBy is the card that allowed the call (authorize).
	decidedBy string
	// The middleware chain (middleware.go): whether its layers decided
	// already (a stale tool version retried does not ask again), their
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
	reasked    int // times the approval was asked again because the cards changed during a wait
	// admitted: the call-admitted record is written (admitRecord) and the
	// tool may run; trailAtAdmit is how many verdicts it holds.
	admitted     bool
	trailAtAdmit int
	// release gives the call's admission turn back; nil while it has none
	// (waiting for a human: suspend, resume).
	release func()

	// A built-in's call (builtins.go): the operation and the wallet its
	// visibility was decided on.
	builtin       *builtin
	builtinWallet *cards.Wallet

	noAudit bool // Host.noAudit

	// secrets are the call's secret handles (secrets.go); nil if its
	// input had no {"$secret": ...}.
	secrets *callSecrets

	// sess is the call's session once looked up (sessions.go).
	sess *store.Session
	// preopens are the directories a tool with fs gets (sessionGate).
	preopens []sandbox.Preopen
}

// renderText is the call's arguments as rendered, computed once.
func (inv *invocation) renderText() string {
	if inv.renderedText == "" && len(inv.rendered) > 0 {
		inv.renderedText = grant.Rendering(inv.rendered)
	}
	return inv.renderedText
}

// suspend gives the call's admission turn back while it waits for a human,
// so waiting calls do not hold the slots running calls need.
func (inv *invocation) suspend() {
	if inv.release != nil {
		inv.release()
		inv.release = nil
	}
}

// resume takes a turn again after suspend.
func (inv *invocation) resume(ctx context.Context, h *Host) error {
	if inv.release != nil {
		return nil
	}
	release, err := h.adm.enter(ctx, inv.call.Tool)
	if err != nil {
		return err
	}
	inv.release = release
	return nil
}

// handler runs (the rest of) a call.
type handler func(ctx context.Context, inv *invocation) error

// stage wraps the rest of the pipeline.
type stage func(next handler) handler

// pipeline assembles the call path: admission → exposure and policy →
// (the audit of how it ended) → crash cool-down → input → authority (cards) → load and
// validate → middleware chain (around the rest) → consume an approval →
// the call-admitted audit record → output check (around the run) → run.
func (h *Host) pipeline() handler {
	stages := []stage{
		h.admit,
		h.resolvePolicy,
		h.auditCall,
		h.markDone,
		h.checkInput,
		h.secretHandles,
		h.parseCommand,
		h.parseToolCommand,
		h.authorize,
		h.sessionGate,
		h.loadAndValidate,
		h.coolDown,
		h.middleware,
		h.sessionRecheck,
		h.runApproved,
		h.admitRecord,
		h.checkOutput,
		h.secretRunInput,
	}
	next := h.run
	for i := len(stages) - 1; i >= 0; i-- {
		next = stages[i](next)
	}
	return next
}

// fail ends an invocation with a tool-level failure the caller sees.
func (inv *invocation) fail(kind ErrorKind, msg string) error {
	inv.res.Error = &ToolError{Kind: kind, Message: msg}
	return nil
}

// admit takes a turn among MaxConcurrent, or waits (up to MaxQueued), or
// refuses with ErrOverloaded.
func (h *Host) admit(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		release, err := h.adm.enter(ctx, inv.call.Tool)
		if err != nil {
			return err
		}
		inv.release = release
		defer func() {
			if inv.release != nil {
				inv.release()
			}
		}()
		return next(ctx, inv)
	}
}

// resolvePolicy reads the policy once from the configuration in force, so
// an edit to agent.toml never changes a call halfway: the call's agent, the
// tool as that agent's binding exposes it (an unbound tool does not exist),
// and its egress policy.
func (h *Host) resolvePolicy(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		cfg := h.cfg.Load()
		exp, err := expose(cfg, inv.call.Agent, inv.call.Tool)
		if err != nil {
			return err
		}
		pol, err := h.policySet(cfg).egressPolicy(exp)
		if err != nil {
			return inv.fail(KindConfig, err.Error())
		}
		inv.cfg, inv.agent, inv.tool, inv.policy = cfg, exp.agent, exp.tool, pol
		return next(ctx, inv)
	}
}

// checkInput refuses input over the size cap before parsing it, then
// parses it once.
func (h *Host) checkInput(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		limit := h.maxInputBytes(inv.cfg)
		if n := int64(len(inv.call.Input)); n > limit {
			return inv.fail(KindInput, InputTooLarge(n, limit))
		}
		doc, err := parseInput(inv.call.Input)
		if err != nil {
			return inv.fail(KindInput, jsonProblem(inv.call.Input))
		}
		inv.input = doc
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
	if h.opts.MaxInputBytes > 0 {
		return h.opts.MaxInputBytes
	}
	return cfg.MaxInputBytes()
}

// loadAndValidate loads one version of the tool, checks the input against
// that version's schema (under the call's deadline and ctx), and runs that
// same version. If the version is replaced on disk at the very moment it
// starts, it loads the new one and checks again.
func (h *Host) loadAndValidate(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.tool.CLI != nil {
			return next(ctx, inv) // parseCommand validated the call against its description
		}
		if inv.tool.MCP != nil {
			li, refusal, err := h.loadImported(ctx, inv)
			if err != nil {
				return err
			}
			inv.toolDigest = li.Digest
			if refusal != nil {
				return inv.fail(refusal.Kind, refusal.Message)
			}
			schema := h.schemas.get(li.Digest, li.Schema)
			if schema.err != nil {
				return inv.fail(KindInvalid, "the MCP server's input schema: "+schema.err.Error())
			}
			if err := schema.validateWithin(ctx, inv.tool.Timeout, inv.input); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return inv.fail(KindInput, err.Error())
			}
			inv.schema = schema
			return next(ctx, inv)
		}
		lim := limitsOf(inv.tool)
		for attempt := 0; ; attempt++ {
			t, err := inv.opened, inv.openErr // opened by parseToolCommand
			if attempt > 0 || (t == nil && err == nil) {
				t, err = h.runner.Open(ctx, inv.tool.Path, lim)
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, sandbox.ErrClosed) || errors.Is(err, worker.ErrClosed) {
					return ErrClosed
				}
				if !errors.Is(err, sandbox.ErrInvalidTool) {
					// Not the tool's fault (a worker that cannot start):
					// the call could not be made.
					return err
				}
				kind, msg := loadFailure(err)
				return inv.fail(kind, msg)
			}
			if err := toolWorld(t); err != nil {
				return inv.fail(KindInvalid, err.Error())
			}
			schema := h.schemas.getTool(t.Digest, t.Schema)
			if schema.err != nil {
				return inv.fail(KindInvalid, schema.err.Error())
			}
			if !inv.sameToolCommand(t, schema) {
				return inv.toolChanged()
			}
			err = nil
			if inv.toolCmd == nil { // a command tree's call was validated by parseToolCommand
				err = schema.validateWithin(ctx, lim.Timeout, inv.input)
			}
			switch {
			case err == nil:
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, context.DeadlineExceeded):
				return inv.fail(KindDeadline, fmt.Sprintf("checking the input against the tool's schema took longer than its %v timeout", lim.Timeout))
			default:
				return inv.fail(KindInput, err.Error())
			}
			inv.opened, inv.schema, inv.output = t, schema, nil
			if t.OutputSchema != "" {
				out := h.outSchemas.get(t.Digest, t.OutputSchema)
				if out.err != nil {
					return inv.fail(KindInvalid, "output-schema(): "+out.err.Error())
				}
				inv.output = out
			}
			err = next(ctx, inv)
			if errors.Is(err, sandbox.ErrStale) && attempt < 3 {
				inv.res.Logs, inv.res.Error = nil, nil
				continue
			}
			return err
		}
	}
}

// checkOutput holds a tool that declares an output schema (maiden:tool@0.2.0
// output-schema()) to it: output that is not JSON or does not match is the
// tool's failure (kind tool, the problems listed), never passed on as if
// it were what the tool promised. Front ends (MCP's structuredContent)
// can then trust a successful output.
func (h *Host) checkOutput(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if err := next(ctx, inv); err != nil || inv.output == nil || !inv.res.OK {
			return err
		}
		var msg string
		doc, err := parseInput(inv.res.Output)
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

// run executes the opened version in its runner. The values of the
// secrets this tool may use never leave the host: not in its logs, its
// output or its error messages.
func (h *Host) run(ctx context.Context, inv *invocation) error {
	inv.ran = true
	if inv.tool.CLI != nil {
		return h.runCLI(ctx, inv)
	}
	if inv.tool.MCP != nil {
		return h.runImported(ctx, inv)
	}
	var refusals refusalLog
	out, err := inv.opened.Execute(ctx, sandbox.Call{
		Limits: limitsOf(inv.tool),
		Input:  inv.toolInput(),
		// The session boundary's directories as WASI preopens, for a tool
		// whose policy has fs (sessionGate); none otherwise.
		Preopens: inv.preopens,
		OnLog:    inv.call.OnLog,
		Fetch:    refusals.watch(h.secretFetch(ctx, inv, h.auditFetch(ctx, inv, fetchFunc(h.gate, inv.policy, h.opts.Observer, inv.tool.Name, inv.agent, walletAuthorizer(inv.wallet))))),
		Redact:   inv.secrets.redactor(h.gate.Redactor(inv.policy)),
		Reveal:   h.revealFunc(ctx, inv),
		// A tool losing its workers computes only on CPU nobody else wants.
		LowPriority: h.crashes.troubled(inv.tool.Name),
	})
	inv.res.Logs = out.Logs
	if err == nil {
		h.crashes.record(inv.tool.Name, inv.opened.Digest, out.WorkerLost)
	}
	if err != nil {
		var pe *sandbox.PreopenError
		if errors.As(err, &pe) {
			// A directory of the session's boundary is missing or not
			// a plain directory (a symlink on its path): the call is
			// refused before anything ran, naming it.
			return inv.fail(KindDenied, "a directory of the session's boundary cannot be given to the tool: "+pe.Error())
		}
		return err
	}
	if out.Failure != nil {
		if first := refusals.first(); first != "" && (out.Failure.Kind == KindTool || out.Failure.Kind == KindTrap) {
			// The tool gave up after the host refused its request: the
			// cause is the policy (a missing credential, a host or port
			// not allowed), and the refusal names the key that changes it.
			return inv.fail(KindDenied, fmt.Sprintf("http-fetch was refused: %s (the tool then reported: %s)", first, out.Failure.Message))
		}
		return inv.fail(out.Failure.Kind, out.Failure.Message)
	}
	inv.res.OK, inv.res.Output = true, out.Output
	return nil
}

// newRunner makes the runner Options ask for: the in-process sandbox, or a
// pool of worker processes (size workers).
func newRunner(o Options, size int) (sandbox.Runner, error) {
	switch o.Isolation {
	case InProcess:
		return sandbox.New(&sandbox.Options{CacheDir: o.CacheDir, Logger: o.Logger, MaxCacheBytes: o.MaxCacheBytes})
	case Workers:
		dir := o.CacheDir
		switch dir {
		case "off":
			dir = ""
		case "":
			if d, err := os.UserCacheDir(); err == nil {
				dir = filepath.Join(d, "maiden", "components")
			}
		}
		return worker.New(&worker.Options{Command: o.WorkerCommand, Size: size, Logger: o.Logger, CacheDir: dir, MaxCacheBytes: o.MaxCacheBytes})
	}
	return nil, fmt.Errorf("unknown isolation %d", o.Isolation)
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
