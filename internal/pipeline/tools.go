package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/toolinfo"
)

// ToolInfo describes one configured tool (api.ToolInfo).
type ToolInfo = api.ToolInfo

// Provenance is api.Provenance.
type Provenance = api.Provenance

// Policy is a tool's whole effective policy (api.Policy).
type Policy = api.Policy

// SecretDestination is where a secret may be attached (api.SecretDestination).
type SecretDestination = api.SecretDestination

// Hints are a tool's MCP behaviour hints (api.Hints).
type Hints = api.Hints

// LoadReport is what Check found for one tool (api.LoadReport).
type LoadReport = api.LoadReport

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
	k := h.kindsOf(cfg)
	var out []ToolInfo
	for _, t := range cfg.Tools() {
		infos, err := k.of(t.Name).describe(ctx, cfg, t)
		if err != nil {
			return nil, err
		}
		out = append(out, infos...)
	}
	return out, nil
}

// describeLoaded is the ToolInfo of a tool of one component (a WebAssembly
// tool; a wrapped CLI, from its description) as loaded: li, or why it
// could not be (err).
func (s *toolSchemas) describeLoaded(ctx context.Context, cfg *config.Config, t config.Tool, li sandbox.LoadInfo, err error) ([]ToolInfo, error) {
	info := ToolInfo{Name: t.Name, Title: t.Title, Policy: toolinfo.WithDestinations(toolinfo.PolicyOf(t), cfg), Hints: toolinfo.HintsOf(t)}
	switch {
	case err == nil:
		info.Description, info.InputSchema, info.OutputSchema, info.Digest = li.Description, li.Schema, li.OutputSchema, li.Digest
		info.Provenance = s.provenance(t, li)
		in := s.in.getTool(li.Digest, li.Schema)
		if in.cmd != nil {
			info.InputSchema = in.text // a command description's JSON Schema projection (wasmcommand.go)
		}
		if in.err != nil {
			info.Error = &ToolError{Kind: KindInvalid, Message: in.err.Error()}
		} else if err := s.outputErr(li); err != nil {
			info.Error = &ToolError{Kind: KindInvalid, Message: err.Error()}
		}
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, api.ErrClosed):
		return nil, ErrClosed
	case errors.Is(err, sandbox.ErrInvalidTool):
		kind, msg := loadFailure(err)
		info.Error = &ToolError{Kind: kind, Message: msg}
	default:
		return nil, err
	}
	return []ToolInfo{info}, nil
}

// checkLoaded is Check's report of a tool of one component as loaded;
// hasSecret tells which secrets the host holds (egress.Gate.HasSecret),
// for its warnings.
func (s *toolSchemas) checkLoaded(ctx context.Context, hasSecret func(string) bool, t config.Tool, li sandbox.LoadInfo, err error) (LoadReport, error) {
	if err != nil && ctx.Err() != nil {
		return LoadReport{}, ctx.Err()
	}
	if err == nil {
		err = s.in.getTool(li.Digest, li.Schema).err
	}
	if err == nil {
		err = s.outputErr(li)
	}
	return LoadReport{Tool: t.Name, Err: err, Cached: li.Cached, Compile: li.Compile, Warnings: toolinfo.Warnings(t, hasSecret)}, nil
}

// outputErr says why a tool's declared output schema is unusable.
func (s *toolSchemas) outputErr(li sandbox.LoadInfo) error {
	if li.OutputSchema == "" {
		return nil
	}
	if err := s.out.get(li.Digest, li.OutputSchema).err; err != nil {
		return fmt.Errorf("output-schema(): %w", err)
	}
	return nil
}

// toolWorld refuses a component of another world (middleware) where a
// tool is expected.
func toolWorld(t *sandbox.Tool) error {
	if t.World != sandbox.WorldTool {
		return fmt.Errorf("%w: it is a %s component (maiden:%s world), not a tool: declare it as [middleware.NAME] and use it in [[middleware]]", sandbox.ErrInvalidTool, t.World, t.World)
	}
	return nil
}

// Check loads every tool and reports each one's fate, in name order. The
// error return is only for ctx.
func (h *Host) Check(ctx context.Context) ([]LoadReport, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	cfg := h.cfg.Load()
	k := h.kindsOf(cfg)
	var out []LoadReport
	for _, t := range cfg.Tools() {
		rep, err := k.of(t.Name).check(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	for _, t := range cfg.Tools() {
		if k.of(t.Name).confined(t) {
			// Wrapped CLIs and stdio imports run confined: prove it now.
			rep := LoadReport{Tool: "confinement"}
			if _, err := h.probe.confinement(ctx); err != nil {
				rep.Err = err
			}
			out = append(out, rep)
			break
		}
	}
	for _, c := range cfg.MiddlewareComponents() {
		opened, err := h.runner.Open(ctx, c.Path, sandbox.Limits{Timeout: c.Timeout, Memory: c.MemoryBytes})
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rep := LoadReport{Tool: "middleware." + c.Name, Err: err}
		if err == nil {
			rep.Cached, rep.Compile = opened.Cached, opened.Compile
			if opened.World != sandbox.WorldMiddleware {
				rep.Err = fmt.Errorf("%w: %s is a %s component, not middleware (maiden:middleware world; build it from a maiden new middleware-go or middleware-js project)", sandbox.ErrInvalidTool, c.Path, opened.World)
			}
		}
		out = append(out, rep)
	}
	return out, nil
}
