package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/sandbox"
	"golang.org/x/sys/unix"
)

// run runs one export of the compiled code art in a worker and supervises
// it: the deadline (kill at deadline + grace), cancellation (cancel, then
// kill), memory (RLIMIT_DATA), crashes, and the worker's requests (logs,
// http-fetch), each checked: a worker is an adversary too.
func (p *Pool) run(ctx context.Context, art, export string, c sandbox.Call) (sandbox.Outcome, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return sandbox.Outcome{}, err
	}
	if len(c.Preopens) > 0 || len(c.Opened) > 0 {
		return p.runPreopened(ctx, art, export, c)
	}
	w, err := p.acquirePriority(ctx, art, c.LowPriority)
	if err != nil {
		return sandbox.Outcome{Duration: time.Since(start)}, err
	}
	var healthy bool
	out, err := p.runOn(ctx, w, art, export, c, start, &healthy)
	// A worker lost to the call itself, not to the caller giving up or to
	// Shutdown (read before release, which kills an unhealthy worker).
	out.WorkerLost = !healthy && err == nil && ctx.Err() == nil && w.killReason() != killedShutdown
	p.release(w, healthy)
	return out, err
}

// runOn runs one export on worker w (held by the caller) and sets *healthy
// when w can serve again.
func (p *Pool) runOn(ctx context.Context, w *proc, art, export string, c sandbox.Call, start time.Time, healthy *bool) (sandbox.Outcome, error) {
	if err := p.ensureLoaded(ctx, w, art); err != nil {
		return sandbox.Outcome{Duration: time.Since(start)}, err
	}
	if err := w.setDataLimit(w.base + c.Limits.Memory + p.opts.Allowance + raceExtra); err != nil {
		return sandbox.Outcome{Duration: time.Since(start)}, limitErr(w, err)
	}
	w.calls++
	id := uint64(w.calls)
	op := w.begin()
	defer w.end(op) // before the caller releases w
	// The deadline starts now: starting a worker and handing it compiled
	// code are maiden's costs, like a compile-cache lookup in process. One
	// clock reading serves the deadline, the call's own timing and the
	// timers (each reading is a vDSO call that profiles show on this VM).
	callStart := time.Now()
	deadline := callStart.Add(c.Limits.Timeout)
	// Wait for the answer awake (see spinReader) for about as long as this
	// worker's calls usually take, but only while every spinner has a CPU
	// of its own beside the workers': a spinner that takes a worker's CPU
	// slows the call it waits for.
	var workerSpin time.Duration
	if n := p.inflight.Add(1); 2*n <= int64(runtime.NumCPU()) && spinPolicy(&cpus, callStart.UnixNano() < w.spinUntil) {
		w.conn.spinFor(w.spinBudget())
		workerSpin = workerSpinWait
	}
	defer func() {
		w.conn.stop()
		p.inflight.Add(-1)
		end := time.Now()
		w.observe(end.Sub(callStart))
		// The worker now waits awake for workerSpin (or not at all).
		w.spinUntil = end.Add(workerSpin).UnixNano()
	}()
	// A worker that stops reading must not hold the parent's writes (the
	// call, a fetch reply) past the deadline, nor its answer: killing it
	// closes the socket, which ends a pending write and the caller's own
	// read of the answer (readDirect below), and the call ends as past
	// its deadline (lost). The select loop below has a timer of its own
	// for the same instant. One timer per worker, reset for each call.
	w.armGuard(op, c.Limits.Timeout+p.opts.Grace)
	defer w.guard.Stop()
	// Cancellation: one callback on ctx (none if ctx cannot be cancelled)
	// sends the cancel frame, once the run frame is out (a cancel before
	// it would find no call in the worker and be ignored), and kills a
	// worker that does not end the call within the grace period.
	cs := &cancelState{w: w, id: id}
	if ctx.Done() != nil {
		stopOnCancel := context.AfterFunc(ctx, func() {
			// The kill first: the cancel frame's write may wait on a
			// worker that holds its slot (mailbox.go) until a kill ends it.
			time.AfterFunc(p.opts.Grace, func() { w.killFor(op, killedCancel) })
			if cs.runSent.Load() {
				cs.send()
			}
		})
		defer stopOnCancel()
	}
	if err := w.send(runMsg{ID: id, Digest: art, Export: export, Input: c.Input,
		TimeoutNS: uint64(time.Until(deadline)), Memory: c.Limits.Memory, SpinNS: uint64(workerSpin)}.encode()); err != nil {
		if w.killReason() == killedDeadline {
			return sandbox.Outcome{Failure: &sandbox.Failure{Kind: sandbox.KindDeadline, Message: p.unanswered(w, c, export)},
				Duration: time.Since(start)}, nil
		}
		return p.crashed(w, c, start, ctx)
	}
	// While this goroutine reads the answer itself (below), nothing else
	// watches ctx: a cancellation that came before the run frame was out
	// sends the cancel frame from here, one after it from the callback.
	// (Sequentially consistent atomics: either the callback sees runSent,
	// or this sees ctx done.)
	cs.runSent.Store(true)
	if ctx.Err() != nil {
		cs.send()
	}

	redact := c.Redact
	if redact == nil {
		redact = func(s string) string { return s }
	}
	var logs *sandbox.LogCollector // made at the first line
	out := sandbox.Outcome{}
	finish := func() sandbox.Outcome {
		if logs != nil {
			out.Logs = logs.Finish()
		}
		out.Duration = time.Since(start)
		return out
	}
	fail := func(kind sandbox.Kind, msg string) (sandbox.Outcome, error) {
		out.Failure = &sandbox.Failure{Kind: kind, Message: redact(msg)}
		return finish(), nil
	}

	// The first frame, most often the answer, is read on this goroutine
	// (see proc.read for why); the kill at deadline + grace (the guard),
	// or after a cancellation's grace, closes the socket under a worker
	// that does not answer. Anything else (logs, a fetch, a reveal) has the
	// rest read by a reader goroutine while this one also waits for the
	// fetch, the reveal, ctx and the kill timer: what only that loop needs
	// (the timer, the channels, the context a fetch runs under) is made
	// when it starts, not on every call.
	var first *frame
	if f, err := w.readDirect(); err == nil {
		first = &f
		if f.typ != msgDone {
			go w.read()
		}
	}
	var lp *callLoop
	if first == nil || first.typ != msgDone {
		lp = newCallLoop(ctx, deadline, p.opts.Grace)
		defer lp.stop()
	}
	fetching := false
	revealing := false
	cancelled := false
	done := ctx.Done()
	for {
		var f frame
		if first != nil {
			f, first = *first, nil
		} else {
			select {
			case f = <-w.frames:
			case rep := <-lp.fetches:
				fetching = false
				rep.ID = id
				_ = w.send(rep.encode()) // if the worker died, its death arrives on w.dead
				continue
			case rep := <-lp.reveals:
				revealing = false
				rep.ID = id
				_ = w.send(rep.encode()) // if the worker died, its death arrives on w.dead
				continue
			case <-w.dead:
				cancelled = cancelled || cs.sent.Load()
				return p.lost(ctx, w, c, export, start, cancelled, fail, finish)
			case <-lp.kill.C:
				w.kill(killedDeadline)
				if cancelled || cs.sent.Load() {
					return finish(), context.Cause(ctx)
				}
				return fail(sandbox.KindDeadline, p.unanswered(w, c, export))
			case <-done:
				done = nil // once is enough
				// Ask the worker to interrupt the guest; if it does not answer
				// within the grace period, kill it.
				cancelled = true
				cs.send()
				lp.kill.Reset(p.opts.Grace)
				continue
			}
		}
		cancelled = cancelled || cs.sent.Load()
		switch f.typ {
		case msgLog:
			m, err := decodeLog(f.p)
			if err != nil || m.ID != id || !validLog(m) {
				return p.violation(w, c, start, "bad log message")
			}
			if logs == nil {
				logs = sandbox.NewLogCollector(p.opts.MaxLogBytes, redact, c.OnLog)
			}
			logs.Add(sandbox.Level(m.Level), m.Source, m.Message)
		case msgFetch:
			m, err := decodeFetch(f.p)
			if err != nil || m.ID != id || fetching {
				return p.violation(w, c, start, "bad or concurrent fetch")
			}
			fetching = true
			go func() { lp.fetches <- p.fetch(lp.ctx, c.Fetch, m) }()
		case msgReveal:
			// The decision is the parent's: the worker only carries
			// the tool's question and the answer.
			m, err := decodeReveal(f.p)
			if err != nil || m.ID != id || revealing || fetching || len(m.Handle) > maxHandleBytes {
				return p.violation(w, c, start, "bad or concurrent reveal")
			}
			revealing = true
			go func() { lp.reveals <- revealDecision(lp.ctx, c.Reveal, m) }()
		case msgDone:
			m, err := decodeDone(f.p)
			if err != nil || m.ID != id || (m.Interrupted && !cancelled) || (m.FailKind != "" && !validKind(m.FailKind)) {
				// A worker that claims an interruption nobody asked for, or
				// a kind the sandbox never reports, is lying.
				return p.violation(w, c, start, "bad done message")
			}
			if bad := badDone(m, p.opts.MaxOutputBytes); bad != "" {
				return p.violation(w, c, start, "bad done message: "+bad)
			}
			if fetching {
				// A fetch may still be running in the parent: the worker
				// stays healthy, the reply goes nowhere.
				go func() { <-lp.fetches }()
			}
			if revealing {
				go func() { <-lp.reveals }()
			}
			out.MemoryPeak = m.MemoryPeak
			switch {
			case m.Interrupted || cancelled:
				*healthy = true
				return finish(), context.Cause(ctx)
			case m.HostErr != "":
				// The worker's sandbox failed, or says it did: a trap,
				// redacted like everything from a worker, and the worker
				// is not reused.
				w.kill(killedProtocol)
				return fail(sandbox.KindTrap, "the tool's worker failed: "+m.HostErr)
			case m.FailKind != "":
				// describeFailed: a worker whose describe() or schema()
				// failed is not reused, so a second opinion comes from
				// another worker.
				*healthy = export == "execute"
				if m.FailKind == string(sandbox.KindDeadline) {
					// The worker's sandbox counted the time left when
					// the call reached it (499.97ms of 500ms): the
					// message names the call's timeout.
					return fail(sandbox.KindDeadline, timedOut(c))
				}
				if len(m.FailMessage) > p.opts.MaxOutputBytes {
					// As in process, where the err variant is held to the
					// output limit (a worker's own sandbox may have a
					// larger one, or the worker may lie).
					return fail(sandbox.KindTrap, fmt.Sprintf("%s returned an error message of %d bytes, over the %d-byte limit", export, len(m.FailMessage), p.opts.MaxOutputBytes))
				}
				return fail(sandbox.Kind(m.FailKind), m.FailMessage)
			}
			if len(m.Output) > p.opts.MaxOutputBytes {
				return fail(sandbox.KindTrap, fmt.Sprintf("%s returned more than the %d-byte output limit", export, p.opts.MaxOutputBytes))
			}
			*healthy = true
			out.Output = redact(m.Output)
			return finish(), nil
		default:
			return p.violation(w, c, start, fmt.Sprintf("unexpected message type %d", f.typ))
		}
	}
}

// badDone says what in a worker's answer no sandbox could have sent (""
// if nothing): text that is not UTF-8 (the canonical ABI lifts only valid
// UTF-8, and every message a sandbox writes is Go's or wasmtime's text), or
// a host error over the output limit (a sandbox's own failure is a short
// message). Both are a worker that lies; the agent would read them.
func badDone(m doneMsg, maxOutput int) string {
	if len(m.HostErr) > maxOutput {
		return fmt.Sprintf("a host error of %d bytes, over the %d-byte limit", len(m.HostErr), maxOutput)
	}
	if !utf8.ValidString(m.Output) || !utf8.ValidString(m.FailMessage) || !utf8.ValidString(m.HostErr) {
		return "not UTF-8 text"
	}
	return ""
}

// cancelState is what a call's cancellation callback shares with the call.
type cancelState struct {
	w       *proc
	id      uint64
	runSent atomic.Bool // the run frame is out
	sent    atomic.Bool // the cancel frame is (being) sent
}

// send sends the cancel frame, once, and the signal that has the worker
// read it (cancel.go).
func (s *cancelState) send() {
	if s.sent.CompareAndSwap(false, true) {
		_ = s.w.send(cancelMsg{ID: s.id}.encode())
		s.w.wake()
	}
}

// callLoop is what a call needs only when its worker sends more than the
// answer: the kill timer of its select loop, the channels fetches and
// reveals answer on, and the context they run under.
type callLoop struct {
	kill    *time.Timer
	fetches chan fetchReplyMsg
	reveals chan revealReplyMsg
	ctx     context.Context
	cancel  context.CancelFunc
}

func newCallLoop(ctx context.Context, deadline time.Time, grace time.Duration) *callLoop {
	lp := &callLoop{kill: time.NewTimer(time.Until(deadline) + grace),
		fetches: make(chan fetchReplyMsg, 1), reveals: make(chan revealReplyMsg, 1)}
	lp.ctx, lp.cancel = context.WithDeadline(ctx, deadline)
	return lp
}

func (lp *callLoop) stop() {
	lp.kill.Stop()
	lp.cancel()
}

// unanswered is the failure of a call whose worker was killed at the
// call's deadline plus the grace period because it had not answered: it
// stopped reading or writing, was hostile, got no CPU, or (on a loaded
// machine) its sandbox's own deadline, which ends a tool that runs too long
// with the plain message, came too late for the grace period. The kind and
// the start of the message are the same either way; the rest tells a
// worker killed and replaced from one that answered.
func (p *Pool) unanswered(w *proc, c sandbox.Call, export string) string {
	p.log.Debug("worker killed: it had not answered by its call's deadline plus grace",
		"pid", w.pid, "export", export, "timeout", c.Limits.Timeout, "grace", p.opts.Grace)
	return timedOut(c) + " (its worker had not answered by then and was stopped)"
}

// timedOut is the message of a call that reached its deadline, as the
// sandbox words it in process.
func timedOut(c sandbox.Call) string {
	return fmt.Sprintf("did not finish within its %v timeout", c.Limits.Timeout)
}

// lost ends a call whose worker can no longer be read (it died, was
// killed, or sent bytes that are no frame).
func (p *Pool) lost(ctx context.Context, w *proc, c sandbox.Call, export string, start time.Time, cancelled bool,
	fail func(sandbox.Kind, string) (sandbox.Outcome, error), finish func() sandbox.Outcome) (sandbox.Outcome, error) {
	switch reason := w.killReason(); {
	case cancelled || (reason == killedCancel && ctx.Err() != nil):
		return finish(), context.Cause(ctx)
	case reason == killedShutdown:
		return finish(), api.ErrClosed
	case reason == killedDeadline:
		// The write guard: the worker stopped reading, or answering.
		return fail(sandbox.KindDeadline, p.unanswered(w, c, export))
	}
	if !hungUp(w.err) {
		return p.violation(w, c, start, "unreadable message: "+w.err.Error())
	}
	why := w.diagnosis()
	if w.outOfMemory() {
		return fail(sandbox.KindMemory, fmt.Sprintf("the call used more memory than memory_mb (%s) plus the %d MiB allowance for engine state and host-call arguments; its worker was stopped (%s)",
			mib(c.Limits.Memory), p.opts.Allowance>>20, why))
	}
	return fail(sandbox.KindTrap, "the tool's worker process died: "+why)
}

// hungUp reports whether err, the error that ended the reading of a
// worker's socket, is the worker's end going away (it died, was killed, or
// closed it) rather than bytes that are no frame: end of file, or
// ECONNRESET, which the kernel reports instead when the worker's end was
// closed with bytes from the parent still unread in it (a worker killed
// before it read a frame sent to it; TestWorkerKilledMidCall read
// "misbehaved (unreadable message: connection reset by peer)" once in a
// full run), or the parent's own close.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed) ||
		errors.Is(err, unix.ECONNRESET)
}

// fetch serves one http-fetch of a worker with the call's FetchFunc (the
// egress gate, in the parent, which alone holds secrets and the network).
func (p *Pool) fetch(ctx context.Context, fetch sandbox.FetchFunc, m fetchMsg) fetchReplyMsg {
	if fetch == nil {
		fetch = sandbox.NoNetwork
	}
	req := sandbox.FetchRequest{Method: m.Method, URL: m.URL, Body: m.Body, HasCredential: m.HasCredential, Credential: m.Credential}
	for _, h := range m.Headers {
		req.Headers = append(req.Headers, sandbox.Header{Name: h.Name, Value: h.Value})
	}
	resp, ferr := fetch(ctx, req)
	if ferr == nil && resp == nil {
		ferr = &sandbox.FetchError{Kind: sandbox.FetchFailed, Message: "no response"}
	}
	if ferr != nil {
		return fetchReplyMsg{ErrKind: string(ferr.Kind), ErrMessage: ferr.Message}
	}
	rep := fetchReplyMsg{Status: uint32(resp.Status), Body: resp.Body}
	for _, h := range resp.Headers {
		rep.Headers = append(rep.Headers, header{Name: h.Name, Value: h.Value})
	}
	return rep
}

// maxHandleBytes bounds the handle a worker may ask reveal about: handles
// are short (the root issues them), so a longer string is refused in the
// worker and a longer frame is a protocol violation.
const maxHandleBytes = 1 << 10

// revealDecision answers one reveal of a worker with the call's RevealFunc
// (in the parent, which alone holds secrets and decides).
func revealDecision(ctx context.Context, reveal sandbox.RevealFunc, m revealMsg) revealReplyMsg {
	if reveal == nil {
		reveal = sandbox.NoReveal
	}
	v, refusal := reveal(ctx, m.Handle)
	if refusal != nil {
		return revealReplyMsg{Refusal: refusal.Error()}
	}
	return revealReplyMsg{OK: true, Value: v}
}

// violation ends a worker that broke the protocol; the call is a trap.
func (p *Pool) violation(w *proc, c sandbox.Call, start time.Time, what string) (sandbox.Outcome, error) {
	w.kill(killedProtocol)
	p.log.Warn("worker broke the protocol; killed", "pid", w.pid, "problem", what)
	return sandbox.Outcome{Failure: &sandbox.Failure{Kind: sandbox.KindTrap, Message: "the tool's worker process misbehaved (" + what + ") and was stopped"},
		Duration: time.Since(start)}, nil
}

// crashed reports a worker that could not be sent the call.
func (p *Pool) crashed(w *proc, c sandbox.Call, start time.Time, ctx context.Context) (sandbox.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Outcome{Duration: time.Since(start)}, err
	}
	return sandbox.Outcome{Failure: &sandbox.Failure{Kind: sandbox.KindTrap, Message: "the tool's worker process died: " + w.diagnosis()},
		Duration: time.Since(start)}, nil
}

// ensureLoaded makes sure w holds the compiled code art, sending it if not,
// and keeps at most maxLoadedPerWorker per worker.
func (p *Pool) ensureLoaded(ctx context.Context, w *proc, art string) error {
	for i, d := range w.loaded {
		if d == art {
			// Most recently used last, moved in place (most often it is
			// already last). Only the holder touches w.loaded; a worker's
			// replacement is handed the list of a worker that is dead.
			copy(w.loaded[i:], w.loaded[i+1:])
			w.loaded[len(w.loaded)-1] = art
			return nil
		}
	}
	code, ok := p.artifact(art)
	if !ok {
		return errLost
	}
	defer code.close()
	// Loading maps code the parent chose (no guest code runs): raise the
	// limit while it loads, then measure the worker's new resting size.
	// Raise it, not lift it: the worker may have been taken over by an
	// earlier call, and what it took while "loading" would be its resting
	// size for good, each later call's limit set over it.
	if err := w.setDataLimit(w.loadLimit(code.size, p.opts.Allowance)); err != nil {
		return limitErr(w, err)
	}
	// Bounded like a start: a worker that neither reads nor answers is
	// killed, which also ends a write it blocks (the drop's too: a worker
	// that holds its mailbox's slot "being read" holds a frame of any size).
	op := w.begin()
	defer w.end(op) // before the call that follows, on the same worker
	guard := time.AfterFunc(loadTimeout, func() { w.killFor(op, killedDeadline) })
	defer guard.Stop()
	stopOnCancel := context.AfterFunc(ctx, func() { w.killFor(op, killedCancel) })
	defer stopOnCancel()
	if len(w.loaded) >= maxLoadedPerWorker {
		if err := w.send(dropMsg{Digest: w.loaded[0]}.encode()); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return deadErr(w, "")
		}
		w.loaded = w.loaded[1:]
	}
	go w.read() // until the loaded answer
	msg := loadMsg{Digest: art, Code: code.code}
	if code.file != nil && w.code != nil {
		// The descriptor first, so it waits in the channel when the
		// frame that names it arrives (codefd.go).
		if err := w.code.send(code.file); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, errChannelFull) {
				w.kill(killedProtocol)
				return err
			}
			return deadErr(w, "")
		}
		msg.Size = uint64(code.size)
	} else if code.file != nil {
		// A worker without a code channel: the bytes, read back.
		b := make([]byte, code.size)
		if _, err := code.file.ReadAt(b, 0); err != nil {
			return fmt.Errorf("reading compiled code: %w", err)
		}
		msg.Code = b
	}
	if err := w.send(msg.encode()); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return deadErr(w, "")
	}
	select {
	case f := <-w.frames:
		m, err := decodeLoaded(f.p)
		if f.typ != msgLoaded || err != nil || m.Digest != art {
			w.kill(killedProtocol)
			return fmt.Errorf("worker answered a load with message type %d", f.typ)
		}
		if msg.Size > 0 && w.code.unread() {
			w.kill(killedProtocol)
			return fmt.Errorf("worker %d answered a load without taking the compiled code sent to it", w.pid)
		}
		if m.Err != "" {
			return &invalidError{msg: m.Err}
		}
	case <-w.dead:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return deadErr(w, " loading compiled code")
	case <-ctx.Done():
		w.kill(killedCancel)
		return ctx.Err()
	}
	w.loaded = append(w.loaded, art)
	if n, err := vmData(w.pid); err == nil {
		w.base = n
	}
	return nil
}

var errLost = fmt.Errorf("%w", ErrLost)

// loadGrowth bounds what loading compiled code may add to a worker's data,
// per byte of code: measured, a Go tool's code adds 2.6 times its size
// to VmData, a JS tool's 1.3 times, a WAT tool's nothing seen.
const loadGrowth = 4

// loadLimit is the worker's data limit while it loads code of n bytes:
// what it holds now, loadGrowth times the code, and the allowance.
func (p *proc) loadLimit(n int, allowance uint64) uint64 {
	held, err := vmData(p.pid)
	if err != nil || held < p.base {
		held = p.base
	}
	return held + loadGrowth*uint64(n) + allowance
}

// loadTimeout bounds handing a worker compiled code (deserializing a 46 MB
// JS artifact takes ~50 ms here).
const loadTimeout = 30 * time.Second

// validKind tells whether a worker reported a kind the sandbox produces.
func validKind(k string) bool {
	switch sandbox.Kind(k) {
	case sandbox.KindTool, sandbox.KindDeadline, sandbox.KindMemory, sandbox.KindTrap, sandbox.KindInvalid:
		return true
	}
	return false
}

// validLog tells whether a log line has a level and source the sandbox
// produces.
func validLog(m logMsg) bool {
	switch sandbox.Level(m.Level) {
	case sandbox.LevelDebug, sandbox.LevelInfo, sandbox.LevelWarn, sandbox.LevelError:
	default:
		return false
	}
	switch m.Source {
	case sandbox.SourceLog, sandbox.SourceStdout, sandbox.SourceStderr, sandbox.SourceHost:
		return true
	}
	return false
}

// limitErr is the error of a worker whose limits could not be set: if it
// was killed or died meanwhile, that (deadErr: a Shutdown is ErrClosed, as
// for every call it interrupts; prlimit of an exiting process fails with
// EPERM), else the failure to limit it.
func limitErr(w *proc, err error) error {
	if w.killReason() != notKilled || w.alive() != nil {
		return deadErr(w, "")
	}
	return fmt.Errorf("limit worker memory: %w", err)
}

// deadErr is the error for a worker found dead outside a call: api.ErrClosed
// if Shutdown killed it.
// A worker the parent killed says why: "died: still running" (a process
// not yet reaped) told an operator nothing.
func deadErr(w *proc, doing string) error {
	switch w.killReason() {
	case killedShutdown:
		return api.ErrClosed
	case killedDeadline:
		return fmt.Errorf("worker stopped%s: it did not take the compiled code within %v (a machine this loaded may need fewer calls at once)", doing, loadTimeout)
	case killedProtocol:
		return fmt.Errorf("worker stopped%s: it broke the worker protocol", doing)
	}
	return fmt.Errorf("worker died%s: %s", doing, w.diagnosis())
}

func mib(n uint64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
