package worker

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/wit"
)

// Open loads the tool at path (compiling it in a worker on first use) and
// asks it for its description and schema, in a call worker under lim and
// ctx. A failure the deadline or ctx caused is not remembered.
func (p *Pool) Open(ctx context.Context, path string, lim sandbox.Limits) (*sandbox.Tool, error) {
	return p.OpenPinned(ctx, path, "", lim)
}

// OpenPinned is Open of a file verified as digest (sandbox.Runner): the
// parent refuses a version whose bytes hash to another before a worker
// compiles or describes it.
func (p *Pool) OpenPinned(ctx context.Context, path, digest string, lim sandbox.Limits) (*sandbox.Tool, error) {
	var v *version
	var info sandbox.Info
	for attempt := 0; ; attempt++ {
		var err error
		v, err = p.reg.get(ctx, path, digest)
		if err != nil {
			return nil, err
		}
		info, err = p.infos.Get(ctx, v.art, func() (sandbox.Info, error) { return p.describe(ctx, v, lim) })
		if errors.Is(err, ErrLost) && attempt < 3 {
			// The compiled code was evicted and is not on disk: load the
			// file again.
			p.reg.forget(path, v)
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	li := sandbox.LoadInfo{Info: info, Digest: v.digest, Cached: v.cached, Compile: v.compile}
	// A middleware component's calls run handle (the event in, the verdict
	// out); a tool's run execute.
	entry := wit.ExecuteExport
	if info.World == sandbox.WorldMiddleware {
		entry = wit.HandleExport
	}
	return sandbox.NewTool(li, func(ctx context.Context, c sandbox.Call) (sandbox.Outcome, error) {
		out, err := p.run(ctx, v.art, entry, c)
		if errors.Is(err, ErrLost) {
			// Evicted from memory and gone from disk: load the file again.
			p.reg.forget(path, v)
			return out, sandbox.ErrStale
		}
		return out, err
	}), nil
}

func (p *Pool) describe(ctx context.Context, v *version, lim sandbox.Limits) (sandbox.Info, error) {
	info := sandbox.Info{World: v.world}
	exports := []struct {
		name string
		dst  *string
	}{{"describe", &info.Description}, {"schema", &info.Schema}, {wit.OutputSchemaExport, &info.OutputSchema}}
	for _, f := range exports {
		if info.World == sandbox.WorldMiddleware && (f.name == "schema" || f.name == wit.OutputSchemaExport) {
			// A middleware has describe and no schemas.
			continue
		}
		// output-schema of a 0.1.0 tool is "" without running anything.
		out, err := p.run(ctx, v.art, f.name, sandbox.Call{Limits: lim})
		if err == nil && out.Failure != nil && out.Failure.Kind != sandbox.KindDeadline {
			// What describe() says is remembered for the version, so one
			// worker's word is not enough: a failure the parent did not see
			// for itself (a deadline) is asked again, of a fresh worker (the
			// first was not reused: see describeFailed).
			out, err = p.run(ctx, v.art, f.name, sandbox.Call{Limits: lim})
		}
		if err != nil {
			return sandbox.Info{}, err
		}
		if out.Failure != nil {
			return sandbox.Info{}, fmt.Errorf("%w: %s() failed: %w", sandbox.ErrInvalidTool, f.name, out.Failure)
		}
		*f.dst = out.Output
	}
	return info, nil
}

// engineFingerprint is the fingerprint of the workers' engine, learnt from
// the first worker's hello (starting one if none has started yet).
func (p *Pool) engineFingerprint(ctx context.Context) (string, error) {
	p.mu.Lock()
	fp := p.fingerprint
	p.mu.Unlock()
	if fp != "" {
		return fp, nil
	}
	w, err := p.acquire(ctx)
	if err != nil {
		return "", err
	}
	p.release(w, true)
	return w.fingerprint, nil
}

// openDisk opens the disk cache once the workers' engine fingerprint is
// known (artifacts are only valid for the engine that made them).
func (p *Pool) openDisk(ctx context.Context) error {
	if p.opts.CacheDir == "" {
		return nil
	}
	fp, err := p.engineFingerprint(ctx)
	if err != nil {
		return err
	}
	p.diskOnce.Do(func() {
		c, err := compcache.Open(p.opts.CacheDir, fp, p.log)
		if err != nil {
			p.log.Warn("compiled-component disk cache disabled", "error", err)
			return
		}
		p.disk = c
	})
	return nil
}

// artifact finds compiled code: in memory, else in the disk cache, which
// returns only bytes that match the digest recorded when maiden wrote them
// (copied into a sealed memfd as they are hashed: the memfd holds the
// bytes that matched, whatever happens to the file). The caller closes it.
func (p *Pool) artifact(digest string) (loadable, bool) {
	if a, ok := p.mem.Get(digest); ok {
		return a, true
	}
	if p.disk == nil {
		return loadable{}, false
	}
	// One read of the cache: a small artifact as bytes, a large one
	// straight into a memfd (or as bytes where none can be made).
	sink := &codeSink{min: p.mem.minSize()}
	if _, err := p.disk.LoadTo(digest, sink); err != nil {
		sink.discard()
		return loadable{}, false
	}
	a, err := sink.artifact(digest)
	if err != nil {
		return loadable{}, false
	}
	p.mem.put(a)
	return p.mem.Get(digest)
}

func (p *Pool) storeArtifact(digest string, code []byte) {
	_ = p.mem.Put(digest, code)
	if p.disk != nil {
		if err := p.disk.Put(digest, code); err != nil {
			p.log.Warn("cannot store compiled component", "error", err)
		}
	}
}

// compile compiles a component in a fresh worker, under a CPU-time and a
// memory limit. Whatever kills that worker (a crash of the code generator,
// the limits) makes the component invalid; the parent goes on.
func (p *Pool) compile(ctx context.Context, path string, wasm []byte) ([]byte, error) {
	p.mu.Lock()
	closing := p.closing
	p.mu.Unlock()
	if closing {
		return nil, api.ErrClosed
	}
	w, err := p.spawnTracked(ctx)
	if err != nil {
		return nil, err
	}
	// Its answer may be compiled code of any frame's size (its hello, the
	// only frame read before, was read under workerFrameLimit).
	w.limits = compileFrameLimit
	p.track(w, true) // Shutdown kills a compile in progress
	defer p.track(w, false)
	defer w.kill(killedShutdown)
	if err := w.setCPULimit(p.opts.CompileCPU); err != nil {
		return nil, fmt.Errorf("limit compile worker: %w", err)
	}
	if err := w.setDataLimit(w.base + p.opts.CompileMemory); err != nil {
		return nil, fmt.Errorf("limit compile worker: %w", err)
	}
	start := time.Now()
	// A compile worker that neither answers nor uses CPU (a code generator
	// taken over, asleep) is not ended by its CPU limit; the clock ends it.
	wall := time.AfterFunc(compileWall(p.opts.CompileCPU), func() { w.kill(killedDeadline) })
	defer wall.Stop()
	// A worker that stops reading must not hold the parent's write.
	stopWrite := context.AfterFunc(ctx, func() { w.kill(killedCancel) })
	err = w.send(compileMsg{ID: 1, Wasm: wasm}.encode())
	stopWrite()
	if err != nil {
		return nil, p.compileDeath(ctx, w, path)
	}
	go w.read() // until the compiled answer
	select {
	case f := <-w.frames:
		if f.typ != msgCompiled {
			return nil, fmt.Errorf("compile worker sent message type %d", f.typ)
		}
		m, err := decodeCompiled(f.p)
		if err != nil {
			return nil, fmt.Errorf("compile worker: %w", err)
		}
		if m.Err != "" {
			// The worker's message already says "not a loadable maiden
			// tool: ..."; keep the kind without repeating it.
			return nil, &invalidError{msg: m.Err}
		}
		p.log.Debug("compiled component", "path", path, "bytes", len(wasm), "duration", time.Since(start))
		return m.Code, nil
	case <-w.dead:
		return nil, p.compileDeath(ctx, w, path)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// compileWall bounds a compilation on the clock: twice its CPU limit
// (cpuSeconds), which a compiler that works reaches first on a machine
// that gives it even half a CPU.
func compileWall(cpuSeconds uint64) time.Duration {
	return 2 * time.Duration(cpuSeconds) * time.Second
}

// compileDeath explains a compile worker that died. A crash of the code
// generator, or the CPU, memory or clock limit, belongs to the component: it is
// invalid (and remembered until the file changes). A kill from elsewhere
// (Shutdown, the caller giving up, an operator or the OOM killer) does not:
// the next call compiles again.
func (p *Pool) compileDeath(ctx context.Context, w *proc, path string) error {
	switch w.killReason() {
	case killedShutdown:
		return api.ErrClosed
	case killedCancel:
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	why := w.diagnosis()
	switch {
	case w.killReason() == killedDeadline:
		why = fmt.Sprintf("it did not finish within %v (twice its CPU limit, on the clock) (%s)", compileWall(p.opts.CompileCPU), why)
	case w.outOfMemory():
		why = fmt.Sprintf("it needs more than %d MiB to compile (%s)", p.opts.CompileMemory>>20, why)
	case w.signal() == syscall.SIGXCPU || (w.signal() == syscall.SIGKILL && w.cpuTime() >= time.Duration(p.opts.CompileCPU)*time.Second):
		why = fmt.Sprintf("it takes more than %d s of CPU to compile (%s)", p.opts.CompileCPU, why)
	case w.signal() == syscall.SIGKILL:
		return fmt.Errorf("compile %s: the compiler was killed from outside maiden (%s); try again", baseName(path), why)
	}
	return fmt.Errorf("%w: compile %s: the compiler failed: %s", sandbox.ErrInvalidTool, baseName(path), why)
}

// invalidError is a compile worker's refusal, already worded.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return sandbox.ErrInvalidTool }

func baseName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}

// ErrLost means compiled code vanished from every store between load and
// call; the caller opens the tool again (like sandbox.ErrStale).
var ErrLost = errors.New("compiled code no longer available")
