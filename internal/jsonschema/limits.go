package jsonschema

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"

	lib "github.com/santhosh-tekuri/jsonschema/v6"
)

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
			if k == "$dynamicRef" || k == "$dynamicAnchor" {
				// Where a dynamic reference lands is chosen as it runs
				// (the outermost resource in scope with that anchor),
				// often a schema no keyword applies directly: neither
				// checkCompiled nor instrument would see it, nor what it
				// refers to, so its size and its work would go unbounded.
				return fmt.Errorf("at %s: %s is not supported (where a dynamic reference lands is chosen at validation time, beyond the limits checked at load)", where(at+"/"+escapePointer(k)), k)
			}
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
	if p := numberProblem(string(n)); p != "" {
		return fmt.Errorf("at %s: %s", where(at), p)
	}
	return nil
}

// numberProblem says why checkNumber refuses s, or "".
func numberProblem(s string) string {
	if len(s) > maxNumberChars {
		return fmt.Sprintf("a number of %d characters; the limit is %d", len(s), maxNumberChars)
	}
	if len(s) <= 4 {
		return "" // an exponent of at most two digits
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > maxNumberExponent || e < -maxNumberExponent {
			return fmt.Sprintf("number %s has an exponent beyond ±%d", excerpt(s), maxNumberExponent)
		}
	}
	return ""
}

// inputSize measures an input for the choice of goroutine.
type inputSize struct {
	nodes int // values, and property names (patterns match them)
	bytes int // of strings and property names
}

// checkInput applies the number limits and maxInputDepth to an input, and
// measures it.
func checkInput(v any, size *inputSize) error {
	w := inputWalk{size: size}
	if p := w.check(v, 1); p != nil {
		return p.err()
	}
	return nil
}

// inputWalk is checkInput's walk. It writes nothing but counters on its
// way down: a problem gathers its location on the way back up. (Building
// the location of every value was half of the walk's time on 30,000 small
// objects, and keeping a path of keys on the way down cost the garbage
// collector's write barrier on each while the parse's garbage is marked.)
type inputWalk struct {
	size *inputSize
}

// inputProblem is a problem and its path, innermost token first.
type inputProblem struct {
	msg  string
	path []token
}

// token is one step of a path: an object's key, or an array's index (key
// unused) when index >= 0.
type token struct {
	key   string
	index int
}

func (w *inputWalk) check(v any, depth int) *inputProblem {
	w.size.nodes++
	switch v := v.(type) {
	case map[string]any:
		if depth > maxInputDepth {
			return &inputProblem{msg: fmt.Sprintf("nested more than %d deep", maxInputDepth)}
		}
		for k, e := range v {
			w.size.nodes++
			w.size.bytes += len(k)
			if p := w.check(e, depth+1); p != nil {
				p.path = append(p.path, token{key: k, index: -1})
				return p
			}
		}
	case []any:
		if depth > maxInputDepth {
			return &inputProblem{msg: fmt.Sprintf("nested more than %d deep", maxInputDepth)}
		}
		for i, e := range v {
			if p := w.check(e, depth+1); p != nil {
				p.path = append(p.path, token{index: i})
				return p
			}
		}
	case string:
		w.size.bytes += len(v)
	case json.Number:
		if msg := numberProblem(string(v)); msg != "" {
			return &inputProblem{msg: msg}
		}
	}
	return nil
}

// err is the problem at its place, in checkDocument's words.
func (p *inputProblem) err() error {
	var b strings.Builder
	for i := len(p.path) - 1; i >= 0; i-- {
		b.WriteByte('/')
		if t := p.path[i]; t.index >= 0 {
			b.WriteString(strconv.Itoa(t.index))
		} else {
			b.WriteString(escapePointer(t.key))
		}
	}
	return fmt.Errorf("at %s: %s", where(b.String()), p.msg)
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
// The library also asks the engine during validation (format "regex" on
// input strings); those are the input's, not the schema's: done turns the
// budget off, and once the copy is compiled the engine only parses them,
// charged (parseRegex).
type patternBudget struct {
	seen     map[string]bool // the metaschema check sees each pattern again
	bytes    int
	maxInsts int
	done     bool
	err      error // the first limit passed
}

func (b *patternBudget) engine(c *compiledSchema) lib.RegexpEngine {
	return func(p string) (lib.Regexp, error) {
		if c.validating {
			return c.parseRegex(p)
		}
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

// parseRegex is format "regex" on an input's string: is it a regular
// expression? Parsing says (compiling a parsed pattern cannot fail), and
// only parsing is done, charged per byte first and refused past
// maxRegexFormatBytes: Go's parser takes up to ~6 µs and ~2 KB per byte
// (\pL is a class of hundreds of ranges), and its compiler turns \pL{1000}
// (9 bytes) into a million instructions (~0.5 s and ~240 MB).
func (c *compiledSchema) parseRegex(p string) (lib.Regexp, error) {
	if len(p) > maxRegexFormatBytes {
		return nil, fmt.Errorf("a pattern of %d bytes; maiden checks patterns of at most %d", len(p), maxRegexFormatBytes)
	}
	c.charge(0, 1+len(p)*regexParseUnits)
	if _, err := syntax.Parse(p, syntax.Perl); err != nil {
		return nil, err
	}
	return nil, nil // the library only asks whether it is one
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
