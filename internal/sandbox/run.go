package sandbox

import (
	"context"
	"errors"
	"fmt"
	"github.com/maiden-run/maiden/api"
	"time"

	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// Call is one execution of a tool.
type Call struct {
	// Path is the component file (absolute).
	Path   string
	Limits Limits
	// Input is the text passed to execute.
	Input string
	// Fetch serves the tool's http-fetch. nil refuses every request.
	Fetch FetchFunc
	// Reveal serves a maiden:tool@0.3.0 tool's reveal. nil refuses every
	// handle.
	Reveal RevealFunc
	// Redact rewrites every log line, the output and error messages before
	// they leave the sandbox (secret values a server echoed back, say). nil
	// leaves them as they are.
	Redact func(string) string
	// OnLog, if set, sees each log line as it is written (for live
	// notifications). It runs on the guest's thread: it must not block.
	OnLog func(LogEntry)
	// Preopens are the directories the tool's WASI filesystem sees, opened
	// when the call starts (see Preopen); none, the default, means no
	// filesystem at all. A directory that cannot be given (missing, not a
	// directory, reached through a symlink, a bad path) fails the call
	// before anything runs, with a *PreopenError.
	Preopens []Preopen
	// Opened, if set, replaces Preopens with directories the caller has
	// already opened (a worker receives them from its parent); the caller
	// closes them.
	Opened []OpenedPreopen
	// LowPriority asks that the guest's code take the CPU only when nothing
	// else wants it: the caller's verdict on a tool in trouble (its recent
	// calls lost their worker processes), so that a crash storm cannot
	// slow other tools' calls. Worker isolation applies it (SCHED_IDLE for
	// the worker during the call); in process it is ignored.
	LowPriority bool
}

// Failure says why a call did not succeed.
type Failure struct {
	Kind    Kind
	Message string
}

func (f *Failure) Error() string { return string(f.Kind) + ": " + f.Message }

// Outcome is what a call produced.
type Outcome struct {
	// Output is execute's ok value; empty on failure.
	Output string
	// Failure is nil on success.
	Failure *Failure
	Logs    []LogEntry
	// Duration is the call's wall time, loading included.
	Duration time.Duration
	// MemoryPeak is the most linear memory the call held at once, in bytes.
	MemoryPeak uint64
	// WorkerLost is set by a runner of worker processes when the call cost
	// its worker (it died, or was killed for the deadline, memory or the
	// protocol): the host backs off a tool that does this again and again.
	WorkerLost bool
}

// Execute runs the tool's execute function on c.Input in a fresh instance.
// A failure of the tool (including a file that is not a valid tool) is
// reported in Outcome.Failure; the error is non-nil only when ctx ended the
// call (it is then ctx's error) or the sandbox itself failed.
func (s *Sandbox) Execute(ctx context.Context, c Call) (Outcome, error) {
	start := time.Now()
	// As in Open: the load uses the engine, which Shutdown waits for.
	if err := s.enter(); err != nil {
		return Outcome{}, err
	}
	defer s.leave(nil)
	l, err := s.cache.get(ctx, c.Path, "")
	if err != nil {
		if ctx.Err() != nil {
			return Outcome{Duration: time.Since(start)}, ctx.Err()
		}
		if !errors.Is(err, ErrInvalidTool) {
			return Outcome{Duration: time.Since(start)}, err
		}
		msg := err.Error()
		if c.Redact != nil {
			msg = c.Redact(msg)
		}
		return Outcome{Failure: &Failure{Kind: KindInvalid, Message: msg}, Duration: time.Since(start)}, nil
	}
	return s.execute(ctx, l, c, start)
}

// ErrStale is returned by Tool.Execute when the version it holds was
// replaced (its file changed) and freed before the call could start; Open
// the tool again.
var ErrStale = errors.New("tool version replaced while the call was starting")

// Execute runs this version's execute function on c.Input in a fresh
// instance; c.Path is ignored. Failures are reported as by
// Sandbox.Execute. For a middleware component (Info.World is
// WorldMiddleware) it runs handle instead: c.Input is the event JSON and
// Outcome.Output the verdict JSON, under the same deadline, memory ceiling
// and failure kinds (handle's err result is KindTool).
func (t *Tool) Execute(ctx context.Context, c Call) (Outcome, error) {
	return t.exec(ctx, c)
}

func (s *Sandbox) execute(ctx context.Context, l *loaded, c Call, start time.Time) (Outcome, error) {
	defer l.keepAlive() // evicted code stays valid until this call is done
	out := s.run(ctx, l.comp, c, entryExport(l.world))
	out.Duration = time.Since(start)
	if out.interrupted {
		// Only the caller's context interrupts a store.
		return out.Outcome, context.Cause(ctx)
	}
	if out.hostErr != nil {
		return out.Outcome, out.hostErr
	}
	return out.Outcome, nil
}

type runResult struct {
	Outcome
	interrupted bool
	hostErr     error // a failure of the sandbox itself, not of the tool
}

// callState is what host functions reach through the store.
type callState struct {
	// parent is the caller's context and deadline the call's; ctx carries
	// both to a host call that waits (fetch, reveal), made at the first:
	// context.WithDeadline is a Go timer, and a timer armed at every call
	// had Go wake an idle thread to watch it (the guest's own deadline is
	// the store's: wasmtime.StoreOptions.Deadline). Host calls come one at
	// a time, on the call's goroutine.
	parent   context.Context
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc
	fetch    FetchFunc
	reveal   RevealFunc
	logs     *logBuffer
}

// context is the call's context for a host call: the caller's, ending at
// the call's deadline.
func (cs *callState) context() context.Context {
	if cs.ctx == nil {
		cs.ctx, cs.cancel = context.WithDeadline(cs.parent, cs.deadline)
	}
	return cs.ctx
}

// run calls one export in a fresh store and instance.
func (s *Sandbox) run(ctx context.Context, comp *wasmtime.Component, c Call, export string) runResult {
	deadline := time.Now().Add(c.Limits.Timeout)
	cs := &callState{
		parent:   ctx,
		deadline: deadline,
		fetch:    c.Fetch,
		reveal:   c.Reveal,
		logs:     newLogBuffer(s.opts.MaxLogBytes, c.Redact, c.OnLog),
	}
	defer func() {
		if cs.cancel != nil {
			cs.cancel()
		}
	}()
	// Counted before the store exists: creating it uses the engine, which
	// Shutdown must not free meanwhile.
	if err := s.enter(); err != nil {
		return runResult{hostErr: err}
	}
	var watched *wasmtime.Store
	defer func() { s.leave(watched) }()
	// A host call whose arguments wasmtime lifted at a cost far beyond any
	// legitimate request (millions of list elements) leaves that memory in
	// the C allocator's arenas: give it back once the store is closed
	// (deferred earlier, so this runs later).
	var lifted bool
	defer func() {
		if lifted {
			wasmtime.TrimHeap()
		}
	}()
	dirs, release, err := preopensOf(c)
	if err != nil {
		return runResult{hostErr: err}
	}
	store, err := wasmtime.NewStore(s.engine, &wasmtime.StoreOptions{
		MemoryLimit: c.Limits.Memory,
		Deadline:    deadline,
		Output:      cs.logs.write,
		Data:        cs,
		Preopens:    dirs,
	})
	release() // wasmtime holds its own descriptors now
	if err != nil {
		if errors.Is(err, wasmtime.ErrUseAfterClose) {
			return runResult{hostErr: api.ErrClosed}
		}
		return runResult{hostErr: fmt.Errorf("create store: %w", err)}
	}
	defer store.Close()
	s.watch(store)
	watched = store
	// The caller's cancellation reaches a running guest at its next epoch
	// check (Interrupt advances the epoch).
	stop := context.AfterFunc(ctx, store.Interrupt)
	defer stop()

	var res runResult
	inst, err := s.linker.Instantiate(store, comp)
	if errors.Is(err, wasmtime.ErrUseAfterClose) {
		// The cache freed this version between lookup and instantiation.
		return runResult{hostErr: ErrStale}
	}
	var v wasmtime.Val
	if err == nil {
		var f *wasmtime.Func
		f, err = inst.Func(export)
		if err == nil {
			var params []wasmtime.Val
			if export == wit.ExecuteExport || export == wit.HandleExport {
				params = []wasmtime.Val{wasmtime.String(c.Input)}
			}
			v, err = f.Call(params...)
		}
	}
	lifted = store.Lifted()
	res.MemoryPeak = store.MemoryPeak()
	res.Logs = cs.logs.finish()
	redact := func(m string) string {
		if c.Redact != nil {
			return c.Redact(m)
		}
		return m
	}
	if err != nil {
		if ctx.Err() != nil && (store.StopReason() == wasmtime.StopInterrupt || errors.Is(err, ctx.Err())) {
			res.interrupted = true
			res.Failure = &Failure{Kind: KindTrap, Message: "interrupted: " + context.Cause(ctx).Error()}
			return res
		}
		res.Failure = s.classify(store, err, c.Limits)
		res.Failure.Message = redact(res.Failure.Message)
		return res
	}
	out, failure := s.result(export, v)
	if failure != nil {
		if failure.Kind == KindTool && store.MemoryDenied() {
			// The tool noticed the refusal and gave up politely; the cause
			// is still the ceiling.
			failure = &Failure{Kind: KindMemory, Message: fmt.Sprintf("memory ceiling of %s reached; the tool reported: %s", bytesString(c.Limits.Memory), failure.Message)}
		}
		failure.Message = redact(failure.Message)
		res.Failure = failure
		return res
	}
	res.Output = redact(out)
	return res
}

// entryExport is the export a call of a component of world runs: execute
// for a tool, handle for a middleware.
func entryExport(world string) string {
	if world == WorldMiddleware {
		return wit.HandleExport
	}
	return wit.ExecuteExport
}

// resultExport tells whether an export returns result<string, string>
// (execute, handle) rather than a string (describe, schema, output-schema).
func resultExport(export string) bool {
	return export == wit.ExecuteExport || export == wit.HandleExport
}

// result unpacks an export's return value and applies the output cap.
func (s *Sandbox) result(export string, v wasmtime.Val) (string, *Failure) {
	var text string
	var isErr bool
	switch {
	case !resultExport(export) && v.Kind == wasmtime.KindString:
		text = v.Str
	case resultExport(export) && v.Kind == wasmtime.KindResult && v.Payload != nil && v.Payload.Kind == wasmtime.KindString:
		text, isErr = v.Payload.Str, !v.OK
	default:
		return "", &Failure{Kind: KindTrap, Message: fmt.Sprintf("%s returned an unexpected %s value", export, v.Kind)}
	}
	if len(text) > s.opts.MaxOutputBytes {
		what := "output"
		if isErr {
			what = "error message"
		}
		return "", &Failure{Kind: KindTrap, Message: fmt.Sprintf("%s returned a %s of %s, over the %s limit", export, what, bytesString(uint64(len(text))), bytesString(uint64(s.opts.MaxOutputBytes)))}
	}
	if isErr {
		return "", &Failure{Kind: KindTool, Message: text}
	}
	return text, nil
}

// classify turns a failed instantiation or call into a Failure. The memory
// ceiling wins over everything else: a refused allocation usually surfaces
// as some other trap (an abort, an unreachable) a moment later.
func (s *Sandbox) classify(store *wasmtime.Store, err error, lim Limits) *Failure {
	var werr *wasmtime.Error
	msg := err.Error()
	if errors.As(err, &werr) {
		msg = werr.Message
	}
	switch {
	case store.MemoryDenied():
		return &Failure{Kind: KindMemory, Message: fmt.Sprintf("memory ceiling of %s reached (%s)", bytesString(lim.Memory), msg)}
	case store.StopReason() == wasmtime.StopDeadline, errors.Is(err, context.DeadlineExceeded):
		return &Failure{Kind: KindDeadline, Message: fmt.Sprintf("did not finish within its %v timeout", lim.Timeout)}
	case werr != nil && werr.ExitStatus != nil:
		return &Failure{Kind: KindTrap, Message: fmt.Sprintf("tool exited with status %d", *werr.ExitStatus)}
	default:
		return &Failure{Kind: KindTrap, Message: msg}
	}
}

func bytesString(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
