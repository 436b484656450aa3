package jsonschema

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	lib "github.com/santhosh-tekuri/jsonschema/v6"
)

// TestMutation40SchemaTextBoundIsExact: a schema() of exactly
// maxSchemaBytes loads, one byte more is refused before it is parsed.
func TestMutation40SchemaTextBoundIsExact(t *testing.T) {
	pad := func(n int) string {
		head := `{"type":"object","description":"`
		return head + strings.Repeat("x", n-len(head)-2) + `"}`
	}
	if s := compileSchema(pad(maxSchemaBytes)); s.err != nil {
		t.Errorf("a schema of %d bytes (the limit): %v; want it loaded", maxSchemaBytes, s.err)
	}
	s := compileSchema(pad(maxSchemaBytes + 1))
	if s.err == nil || !strings.Contains(s.err.Error(), "schema() returned 262145 bytes; the limit is 262144") {
		t.Errorf("a schema of %d bytes: %v; want it refused at the byte limit", maxSchemaBytes+1, s.err)
	}
}

// TestMutation40InputSchemaIsAnObject: a schema that does not say "type":
// "object" is refused at load (MCP passes arguments as an object), even
// one any object would fit.
func TestMutation40InputSchemaIsAnObject(t *testing.T) {
	for _, sch := range []string{`{}`, `{"type":"string"}`, `{"type":["object","null"]}`, `{"properties":{"a":{"type":"string"}}}`, `true`} {
		s := compileSchema(sch)
		if s.err == nil {
			t.Errorf("Compile(%s) = nil; want it refused: an input schema must have \"type\": \"object\"", sch)
			continue
		}
		if want := `"type": "object"`; sch != `true` && !strings.Contains(s.err.Error(), want) {
			t.Errorf("Compile(%s) = %v; want it to say %s", sch, s.err, want)
		}
	}
}

// TestMutation40NoExternalReference: a $ref to a file on the host is
// refused at load, naming maiden's rule, never read (the file here is a
// real schema the library's default loader would load).
func TestMutation40NoExternalReference(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := compileSchema(objectSchema(`"a":{"$ref":"file://` + filepath.ToSlash(path) + `"}`))
	if s.err == nil || !strings.Contains(s.err.Error(), "maiden resolves only references inside the schema itself") {
		t.Errorf("Compile of a schema referring to file://%s = %v; want it refused: only references inside the schema", path, s.err)
	}
}

// TestMutation40SchemaDepthAndCountAreExact: a schema document nested 64
// deep (objects) and one of exactly maxSubschemas objects load; one
// level or one object more is refused before it is compiled, naming the
// limit.
func TestMutation40SchemaDepthAndCountAreExact(t *testing.T) {
	deep := func(k int) string {
		return `{"type":"object","default":` + strings.Repeat(`{"a":`, k) + "1" + strings.Repeat("}", k) + `}`
	}
	if s := compileSchema(deep(63)); s.err != nil {
		t.Errorf("a schema document nested 64 deep: %v; want it loaded", s.err)
	}
	if s := compileSchema(deep(64)); s.err == nil || !strings.Contains(s.err.Error(), "nested more than 64 deep") {
		t.Errorf("a schema document nested 65 deep (objects): %v; want it refused as nested more than 64 deep", s.err)
	}
	// Objects in a default: counted (any object may be a subschema) though
	// none compiles, so only this count refuses them.
	many := func(n int) string {
		return `{"type":"object","default":[` + strings.TrimSuffix(strings.Repeat("{},", n), ",") + `]}`
	}
	if s := compileSchema(many(maxSubschemas - 1)); s.err != nil {
		t.Errorf("a schema of %d objects: %v; want it loaded", maxSubschemas, s.err)
	}
	if s := compileSchema(many(maxSubschemas)); s.err == nil || !strings.Contains(s.err.Error(), "more than 5000 objects and booleans") {
		t.Errorf("a schema of %d objects: %v; want it refused at the subschema limit", maxSubschemas+1, s.err)
	}
}

// TestMutation40NumberExponents: numbers whose exponent passes ±1000, large
// or small, short or long, are refused in an input and in a schema; ±1000
// itself is accepted.
func TestMutation40NumberExponents(t *testing.T) {
	s := mustCompile(t, `{"type":"object"}`)
	for _, n := range []string{"1e1001", "1e9999", "1e-1001", "1e-999999", "-1E-5000", "1.5e+1001"} {
		if err := s.validate(mustParse(t, `{"a":`+n+`}`)); err == nil || !strings.Contains(err.Error(), "has an exponent beyond ±1000") {
			t.Errorf("input {\"a\":%s}: %v; want it refused for its exponent", n, err)
		}
		if c := compileSchema(objectSchema(`"a":{"maximum":` + n + `}`)); c.err == nil || !strings.Contains(c.err.Error(), "has an exponent beyond ±1000") {
			t.Errorf("schema with maximum %s: %v; want it refused for its exponent", n, c.err)
		}
		text := `{"a":` + n + `}`
		sc, err := ScanInput(text)
		if err != nil {
			t.Fatalf("ScanInput(%s): %v", text, err)
		}
		if _, _, err := s.ValidateScanned(context.Background(), 0, text, &sc); err == nil || !strings.Contains(err.Error(), "has an exponent beyond ±1000") {
			t.Errorf("ValidateScanned(%s) (scan's problem %v): %v; want it refused for its exponent", text, sc.Problem, err)
		}
	}
	for _, n := range []string{"1e1000", "1e-1000", "1e+1000", "-1E-1000"} {
		if err := s.validateCtx(context.Background(), mustParse(t, `{"a":`+n+`}`)); err != nil {
			t.Errorf("input {\"a\":%s}: %v; want it to fit", n, err)
		}
	}
}

// TestMutation40PatternBoundsAreExact: a pattern of exactly
// maxPatternBytes bytes, and one of exactly maxPatternInsts instructions,
// load; one byte or one instruction more is refused, naming the limit.
func TestMutation40PatternBoundsAreExact(t *testing.T) {
	pattern := func(p string) string { return objectSchema(`"a":{"type":"string","pattern":"` + p + `"}`) }
	if s := compileSchema(pattern(strings.Repeat("a", maxPatternBytes))); s.err != nil {
		t.Errorf("a pattern of %d bytes: %v; want it loaded", maxPatternBytes, s.err)
	}
	if s := compileSchema(pattern(strings.Repeat("a", maxPatternBytes+1))); s.err == nil || !strings.Contains(s.err.Error(), "is 1025 bytes; the limit is 1024") {
		t.Errorf("a pattern of %d bytes: %v; want it refused at the byte limit", maxPatternBytes+1, s.err)
	}
	// a{1000}b{k} compiles to a number of instructions that grows by one
	// with k (Go refuses a count over 1000).
	var at, over string
	for k := 1; k <= 1000 && (at == "" || over == ""); k++ {
		p := "a{1000}b{" + strconv.Itoa(k) + "}"
		switch instructions(p) {
		case maxPatternInsts:
			at = p
		case maxPatternInsts + 1:
			over = p
		}
	}
	if at == "" || over == "" {
		t.Fatalf("no a{1000}b{k} of %d and %d instructions (%q, %q)", maxPatternInsts, maxPatternInsts+1, at, over)
	}
	if s := compileSchema(pattern(at)); s.err != nil {
		t.Errorf("pattern %s (%d instructions): %v; want it loaded", at, maxPatternInsts, s.err)
	}
	if s := compileSchema(pattern(over)); s.err == nil || !strings.Contains(s.err.Error(), "compiles to 2001 instructions; the limit is 2000") {
		t.Errorf("pattern %s (%d instructions): %v; want it refused at the instruction limit", over, maxPatternInsts+1, s.err)
	}
}

// libFits is the library's own verdict, without maiden.
func libFits(t *testing.T, sch string, v any) bool {
	t.Helper()
	doc, err := lib.UnmarshalJSON(strings.NewReader(sch))
	if err != nil {
		t.Fatal(err)
	}
	lc := lib.NewCompiler()
	if err := lc.AddResource("lib.json", doc); err != nil {
		t.Fatal(err)
	}
	ls, err := lc.Compile("lib.json")
	if err != nil {
		t.Fatal(err)
	}
	return ls.Validate(v) == nil
}

// TestMutation40FastEdgesAgree: on the edges of the plain kind (a bound
// of 0, an enum or const at the top, many required names, a plain string
// read from the text, a subschema of another kind) the fast check, on the
// value and on the text's members, says yes only where the library does:
// each input the library refuses is refused by Validate and ValidateScanned
// alike.
func TestMutation40FastEdgesAgree(t *testing.T) {
	var names, members []string
	for i := range 20 {
		names = append(names, strconv.Quote("k"+strconv.Itoa(i)))
		if i != 13 {
			members = append(members, strconv.Quote("k"+strconv.Itoa(i))+":1")
		}
	}
	for _, tc := range []struct{ schema, input string }{
		{`{"type":"object","maxProperties":0}`, `{"a":1}`},
		{`{"type":"object","properties":{"a":{"type":"object","maxProperties":0}}}`, `{"a":{"b":1}}`},
		{`{"type":"object","properties":{"a":{"type":"array","maxItems":0}}}`, `{"a":[1]}`},
		{`{"type":"object","properties":{"a":{"type":"string","maxLength":0}}}`, `{"a":"x"}`},
		{`{"type":"object","enum":[{"a":1}]}`, `{"a":2}`},
		{`{"type":"object","const":{"a":1}}`, `{"a":2}`},
		{`{"type":"object","required":[` + strings.Join(names, ",") + `]}`, `{` + strings.Join(members, ",") + `}`},
		{`{"type":"object","properties":{"a":{"type":"string","minLength":3}}}`, `{"a":"ab"}`},
		{`{"type":"object","properties":{"a":{"type":"string","minLength":2}}}`, `{"a":"é"}`},
		{`{"type":"object","additionalProperties":{"type":"string","pattern":"^x"}}`, `{"b":"y"}`},
		{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","pattern":"^x"}}}}`, `{"a":["y"]}`},
		{`{"type":"object","properties":{"a":{"type":"boolean","enum":[true]}}}`, `{"a":false}`},
		{`{"type":"object","properties":{"a":{"const":false}}}`, `{"a":true}`},
	} {
		s := mustCompile(t, tc.schema)
		v := mustParse(t, tc.input)
		if libFits(t, tc.schema, v) {
			t.Fatalf("schema %s, input %s: the library says it fits; the case is wrong", tc.schema, tc.input)
		}
		if err := s.validate(v); err == nil || !strings.HasPrefix(err.Error(), "input does not match the tool's schema:") {
			t.Errorf("schema %s: Validate(%s) = %v; want it refused, as the library does", tc.schema, tc.input, err)
		}
		sc, err := ScanInput(tc.input)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ValidateScanned(context.Background(), 0, tc.input, &sc); err == nil || !strings.HasPrefix(err.Error(), "input does not match the tool's schema:") {
			t.Errorf("schema %s: ValidateScanned(%s) = %v; want it refused, as the library does", tc.schema, tc.input, err)
		}
	}
}

// TestMutation40EndedContext: a validation asked under a context that has
// ended returns its error, even one short enough to run inline.
func TestMutation40EndedContext(t *testing.T) {
	s := mustCompile(t, objectSchema(`"a":{"type":"string"}`))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Validate(ctx, 0, mustParse(t, `{"a":"x"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Validate under a cancelled context = %v; want context.Canceled", err)
	}
	text := `{"a":"x"}`
	sc, err := ScanInput(text)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ValidateScanned(ctx, 0, text, &sc); !errors.Is(err, context.Canceled) {
		t.Errorf("ValidateScanned under a cancelled context = %v; want context.Canceled", err)
	}
}

// TestMutation40MatchWorkIsPerValidation: a copy's match work starts at 0
// in each validation: a hundred validations that each cost an eightieth
// of maxMatchWork (a pattern of 1,803 instructions over 900 bytes) all
// fit.
func TestMutation40MatchWorkIsPerValidation(t *testing.T) {
	s := mustCompile(t, objectSchema(`"a":{"type":"string","pattern":"^[ab]{1,900}$"}`))
	v := mustParse(t, `{"a":"`+strings.Repeat("a", 900)+`"}`)
	for i := range 100 {
		if err := s.validate(v); err != nil {
			t.Fatalf("validation %d of the same input (%d match units each): %v; want it to fit", i+1, 1+s.maxInsts*900/64, err)
		}
	}
}

// endedLater is a context that has ended (Done is closed) but says so
// only from its second Err on: the check before a validation sees it
// live, the wait after sees it ended.
type endedLater struct {
	context.Context
	asked atomic.Int32
}

func (c *endedLater) Done() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

func (c *endedLater) Err() error {
	if c.asked.Add(1) == 1 {
		return nil
	}
	return context.Canceled
}

// TestMutation40RegexFormatRunsAside: a validation whose format "regex"
// parses are long (16 KiB here, maxRegexFormatBytes) counts them in its
// worst case, so it runs on its own goroutine and returns when its
// context ends, not after the parse.
func TestMutation40RegexFormatRunsAside(t *testing.T) {
	s := mustCompile(t, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"r":{"type":"string","format":"regex"}}}`)
	v := mustParse(t, `{"r":"`+strings.Repeat(`\\pL`, maxRegexFormatBytes/3)+`"}`)
	ctx := &endedLater{Context: context.Background()}
	if err := s.Validate(ctx, 0, v); !errors.Is(err, context.Canceled) {
		t.Errorf("Validate of a 16 KiB format-regex string under an ended context = %v; want context.Canceled (the validation aside)", err)
	}
}

// TestMutation40ReportBytesAreCapped: a report of problems whose
// locations are 4-byte runes (each line cut at maxProblemBytes runes, not
// bytes) is still cut at maxReportBytes.
func TestMutation40ReportBytesAreCapped(t *testing.T) {
	s := mustCompile(t, `{"type":"object","additionalProperties":{"type":"integer"}}`)
	var members []string
	for i := range 20 {
		members = append(members, strconv.Quote(strings.Repeat("𝔸", 200)+strconv.Itoa(i))+`:"x"`)
	}
	err := s.validate(mustParse(t, `{`+strings.Join(members, ",")+`}`))
	if err == nil {
		t.Fatal("fits")
	}
	if n := len(err.Error()); n > maxReportBytes {
		t.Errorf("the report of 20 problems located at 200 4-byte runes is %d bytes; want at most %d", n, maxReportBytes)
	}
	if !strings.Contains(err.Error(), "more problems") {
		t.Errorf("report %.200q… does not count the problems left out", err)
	}
}

// TestMutation40CacheIsBounded: the cache holds at most maxCachedSchemas
// schemas (it starts over past them), and serves each digest its own.
func TestMutation40CacheIsBounded(t *testing.T) {
	var c Cache[string]
	for i := range maxCachedSchemas + 1 {
		d := "digest-" + strconv.Itoa(i)
		if got := c.Get(d, "schema-"+strconv.Itoa(i), func(text string) string { return text }); got != "schema-"+strconv.Itoa(i) {
			t.Fatalf("Get(%s) = %s; want its own schema", d, got)
		}
	}
	if n := len(c.m); n > maxCachedSchemas {
		t.Errorf("after %d digests the cache holds %d schemas; want at most %d", maxCachedSchemas+1, n, maxCachedSchemas)
	}
	if got, ok := c.Peek("digest-1024"); !ok || got != "schema-1024" {
		t.Errorf("Peek(digest-1024) = %q, %v; want its own schema", got, ok)
	}
}
