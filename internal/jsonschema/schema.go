// Package jsonschema checks a call's input (or a tool's output) against the
// JSON Schema a tool declared: the schema's text is checked against limits
// and compiled once (Compile), and each validation is bounded in work,
// runs under the call's context, and explains a misfit in a short report
// located in the input (Validate). It wraps santhosh-tekuri/jsonschema
// and is pure: it imports neither config, the store nor maiden's root.
//
//	s := jsonschema.Compile(`{"type":"object","properties":{"city":{"type":"string"}}}`)
//	if s.Err() != nil { ... } // the tool's schema is unusable
//	v, _ := jsonparse.Parse(`{"city":"Paris"}`)
//	err := s.Validate(ctx, 0, v) // nil: it fits; ctx's error; or the report
package jsonschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	lib "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Limits on a tool's input schema. A schema() is text a tool author wrote, and
// the host validates every call's input against it before any tool code runs,
// so the schema decides how much host CPU and memory a call costs before the
// tool's own limits apply. These limits bound that; a schema over any of them
// is refused at load, naming the limit (the tool is kind invalid). Each is far
// above what real tools use: sdk/go's SchemaFor of a struct is a few hundred
// bytes to a few KiB, nested one level per struct, with no enums or patterns.
const (
	// maxSchemaBytes bounds the schema() text, and with it everything else.
	maxSchemaBytes = 256 << 10
	// maxSchemaDepth bounds the nesting of the schema document (objects and
	// arrays): sdk/go adds two levels per nested struct.
	maxSchemaDepth = 64
	// maxSubschemas bounds the schemas the document compiles to.
	maxSubschemas = 5000
	// maxExpansion bounds the schemas one input value can be checked against:
	// the schema tree with every $ref inlined (a reference back to a schema
	// already on the path counts once). Without it, 40 definitions each
	// referring twice to the next ask for 2^40 checks of one value.
	maxExpansion = 20000
	// maxEnumValues bounds one enum: each input value is compared with each.
	maxEnumValues = 1000
	// maxPatternBytes and maxPatternTotal bound the regular expressions
	// (pattern, patternProperties) as written; maxPatternInsts bounds each as
	// compiled, since a{1000} is 7 bytes but 1,000 instructions and Go's
	// matcher costs instructions × input bytes. A literal of 1 KiB is about
	// 1,000 instructions.
	maxPatternBytes = 1 << 10
	maxPatternTotal = 16 << 10
	maxPatternInsts = 2000
	// maxNumberChars and maxNumberExponent bound the numbers in a schema and
	// in an input: the validator compares numbers as exact rationals, and
	// 1e999999 (8 bytes) is a 415 KB integer that takes ~25 ms to build, per
	// comparison. Numbers past ±1e1000 are beyond any float anyway.
	maxNumberChars    = 1000
	maxNumberExponent = 1000
)

// Limits on format "regex" (asserted by drafts before 2019-09), which asks
// of an input's string whether it is a regular expression: the string is
// the agent's, parsed (parseRegex) at up to ~6 µs per byte, so it is
// charged regexParseUnits match units per byte and one longer than
// maxRegexFormatBytes is refused unparsed.
const (
	maxRegexFormatBytes = 16 << 10
	regexParseUnits     = 4
)

// Limits on the work of one validation, whatever the call's deadline: with
// the schema limits above they bound the host CPU and memory an input costs.
// A check is one schema evaluated on one value, or one value a schema's
// keyword will hand to its subschemas (counted up front, since a subschema
// that fails at its first keyword is never counted itself); a match unit is
// a regular expression's instructions × bytes / 64 (the matcher's worst
// case, ~1.7 µs here).
const (
	// maxInputDepth bounds an input's nesting: the library records each
	// problem with its full location, so problems along one deep path cost
	// depth² (a failing leaf 9,000 deep took 651 MB).
	maxInputDepth = 64
	// maxChecks bounds the pass that decides whether an input fits; it
	// records no problems. A 1 MiB array of small values needs ~1 M.
	maxChecks = 2_000_000
	// maxExplainChecks bounds the pass that explains an input that does
	// not fit: each check may leave a problem (~300 bytes) in memory until
	// the report is made, so an array of more than ~100,000 items that does
	// not fit is reported without locations.
	maxExplainChecks = 200_000
	// maxMatchWork bounds regular-expression matching over both passes:
	// e.g. a pattern of 100 instructions over 1 MiB.
	maxMatchWork = 2_000_000
)

// Limits on the report of an input that does not fit: an agent needs a few
// located problems to fix its call, and a report must not grow with the
// input (1,000 wrong items against a 20,000-value enum once made 189 MB).
const (
	maxProblems     = 10      // problems listed; the rest are counted
	maxProblemBytes = 300     // one problem's line
	maxReportBytes  = 4 << 10 // the whole report
	maxExcerptRunes = 40      // a value quoted from the input or the schema
	maxListed       = 5       // property names or enum values listed
)

// matchChunk is how much of a string a regular expression reads between
// checks for a cancelled validation: Go's matcher cannot be interrupted, so
// longer strings are fed to it through a reader that checks. A pattern of
// 2,000 instructions matched ~55 ms per 1 KiB here at worst (the matcher
// costs up to ~27 ns per instruction per byte).
const matchChunk = 1 << 10

// Schema is a tool's compiled input schema, or why it has none.
//
// Validation runs on its own goroutine so that validateCtx can return when
// the call's context ends, and every compiled copy reads a stop flag at each
// schema it evaluates and between chunks of each regular-expression match,
// so the abandoned goroutine ends soon after too. The flag and the work
// counters are per validation, so a copy serves one validation at a time:
// idle copies are kept, and a new one is compiled when all are busy.
type Schema struct {
	err  error  // the schema text is not a usable JSON Schema
	text string // the schema, to compile more copies

	// The most schemas one value may meet (refs inlined, over-counted: every
	// subschema) and the largest pattern, to tell a validation that is
	// surely short (run on the caller's goroutine) from one that may not be.
	expansion, maxInsts int
	// regexFormat: some schema says format "regex", whose check parses
	// an input's strings (regexParseUnits a byte).
	regexFormat bool

	// fast checks inputs of a plain schema for a yes without the library
	// (fast.go); nil for any other schema.
	fast *fastSchema

	mu   sync.Mutex
	idle []*compiledSchema
}

// neverStop is the stop flag of validations that nobody stops.
var neverStop atomic.Bool

// maxInlineWork is the most work, in checks and match units, that a
// validation may need to run on the caller's goroutine (see validateCtx).
const maxInlineWork = 10_000

// maxIdleCopies bounds the compiled copies a schema keeps between calls.
const maxIdleCopies = 4

// compiledSchema is one compiled copy, used by one validation at a time:
// take hands it over on the goroutine that validates and put takes it back,
// so the counters need no lock. stop is that validation's flag, which its
// caller holds too, to set when the call's context ends.
type compiledSchema struct {
	check  *lib.Schema // the schema under not-not: a yes or no, no problems recorded
	schema *lib.Schema // the schema itself: every problem, located
	stop   *atomic.Bool

	checks, checkLimit int
	match              int
	explaining         bool

	expansion   int  // see Schema
	regexFormat bool // see Schema

	// validating: the copy is compiled, so the regexp engine is asked
	// only by format "regex", of an input's strings.
	validating bool
}

// stopPanic unwinds a validation whose caller has gone; overPanic one that
// is over a work limit.
type (
	stopPanic struct{}
	overPanic struct{}
)

// charge counts work and stops the validation if its caller has gone or it
// is over a limit. The library calls it (through the format hook and the
// regexp engine) from inside its own recursion, so a panic is the only way
// out; validate recovers it.
func (c *compiledSchema) charge(checks, match int) {
	if c.stop.Load() {
		panic(stopPanic{})
	}
	c.checks += checks
	c.match += match
	if c.checks > c.checkLimit || c.match > maxMatchWork {
		panic(overPanic{})
	}
}

// noRefs refuses every external $ref: a tool's schema must not make the
// host read files or reach the network.
type noRefs struct{}

func (noRefs) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema refers to %s; maiden resolves only references inside the schema itself", url)
}

// compileSchema checks a tool's schema() text: JSON, a valid JSON Schema
// (any draft it declares; 2020-12 when it declares none) with only internal
// references, describing an object (MCP requires tool inputs to be objects),
// within the limits above.
func compileSchema(text string) *Schema {
	if len(text) > maxSchemaBytes {
		return &Schema{err: fmt.Errorf("schema() returned %d bytes; the limit is %d", len(text), maxSchemaBytes)}
	}
	doc, err := lib.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return &Schema{err: fmt.Errorf("schema() did not return JSON: %v", err)}
	}
	var objects int
	if err := checkDocument(doc, "", 1, &objects); err != nil {
		return &Schema{err: fmt.Errorf("schema() is over a limit: %v", err)}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return &Schema{err: errors.New("schema() must return a JSON Schema object")}
	}
	if obj["type"] != "object" {
		return &Schema{err: fmt.Errorf(`the input schema must have "type": "object" (MCP passes arguments as an object), got %v`, jsonText(obj["type"]))}
	}
	budget := &patternBudget{seen: map[string]bool{}}
	c, err := compileCopy(doc, budget)
	budget.done = true
	if budget.err != nil { // the library's message would quote the pattern
		return &Schema{err: fmt.Errorf("schema() is over a limit: %v", budget.err)}
	}
	if err != nil {
		return &Schema{err: err}
	}
	return &Schema{text: text, idle: []*compiledSchema{c}, expansion: c.expansion, maxInsts: budget.maxInsts, regexFormat: c.regexFormat, fast: buildFast(doc, true)}
}

const (
	schemaLoc = "maiden:tool-input-schema.json"
	checkLoc  = "maiden:tool-input-check.json"
)

// compileCopy compiles the schema document with the work counting wired in.
// budget, when not nil, enforces the pattern limits (the first compilation).
func compileCopy(doc any, budget *patternBudget) (*compiledSchema, error) {
	cs := &compiledSchema{stop: new(atomic.Bool)}
	c := lib.NewCompiler()
	c.UseLoader(noRefs{})
	c.UseRegexpEngine(budget.engine(cs))
	if err := c.AddResource(schemaLoc, doc); err != nil {
		return nil, fmt.Errorf("schema() is not a valid JSON Schema: %v", truncate(oneLine(err), maxProblemBytes*3))
	}
	// The same schema under not twice: the library evaluates a not for a
	// yes or no, stops at a first problem and records none, so most inputs
	// (those that fit) are checked at little memory, and only an input
	// that does not fit pays for its report.
	wrapper := map[string]any{"not": map[string]any{"not": map[string]any{"$ref": schemaLoc}}}
	if err := c.AddResource(checkLoc, wrapper); err != nil {
		return nil, err
	}
	s, err := c.Compile(schemaLoc)
	if err != nil {
		// The library's message quotes whole subschemas and patterns.
		return nil, fmt.Errorf("schema() is not a valid JSON Schema: %v", truncate(oneLine(err), maxProblemBytes*3))
	}
	check, err := c.Compile(checkLoc)
	if err != nil {
		return nil, err
	}
	cs.schema, cs.check = s, check
	// Counted before instrument takes the enums over.
	if cs.expansion, err = checkCompiled(s); err != nil {
		return nil, fmt.Errorf("schema() is over a limit: %v", err)
	}
	instrument(s, cs)
	cs.validating = true
	return cs, nil
}

// instrument gives every schema a format hook that charges its checks.
// The library runs a schema's format right after its type, const and enum
// checks, before anything that recurses, and in every mode (its extension
// point for vocabularies is skipped when a schema fails under not); the
// hook takes over those three checks, so that every schema evaluated,
// even one that fails at once, passes a stop check and is charged. The
// original format, if the schema asserts one, still runs.
func instrument(root *lib.Schema, c *compiledSchema) {
	// All costs first: a schema's cost reads its children's enums, which
	// the hook then takes over.
	hooks := map[*lib.Schema]*early{}
	var walk func(s *lib.Schema)
	walk = func(s *lib.Schema) {
		if s == nil || hooks[s] != nil || isMetaschema(s) {
			return // a metaschema is shared by every compiler; checkCompiled refuses it
		}
		e := &early{orig: s.Format}
		if s.Format != nil && s.Format.Name == "regex" {
			c.regexFormat = true
		}
		e.inPlace, e.perPart = fanOut(s)
		hooks[s] = e
		for _, k := range children(s) {
			walk(k)
		}
	}
	walk(root)
	for s, e := range hooks {
		hook(s, e, c)
	}
}

func hook(s *lib.Schema, e *early, c *compiledSchema) {
	// A format "regex" is hooked too: the library sends it to the
	// regexp engine only when validating a schema against its
	// metaschema; an input meets Format.Validate (the engine's
	// parseRegex), as any other format.
	if s.Types != nil && !s.Types.IsEmpty() {
		e.types = s.Types.ToStrings()
	}
	if s.Const != nil {
		e.constant = *s.Const
		e.hasConst = true
	}
	if s.Enum != nil {
		e.enum = s.Enum.Values
	}
	s.Types, s.Const, s.Enum = nil, nil, nil
	name := "maiden-check"
	if e.orig != nil {
		name = e.orig.Name
	}
	s.Format = &lib.Format{Name: name, Validate: func(v any) error { return e.check(c, v) }}
}

// early is a schema's checks that come before it recurses: the library's
// type, const and enum (same order, same meaning), its own format, and the
// charge for the schema and the subschemas it will hand parts to.
type early struct {
	orig             *lib.Format
	inPlace, perPart int
	types            []string
	constant         any
	hasConst         bool
	enum             []any
}

// earlyError carries the library's own kind of problem through the format
// hook, which may only return an error; problem unwraps it.
type earlyError struct{ kind lib.ErrorKind }

func (e *earlyError) Error() string { return problem(e.kind) }

func (e *early) check(c *compiledSchema, v any) error {
	c.charge(1, 0) // first, so a schema that fails at once is counted too
	if e.types != nil {
		if got, ok := typeMatches(v, e.types); !ok {
			return &earlyError{&kind.Type{Got: got, Want: e.types}}
		}
	}
	if e.hasConst && !jsonEqual(v, e.constant) {
		return &earlyError{&kind.Const{Got: v, Want: e.constant}}
	}
	if e.enum != nil {
		c.charge(len(e.enum)/16, 0) // each comparison is cheap, but 1,000 add up
		found := false
		for _, w := range e.enum {
			if jsonEqual(v, w) {
				found = true
				break
			}
		}
		if !found {
			return &earlyError{&kind.Enum{Got: v, Want: e.enum}}
		}
	}
	c.charge(e.inPlace+e.perPart*parts(v), 0)
	if e.orig != nil {
		return e.orig.Validate(v)
	}
	return nil
}

// typeMatches is the library's type keyword: a JSON number is an integer
// when its exact value is whole.
func typeMatches(v any, want []string) (got string, ok bool) {
	switch v.(type) {
	case nil:
		got = "null"
	case bool:
		got = "boolean"
	case string:
		got = "string"
	case []any:
		got = "array"
	case map[string]any:
		got = "object"
	default:
		got = "number"
	}
	for _, w := range want {
		if w == got {
			return got, true
		}
		if w == "integer" && got == "number" {
			if r, ok := rat(v); ok && r.IsInt() {
				return got, true
			}
		}
	}
	return got, false
}

// jsonEqual is the library's equality: numbers by exact value, objects and
// arrays member by member.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, x := range a {
			y, ok := b[k]
			if !ok || !jsonEqual(x, y) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case string:
		b, ok := b.(string)
		return ok && a == b
	}
	x, ok1 := rat(a)
	y, ok2 := rat(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}

// rat is a number's exact value; numbers are bounded by checkNumber.
func rat(v any) (*big.Rat, bool) {
	switch v := v.(type) {
	case json.Number:
		return new(big.Rat).SetString(string(v))
	case float64:
		return new(big.Rat).SetString(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return nil, false
}

// fanOut counts the schemas s applies to the value itself, and those it may
// apply to each of the value's parts (properties or items).
func fanOut(s *lib.Schema) (inPlace, perPart int) {
	for _, k := range []*lib.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else} {
		if k != nil {
			inPlace++
		}
	}
	if s.DynamicRef != nil {
		inPlace++
	}
	inPlace += len(s.AllOf) + len(s.AnyOf) + len(s.OneOf) + len(s.DependentSchemas) + len(s.Dependencies)
	// Each part meets at most one of properties, prefixItems, items and
	// additional*; and maybe each of the others. Its cost before its own
	// check (an enum compared, then failing) is counted here too.
	var one int
	for _, k := range s.Properties {
		one = max(one, 1+ownCost(k))
	}
	for _, k := range s.PrefixItems {
		one = max(one, 1+ownCost(k))
	}
	for _, a := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems, s.Items2020} {
		switch a := a.(type) {
		case *lib.Schema:
			if a != nil { // the library leaves typed nils in these fields
				one = max(one, 1+ownCost(a))
			}
		case []*lib.Schema:
			for _, k := range a {
				one = max(one, 1+ownCost(k))
			}
		case bool:
			one = max(one, 1)
		}
	}
	perPart = one
	for _, k := range []*lib.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.UnevaluatedItems} {
		if k != nil {
			perPart += 1 + ownCost(k)
		}
	}
	for _, k := range s.PatternProperties {
		perPart += 1 + ownCost(k)
	}
	if s.UniqueItems {
		perPart++
	}
	return inPlace, perPart
}

// ownCost is the work of s's early keywords beyond one check: its enum.
func ownCost(s *lib.Schema) int {
	if s == nil || s.Enum == nil {
		return 0
	}
	return len(s.Enum.Values) / 16
}

func parts(v any) int {
	switch v := v.(type) {
	case map[string]any:
		return len(v)
	case []any:
		return len(v)
	}
	return 0
}

// isMetaschema tells a schema of the library's own metaschemas, which a
// tool's schema reaches only by a $ref to them.
func isMetaschema(s *lib.Schema) bool {
	return strings.HasPrefix(s.Location, "http://json-schema.org/") || strings.HasPrefix(s.Location, "https://json-schema.org/")
}
