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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	lib "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
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

	expansion int // see Schema
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
	return &Schema{text: text, idle: []*compiledSchema{c}, expansion: c.expansion, maxInsts: budget.maxInsts}
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
	if s.Format != nil && s.Format.Name == "regex" {
		return // the library sends "regex" to the regexp engine, not the hook
	}
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

// checkDocument walks the parsed schema for nesting past maxSchemaDepth,
// numbers past the number limits, and more objects and booleans (each
// possibly a subschema) than maxSubschemas: this runs before compiling,
// whose cost grows faster than the count (80,000 empty subschemas took
// 2m49s here, 5,000 0.14 s). at names where the walk is; seen counts.
func checkDocument(v any, at string, depth int, seen *int) error {
	switch v.(type) {
	case map[string]any, bool:
		if *seen++; *seen > maxSubschemas {
			return fmt.Errorf("more than %d objects and booleans (each a possible subschema); the limit is %d", maxSubschemas, maxSubschemas)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		if depth > maxSchemaDepth {
			return fmt.Errorf("at %s: nested more than %d deep", where(at), maxSchemaDepth)
		}
		for k, e := range v {
			if err := checkDocument(e, at+"/"+escapePointer(k), depth+1, seen); err != nil {
				return err
			}
		}
	case []any:
		if depth > maxSchemaDepth {
			return fmt.Errorf("at %s: nested more than %d deep", where(at), maxSchemaDepth)
		}
		for i, e := range v {
			if err := checkDocument(e, at+"/"+strconv.Itoa(i), depth+1, seen); err != nil {
				return err
			}
		}
	case json.Number:
		return checkNumber(v, at)
	}
	return nil
}

// checkNumber refuses a number too long or too large to compare cheaply.
func checkNumber(n json.Number, at string) error {
	s := string(n)
	if len(s) > maxNumberChars {
		return fmt.Errorf("at %s: a number of %d characters; the limit is %d", where(at), len(s), maxNumberChars)
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > maxNumberExponent || e < -maxNumberExponent {
			return fmt.Errorf("at %s: number %s has an exponent beyond ±%d", where(at), excerpt(s), maxNumberExponent)
		}
	}
	return nil
}

// inputSize measures an input for the choice of goroutine.
type inputSize struct {
	nodes int // values, and property names (patterns match them)
	bytes int // of strings and property names
}

// checkInput applies the number limits and maxInputDepth to an input, and
// measures it.
func checkInput(v any, at string, depth int, size *inputSize) error {
	size.nodes++
	switch v := v.(type) {
	case map[string]any:
		if depth > maxInputDepth {
			return fmt.Errorf("at %s: nested more than %d deep", where(at), maxInputDepth)
		}
		for k, e := range v {
			size.nodes++
			size.bytes += len(k)
			if err := checkInput(e, at+"/"+escapePointer(k), depth+1, size); err != nil {
				return err
			}
		}
	case []any:
		if depth > maxInputDepth {
			return fmt.Errorf("at %s: nested more than %d deep", where(at), maxInputDepth)
		}
		for i, e := range v {
			if err := checkInput(e, at+"/"+strconv.Itoa(i), depth+1, size); err != nil {
				return err
			}
		}
	case string:
		size.bytes += len(v)
	case json.Number:
		return checkNumber(v, at)
	}
	return nil
}

// checkCompiled counts the compiled schemas, their enums and the expansion
// of their references.
func checkCompiled(root *lib.Schema) (expansion int, err error) {
	w := schemaWalk{size: map[*lib.Schema]int{}, onPath: map[*lib.Schema]bool{}}
	n, err := w.expand(root)
	if err != nil {
		return 0, err
	}
	if n > maxExpansion {
		return 0, fmt.Errorf("its references expand to more than %d schemas for one value; the limit is %d", maxExpansion, maxExpansion)
	}
	return n, nil
}

type schemaWalk struct {
	size   map[*lib.Schema]int // expanded size, once known
	onPath map[*lib.Schema]bool
}

// expand returns the size of s's tree with references inlined, stopping
// (with a size past the limit) as soon as it is over maxExpansion, so a
// hostile schema cannot make the count itself expensive. A recursive
// reference counts once: its repetitions are bounded by the input's depth
// and are charged as they happen.
func (w *schemaWalk) expand(s *lib.Schema) (int, error) {
	if s == nil {
		return 0, nil
	}
	if n, ok := w.size[s]; ok {
		return n, nil
	}
	if w.onPath[s] {
		return 1, nil
	}
	if isMetaschema(s) {
		return 0, fmt.Errorf("refers to the metaschema %s; maiden resolves only references inside the schema itself", s.Location)
	}
	if s.Enum != nil && len(s.Enum.Values) > maxEnumValues {
		return 0, fmt.Errorf("at %s: an enum of %d values; the limit is %d", s.Location, len(s.Enum.Values), maxEnumValues)
	}
	w.onPath[s] = true
	defer delete(w.onPath, s)
	n := 1
	for _, c := range children(s) {
		m, err := w.expand(c)
		if err != nil {
			return 0, err
		}
		n += m
		if n > maxExpansion {
			n = maxExpansion + 1
			break
		}
	}
	if w.size[s] = n; len(w.size) > maxSubschemas {
		return 0, fmt.Errorf("more than %d subschemas; the limit is %d", maxSubschemas, maxSubschemas)
	}
	return n, nil
}

// children lists every schema s applies, to the same value or to parts of it.
func children(s *lib.Schema) []*lib.Schema {
	out := []*lib.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else,
		s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	out = append(out, s.PrefixItems...)
	for _, c := range s.Properties {
		out = append(out, c)
	}
	for _, c := range s.PatternProperties {
		out = append(out, c)
	}
	for _, c := range s.DependentSchemas {
		out = append(out, c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*lib.Schema); ok {
			out = append(out, c)
		}
	}
	for _, a := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch a := a.(type) {
		case *lib.Schema:
			out = append(out, a)
		case []*lib.Schema:
			out = append(out, a...)
		}
	}
	return out
}

// patternBudget enforces the pattern limits while a schema is compiled.
// The library also compiles regular expressions during validation (format
// "regex" on input strings); those are the input's, not the schema's, and
// are only compiled (Go's compiler is linear in the pattern), so done turns
// the budget off.
type patternBudget struct {
	seen     map[string]bool // the metaschema check sees each pattern again
	bytes    int
	maxInsts int
	done     bool
	err      error // the first limit passed
}

func (b *patternBudget) engine(c *compiledSchema) lib.RegexpEngine {
	return func(p string) (lib.Regexp, error) {
		if b != nil && !b.done && !b.seen[p] {
			if err := b.admit(p); err != nil {
				if b.err == nil {
					b.err = err
				}
				return nil, err
			}
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, err
		}
		return stoppableRegexp{re: re, c: c, insts: instructions(p)}, nil
	}
}

func (b *patternBudget) admit(p string) error {
	b.seen[p] = true
	if len(p) > maxPatternBytes {
		return fmt.Errorf("pattern %s is %d bytes; the limit is %d", excerpt(p), len(p), maxPatternBytes)
	}
	b.bytes += len(p)
	if b.bytes > maxPatternTotal {
		return fmt.Errorf("the patterns total more than %d bytes", maxPatternTotal)
	}
	n := instructions(p)
	if n > maxPatternInsts {
		return fmt.Errorf("pattern %s compiles to %d instructions; the limit is %d", excerpt(p), n, maxPatternInsts)
	}
	b.maxInsts = max(b.maxInsts, n)
	return nil
}

// instructions is the size of the program Go's matcher runs for p, parsed
// with the flags regexp.Compile uses; 0 if p is not a pattern (the library
// reports that).
func instructions(p string) int {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// stoppableRegexp matches like the regexp it wraps, reading a long string
// in chunks so a cancelled validation stops between them.
type stoppableRegexp struct {
	re    *regexp.Regexp
	c     *compiledSchema
	insts int
}

func (r stoppableRegexp) String() string { return r.re.String() }

func (r stoppableRegexp) MatchString(s string) bool {
	if len(s) <= matchChunk {
		r.c.charge(0, 1+r.insts*len(s)/64)
		return r.re.MatchString(s)
	}
	return r.re.MatchReader(&stopReader{s: s, r: r})
}

// stopReader yields s's runes as MatchString decodes them (an invalid byte
// is U+FFFD of width 1) and checks the stop flag every matchChunk bytes.
type stopReader struct {
	s    string
	i    int
	next int // offset of the next check
	r    stoppableRegexp
}

func (r *stopReader) ReadRune() (rune, int, error) {
	if r.i >= len(r.s) {
		return 0, 0, io.EOF
	}
	if r.i >= r.next {
		r.r.c.charge(0, 1+r.r.insts*matchChunk/64)
		r.next = r.i + matchChunk
	}
	c, w := utf8.DecodeRuneInString(r.s[r.i:])
	r.i += w
	return c, w, nil
}

// validate checks a parsed input against the schema, with no deadline; see
// validateCtx.
func (s *Schema) validate(v any) error {
	return s.validateCtx(context.Background(), v)
}

// validateCtx checks a parsed input against the schema and explains the
// first few problems by location in the input (at most maxProblems, in at
// most maxReportBytes, counting the rest). It returns ctx's error when ctx
// ends first, at once, and the validation left running stops at its next
// check: every schema evaluated passes one (see instrument), and a regular
// expression every 1 KiB. So the work after the return is one step: a
// pattern of 2,000 instructions over 1 KiB (~10 ms here, ~55 ms at worst),
// an enum of 1,000 values compared with one value, uniqueItems hashing one
// array (~40 ms for 100,000 items), or a loop over a value's parts that
// meets only boolean subschemas. Whatever ctx, the work limits end it after
// 2 M checks and 2 M match units (~1-2 s here; BenchmarkValidate/worst-*).
// A validation whose worst case is short runs on the caller's goroutine
// and ignores ctx: it ends within ~10 ms anyway.
//
// An error that is not ctx's is the report, for a result of kind input.
func (s *Schema) validateCtx(ctx context.Context, v any) error {
	return s.validateWithin(ctx, 0, v)
}

// validateWithin is validateCtx under an extra timeout (0: none), which
// costs a timer only when the validation is long enough to run on its own
// goroutine.
func (s *Schema) validateWithin(ctx context.Context, timeout time.Duration, v any) error {
	if s.err != nil {
		return s.err
	}
	var size inputSize
	if err := checkInput(v, "", 1, &size); err != nil {
		return fmt.Errorf("input does not match the tool's schema:\n  %v", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A goroutine and a channel cost ~10 µs here, as much as a tiny
	// tool's whole call, so a validation whose worst case is short
	// (~10 ms) runs here, whatever ctx, in one pass: it can record few
	// problems.
	worst := size.nodes*s.expansion + size.bytes*s.maxInsts/64
	if worst <= maxInlineWork {
		c, err := s.take(&neverStop)
		if err != nil {
			return err
		}
		defer s.put(c)
		return c.validate(v, false)
	}
	stop := new(atomic.Bool) // this validation's; its copy may serve another later
	run := func() error {
		c, err := s.take(stop) // may compile a copy: on the goroutine too
		if err != nil {
			return err
		}
		defer s.put(c)
		return c.validate(v, true)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if ctx.Done() == nil {
		return run()
	}
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		stop.Store(true)
		return ctx.Err()
	}
}

// take gives the caller a copy for one validation, reading stop.
func (s *Schema) take(stop *atomic.Bool) (*compiledSchema, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		c.stop = stop
		return c, nil
	}
	s.mu.Unlock()
	doc, err := lib.UnmarshalJSON(strings.NewReader(s.text))
	if err != nil {
		return nil, err // compiled once already; cannot happen
	}
	c, err := compileCopy(doc, nil)
	if err != nil {
		return nil, err
	}
	c.stop = stop
	return c, nil
}

func (s *Schema) put(c *compiledSchema) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) < maxIdleCopies {
		s.idle = append(s.idle, c)
	}
}

// validate decides whether v fits, and if not, explains why; a stop or a
// limit reached deep in the library comes back here as a panic. With
// twoPass it first decides under not-not, recording no problems; without,
// it explains at once, under the larger limit.
func (c *compiledSchema) validate(v any, twoPass bool) (err error) {
	defer func() {
		switch r := recover(); r.(type) {
		case nil:
		case stopPanic:
			err = context.Canceled // nobody is waiting for it
		case overPanic:
			if c.explaining {
				err = fmt.Errorf("input does not match the tool's schema; locating its problems is over the limit of %d checks and %d match units", maxExplainChecks, maxMatchWork)
			} else {
				err = fmt.Errorf("input does not match the tool's schema: checking it is over the limit of %d checks and %d match units; send a smaller input", maxChecks, maxMatchWork)
			}
		default:
			panic(r)
		}
	}()
	c.checks, c.checkLimit, c.match, c.explaining = 0, maxChecks, 0, false
	if twoPass {
		if c.check.Validate(v) == nil {
			return nil
		}
		c.checks, c.checkLimit, c.explaining = 0, maxExplainChecks, true // match work is counted over both
	}
	err = c.schema.Validate(v)
	var verr *lib.ValidationError
	if !errors.As(err, &verr) {
		if err == nil && twoPass { // the two passes disagree: cannot happen
			return errors.New("input does not match the tool's schema")
		}
		return err
	}
	return errors.New(report(verr))
}

// report renders a bounded explanation of verr: its leaves, the first
// maxProblems by location then message, and how many more there were.
func report(verr *lib.ValidationError) string {
	var r reporter
	r.walk(verr)
	var b strings.Builder
	b.WriteString("input does not match the tool's schema:")
	shown := 0
	for _, p := range r.best {
		line := "\n  " + p.line
		if b.Len()+len(line) > maxReportBytes-100 { // room for the count
			break
		}
		b.WriteString(line)
		shown++
	}
	if shown == 0 { // no leaves: cannot happen, but say something bounded
		b.WriteString("\n  at /: " + problem(verr.ErrorKind))
		shown = 1
	}
	if more := r.total - shown; more > 0 {
		fmt.Fprintf(&b, "\n  … and %d more problems", more)
	}
	return b.String()
}

type reporter struct {
	best  []located // in order, at most maxProblems
	total int
}

type located struct {
	path []string // the instance location's tokens
	line string
}

func (r *reporter) walk(e *lib.ValidationError) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			r.walk(c)
		}
		return
	}
	r.total++
	if len(r.best) == maxProblems && comparePaths(e.InstanceLocation, r.best[maxProblems-1].path) > 0 {
		return // cannot be among the first: skip the message
	}
	loc := "/"
	if len(e.InstanceLocation) > 0 {
		var b strings.Builder
		for _, t := range e.InstanceLocation {
			b.WriteString("/" + escapePointer(t))
		}
		loc = truncate(b.String(), 120)
	}
	p := located{e.InstanceLocation, truncate("at "+loc+": "+problem(e.ErrorKind), maxProblemBytes)}
	i := len(r.best)
	for i > 0 && p.less(r.best[i-1]) {
		i--
	}
	if i == maxProblems {
		return
	}
	r.best = append(r.best, located{})
	copy(r.best[i+1:], r.best[i:])
	r.best[i] = p
	if len(r.best) > maxProblems {
		r.best = r.best[:maxProblems]
	}
}

func (p located) less(q located) bool {
	if c := comparePaths(p.path, q.path); c != 0 {
		return c < 0
	}
	return p.line < q.line
}

// comparePaths orders locations as a reader expects: by token, array
// indexes by number (so /a/2 comes before /a/10), a parent before its parts.
func comparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if isIndex(x) && isIndex(y) && len(x) != len(y) {
			return len(x) - len(y)
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func isIndex(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return false
		}
	}
	return true
}

var printer = message.NewPrinter(language.English)

// problem says what is wrong in one line, quoting values only in excerpt:
// the library's own messages list every enum value and the whole string.
func problem(k lib.ErrorKind) string {
	var early *earlyError
	if f, ok := k.(*kind.Format); ok && errors.As(f.Err, &early) {
		k = early.kind
	}
	switch k := k.(type) {
	case *kind.Enum:
		if len(k.Want) <= maxListed {
			return fmt.Sprintf("%s is not one of %s", excerptValue(k.Got), listValues(k.Want))
		}
		return fmt.Sprintf("%s is not one of the %d allowed values", excerptValue(k.Got), len(k.Want))
	case *kind.Const:
		return fmt.Sprintf("%s must be %s", excerptValue(k.Got), excerptValue(k.Want))
	case *kind.Pattern:
		return fmt.Sprintf("%s does not match pattern %s", excerptValue(k.Got), excerpt(k.Want))
	case *kind.Format:
		return fmt.Sprintf("%s is not a valid %s", excerptValue(k.Got), excerpt(k.Want))
	case *kind.PropertyNames:
		return fmt.Sprintf("property name %s is not valid", excerptValue(k.Property))
	case *kind.AdditionalProperties:
		return "additional properties not allowed: " + listNames(k.Properties)
	case *kind.Required:
		return "missing properties: " + listNames(k.Missing)
	case *kind.Dependency:
		return fmt.Sprintf("properties %s required by %s are missing", listNames(k.Missing), excerptValue(k.Prop))
	case *kind.DependentRequired:
		return fmt.Sprintf("properties %s required by %s are missing", listNames(k.Missing), excerptValue(k.Prop))
	case *kind.MinContains:
		return fmt.Sprintf("at least %d items must match contains, %d do", k.Want, len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf("at most %d items may match contains, %d do", k.Want, len(k.Got))
	case *kind.InvalidJsonValue:
		return "not a JSON value"
	}
	// The rest quote only numbers (bounded by checkNumber) and the schema's
	// own short words.
	return truncate(k.LocalizedString(printer), maxProblemBytes)
}

func listValues(vs []any) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, excerptValue(v))
	}
	return strings.Join(parts, ", ")
}

func listNames(names []string) string {
	var parts []string
	for i, n := range names {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-maxListed))
			break
		}
		parts = append(parts, excerptValue(n))
	}
	return strings.Join(parts, ", ")
}

// excerptValue quotes a value briefly: a string in quotes, an object or array
// by its kind and size, anything else as JSON; cut at maxExcerptRunes.
func excerptValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(truncate(v, maxExcerptRunes))
	case map[string]any:
		return fmt.Sprintf("an object of %d properties", len(v))
	case []any:
		return fmt.Sprintf("an array of %d items", len(v))
	}
	return excerpt(jsonText(v))
}

func excerpt(s string) string { return truncate(s, maxExcerptRunes) }

// truncate cuts s to at most n runes (bytes for a long string, so the cost
// is bounded), ending in … when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := 0
	for i := 0; i < n && cut < len(s); i++ {
		_, w := utf8.DecodeRuneInString(s[cut:])
		cut += w
	}
	if cut >= len(s) {
		return s
	}
	return s[:cut] + "…"
}

func escapePointer(t string) string {
	t = strings.ReplaceAll(t, "~", "~0")
	return strings.ReplaceAll(t, "/", "~1")
}

func where(at string) string {
	if at == "" {
		return "/"
	}
	return truncate(at, 120)
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func jsonText(v any) string {
	if v == nil {
		return "none"
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}
