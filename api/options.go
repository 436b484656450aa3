package api

import (
	"context"
	"log/slog"
	"net/netip"
	"time"
)

// Options configure a Host (maiden.New; the root package names it
// maiden.Options). nil means all defaults; every zero value is a
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
	// OnCompile is told the path of each component (a tool, or a
	// middleware component) about to be compiled because neither memory
	// nor the disk cache held its code: the start of a wait of seconds for
	// a Go tool and tens of seconds for a JavaScript one on a slow
	// machine, which a command line may want to announce. It runs on the
	// goroutine that loads the component, before the compile: keep it
	// short. nil: nothing is told.
	OnCompile func(path string)
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
	// with ErrOverloaded instead of piling up; so does one whose agent's
	// calls already hold three quarters of the places (Call.Agent: the
	// rest are kept for other agents).
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
	// which must then call maiden.WorkerMain first thing in main: New fails with
	// maiden.ErrNoWorkerMain otherwise. The maiden command's path works too:
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
	// TracerProvider, if set, is a go.opentelemetry.io/otel/trace
	// TracerProvider (typed any so that api imports only the standard
	// library; New refuses anything else): every call gets an
	// OpenTelemetry span (maiden.call, with children for admission, the
	// decision, each middleware layer, a human's wait, the run and each
	// http-fetch; docs/observability.md). nil is tracing off, at no
	// measurable cost. A call's Call.TraceParent makes its spans part of
	// the caller's trace.
	TracerProvider any
	// TracePropagateTo lists host patterns (as http_allow writes them)
	// whose http-fetch requests carry the call's traceparent; empty means
	// none, since it identifies the caller to the destination.
	TracePropagateTo []string
}

// DefaultApprovalWait is how long a call waits for a human by default.
const DefaultApprovalWait = 5 * time.Minute

// Resolver looks up host names for http-fetch. *net.Resolver satisfies it.
// Tests and embedders that run their own DNS supply one in Options; maiden
// resolves each allowed name once per connection and dials only the
// addresses it checked.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

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
	// maiden.WorkerMain first thing in main (and in TestMain), or Options name a
	// WorkerCommand; New fails with maiden.ErrNoWorkerMain when neither is true,
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
