package pipeline

import (
	"context"
	"time"

	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/jsonparse"
	"github.com/maiden-run/maiden/internal/jsonschema"
)

// inputSchema is a tool's compiled input (or output) schema, or why it has
// none; the checking is internal/jsonschema's.
type inputSchema struct {
	err     error
	checker *jsonschema.Schema // nil when err is set
	text    string             // the schema compiled, when it compiled
	// cmd is the command description a WebAssembly tool's schema()
	// returned (wasmcommand.go); the checker is then its JSON Schema
	// projection's.
	cmd *command.Spec
}

func compileSchema(text string) *inputSchema {
	c := jsonschema.Compile(text)
	if c.Err() != nil {
		return &inputSchema{err: c.Err()}
	}
	return &inputSchema{checker: c, text: text}
}

// validateWithin checks a parsed input under ctx and an extra timeout (0:
// none): nil, ctx's error, or the report for a result of kind input.
func (s *inputSchema) validateWithin(ctx context.Context, timeout time.Duration, v any) error {
	if s.err != nil {
		return s.err
	}
	return s.checker.Validate(ctx, timeout, v)
}

// toolSchemas are what the Host keeps of the component versions it loaded,
// by digest: their compiled input schemas (a command description's
// projection: getTool), their compiled output schemas, and the hash of
// each one's definition (schemapin.go). The backends that load a version
// (wasm.go, imports.go) and Tools and Check share it.
type toolSchemas struct {
	in, out schemaCache
	hashes  jsonschema.Cache[string]
}

// schemaCache holds compiled schemas by component digest.
type schemaCache struct {
	c jsonschema.Cache[*inputSchema]
}

func (c *schemaCache) get(digest, text string) *inputSchema {
	return c.c.Get(digest, text, compileSchema)
}

// getTool is get for a WebAssembly tool's schema(), which may also be a
// command description (compileToolSchema).
func (c *schemaCache) getTool(digest, text string) *inputSchema {
	return c.c.Get(digest, text, compileToolSchema)
}

// peek is the schema compiled for digest, if there is one.
func (c *schemaCache) peek(digest string) (*inputSchema, bool) { return c.c.Peek(digest) }

// parseInput decodes a call's input (invocation.value, once, for every
// stage that reads the value; a middleware's rewrite). Numbers stay
// json.Number, as the validator expects; trailing data is an error; so is
// what JSON readers read differently (jsonparse.ParseStrict: a duplicate
// key, invalid UTF-8, a lone surrogate escape), which the input stage's
// scan (jsonschema.ScanInput) refuses alike. Its strings share the input's
// bytes, which live as long as the call.
func parseInput(input string) (any, error) { return jsonparse.ParseStrict(input) }

// parseOutput parses a tool's output for its output schema: as JSON
// readers do (the last of duplicate keys, U+FFFD for invalid UTF-8).
func parseOutput(output string) (any, error) { return jsonparse.Parse(output) }

// inputProblem is the message for input parseInput refused with err.
func inputProblem(input string, err error) string {
	if _, lax := jsonparse.Parse(input); lax == nil {
		// JSON, but ambiguous: say what and where.
		return "input is JSON that readers read differently: " + err.Error() + "; the schema check, the cards and the tool could each see another value, so it is refused"
	}
	return jsonProblem(input)
}

// The checker's limit on schemas.
const maxSchemaBytes = jsonschema.MaxSchemaBytes
