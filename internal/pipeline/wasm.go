package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// wasmBackend is the WebAssembly tools' backend: a component of the
// maiden:tool world, run by the Host's runner (in process or in a worker).
// Its schema() decides how its calls are read: a JSON Schema (the input as
// sent, validated against it) or a command description (parsed with it
// before the cards: wasmcommand.go). It holds what it needs of the Host
// (newBackends), not the Host.
type wasmBackend struct {
	runner    sandbox.Runner // opens a component version (in process or in a worker)
	schemas   *toolSchemas   // the versions' compiled schemas and schema pins
	exposures *exposures     // each tool as exposed, and its compiled egress policy (resolveTool)
	gate      *egress.Gate   // http-fetch's gate and redaction
	// observer is Options.Observer, told of each http-fetch.
	observer Observer
	trail    *callaudit.Trail // each http-fetch's record
	secrets  callSecrets      // a handle as http-fetch's credential, reveal
	crashes  *crashes         // lost workers, for the cool-down and low priority
}

func (b *wasmBackend) resolve(_ context.Context, cfg *config.Config, call Call, _ time.Time) (resolved, *ToolError, error) {
	return resolveTool(b.exposures, cfg, call, call.Tool)
}

func (b *wasmBackend) carded() bool        { return true }
func (b *wasmBackend) secretHandles() bool { return true }
func (b *wasmBackend) preopens() bool      { return true }
func (b *wasmBackend) files() bool         { return false }
func (b *wasmBackend) pooled() bool        { return true }

// credential: none the host attaches itself; the egress gate asks
// secret:use of each http-fetch's (callegress.Authorizer).
func (b *wasmBackend) credential(*config.Tool) (string, string) { return "", "" }

// parse opens the tool and, if its schema() is a command description,
// parses the call with it: a call that does not fit is kind input, naming
// the argument; one that fits is rendered as the command (inv.cmd), which
// is what the cards, conditions and approvals see. The opened version is
// the one open runs.
func (b *wasmBackend) parse(ctx context.Context, inv *invocation) (parsed, *ToolError, error) {
	t, err := openComponent(ctx, b.runner, inv.tool, limitsOf(inv.tool))
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
	v, err := inv.value()
	if err != nil {
		return parsed{opened: t}, nil, err
	}
	cmd, err := s.cmd.ParseValue(v)
	if err != nil {
		return parsed{opened: t}, &ToolError{Kind: KindInput, Message: inv.tool.Name + ": " + err.Error()}, nil
	}
	return parsed{cmd: cmd, opened: t, toolCmd: &toolCommand{spec: s.cmd, digest: t.Digest}}, nil, nil
}

// open loads the version that will run (the one parse opened, or the
// file again after it was replaced as the call started), and checks it:
// a tool's world, its pinned schema, the input against its schema under
// the call's deadline (a command tree's call was validated by parse), and
// its output schema.
func (b *wasmBackend) open(ctx context.Context, inv *invocation, replaced bool) (loaded, *ToolError, error) {
	lim := limitsOf(inv.tool)
	t, err := inv.opened, inv.openErr // opened by parse
	if replaced || (t == nil && err == nil) {
		t, err = openComponent(ctx, b.runner, inv.tool, lim)
	}
	if err != nil {
		if ctx.Err() != nil {
			return loaded{}, nil, ctx.Err()
		}
		if errors.Is(err, api.ErrClosed) {
			return loaded{}, nil, ErrClosed
		}
		if !errors.Is(err, sandbox.ErrInvalidTool) {
			// Not the tool's fault (a worker that cannot start):
			// the call could not be made.
			return loaded{}, nil, err
		}
		kind, msg := loadFailure(err)
		return loaded{}, &ToolError{Kind: kind, Message: msg}, nil
	}
	if err := toolWorld(t); err != nil {
		return loaded{}, &ToolError{Kind: KindInvalid, Message: err.Error()}, nil
	}
	if err := b.schemas.checkPin(inv.tool, t.LoadInfo); err != nil {
		return loaded{}, &ToolError{Kind: KindInvalid, Message: err.Error()}, nil
	}
	schema := b.schemas.in.getTool(t.Digest, t.Schema)
	if schema.err != nil {
		return loaded{}, &ToolError{Kind: KindInvalid, Message: schema.err.Error()}, nil
	}
	l := loaded{version: t, schema: schema}
	if inv.toolCmd != nil || schema.cmd != nil {
		var ok bool
		if l.cmd, l.toolCmd, ok = sameCommand(inv, t, schema); !ok {
			return loaded{}, toolChanged(inv), nil
		}
	}
	err = nil
	if inv.toolCmd == nil { // a command tree's call was validated by parse
		err = inv.validateInput(ctx, schema, lim.Timeout)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return loaded{}, nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return loaded{}, &ToolError{Kind: KindDeadline, Message: fmt.Sprintf("checking the input against the tool's schema took longer than its %v timeout", lim.Timeout)}, nil
	default:
		return loaded{}, &ToolError{Kind: KindInput, Message: err.Error()}, nil
	}
	if t.OutputSchema != "" {
		out := b.schemas.out.get(t.Digest, t.OutputSchema)
		if out.err != nil {
			// The version was found and runs no further: the refusal
			// names it.
			return loaded{version: t, schema: schema}, &ToolError{Kind: KindInvalid, Message: "output-schema(): " + out.err.Error()}, nil
		}
		l.output = out
	}
	return l, nil, nil
}

// run executes the opened version in its runner. The values of the
// secrets this tool may use never leave the host: not in its logs, its
// output or its error messages.
func (b *wasmBackend) run(ctx context.Context, inv *invocation) (ran, *ToolError, error) {
	hc := &wasmHostCalls{ctx: ctx, b: b, inv: inv}
	refusals := &hc.refusals
	// nil when there is nothing to redact: neither the tool's secrets
	// (their values looked up now, as the gate's redactor does) nor
	// secret handles whose reveal could add a value.
	redact := inv.secrets.Redactor(b.gate.RedactorIfAny(inv.policy))
	out, err := inv.opened.Execute(ctx, sandbox.Call{
		Limits: limitsOf(inv.tool),
		Input:  inv.toolInput(),
		// The session boundary's directories as WASI preopens, for a tool
		// whose policy has fs (sessions.hold); none otherwise.
		Preopens: inv.preopens,
		OnLog:    inv.call.OnLog,
		Fetch:    hc.fetch,
		Redact:   redact,
		Reveal:   hc.reveal,
		// A tool losing its workers computes only on CPU nobody else wants.
		LowPriority: lowPriorityInTrouble && b.crashes.troubled(inv.tool.Name),
	})
	r := ran{logs: out.Logs}
	if err == nil {
		b.crashes.record(inv.tool.Name, inv.opened.Digest, out.WorkerLost)
	}
	if err != nil {
		var pe *sandbox.PreopenError
		if errors.As(err, &pe) {
			// A directory of the session's boundary is missing or not
			// a plain directory (a symlink on its path): the call is
			// refused before anything ran, naming it.
			return r, &ToolError{Kind: KindDenied, Message: "a directory of the session's boundary cannot be given to the tool: " + pe.Error()}, nil
		}
		return r, nil, err
	}
	if out.Failure != nil {
		first := refusals.first()
		if redact != nil {
			// The gate's refusal quotes the tool's request, which may
			// hold a value revealed to it (the gate knows only the
			// values it looked up).
			first = redact(first)
		}
		if first != "" && (out.Failure.Kind == KindTool || out.Failure.Kind == KindTrap) {
			// The tool gave up after the host refused its request: the
			// cause is the policy (a missing credential, a host or port
			// not allowed), and the refusal names the key that changes it.
			// A tool that passes the refusal on (fetch: fetch denied:
			// REFUSAL) would only repeat it: say it once.
			if strings.Contains(out.Failure.Message, first) {
				return r, &ToolError{Kind: KindDenied, Message: "http-fetch was refused: " + first}, nil
			}
			return r, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("http-fetch was refused: %s (the tool then reported: %s)", first, out.Failure.Message)}, nil
		}
		return r, &ToolError{Kind: out.Failure.Kind, Message: out.Failure.Message}, nil
	}
	r.output = out.Output
	return r, nil, nil
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
	// recorded counts the call's http-fetch requests and reveals, each an
	// audit record (or, unaudited, a log line): maxRecordedHostCalls.
	recorded atomic.Int32
}

// maxRecordedHostCalls bounds the http-fetch requests and reveals of one
// call. Each is recorded (an audit record of a declared agent's call, the
// gate's log line), and a refused one costs the tool microseconds: a tool
// asking in a loop until its deadline wrote records faster than the
// journal's ingestion, until Append refused every audited call of every
// agent (the fourth review). Past the bound a request is refused unsent
// and unrecorded; the tool gets the refusal. 1,024 is far more than a
// call's timeout leaves time for over a real network.
const maxRecordedHostCalls = 1024

// overRecorded counts one host call that would be recorded and reports
// whether it is past maxRecordedHostCalls.
func (hc *wasmHostCalls) overRecorded() bool {
	return hc.recorded.Add(1) > maxRecordedHostCalls
}

var tooManyRecorded = fmt.Sprintf("this call has made %d http-fetch requests and reveals, the most one call may (each is recorded); the rest are refused", maxRecordedHostCalls)

// capRecorded refuses the call's requests past maxRecordedHostCalls.
func (hc *wasmHostCalls) capRecorded(fetch sandbox.FetchFunc) sandbox.FetchFunc {
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		if hc.overRecorded() {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchDenied, Message: tooManyRecorded}
		}
		return fetch(ctx, req)
	}
}

func (hc *wasmHostCalls) fetch(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
	hc.fetchOnce.Do(func() {
		b, inv := hc.b, hc.inv
		hc.fetchChain = inv.budget.Fetch(hc.refusals.watch(hc.capRecorded(inv.traceFetch(hc.ctx, b.secrets.fetch(hc.ctx, inv, auditFetch(hc.ctx, b.trail, inv, fetchFunc(b.gate, inv.policy, b.observer, inv.tool.Name, inv.agent, inv.wallet)))))))
	})
	if hc.inv.secrets != nil {
		ctx = callegress.WithRecordRedactor(ctx, hc.inv.secrets.Redactor(nil))
	}
	return hc.fetchChain(ctx, req)
}

func (hc *wasmHostCalls) reveal(ctx context.Context, handle string) (string, error) {
	hc.revealOnce.Do(func() { hc.revealFunc = hc.b.secrets.reveal(hc.ctx, hc.inv) })
	if hc.overRecorded() {
		return "", errors.New(tooManyRecorded)
	}
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
	return basePolicy(inv.cfg, *inv.tool)
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
	opened, err := openComponent(ctx, b.runner, &t, limitsOf(&t))
	if err != nil {
		return sandbox.LoadInfo{}, err
	}
	if err := toolWorld(opened); err != nil {
		return sandbox.LoadInfo{}, err
	}
	if err := b.schemas.checkPin(&t, opened.LoadInfo); err != nil {
		return sandbox.LoadInfo{}, err
	}
	return opened.LoadInfo, nil
}

// openComponent opens t's component in runner under lim: a local file as
// it is, an oci:// tool's pinned to the layer digest the store verified its
// file as when the configuration was loaded (config.OCISource.Layer). The
// runner reads the file again (to compile, describe, and after each change
// of it), hashing what it read as it does for its compile cache, and
// refuses bytes hashing to another digest before compiling or running
// them: so the gap between the store's check and this read is closed
// whoever can write the store. Every load of a tool (each call's parse
// and open, a stale version's reopen, tools/list, check) comes here.
func openComponent(ctx context.Context, runner sandbox.Runner, t *config.Tool, lim sandbox.Limits) (*sandbox.Tool, error) {
	o := t.OCI
	if o == nil {
		return runner.Open(ctx, t.Path, lim)
	}
	if o.Layer == "" {
		// Not loaded through the store (config.Load always sets it):
		// nothing verified the file, so nothing of it loads.
		return nil, fmt.Errorf("%w: tool %s: %s has no layer digest verified by the component store", sandbox.ErrInvalidTool, t.Name, o.Ref)
	}
	opened, err := runner.OpenPinned(ctx, t.Path, o.Layer, lim)
	var de *sandbox.DigestError
	if errors.As(err, &de) {
		return nil, &componentChanged{tool: t.Name, ref: o.Ref, de: de}
	}
	return opened, err
}

// componentChanged is an oci:// tool refused because its component file no
// longer holds the layer the store verified: it wraps sandbox.ErrInvalidTool
// (the tool does not load, nothing of it runs) and oci.ErrDigestMismatch.
type componentChanged struct {
	tool, ref string
	de        *sandbox.DigestError
}

func (e *componentChanged) Error() string {
	return fmt.Sprintf("tool %s: %v: the component file of %s in the local component store now holds bytes hashing to %s, not the layer %s the store verified when agent.toml was loaded, "+
		"so it does not load and nothing of it runs; something changed the store: run maiden pull to fetch the component again",
		e.tool, oci.ErrDigestMismatch, e.ref, e.de.Got, e.de.Want)
}

func (e *componentChanged) Unwrap() []error { return []error{e.de, oci.ErrDigestMismatch} }
