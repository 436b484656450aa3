package sandbox

import (
	"context"
	"errors"
	"fmt"
	"github.com/maiden-run/maiden/api"
	"time"

	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// Compiled is a compiled component that passed the contract check, held
// outside the path-keyed cache. Worker processes use it: they receive
// compiled code by digest from their parent, never a path.
type Compiled struct {
	comp *wasmtime.Component
	// outputSchema: the component exports output-schema (0.2.0).
	outputSchema bool
	// world is WorldTool or WorldMiddleware.
	world string
}

// World is the contract the component implements, WorldTool or
// WorldMiddleware.
func (c *Compiled) World() string { return c.world }

// Close frees the compiled code; instances already made keep their own
// reference.
func (c *Compiled) Close() { c.comp.Close() }

// Compile compiles a component's binary, checks it against the contract and
// returns its serialized form for Deserialize. Errors wrap ErrInvalidTool.
func (s *Sandbox) Compile(wasm []byte) ([]byte, error) {
	if !LooksLikeComponent(wasm) {
		return nil, fmt.Errorf("%w: not a WebAssembly component (%s)", ErrInvalidTool, DescribeMagic(wasm))
	}
	if err := CheckBinary(wasm); err != nil {
		return nil, err
	}
	comp, err := s.engine.NewComponent(wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: compile: %v", ErrInvalidTool, err)
	}
	defer comp.Close()
	if err := checkContract(comp); err != nil {
		return nil, err
	}
	b, err := comp.Serialize()
	if err != nil {
		return nil, fmt.Errorf("serialize: %w", err)
	}
	return b, nil
}

// Deserialize loads code made by Compile (by this maiden, with the same
// engine configuration) and checks the contract again.
//
// The bytes are trusted: they are native code. Only pass bytes this process
// or its parent verified.
func (s *Sandbox) Deserialize(b []byte) (*Compiled, error) {
	comp, err := s.engine.DeserializeComponent(b)
	if err != nil {
		return nil, fmt.Errorf("%w: load compiled code: %v", ErrInvalidTool, err)
	}
	if err := checkContract(comp); err != nil {
		comp.Close()
		return nil, err
	}
	c := &Compiled{comp: comp, world: componentWorld(comp)}
	if items, err := comp.Exports(); err == nil {
		c.outputSchema = hasOutputSchema(items)
	}
	return c, nil
}

// Run calls one export ("describe", "schema" or "execute"; "describe" or
// "handle" of a middleware) of comp in a fresh store and instance,
// reporting as Execute does.
//
// output-schema of a component that does not export it (a 0.1.0 tool), and
// schema and output-schema of a middleware, return "" without running
// anything. execute of a middleware or handle of a tool is a KindInvalid
// failure: a caller must not run one world's entry point on the other.
func (s *Sandbox) Run(ctx context.Context, comp *Compiled, export string, c Call) (Outcome, error) {
	start := time.Now()
	switch {
	case export == wit.OutputSchemaExport && !comp.outputSchema,
		comp.world == WorldMiddleware && (export == "schema" || export == wit.OutputSchemaExport):
		return Outcome{Duration: time.Since(start)}, nil
	case resultExport(export) && export != entryExport(comp.world):
		return Outcome{Failure: &Failure{Kind: KindInvalid, Message: fmt.Sprintf("%s: a %s component has no %s export", ErrInvalidTool, comp.world, export)},
			Duration: time.Since(start)}, nil
	}
	out := s.run(ctx, comp.comp, c, export)
	out.Duration = time.Since(start)
	if out.interrupted {
		return out.Outcome, context.Cause(ctx)
	}
	if out.hostErr != nil {
		if errors.Is(out.hostErr, ErrStale) {
			return out.Outcome, api.ErrClosed
		}
		return out.Outcome, out.hostErr
	}
	return out.Outcome, nil
}
