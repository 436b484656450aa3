// Package maiden runs AI-agent tools as WebAssembly components with no
// ambient authority. Each call gets a fresh instance under the tool's
// deadline and memory ceiling, an empty WASI context, and a host interface
// whose only road to the network is the gated http-fetch.
//
// This package is the embeddable API; the maiden command and the MCP server
// are front ends over it. Every call goes through Host.Call, the one place
// where a call is admitted, run and accounted.
//
//	cfg, err := config.Load("agent.toml")
//	if err != nil { ... }
//	h, err := maiden.New(cfg, nil)
//	if err != nil { ... }
//	defer h.Close()
//	res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
package maiden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
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
	// MaxConcurrent is how many calls run at once across all callers; 0
	// means 4 per CPU (at least 4). Calls beyond it wait their turn.
	MaxConcurrent int
	// MaxQueued is how many calls may wait for a turn; 0 means 1024, a
	// negative value means none may wait. A call beyond it fails at once
	// with ErrOverloaded instead of piling up.
	MaxQueued int
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
}

// Default admission limits.
const (
	DefaultMaxQueued = 1024
)

// Host runs the tools of one configuration. It is safe for concurrent use.
type Host struct {
	cfg     atomic.Pointer[config.Config]
	sb      *sandbox.Sandbox
	log     *slog.Logger
	schemas schemaCache
	adm     *admission
	closed  atomic.Bool

	// http-fetch: the gate, and each tool's compiled egress policy for the
	// configuration in force.
	gate   *egress.Gate
	pols   atomic.Pointer[policies]
	polsMu sync.Mutex
}

// New creates a host for cfg. Tools are compiled lazily, on first use (or by
// Check and Tools); New itself does no guest work.
func New(cfg *config.Config, opts *Options) (*Host, error) {
	if cfg == nil {
		return nil, fmt.Errorf("maiden.New: %w", ErrNoConfig)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	sb, err := sandbox.New(&sandbox.Options{CacheDir: o.CacheDir, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("maiden.New: %w", err)
	}
	audit := o.Audit
	if audit == nil {
		audit = o.Logger
	}
	var resolver egress.Resolver
	if o.Resolver != nil {
		resolver = o.Resolver
	}
	h := &Host{sb: sb, log: o.Logger, adm: newAdmission(o.MaxConcurrent, o.MaxQueued)}
	h.gate = egress.New(&egress.Options{Resolver: resolver, LookupSecret: o.LookupSecret, Audit: audit})
	h.cfg.Store(cfg)
	return h, nil
}

// Close releases the engine and every compiled component. Calls in progress
// must have returned.
func (h *Host) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	return h.sb.Close()
}

// Active is how many calls are running or waiting for a turn, for graceful
// shutdown.
func (h *Host) Active() int { return h.adm.active() }

// Config returns the configuration in force.
func (h *Host) Config() *config.Config { return h.cfg.Load() }

// SetConfig replaces the configuration. Calls already running keep the
// policy they started with; the next call sees the new one.
func (h *Host) SetConfig(cfg *config.Config) {
	if cfg != nil {
		h.cfg.Store(cfg)
	}
}

// Call is one request to run a tool.
type Call struct {
	// Tool is the tool's name in agent.toml.
	Tool string
	// Input is the JSON text passed to the tool's execute function.
	Input string
	// OnLog, if set, sees each of the tool's log lines as it is written, on
	// the tool's thread; it must not block.
	OnLog func(LogEntry)
}

// Result is the outcome of a call the tool ran (or tried to run).
type Result struct {
	Tool string `json:"tool"`
	OK   bool   `json:"ok"`
	// Output is the tool's output; set when OK.
	Output string `json:"output,omitempty"`
	// Error says why the call failed; set when not OK.
	Error *ToolError `json:"error,omitempty"`
	// Logs are the tool's log lines, in order, within the per-call limit.
	Logs []LogEntry `json:"logs"`
	// Duration is the call's wall time.
	Duration time.Duration `json:"-"`
}

// LogEntry is one line of a tool's log.
type LogEntry = sandbox.LogEntry

// ToolError describes a failed call.
type ToolError struct {
	Kind    ErrorKind `json:"kind"`
	Message string    `json:"message"`
}

func (e *ToolError) Error() string { return string(e.Kind) + ": " + e.Message }

// ErrorKind classifies failures. Every front end (CLI, MCP) reports these
// same kinds.
type ErrorKind string

// Error kinds.
const (
	// KindTool: the tool's execute returned an error.
	KindTool ErrorKind = "tool"
	// KindDeadline: the call ran past the tool's timeout_ms.
	KindDeadline ErrorKind = "deadline"
	// KindMemory: the tool tried to grow past its memory_mb ceiling.
	KindMemory ErrorKind = "memory"
	// KindTrap: the tool trapped, exited, or broke a host limit (output size).
	KindTrap ErrorKind = "trap"
	// KindDenied: a policy refused the call. No policy in this release
	// refuses whole calls (http-fetch refusals are values the tool sees);
	// approval and quota middleware will.
	KindDenied ErrorKind = "denied"
	// KindInvalid: the tool's file is not a loadable maiden tool.
	KindInvalid ErrorKind = "invalid"
	// KindConfig: the call could not be made as asked (unknown tool, a bad
	// agent.toml).
	KindConfig ErrorKind = "config"
	// KindInput: the input is not JSON or does not match the tool's input
	// schema; the message lists every problem, so an agent can fix its call.
	KindInput ErrorKind = "input"
)

// MarshalJSON adds duration_ms, the envelope field the CLI documents.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	logs := r.Logs
	if logs == nil {
		logs = []LogEntry{}
	}
	p := plain(r)
	p.Logs = logs
	return json.Marshal(struct {
		plain
		DurationMS float64 `json:"duration_ms"`
	}{p, float64(r.Duration.Microseconds()) / 1000})
}

// Call runs a tool. A failure of the tool — its own error, a deadline, the
// memory ceiling, a trap, a file that is not a valid tool — or input that does
// not fit the tool's schema is a Result with OK false. The error is non-nil
// only when the call could not be made (ErrClosed, ErrUnknownTool,
// ErrOverloaded) or ctx ended it (ctx's error).
//
// The call is admitted (a turn among MaxConcurrent), its policy read once
// from the configuration in force, its input validated, and only then does
// any tool code run.
func (h *Host) Call(ctx context.Context, c Call) (Result, error) {
	if h.closed.Load() {
		return Result{Tool: c.Tool}, ErrClosed
	}
	start := time.Now()
	release, err := h.adm.enter(ctx)
	if err != nil {
		return Result{Tool: c.Tool}, err
	}
	defer release()
	// The policy is read once per call from the immutable config in force,
	// so an edit to agent.toml never changes a call halfway.
	cfg := h.cfg.Load()
	tool, ok := cfg.Tool(c.Tool)
	if !ok {
		return Result{Tool: c.Tool}, fmt.Errorf("%w %q in %s (%s)", ErrUnknownTool, c.Tool, cfg.File(), toolNames(cfg))
	}
	res := Result{Tool: c.Tool}
	fail := func(kind ErrorKind, msg string) (Result, error) {
		res.Error = &ToolError{Kind: kind, Message: msg}
		res.Duration = time.Since(start)
		return res, nil
	}
	pols := h.policySet(cfg)
	if err := pols.errs[c.Tool]; err != nil {
		return fail(KindConfig, err.Error())
	}
	policy := pols.byTool[c.Tool]
	doc, err := parseInput(c.Input)
	if err != nil {
		return fail(KindInput, jsonProblem(c.Input))
	}
	// One version of the tool is loaded, its schema checked, and that same
	// version run. If it is replaced on disk at the very moment it starts,
	// load the new one and check again.
	var out sandbox.Outcome
	for attempt := 0; ; attempt++ {
		t, err := h.sb.Open(ctx, tool.Path, limitsOf(tool))
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			kind, msg := loadFailure(err)
			return fail(kind, msg)
		}
		schema := h.schemas.get(t.Digest, t.Schema)
		if schema.err != nil {
			return fail(KindInvalid, schema.err.Error())
		}
		if err := schema.validate(doc); err != nil {
			return fail(KindInput, err.Error())
		}
		out, err = t.Execute(ctx, sandbox.Call{
			Limits: limitsOf(tool),
			Input:  c.Input,
			OnLog:  c.OnLog,
			Fetch:  fetchFunc(h.gate, policy),
			// The values of the secrets this tool may use never leave the
			// host: not in its logs, its output or its error messages.
			Redact: h.gate.Redactor(policy),
		})
		if errors.Is(err, sandbox.ErrStale) && attempt < 3 {
			continue
		}
		res.Logs, res.Duration = out.Logs, time.Since(start)
		if err != nil {
			return res, err
		}
		break
	}
	if out.Failure != nil {
		res.Error = &ToolError{Kind: ErrorKind(out.Failure.Kind), Message: out.Failure.Message}
		return res, nil
	}
	res.OK, res.Output = true, out.Output
	return res, nil
}

// loadFailure classifies a tool that could not be loaded. A describe() or
// schema() that failed keeps its own kind (a start-up loop is a deadline);
// anything else about the file is invalid.
func loadFailure(err error) (ErrorKind, string) {
	var f *sandbox.Failure
	if errors.As(err, &f) {
		return ErrorKind(f.Kind), err.Error()
	}
	return KindInvalid, err.Error()
}

func limitsOf(t config.Tool) sandbox.Limits {
	return sandbox.Limits{Timeout: t.Timeout, Memory: t.MemoryBytes}
}

func toolNames(cfg *config.Config) string {
	var names []string
	for _, t := range cfg.Tools() {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return "it defines no tools"
	}
	sort.Strings(names)
	return "tools: " + strings.Join(names, ", ")
}

// jsonProblem explains why input is not JSON, with the byte offset.
func jsonProblem(input string) string {
	if strings.TrimSpace(input) == "" {
		return "input is empty; pass a JSON object such as {}"
	}
	var v any
	err := json.Unmarshal([]byte(input), &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("input is not valid JSON at byte %d: %v", se.Offset, se)
	}
	if err != nil {
		return "input is not valid JSON: " + err.Error()
	}
	return "input is not valid JSON"
}
