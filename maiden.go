// Package maiden runs AI-agent tools as WebAssembly components with no
// ambient authority. Each call gets a fresh instance under the tool's
// deadline and memory ceiling, an empty WASI context, and a host interface
// whose only road to the network is the gated http-fetch.
//
// This package is the embeddable API; the maiden command and the MCP server
// are front ends over it. Every call goes through Host.Call, the one place
// where a call is admitted, run and accounted.
//
// Tools run in worker processes by default: this program re-executed, so
// main calls WorkerMain first (see Isolation).
//
//	maiden.WorkerMain() // first thing in main
//	cfg, err := config.Load("agent.toml")
//	if err != nil { ... }
//	h, err := maiden.New(cfg, nil)
//	if err != nil { ... }
//	defer h.Close(context.Background())
//	res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
package maiden

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/pipeline"
	"github.com/maiden-run/maiden/internal/trace"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/internal/worker"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Options configure a Host. nil means all defaults; every zero value is a
// default.
type Options struct {
	// Logger receives maiden's own diagnostics (compile times, cache
	// problems). nil discards them. Tool output and tool logs never go here.
	Logger *slog.Logger
	// CacheDir holds compiled components between runs. "" means the user
	// cache directory (os.UserCacheDir()/maiden/components); "off" disables
	// the disk cache.
	CacheDir string
	// MaxCacheBytes bounds the compiled code held in memory, least recently
	// used first out; 0 means 1 GiB.
	MaxCacheBytes int64
	// StatePath is the state store (agents, tokens, cards, approvals, the
	// audit trail): a SQLite file, or a postgres:// URL without a password
	// (PGPASSWORD or ~/.pgpass supply it); "" means the configuration's
	// ([state] url or path, or maiden-state.db next to agent.toml). It is
	// opened the first time something needs it.
	StatePath string
	// MaxConcurrent is how many calls run at once across all callers; 0
	// means 4 per CPU (at least 4). Calls beyond it wait their turn. In
	// worker isolation it is also the number of call workers.
	MaxConcurrent int
	// MaxQueued is how many calls may wait for a turn; 0 means 1024, a
	// negative value means none may wait. A call beyond it fails at once
	// with ErrOverloaded instead of piling up.
	MaxQueued int
	// MaxInputBytes caps a call's input; a larger one is refused before it
	// is parsed, as kind input. 0 means the configuration's
	// max_input_bytes (default 1 MiB).
	MaxInputBytes int64
	// Resolver looks up the hosts tools fetch from; nil means the system
	// resolver (net.DefaultResolver).
	Resolver Resolver
	// LookupSecret returns the value of a secret a tool names; nil means
	// the environment variable MAIDEN_SECRET_<NAME>. It is asked on every
	// request, so a rotated value applies at once.
	LookupSecret func(name string) (string, bool)
	// Audit receives one structured event per http-fetch request, allowed
	// or refused (tool, method, host, path without query, credential name,
	// decision, rule, status, bytes, duration; never a secret value); nil
	// means Logger.
	Audit *slog.Logger
	// Isolation chooses where guest code runs: Workers (the zero value),
	// supervised worker processes, or InProcess, for tools you trust. See
	// Isolation.
	Isolation Isolation
	// WorkerCommand is the argv that starts a worker process, for
	// Isolation Workers. nil means this program itself (os.Executable),
	// which must then call WorkerMain first thing in main: New fails with
	// ErrNoWorkerMain otherwise. The maiden command's path works too:
	// []string{"/usr/local/bin/maiden"}.
	WorkerCommand []string
	// Observer, if set, watches every call: admission, how it ended, its
	// http-fetch decisions (see Observer). nil costs nothing.
	Observer Observer
	// ApprovalWait is how long a call waits for a human's decision when an
	// approve rule asks, unless the Call says otherwise; 0 means
	// DefaultApprovalWait. A call whose wait ends returns kind pending.
	ApprovalWait time.Duration
	// ApprovalPoll is how often a waiting call asks the store whether
	// another process decided; 0 means 250 ms. A decision through this
	// Host (Decide) wakes it at once.
	ApprovalPoll time.Duration
	// MCPPinsPath is the file that holds the imported MCP tools an operator
	// accepted (see docs/mcp-imports.md); "" means
	// maiden-pins.json next to agent.toml (kept in memory only when the
	// configuration has no directory).
	MCPPinsPath string
	// TracerProvider, if set, gets an OpenTelemetry span for every call
	// (maiden.call, with children for admission, the decision, each
	// middleware layer, a human's wait, the run and each http-fetch;
	// docs/observability.md). nil is tracing off, at no measurable cost.
	// A call's Call.TraceParent makes its spans part of the caller's trace.
	TracerProvider oteltrace.TracerProvider
	// TracePropagateTo lists host patterns (as http_allow writes them)
	// whose http-fetch requests carry the call's traceparent; empty means
	// none, since it identifies the caller to the destination.
	TracePropagateTo []string
}

// DefaultApprovalWait is how long a call waits for a human by default.
const DefaultApprovalWait = 5 * time.Minute

// Isolation is where guest code runs. The zero value is Workers: the wall
// maiden promises (a tool's deadline, its memory, its crash cost only its
// own call) holds only there, so it is what an embedder gets without
// asking. InProcess is an explicit choice, for tools trusted not to attack
// the host.
type Isolation int

const (
	// Workers (the zero value) runs guest code in supervised worker
	// processes that hold no secrets and no network, confined by rlimits,
	// no_new_privs, Landlock and seccomp. The parent kills a worker past
	// its deadline or over its memory, and a crash costs only the call that
	// caused it. A worker is this program re-executed, so it must call
	// WorkerMain first thing in main (and in TestMain), or Options name a
	// WorkerCommand; New fails with ErrNoWorkerMain when neither is true,
	// rather than start a program that is not a worker.
	Workers Isolation = iota
	// InProcess runs guest code in this process: fastest, and the weaker
	// wall, for tools you trust. What it still promises: every call gets a
	// fresh instance with an empty WASI context and the gated http-fetch as
	// its only road out (no tool reaches another's memory, the network, a
	// secret or a file it was not given); epochs interrupt guest code that
	// computes, and linear memory is held to memory_mb. What it does not:
	// a tool blocked in a WASI call (a sleep, a poll) can overrun its
	// deadline, work the tool drives in host code (instantiation,
	// compilation) is bounded only by load-time limits, and a crash of the
	// engine or the code generator takes the process down.
	//
	// Host-call arguments are the sharpest edge. wasmtime lifts a host
	// call's arguments whole, before any maiden code runs, and its C API
	// has no way to bound that beforehand. In process maiden then refuses
	// (the call traps) any arguments it would take more than 64 MiB to
	// copy, and gives what was lifted back to the operating system when the
	// call ends; what it cannot bound is the lift itself. Measured with
	// memory_mb = 64: 3.7 M http-fetch headers cost this process a
	// transient 1.2 GB (3 s); a maiden:tool@0.1.0 list<u8> body costs
	// about 73 bytes per byte, 4.3 GB for the 59 MB such a tool can pass
	// (7–13 s); and header strings that alias the same guest memory are
	// lifted once per header, so the cost is not bounded by the tool's
	// memory at all (128 KiB of guest memory: +259 MB). A tool that is not
	// trusted not to do that belongs in Workers, where the lift meets the
	// worker's memory limit and only that call fails.
	InProcess
)

// workerMainRan records that WorkerMain was called (and returned: this
// process is not a worker itself), so that New knows this program can be
// re-executed as one.
var workerMainRan atomic.Bool

// WorkerMain serves as a worker process and exits if this process was
// started as one; otherwise it returns at once. A program that embeds
// maiden with the default Isolation (Workers) and no WorkerCommand calls it
// first thing in main (and in TestMain for tests); so does one whose
// configuration has wrapped CLIs or stdio MCP imports (their confinement
// probe's child is this program again).
func WorkerMain() {
	confine.Main() // the confinement probe's child (wrapped CLIs)
	worker.Main()
	workerMainRan.Store(true)
}

// WasmtimeVersion is the wasmtime release maiden runs tools with.
const WasmtimeVersion = wasmtime.Version

// Default admission limits.
const (
	DefaultMaxQueued = 1024
)

// Host runs the tools of one configuration. It is safe for concurrent use.
// It is the embedding API over internal/pipeline, whose Host holds the call
// path (the stages, the backends, the state); every method delegates.
type Host struct {
	p *pipeline.Host
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
	if o.Isolation == Workers && len(o.WorkerCommand) == 0 && !workerMainRan.Load() {
		// os.Executable would name a program that does not serve as a
		// worker: each call would start it (an embedder's own main, with
		// its side effects) and fail. Say so now, with both fixes.
		return nil, fmt.Errorf("maiden.New: %w", ErrNoWorkerMain)
	}
	if o.Isolation != Workers && o.Isolation != InProcess {
		return nil, fmt.Errorf("maiden.New: unknown isolation %d", o.Isolation)
	}
	var resolver pipeline.Resolver
	if o.Resolver != nil {
		resolver = o.Resolver
	}
	tracer, err := trace.New(o.TracerProvider, &trace.Options{PropagateTo: o.TracePropagateTo})
	if err != nil {
		return nil, fmt.Errorf("maiden.New: %w", err)
	}
	p, err := pipeline.New(cfg, &pipeline.Options{
		Logger: o.Logger, CacheDir: o.CacheDir, MaxCacheBytes: o.MaxCacheBytes, StatePath: o.StatePath,
		MaxConcurrent: o.MaxConcurrent, MaxQueued: o.MaxQueued, MaxInputBytes: o.MaxInputBytes,
		Resolver: resolver, LookupSecret: o.LookupSecret, Audit: o.Audit,
		InProcess: o.Isolation == InProcess, WorkerCommand: o.WorkerCommand,
		Observer: o.Observer, ApprovalWait: o.ApprovalWait, ApprovalPoll: o.ApprovalPoll, MCPPinsPath: o.MCPPinsPath,
		Tracer: tracer,
	})
	if err != nil {
		return nil, err
	}
	return &Host{p: p}, nil
}

// Close stops admitting calls, interrupts every running call (each ends as
// interrupted, or its caller's context error), waits for them to return or
// for ctx, then frees the engine, the workers and every compiled component.
// If ctx ends first, Close returns its error and frees nothing that a
// running call could still touch. Close is safe to call while calls run and
// more than once.
func (h *Host) Close(ctx context.Context) error { return h.p.Close(ctx) }

// Active is how many calls are running or waiting for a turn, for graceful
// shutdown.
func (h *Host) Active() int { return h.p.Active() }

// Config returns the configuration in force.
func (h *Host) Config() *config.Config { return h.p.Config() }

// SetConfig replaces the configuration. Calls already running keep the
// policy they started with; the next call sees the new one. An imported MCP
// server whose [mcp.NAME] table is gone or changed is stopped as soon as
// the calls running on it have returned.
func (h *Host) SetConfig(cfg *config.Config) { h.p.SetConfig(cfg) }

// Call is one request to run a tool (see api.Call for its fields).
type Call = api.Call

// Result is the outcome of a call the tool ran or tried to run (see
// api.Result).
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
// The call passes through the pipeline New assembled (ARCHITECTURE.md,
// "The call path is a pipeline"): admission, policy, input, load and
// validation, run. No tool code runs before the input is validated.
func (h *Host) Call(ctx context.Context, c Call) (Result, error) { return h.p.Call(ctx, c) }
