// Package sandbox runs maiden tool components: one fresh store and instance
// per call, under a wall-clock deadline, a memory ceiling and an empty WASI
// context, with the host interface (log, http-fetch) linked in. It owns the
// compile cache and the classification of failures into error kinds. Policy
// (which tool, which limits, which network) arrives with each call; the
// sandbox keeps none of it.
//
//	sb, _ := sandbox.New(nil)
//	out, err := sb.Execute(ctx, sandbox.Call{
//		Path:   "/abs/echo.wasm",
//		Limits: sandbox.Limits{Timeout: 5 * time.Second, Memory: 64 << 20},
//		Input:  `{"message":"hi"}`,
//	})
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// Errors returned by the sandbox.
var (
	// ErrInvalidTool means a file is not a loadable maiden tool: not a
	// component, a component that fails to compile, imports outside the
	// contract, missing or mistyped exports, or describe/schema failing.
	ErrInvalidTool = errors.New("not a loadable maiden tool")
)

// Kind classifies a call that did not succeed (api.ErrorKind: the error
// kinds have one source).
type Kind = api.ErrorKind

// Failure kinds the sandbox produces.
const (
	KindTool     = api.KindTool     // execute returned err
	KindDeadline = api.KindDeadline // the call ran past its timeout
	KindMemory   = api.KindMemory   // the memory ceiling refused an allocation
	KindTrap     = api.KindTrap     // the guest trapped, exited, or broke a host limit
	KindInvalid  = api.KindInvalid  // not a loadable maiden tool
)

// Limits bound one call.
type Limits struct {
	// Timeout covers instantiation, guest code and time blocked in host calls.
	Timeout time.Duration
	// Memory is the ceiling in bytes on all the call's linear memory.
	Memory uint64
}

// Options configure a Sandbox. nil means all defaults.
type Options struct {
	// CacheDir holds compiled components between runs. "" means
	// os.UserCacheDir()/maiden/components; "off" disables the disk cache.
	CacheDir string
	// MaxCacheBytes bounds the compiled code kept in memory, least recently
	// used first out; 0 means DefaultMaxCacheBytes (1 GiB).
	MaxCacheBytes int64
	// Logger receives maiden's own diagnostics; nil discards them. Tool logs
	// never go here: they are returned with each call.
	Logger *slog.Logger
	// MaxLogBytes bounds one call's log; 0 means 64 KiB.
	MaxLogBytes int
	// MaxOutputBytes bounds execute's result (ok or err); 0 means 1 MiB.
	MaxOutputBytes int
	// Engine tunes wasmtime; nil means maiden's production configuration.
	Engine *wasmtime.Config
	// OnCompile is told the path of each component about to be compiled
	// because no cache held its code (api.Options.OnCompile); nil: nothing.
	OnCompile func(path string)
}

// Defaults for Options.
const (
	DefaultMaxLogBytes    = 64 << 10
	DefaultMaxOutputBytes = 1 << 20
)

// Sandbox runs tool components in this process. It is safe for concurrent
// use.
type Sandbox struct {
	engine *wasmtime.Engine
	linker *wasmtime.Linker
	cache  *cache
	log    *slog.Logger
	opts   Options
	infos  InfoCache

	// Calls in flight, so Shutdown can interrupt them and wait before the
	// engine is freed: nothing may touch C state after it is gone.
	mu       sync.Mutex
	active   map[*wasmtime.Store]struct{}
	inflight int           // calls between enter and leave, stores or not
	idle     chan struct{} // closed when inflight reaches 0 during shutdown
	closing  bool
	freed    bool
}

// New creates a sandbox: one engine, one linker (WASI plus the host
// interface) and the compile cache.
func New(opts *Options) (*Sandbox, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = DefaultMaxLogBytes
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	switch o.CacheDir {
	case "off":
		o.CacheDir = ""
	case "":
		o.CacheDir = compcache.DefaultDir()
	}
	if o.CacheDir != "" {
		if err := prepareCacheDir(o.CacheDir); err != nil {
			o.Logger.Warn("compiled-component disk cache disabled", "error", err)
			o.CacheDir = ""
		}
	}
	engine, err := wasmtime.NewEngine(o.Engine)
	if err != nil {
		return nil, err
	}
	linker, err := wasmtime.NewLinker(engine)
	if err == nil {
		err = linker.AddWASIP2()
	}
	if err == nil {
		err = defineHost(linker)
	}
	if err != nil {
		if linker != nil {
			linker.Close()
		}
		engine.Close()
		return nil, fmt.Errorf("link host interface: %w", err)
	}
	s := &Sandbox{engine: engine, linker: linker, log: o.Logger, opts: o, active: map[*wasmtime.Store]struct{}{}}
	s.cache = newCache(engine, o.CacheDir, o.MaxCacheBytes, o.Logger, checkContract)
	s.cache.onCompile = o.OnCompile
	return s, nil
}

// Close is Shutdown without a time limit: it interrupts the calls in
// progress, waits for them and frees the engine.
func (s *Sandbox) Close() error { return s.Shutdown(context.Background()) }

// Shutdown stops new calls, interrupts every running call (each ends at its
// next epoch check as kind trap, "interrupted"), waits for them to return, then
// frees the engine and every compiled component. If ctx ends first, Shutdown
// returns ctx's error and frees nothing: memory is leaked rather than freed
// under a running guest.
func (s *Sandbox) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	for st := range s.active {
		st.Interrupt()
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
		if s.inflight == 0 {
			close(s.idle)
		}
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		return fmt.Errorf("sandbox shutdown: calls still running: %w", ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed {
		return nil
	}
	s.freed = true
	s.cache.close()
	s.linker.Close()
	return s.engine.Close()
}

// enter counts a call in flight before it touches the engine (creating a
// store uses it); it fails once shutdown began.
func (s *Sandbox) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return api.ErrClosed
	}
	s.inflight++
	return nil
}

// watch registers the call's store, so shutdown can interrupt it; a store
// made after shutdown began is interrupted at once.
func (s *Sandbox) watch(st *wasmtime.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active[st] = struct{}{}
	if s.closing {
		st.Interrupt()
	}
}

// leave ends what enter began (st may be nil: no store was made).
func (s *Sandbox) leave(st *wasmtime.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != nil {
		delete(s.active, st)
	}
	s.inflight--
	if s.closing && s.inflight == 0 && s.idle != nil {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

// Engine exposes the engine, for benchmarks that compare the sandbox with
// bare calls through the cgo layer.
func (s *Sandbox) Engine() *wasmtime.Engine { return s.engine }

// Info is what a tool (or a middleware component) says about itself.
type Info struct {
	// World is the contract the component implements: WorldTool
	// (maiden:tool) or WorldMiddleware (maiden:middleware). Open accepts
	// both; a caller that expects one must check it, since a tool is not a
	// middleware (it may reach the network) and a middleware is not a tool.
	World       string
	Description string
	// Schema is the tool's input schema; "" for middleware.
	Schema string
	// OutputSchema is what a maiden:tool@0.2.0 tool's output-schema()
	// returned: the JSON Schema of execute's output, or "" (a tool that
	// declares none, or a 0.1.0 tool).
	OutputSchema string
}

// LoadInfo describes a tool loaded from disk.
type LoadInfo struct {
	Info
	// Digest is the SHA-256 of the component file.
	Digest string
	// Cached tells whether compiled code came from the disk cache.
	Cached bool
	// Compile is how long compiling (or deserializing) took.
	Compile time.Duration
}

// Load compiles (or fetches from cache) the component at path, checks it
// against the contract and returns its description and schema. describe and
// schema run once per version of the file, each in a fresh instance under
// lim. Every error wraps ErrInvalidTool except cancellation of ctx.
func (s *Sandbox) Load(ctx context.Context, path string, lim Limits) (LoadInfo, error) {
	t, err := s.Open(ctx, path, lim)
	if err != nil {
		return LoadInfo{}, err
	}
	return t.LoadInfo, nil
}

// Tool is one version of a tool component, loaded and described; it is
// immutable (Sandbox.Open returns the same Tool for every Open of one
// version: callers must not change its LoadInfo). Executing it runs
// exactly that version, so a caller that checked an input against
// this version's schema runs the code that schema belongs to. Once the file
// changes and the cache frees the old version, Execute returns ErrStale.
type Tool struct {
	LoadInfo
	exec func(ctx context.Context, c Call) (Outcome, error)
}

// NewTool makes a Tool of a runner other than Sandbox: exec runs this
// version's execute.
func NewTool(info LoadInfo, exec func(ctx context.Context, c Call) (Outcome, error)) *Tool {
	return &Tool{LoadInfo: info, exec: exec}
}

// Runner runs tool components: Sandbox in this process, package worker in
// supervised worker processes. Open loads (compiling on first use) and
// describes one version of the tool at path under lim and ctx. OpenPinned
// is Open of a file verified as digest ("sha256:HEX"; "" pins nothing): the
// bytes the runner reads from it, the ones it compiles and runs, must hash
// to digest, or it returns a *DigestError before compiling or describing
// them (the hash is the one it takes of every version anyway, for its
// compile cache and LoadInfo.Digest). Shutdown stops admission, interrupts
// running calls, waits for them (or ctx) and frees.
type Runner interface {
	Open(ctx context.Context, path string, lim Limits) (*Tool, error)
	OpenPinned(ctx context.Context, path, digest string, lim Limits) (*Tool, error)
	Shutdown(ctx context.Context) error
}

var _ Runner = (*Sandbox)(nil)

// Open is Load, keeping hold of the loaded version. describe() and schema()
// run once per version of the file, under lim and ctx; a failure that the
// deadline or ctx caused is not remembered, so the next Open tries again.
func (s *Sandbox) Open(ctx context.Context, path string, lim Limits) (*Tool, error) {
	return s.OpenPinned(ctx, path, "", lim)
}

// OpenPinned is Open of a file verified as digest (Runner): the cache
// refuses a version whose bytes hash to another before compiling it, so
// neither describe() nor a call runs it.
func (s *Sandbox) OpenPinned(ctx context.Context, path, digest string, lim Limits) (*Tool, error) {
	// Loading compiles or deserializes with the engine, which Shutdown must
	// not free meanwhile: counted as a call in flight.
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave(nil)
	l, err := s.cache.get(ctx, path, digest)
	if err != nil {
		return nil, err
	}
	if t := l.opened.Load(); t != nil {
		return t, nil
	}
	info, err := s.infos.Get(ctx, l.digest, func() (Info, error) { return s.describe(ctx, l.comp, l.world, lim) })
	if err != nil {
		return nil, err
	}
	li := LoadInfo{Info: info, Digest: l.digest, Cached: l.fromDisk, Compile: l.compile}
	t := NewTool(li, func(ctx context.Context, c Call) (Outcome, error) {
		return s.execute(ctx, l, c, time.Now())
	})
	if !l.opened.CompareAndSwap(nil, t) {
		t = l.opened.Load() // another Open of this version won: one Tool per version
	}
	return t, nil
}

// checkContract refuses a component whose imports or exports do not match
// maiden's tool world or, for a component that exports handle and not
// execute, the middleware world.
func checkContract(comp *wasmtime.Component) error {
	if componentWorld(comp) == WorldMiddleware {
		imports, err := comp.Imports()
		if err == nil {
			err = checkMiddlewareImports(imports)
		}
		if err != nil {
			return err
		}
		exports, err := comp.Exports()
		if err == nil {
			err = checkMiddlewareExports(exports)
		}
		return err
	}
	imports, err := comp.Imports()
	if err == nil {
		err = checkImports(imports)
	}
	if err != nil {
		return err
	}
	exports, err := comp.Exports()
	if err == nil {
		err = checkExports(exports)
	}
	return err
}

// componentWorld is worldOf a compiled component's exports; a component
// whose exports cannot be read is held to the tool world (whose check then
// reports the problem).
func componentWorld(comp *wasmtime.Component) string {
	exports, err := comp.Exports()
	if err != nil {
		return WorldTool
	}
	return worldOf(exports)
}

// describe calls describe and schema (a middleware: describe only), each in
// a fresh instance like any call, under the caller's context and the
// component's limits.
func (s *Sandbox) describe(ctx context.Context, comp *wasmtime.Component, world string, lim Limits) (Info, error) {
	info := Info{World: world}
	exports := []struct {
		name string
		dst  *string
	}{{"describe", &info.Description}, {"schema", &info.Schema}}
	if world == WorldMiddleware {
		exports = exports[:1]
	} else if items, err := comp.Exports(); err == nil && hasOutputSchema(items) {
		exports = append(exports, struct {
			name string
			dst  *string
		}{wit.OutputSchemaExport, &info.OutputSchema})
	}
	for _, f := range exports {
		out := s.run(ctx, comp, Call{Limits: lim}, f.name)
		if out.hostErr != nil {
			return Info{}, out.hostErr
		}
		if out.interrupted {
			return Info{}, context.Cause(ctx)
		}
		if out.Failure != nil {
			// Wrapping the Failure keeps its kind: a start-up loop is still a
			// deadline, whoever asked.
			return Info{}, fmt.Errorf("%w: %s() failed: %w", ErrInvalidTool, f.name, out.Failure)
		}
		*f.dst = out.Output
	}
	return info, nil
}
