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
	"os"
	"path/filepath"
	"time"

	"github.com/maiden-run/maiden/internal/wasmtime"
)

// Errors returned by the sandbox.
var (
	// ErrInvalidTool means a file is not a loadable maiden tool: not a
	// component, a component that fails to compile, imports outside the
	// contract, missing or mistyped exports, or describe/schema failing.
	ErrInvalidTool = errors.New("not a loadable maiden tool")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("sandbox closed")
)

// Kind classifies a call that did not succeed. The names are maiden's public
// error kinds (see the README).
type Kind string

// Failure kinds.
const (
	KindTool     Kind = "tool"     // execute returned err
	KindDeadline Kind = "deadline" // the call ran past its timeout
	KindMemory   Kind = "memory"   // the memory ceiling refused an allocation
	KindTrap     Kind = "trap"     // the guest trapped, exited, or broke a host limit
	KindInvalid  Kind = "invalid"  // not a loadable maiden tool
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
}

// Defaults for Options.
const (
	DefaultMaxLogBytes    = 64 << 10
	DefaultMaxOutputBytes = 1 << 20
)

// Sandbox runs tool components. It is safe for concurrent use.
type Sandbox struct {
	engine *wasmtime.Engine
	linker *wasmtime.Linker
	cache  *cache
	log    *slog.Logger
	opts   Options
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
		if d, err := os.UserCacheDir(); err == nil {
			o.CacheDir = filepath.Join(d, "maiden", "components")
		}
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
	s := &Sandbox{engine: engine, linker: linker, log: o.Logger, opts: o}
	s.cache = newCache(engine, o.CacheDir, o.MaxCacheBytes, o.Logger, checkContract)
	return s, nil
}

// Close frees the engine. Calls in progress must have returned.
func (s *Sandbox) Close() error {
	s.cache.close()
	s.linker.Close()
	return s.engine.Close()
}

// Engine exposes the engine, for benchmarks that compare the sandbox with
// bare calls through the cgo layer.
func (s *Sandbox) Engine() *wasmtime.Engine { return s.engine }

// Info is what a tool says about itself.
type Info struct {
	Description string
	Schema      string
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

// Tool is one version of a tool component, loaded and described. Executing
// it runs exactly that version, so a caller that checked an input against
// this version's schema runs the code that schema belongs to. Once the file
// changes and the cache frees the old version, Execute returns ErrStale.
type Tool struct {
	LoadInfo
	s *Sandbox
	l *loaded
}

// Open is Load, keeping hold of the loaded version.
func (s *Sandbox) Open(ctx context.Context, path string, lim Limits) (*Tool, error) {
	l, err := s.cache.get(ctx, path)
	if err != nil {
		return nil, err
	}
	l.infoOnce.Do(func() { l.info, l.infoErr = s.describe(l.comp, lim) })
	if l.infoErr != nil {
		return nil, l.infoErr
	}
	return &Tool{
		LoadInfo: LoadInfo{Info: l.info, Digest: l.digest, Cached: l.fromDisk, Compile: l.compile},
		s:        s,
		l:        l,
	}, nil
}

// checkContract refuses a component whose imports or exports do not match
// maiden's world.
func checkContract(comp *wasmtime.Component) error {
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

// describe calls describe and schema, each in a fresh instance like any
// call.
func (s *Sandbox) describe(comp *wasmtime.Component, lim Limits) (Info, error) {
	var info Info
	for _, f := range []struct {
		name string
		dst  *string
	}{{"describe", &info.Description}, {"schema", &info.Schema}} {
		out := s.run(context.Background(), comp, Call{Limits: lim}, f.name)
		if out.Failure != nil {
			// Wrapping the Failure keeps its kind: a start-up loop is still a
			// deadline, whoever asked.
			return Info{}, fmt.Errorf("%w: %s() failed: %w", ErrInvalidTool, f.name, out.Failure)
		}
		*f.dst = out.Output
	}
	return info, nil
}
