package jsonschema

import (
	"context"
	"time"

	"github.com/maiden-run/maiden/internal/jsonparse"
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

// ScanInput checks an input's text as jsonparse.ParseStrict does (the
// same refusals, as its *SyntaxError, and two keys of one object that
// differ only in case: jsonparse.Scan) without decoding it, and measures it
// against the limits Validate applies (depth, numbers) in the same pass:
// what ValidateScanned needs.
func ScanInput(text string) (jsonparse.Scanned, error) { return jsonparse.Scan(text, inputLimits) }

// inputLimits are checkInput's limits, for the scan.
var inputLimits = jsonparse.Limits{
	Depth:      maxInputDepth,
	LongNumber: func(s string) bool { return numberProblem(s) != "" },
}

// ValidateScanned is Validate for an input given as its text and its
// ScanInput: the same verdict and report, but the text is decoded only
// when the check needs the whole value (a schema without a fast form, a
// fast check that cannot say yes, an input past the limits); a plain
// schema reads only the top-level members it names. It returns the value
// it decoded, if any (decoded), for the caller to keep.
func (s *Schema) ValidateScanned(ctx context.Context, timeout time.Duration, text string, sc *jsonparse.Scanned) (v any, decoded bool, err error) {
	return s.validateScanned(ctx, timeout, text, sc)
}

// EscapePointer escapes one token of a JSON Pointer (RFC 6901).
func EscapePointer(t string) string { return escapePointer(t) }

// Where is a JSON Pointer as reports show it: "/" for the whole input, cut
// at 120 runes.
func Where(at string) string { return where(at) }

// Truncate cuts s to at most n runes (bytes for a long string, so the cost
// is bounded), ending in … when cut.
func Truncate(s string, n int) string { return truncate(s, n) }
