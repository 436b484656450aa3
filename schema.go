package maiden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
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

// inputSchema is a tool's compiled input schema, or why it has none.
//
// Validation runs on its own goroutine so that validateCtx can return when
// the call's context ends, and every compiled copy checks a stop flag at
// each schema it evaluates and between chunks of each regular-expression
// match, so the abandoned goroutine ends soon after too. The flag is per
// validation, so a copy serves one validation at a time: idle copies are
// kept, and a new one is compiled when all are busy.
type inputSchema struct {
	err  error  // the schema text is not a usable JSON Schema
	text string // the schema, to compile more copies

	mu   sync.Mutex
	idle []*compiledSchema
}

// maxIdleCopies bounds the compiled copies a schema keeps between calls.
const maxIdleCopies = 4

// compiledSchema is one compiled copy. stop belongs to the validation using
// the copy; it is set by take before the validation's goroutine starts and
// read only on that goroutine, so it needs no lock.
type compiledSchema struct {
	schema *jsonschema.Schema
	stop   *atomic.Bool
}

// errStopped is the panic that unwinds a validation whose caller has gone.
type stopPanic struct{}

func (c *compiledSchema) check() {
	if c.stop.Load() {
		panic(stopPanic{})
	}
}

// schemaCache holds compiled schemas by component digest: a tool's schema()
// is asked once per version of its file, so it is compiled once too.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]*inputSchema
}

const maxCachedSchemas = 1024

func (c *schemaCache) get(digest, text string) *inputSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[digest]; ok {
		return s
	}
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = map[string]*inputSchema{} // hot reloads over months; start over
	}
	s := compileSchema(text)
	c.m[digest] = s
	return s
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
func compileSchema(text string) *inputSchema {
	if len(text) > maxSchemaBytes {
		return &inputSchema{err: fmt.Errorf("schema() returned %d bytes; the limit is %d", len(text), maxSchemaBytes)}
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return &inputSchema{err: fmt.Errorf("schema() did not return JSON: %v", err)}
	}
	if err := checkDocument(doc, "", 1); err != nil {
		return &inputSchema{err: fmt.Errorf("schema() is over a limit: %v", err)}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return &inputSchema{err: errors.New("schema() must return a JSON Schema object")}
	}
	if obj["type"] != "object" {
		return &inputSchema{err: fmt.Errorf(`the input schema must have "type": "object" (MCP passes arguments as an object), got %v`, jsonText(obj["type"]))}
	}
	budget := &patternBudget{seen: map[string]bool{}}
	c, err := compileCopy(doc, budget)
	budget.done = true
	if budget.err != nil { // the library's message would quote the pattern
		return &inputSchema{err: fmt.Errorf("schema() is over a limit: %v", budget.err)}
	}
	if err != nil {
		return &inputSchema{err: err}
	}
	if err := checkCompiled(c.schema); err != nil {
		return &inputSchema{err: fmt.Errorf("schema() is over a limit: %v", err)}
	}
	return &inputSchema{text: text, idle: []*compiledSchema{c}}
}

// compileCopy compiles the schema document with the stop checks wired in.
// budget, when not nil, enforces the pattern limits (the first compilation).
func compileCopy(doc any, budget *patternBudget) (*compiledSchema, error) {
	cs := &compiledSchema{stop: new(atomic.Bool)}
	c := jsonschema.NewCompiler()
	c.UseLoader(noRefs{})
	c.UseRegexpEngine(budget.engine(cs))
	// A vocabulary whose keyword every schema has: the library then calls
	// its Validate at each schema it evaluates, where the stop flag is read.
	c.RegisterVocabulary(&jsonschema.Vocabulary{
		URL: "maiden:stop-check",
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return stopCheck{cs}, nil
		},
	})
	c.AssertVocabs()
	const loc = "maiden:tool-input-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema() is not a valid JSON Schema: %v", truncate(oneLine(err), maxProblemBytes*3))
	}
	s, err := c.Compile(loc)
	if err != nil {
		// The library's message quotes whole subschemas and patterns.
		return nil, fmt.Errorf("schema() is not a valid JSON Schema: %v", truncate(oneLine(err), maxProblemBytes*3))
	}
	cs.schema = s
	return cs, nil
}

type stopCheck struct{ c *compiledSchema }

func (s stopCheck) Validate(*jsonschema.ValidatorContext, any) { s.c.check() }

// checkDocument walks the parsed schema (or an input) for nesting past
// maxSchemaDepth and numbers past the number limits; at names where.
func checkDocument(v any, at string, depth int) error {
	switch v := v.(type) {
	case map[string]any:
		if depth > maxSchemaDepth {
			return fmt.Errorf("at %s: nested more than %d deep", where(at), maxSchemaDepth)
		}
		for k, e := range v {
			if err := checkDocument(e, at+"/"+escapePointer(k), depth+1); err != nil {
				return err
			}
		}
	case []any:
		if depth > maxSchemaDepth {
			return fmt.Errorf("at %s: nested more than %d deep", where(at), maxSchemaDepth)
		}
		for i, e := range v {
			if err := checkDocument(e, at+"/"+strconv.Itoa(i), depth+1); err != nil {
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

// checkInput applies the number limits to an input, with the same walk but
// no depth limit (the JSON decoder's own applies).
func checkInput(v any, at string) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if err := checkInput(e, at+"/"+escapePointer(k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := checkInput(e, at+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	case json.Number:
		return checkNumber(v, at)
	}
	return nil
}

// checkCompiled counts the compiled schemas, their enums and the expansion
// of their references.
func checkCompiled(root *jsonschema.Schema) error {
	w := schemaWalk{size: map[walkKey]int{}, onPath: map[walkKey]bool{}, seen: map[*jsonschema.Schema]bool{}}
	n, err := w.expand(root, false)
	if err != nil {
		return err
	}
	if n > maxExpansion {
		return fmt.Errorf("its references expand to more than %d schemas for one value; the limit is %d", maxExpansion, maxExpansion)
	}
	return nil
}

type schemaWalk struct {
	size   map[walkKey]int // expanded size, once known
	onPath map[walkKey]bool
	seen   map[*jsonschema.Schema]bool
}

// walkKey is a schema and whether it is reached under not or if: there the
// library evaluates only for a yes or no, and a schema that fails skips its
// extensions, so the stop check is not reached until the subtree is done.
type walkKey struct {
	s      *jsonschema.Schema
	inBool bool
}

// expand returns the size of s's tree with references inlined, stopping
// (with a size past the limit) as soon as it is over maxExpansion, so a
// hostile schema cannot make the count itself expensive. A recursive
// reference outside not and if counts once: its repetitions are bounded by
// the input's depth and pass a stop check each. Under not or if it is
// refused, since there a failing repetition would not pass one.
func (w *schemaWalk) expand(s *jsonschema.Schema, inBool bool) (int, error) {
	if s == nil {
		return 0, nil
	}
	k := walkKey{s, inBool}
	if n, ok := w.size[k]; ok {
		return n, nil
	}
	if w.onPath[k] {
		if inBool {
			return 0, fmt.Errorf("at %s: a recursive reference under not or if", s.Location)
		}
		return 1, nil
	}
	if s.Enum != nil && len(s.Enum.Values) > maxEnumValues {
		return 0, fmt.Errorf("at %s: an enum of %d values; the limit is %d", s.Location, len(s.Enum.Values), maxEnumValues)
	}
	if w.seen[s] = true; len(w.seen) > maxSubschemas {
		return 0, fmt.Errorf("more than %d subschemas; the limit is %d", maxSubschemas, maxSubschemas)
	}
	w.onPath[k] = true
	defer delete(w.onPath, k)
	n := 1
	for _, c := range children(s) {
		m, err := w.expand(c, inBool || c == s.Not || c == s.If)
		if err != nil {
			return 0, err
		}
		n += m
		if n > maxExpansion {
			n = maxExpansion + 1
			break
		}
	}
	w.size[k] = n
	return n, nil
}

// children lists every schema s applies, to the same value or to parts of it.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else,
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
		if c, ok := d.(*jsonschema.Schema); ok {
			out = append(out, c)
		}
	}
	for _, a := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch a := a.(type) {
		case *jsonschema.Schema:
			out = append(out, a)
		case []*jsonschema.Schema:
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
	seen  map[string]bool // the metaschema check sees each pattern again
	bytes int
	done  bool
	err   error // the first limit passed
}

func (b *patternBudget) engine(c *compiledSchema) jsonschema.RegexpEngine {
	return func(p string) (jsonschema.Regexp, error) {
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
		return stoppableRegexp{re: re, c: c}, nil
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
	// The same flags regexp.Compile uses, so the count is the program
	// the matcher runs.
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil // not a limit: the library reports the bad pattern
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil
	}
	if len(prog.Inst) > maxPatternInsts {
		return fmt.Errorf("pattern %s compiles to %d instructions; the limit is %d", excerpt(p), len(prog.Inst), maxPatternInsts)
	}
	return nil
}

// stoppableRegexp matches like the regexp it wraps, reading a long string
// in chunks so a cancelled validation stops between them.
type stoppableRegexp struct {
	re *regexp.Regexp
	c  *compiledSchema
}

func (r stoppableRegexp) String() string { return r.re.String() }

func (r stoppableRegexp) MatchString(s string) bool {
	r.c.check()
	if len(s) <= matchChunk {
		return r.re.MatchString(s)
	}
	return r.re.MatchReader(&stopReader{s: s, c: r.c})
}

// stopReader yields s's runes as MatchString decodes them (an invalid byte
// is U+FFFD of width 1) and checks the stop flag every matchChunk bytes.
type stopReader struct {
	s    string
	i    int
	next int // offset of the next check
	c    *compiledSchema
}

func (r *stopReader) ReadRune() (rune, int, error) {
	if r.i >= len(r.s) {
		return 0, 0, io.EOF
	}
	if r.i >= r.next {
		r.c.check()
		r.next = r.i + matchChunk
	}
	c, w := utf8.DecodeRuneInString(r.s[r.i:])
	r.i += w
	return c, w, nil
}

// parseInput parses a call's input once, for both the JSON check and the
// schema check (parsing was most of a call with a 10 KB input). Numbers stay
// json.Number, as the schema validator expects; trailing data is an error.
func parseInput(input string) (any, error) {
	return jsonschema.UnmarshalJSON(strings.NewReader(input))
}

// validate checks a parsed input against the schema, with no deadline; see
// validateCtx.
func (s *inputSchema) validate(v any) error {
	return s.validateCtx(context.Background(), v)
}

// validateCtx checks a parsed input against the schema and explains the
// first few problems by location in the input (at most maxProblems, in at
// most maxReportBytes, counting the rest). When ctx ends first it returns
// ctx's error at once, and the validation left running stops at its next
// check: after the schema it is evaluating, or the regular expression's
// current 1 KiB chunk. With the limits above, the longest step between
// checks is one keyword on one value: an enum of 1,000 values compared with
// one input value, a pattern of 2,000 instructions over 1 KiB, uniqueItems
// hashing a 1 MiB array, or one exact number of at most 1,000 digits.
func (s *inputSchema) validateCtx(ctx context.Context, v any) error {
	if s.err != nil {
		return s.err
	}
	if err := checkInput(v, ""); err != nil {
		return fmt.Errorf("input does not match the tool's schema:\n  %v", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := s.take()
	if err != nil {
		return err
	}
	if ctx.Done() == nil {
		defer s.put(c)
		return c.validate(v)
	}
	stop := c.stop
	done := make(chan error, 1)
	go func() {
		err := c.validate(v)
		s.put(c)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		stop.Store(true) // this validation's flag; the copy may be reused with another
		return ctx.Err()
	}
}

// take gives the caller a copy for one validation, with a fresh stop flag.
func (s *inputSchema) take() (*compiledSchema, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		c.stop = new(atomic.Bool)
		return c, nil
	}
	s.mu.Unlock()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s.text))
	if err != nil {
		return nil, err // compiled once already; cannot happen
	}
	return compileCopy(doc, nil)
}

func (s *inputSchema) put(c *compiledSchema) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) < maxIdleCopies {
		s.idle = append(s.idle, c)
	}
}

// validate runs the library, turning the stop panic back into a return.
func (c *compiledSchema) validate(v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopPanic); !ok {
				panic(r)
			}
			err = context.Canceled // nobody is waiting for it
		}
	}()
	err = c.schema.Validate(v)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	return errors.New(report(verr))
}

// report renders a bounded explanation of verr: its leaves, the smallest
// maxProblems by location then message, and how many more there were.
func report(verr *jsonschema.ValidationError) string {
	var r reporter
	r.walk(verr)
	var b strings.Builder
	b.WriteString("input does not match the tool's schema:")
	shown := 0
	for _, p := range r.best {
		line := "\n  " + p
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
	best  []string // sorted, at most maxProblems
	total int
}

func (r *reporter) walk(e *jsonschema.ValidationError) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			r.walk(c)
		}
		return
	}
	r.total++
	loc := "/"
	if len(e.InstanceLocation) > 0 {
		var b strings.Builder
		for _, t := range e.InstanceLocation {
			b.WriteString("/" + escapePointer(t))
		}
		loc = truncate(b.String(), 120)
	}
	prefix := "at " + loc + ": "
	if len(r.best) == maxProblems && prefix > r.best[maxProblems-1] {
		return // cannot be among the first: skip the message
	}
	line := truncate(prefix+problem(e.ErrorKind), maxProblemBytes)
	i := len(r.best)
	for i > 0 && r.best[i-1] > line {
		i--
	}
	if i == maxProblems {
		return
	}
	r.best = append(r.best, "")
	copy(r.best[i+1:], r.best[i:])
	r.best[i] = line
	if len(r.best) > maxProblems {
		r.best = r.best[:maxProblems]
	}
}

var printer = message.NewPrinter(language.English)

// problem says what is wrong in one line, quoting values only in excerpt:
// the library's own messages list every enum value and the whole string.
func problem(k jsonschema.ErrorKind) string {
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
