package jsonschema

import (
	"context"
	"time"
)

// MaxSchemaBytes is the most text a tool's schema() may return.
const MaxSchemaBytes = maxSchemaBytes

// MaxInputDepth is how deeply an input may nest (objects and arrays); a
// deeper one is refused before it is checked.
const MaxInputDepth = maxInputDepth

// Compile checks a schema's text (JSON, a valid JSON Schema of any draft it
// declares, 2020-12 when none, with only internal references, describing
// an object, within the limits above) and compiles it. It never returns
// nil: Err says why a schema is unusable.
func Compile(text string) *Schema { return compileSchema(text) }

// Err is why the schema cannot be used, or nil.
func (s *Schema) Err() error { return s.err }

// Validate checks a parsed input (jsonparse's values) against the schema
// under ctx and an extra timeout (0: none): nil when it fits, ctx's error
// when ctx ends first, else the report, for a result of kind input (or
// Err). See validateCtx for the bounds.
func (s *Schema) Validate(ctx context.Context, timeout time.Duration, v any) error {
	return s.validateWithin(ctx, timeout, v)
}

// EscapePointer escapes one token of a JSON Pointer (RFC 6901).
func EscapePointer(t string) string { return escapePointer(t) }

// Where is a JSON Pointer as reports show it: "/" for the whole input, cut
// at 120 runes.
func Where(at string) string { return where(at) }

// Truncate cuts s to at most n runes (bytes for a long string, so the cost
// is bounded), ending in … when cut.
func Truncate(s string, n int) string { return truncate(s, n) }
