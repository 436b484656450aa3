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
	"sync/atomic"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/pipeline"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/internal/worker"
)

// Options configure a Host (api.Options, where the fields are documented).
// nil means all defaults; every zero value is a default.
type Options = api.Options

// DefaultApprovalWait is how long a call waits for a human by default.
const DefaultApprovalWait = api.DefaultApprovalWait

// Isolation is where guest code runs (api.Isolation). The zero value is
// Workers: the wall maiden promises (a tool's deadline, its memory, its
// crash cost only its own call) holds only there. InProcess is an explicit
// choice, for tools trusted not to attack the host; api.InProcess says what
// it still promises and what it does not.
type Isolation = api.Isolation

// Where guest code runs (see api.Workers and api.InProcess).
const (
	Workers   = api.Workers
	InProcess = api.InProcess
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
	p, err := pipeline.New(cfg, &o)
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

// RefuseUnknownTool records the refusal of a call of a tool c's agent does
// not have, for a front end that refuses such a call before it reaches
// Call (an MCP server answering a tools/call of a name it does not list),
// and returns ErrUnknownTool; nil if the agent has the tool after all.
func (h *Host) RefuseUnknownTool(ctx context.Context, c Call) error {
	return h.p.RefuseUnknownTool(ctx, c)
}
