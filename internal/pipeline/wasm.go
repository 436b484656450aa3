package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// wasmBackend is the WebAssembly tools' backend: a component of the
// maiden:tool world, run by the Host's runner (in process or in a worker).
// Its schema() decides how its calls are read: a JSON Schema (the input as
// sent, validated against it) or a command description (parsed with it
// before the cards: wasmcommand.go). It holds what it needs of the Host
// (newKinds), not the Host.
type wasmBackend struct {
	runner  sandbox.Runner       // opens a component version (in process or in a worker)
	schemas *toolSchemas         // the versions' compiled schemas and schema pins
	pols    *callegress.Policies // each tool's compiled egress policy (resolveTool)
	gate    *egress.Gate         // http-fetch's gate and redaction
	// observer is Options.Observer, told of each http-fetch.
	observer Observer
	trail    *callaudit.Trail // each http-fetch's record
	secrets  callSecrets      // a handle as http-fetch's credential, reveal
	crashes  *crashes         // lost workers, for the cool-down and low priority
}

func (b *wasmBackend) resolve(_ context.Context, cfg *config.Config, call Call, _ time.Time) (resolved, *ToolError, error) {
	return resolveTool(b.pols, cfg, call, call.Tool)
}

func (b *wasmBackend) carded() bool        { return true }
func (b *wasmBackend) secretHandles() bool { return true }
func (b *wasmBackend) preopens() bool      { return true }

// parse opens the tool and, if its schema() is a command description,
// parses the call with it: a call that does not fit is kind input, naming
// the argument; one that fits is rendered as the command (inv.cmd), which
// is what the cards, conditions and approvals see. The opened version is
// the one open runs.
func (b *wasmBackend) parse(ctx context.Context, inv *invocation) (parsed, *ToolError, error) {
	t, err := b.runner.Open(ctx, inv.tool.Path, limitsOf(inv.tool))
	if err != nil {
		if ctx.Err() != nil {
			return parsed{}, nil, ctx.Err()
		}
		return parsed{openErr: err}, nil, nil // open reports it, after authorization as always
	}
	if err := b.schemas.checkPin(inv.tool, t.LoadInfo); err != nil {
		return parsed{openErr: err}, nil, nil // open reports it, after authorization as always
	}
	if toolWorld(t) != nil {
		return parsed{opened: t}, nil, nil
	}
	s := b.schemas.in.getTool(t.Digest, t.Schema)
	if s.cmd == nil {
		return parsed{opened: t}, nil, nil // a JSON-input tool (or an unusable schema: refused by open)
	}
	cmd, err := s.cmd.ParseValue(inv.input)
	if err != nil {
		return parsed{opened: t}, &ToolError{Kind: KindInput, Message: inv.tool.Name + ": " + err.Error()}, nil
	}
	return parsed{cmd: cmd, opened: t, toolCmd: &toolCommand{spec: s.cmd, digest: t.Digest}}, nil, nil
}

// open loads one version of the tool, checks the input against that
// version's schema (under the call's deadline and ctx), and runs that
// same version. If the version is replaced on disk at the very moment it
// starts, it loads the new one and checks again.
func (b *wasmBackend) open(ctx context.Context, inv *invocation, next handler) error {
	lim := limitsOf(inv.tool)
	for attempt := 0; ; attempt++ {
		t, err := inv.opened, inv.openErr // opened by parse
		if attempt > 0 || (t == nil && err == nil) {
			t, err = b.runner.Open(ctx, inv.tool.Path, lim)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, api.ErrClosed) {
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
		if err := b.schemas.checkPin(inv.tool, t.LoadInfo); err != nil {
			return inv.fail(KindInvalid, err.Error())
		}
		schema := b.schemas.in.getTool(t.Digest, t.Schema)
		if schema.err != nil {
			return inv.fail(KindInvalid, schema.err.Error())
		}
		if !inv.sameToolCommand(t, schema) {
			return inv.toolChanged()
		}
		err = nil
		if inv.toolCmd == nil { // a command tree's call was validated by parse
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
		if attempt > 0 && inv.wallet != nil && (inv.decision == nil || inv.decision.Asked.Component != inv.component()) {
			// The retry opened another component than the cards were
			// asked about (a grant may name one): ask again for it.
			d := decide.Decide(decide.Basis{Wallet: inv.wallet}, decide.Invoke(inv.target()))
			inv.decision = &d
			if !d.Allow {
				return inv.fail(KindDenied, d.Reason)
			}
		}
		if t.OutputSchema != "" {
			out := b.schemas.out.get(t.Digest, t.OutputSchema)
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

// run executes the opened version in its runner. The values of the
// secrets this tool may use never leave the host: not in its logs, its
// output or its error messages.
func (b *wasmBackend) run(ctx context.Context, inv *invocation) error {
	hc := &wasmHostCalls{ctx: ctx, b: b, inv: inv}
	refusals := &hc.refusals
	out, err := inv.opened.Execute(ctx, sandbox.Call{
		Limits: limitsOf(inv.tool),
		Input:  inv.toolInput(),
		// The session boundary's directories as WASI preopens, for a tool
		// whose policy has fs (sessions.hold); none otherwise.
		Preopens: inv.preopens,
		OnLog:    inv.call.OnLog,
		Fetch:    hc.fetch,
		// nil when there is nothing to redact: neither the tool's secrets
		// (their values looked up now, as the gate's redactor does) nor
		// secret handles whose reveal could add a value.
		Redact: inv.secrets.Redactor(b.gate.RedactorIfAny(inv.policy)),
		Reveal: hc.reveal,
		// A tool losing its workers computes only on CPU nobody else wants.
		LowPriority: lowPriorityInTrouble && b.crashes.troubled(inv.tool.Name),
	})
	inv.res.Logs = out.Logs
	if err == nil {
		b.crashes.record(inv.tool.Name, inv.opened.Digest, out.WorkerLost)
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
			// A tool that passes the refusal on (fetch: fetch denied:
			// REFUSAL) would only repeat it: say it once.
			if strings.Contains(out.Failure.Message, first) {
				return inv.fail(KindDenied, "http-fetch was refused: "+first)
			}
			return inv.fail(KindDenied, fmt.Sprintf("http-fetch was refused: %s (the tool then reported: %s)", first, out.Failure.Message))
		}
		return inv.fail(out.Failure.Kind, out.Failure.Message)
	}
	inv.res.OK, inv.res.Output = true, out.Output
	return nil
}

// wasmHostCalls is what a WebAssembly call's host functions reach during
// its run, allocated once per call. The http-fetch chain (the budget, the
// refusal log, the trace, secret handles as credentials, the audit, the
// egress gate) and the revealer are built on the first request, as they
// were built before the run: a tool that never fetches or reveals (most
// calls) builds neither. Both are built from the run's ctx and the
// invocation, which nothing changes during the run.
type wasmHostCalls struct {
	ctx      context.Context
	b        *wasmBackend
	inv      *invocation
	refusals refusalLog

	fetchOnce  sync.Once
	fetchChain sandbox.FetchFunc
	revealOnce sync.Once
	revealFunc sandbox.RevealFunc
}

func (hc *wasmHostCalls) fetch(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
	hc.fetchOnce.Do(func() {
		b, inv := hc.b, hc.inv
		hc.fetchChain = inv.budget.Fetch(hc.refusals.watch(inv.traceFetch(hc.ctx, b.secrets.fetch(hc.ctx, inv, auditFetch(hc.ctx, b.trail, inv, fetchFunc(b.gate, inv.policy, b.observer, inv.tool.Name, inv.agent, inv.wallet))))))
	})
	return hc.fetchChain(ctx, req)
}

func (hc *wasmHostCalls) reveal(ctx context.Context, handle string) (string, error) {
	hc.revealOnce.Do(func() { hc.revealFunc = hc.b.secrets.reveal(hc.ctx, hc.inv) })
	return hc.revealFunc(ctx, handle)
}

// reparse reads a rewritten input with the command description the call
// was parsed with, or renders it as JSON input.
func (b *wasmBackend) reparse(inv *invocation, doc any) ([]grant.Arg, *command.Invocation, error) {
	if inv.toolCmd != nil {
		cmd, err := inv.toolCmd.spec.ParseValue(doc)
		if err != nil {
			return nil, nil, err
		}
		return cmd.Render(), cmd, nil
	}
	args, err := grant.RenderJSONInput(doc)
	return args, nil, err
}

// component is the digest of the component the call runs, as its cards
// are asked it (grant.Target.Component): an oci:// tool's pinned manifest
// digest (what agent.toml, maiden add and its signature name); a local
// file's SHA-256 once the call opened it (parse opens it before the cards
// decide, and that version runs); "" for another kind of tool and a file
// that did not open.
func (inv *invocation) component() string {
	if o := inv.tool.OCI; o != nil {
		return o.Digest
	}
	if inv.opened != nil {
		return "sha256:" + inv.opened.Digest
	}
	return ""
}

// identity is the SHA-256 of the component the call opened.
func (b *wasmBackend) identity(inv *invocation) string {
	if inv.opened != nil {
		return "sha256:" + inv.opened.Digest
	}
	return ""
}

func (b *wasmBackend) approvalPolicy(inv *invocation) ApprovalPolicy {
	return basePolicy(inv.cfg, inv.tool)
}

func (b *wasmBackend) describe(ctx context.Context, cfg *config.Config, t config.Tool) ([]ToolInfo, error) {
	li, err := b.load(ctx, t)
	return b.schemas.describeLoaded(ctx, cfg, t, li, err)
}

func (b *wasmBackend) check(ctx context.Context, t config.Tool) (LoadReport, error) {
	li, err := b.load(ctx, t)
	return b.schemas.checkLoaded(ctx, b.gate.HasSecret, t, li, err)
}

func (b *wasmBackend) confined(config.Tool) bool { return false }

// commandSpec is the command description the tool's schema() returns.
func (b *wasmBackend) commandSpec(ctx context.Context, t config.Tool) (*command.Spec, error) {
	li, err := b.load(ctx, t)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, api.ErrClosed) {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	s := b.schemas.in.getTool(li.Digest, li.Schema)
	switch {
	case s.cmd != nil:
		return s.cmd, nil
	case command.IsDescription(li.Schema):
		return nil, fmt.Errorf("%s: %w", t.Name, s.err)
	}
	return nil, fmt.Errorf("%w: %s takes JSON input (its schema: maiden tools)", ErrNoCommands, t.Name)
}

// typedCommands: the version listed described a command tree.
func (b *wasmBackend) typedCommands(info ToolInfo) bool {
	s, ok := b.schemas.in.peek(info.Digest)
	return ok && s.cmd != nil
}

// load loads and describes the tool under its own limits and ctx.
func (b *wasmBackend) load(ctx context.Context, t config.Tool) (sandbox.LoadInfo, error) {
	opened, err := b.runner.Open(ctx, t.Path, limitsOf(t))
	if err != nil {
		return sandbox.LoadInfo{}, err
	}
	if err := toolWorld(opened); err != nil {
		return sandbox.LoadInfo{}, err
	}
	if err := b.schemas.checkPin(t, opened.LoadInfo); err != nil {
		return sandbox.LoadInfo{}, err
	}
	return opened.LoadInfo, nil
}
