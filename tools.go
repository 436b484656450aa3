package maiden

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/worker"
)

// ToolInfo describes one configured tool: what it says about itself and the
// policy it runs under.
type ToolInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema text the tool's schema() returned.
	InputSchema string `json:"input_schema"`
	// OutputSchema is the JSON Schema of the tool's output, if it declares
	// one (maiden:tool@0.2.0's output-schema()); "" otherwise.
	OutputSchema string `json:"output_schema,omitempty"`
	// Digest is the SHA-256 of the component file: it changes exactly when
	// the tool's code does.
	Digest string `json:"digest,omitempty"`
	Policy Policy `json:"policy"`
	// Error is set when the tool cannot be served: its file cannot be
	// loaded, describe() or schema() fail, or the schema is not a usable
	// JSON Schema for an object.
	Error *ToolError `json:"error,omitempty"`
}

// Policy summarises a tool's limits and grants.
type Policy struct {
	Path      string   `json:"path"`
	TimeoutMS int64    `json:"timeout_ms"`
	MemoryMB  uint64   `json:"memory_mb"`
	HTTPAllow []string `json:"http_allow"`
	Secrets   []string `json:"secrets"`
}

func policyOf(t config.Tool) Policy {
	p := Policy{
		Path:      t.Path,
		TimeoutMS: t.Timeout.Milliseconds(),
		MemoryMB:  t.MemoryBytes >> 20,
		HTTPAllow: t.HTTPAllow,
		Secrets:   t.Secrets,
	}
	if p.HTTPAllow == nil {
		p.HTTPAllow = []string{}
	}
	if p.Secrets == nil {
		p.Secrets = []string{}
	}
	return p
}

// Tools loads every configured tool (compiling it if needed) and returns
// what each says about itself, in name order. A tool that cannot be loaded
// is listed with its Error set. The error is ctx's when ctx ended,
// ErrClosed after Close, or a failure of maiden itself (a worker process
// that cannot be started), never a tool's.
func (h *Host) Tools(ctx context.Context) ([]ToolInfo, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	cfg := h.cfg.Load()
	var out []ToolInfo
	for _, t := range cfg.Tools() {
		info := ToolInfo{Name: t.Name, Policy: policyOf(t)}
		li, err := h.load(ctx, t)
		switch {
		case err == nil:
			info.Description, info.InputSchema, info.OutputSchema, info.Digest = li.Description, li.Schema, li.OutputSchema, li.Digest
			if s := h.schemas.get(li.Digest, li.Schema); s.err != nil {
				info.Error = &ToolError{Kind: KindInvalid, Message: s.err.Error()}
			} else if err := h.outputSchemaErr(li); err != nil {
				info.Error = &ToolError{Kind: KindInvalid, Message: err.Error()}
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, sandbox.ErrClosed), errors.Is(err, worker.ErrClosed):
			return nil, ErrClosed
		case errors.Is(err, sandbox.ErrInvalidTool):
			kind, msg := loadFailure(err)
			info.Error = &ToolError{Kind: kind, Message: msg}
		default:
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// outputSchemaErr says why a tool's declared output schema is unusable.
func (h *Host) outputSchemaErr(li sandbox.LoadInfo) error {
	if li.OutputSchema == "" {
		return nil
	}
	if err := h.outSchemas.get(li.Digest, li.OutputSchema).err; err != nil {
		return fmt.Errorf("output-schema(): %w", err)
	}
	return nil
}

// load loads and describes one tool under its own limits and ctx.
func (h *Host) load(ctx context.Context, t config.Tool) (sandbox.LoadInfo, error) {
	opened, err := h.runner.Open(ctx, t.Path, limitsOf(t))
	if err != nil {
		return sandbox.LoadInfo{}, err
	}
	return opened.LoadInfo, nil
}

// LoadReport is what Check found for one tool.
type LoadReport struct {
	Tool string
	// Err is nil when the tool loads: its component compiles, matches the
	// contract, describes itself, and its schema is a JSON Schema for an
	// object.
	Err error
	// Cached tells whether compiled code came from the disk cache.
	Cached  bool
	Compile time.Duration
}

// Check loads every tool and reports each one's fate, in name order. The
// error return is only for ctx.
func (h *Host) Check(ctx context.Context) ([]LoadReport, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	var out []LoadReport
	for _, t := range h.cfg.Load().Tools() {
		li, err := h.load(ctx, t)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			err = h.schemas.get(li.Digest, li.Schema).err
		}
		if err == nil {
			err = h.outputSchemaErr(li)
		}
		out = append(out, LoadReport{Tool: t.Name, Err: err, Cached: li.Cached, Compile: li.Compile})
	}
	return out, nil
}
