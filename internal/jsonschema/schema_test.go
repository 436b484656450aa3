package jsonschema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/jsonparse"
	lib "github.com/santhosh-tekuri/jsonschema/v6"
)

// objectSchema wraps properties into a tool input schema.
func objectSchema(props string) string {
	return `{"type":"object","properties":{` + props + `}}`
}

// enumOf returns a JSON array of n distinct strings.
func enumOf(n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf(`"value-%d"`, i)
	}
	return "[" + strings.Join(vals, ",") + "]"
}

// numbers returns a JSON array of the numbers 0..n-1.
func numbers(n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(vals, ",") + "]"
}

// nested returns a schema nested depth levels of properties deep.
func nested(depth int) string {
	s := `{"type":"string"}`
	for range depth {
		s = `{"type":"object","properties":{"a":` + s + `}}`
	}
	return s
}

// doubling returns a schema whose definitions each refer twice to the next:
// n definitions ask for 2^n checks of one value.
func doubling(n int) string {
	var defs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string"}`, n))
	return `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// manyPatterns returns n properties, each with its own pattern of size bytes.
func manyPatterns(n, size int) string {
	var props []string
	for i := range n {
		p := fmt.Sprintf("^p%d", i) + strings.Repeat("a", size-len(fmt.Sprintf("^p%d", i)))
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string","pattern":%q}`, i, p))
	}
	return objectSchema(strings.Join(props, ","))
}

// wide returns a schema of n properties.
func wide(n int) string {
	var props []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"integer"}`, i))
	}
	return objectSchema(strings.Join(props, ","))
}

// TestSchemaLimitsRefuseHostileSchemas: each schema a hostile tool might
// return to make input validation expensive is refused at load, naming the
// limit it is over.
func TestSchemaLimitsRefuseHostileSchemas(t *testing.T) {
	for _, tc := range []struct {
		name, schema, want string
	}{
		{"huge text", objectSchema(`"a":{"description":"` + strings.Repeat("x", 300<<10) + `"}`), "schema() returned 307"},
		{"huge enum", objectSchema(`"a":{"enum":` + numbers(20000) + `}`), "an enum of 20000 values; the limit is 1000"},
		{"enum just over", objectSchema(`"a":{"enum":` + enumOf(1001) + `}`), "an enum of 1001 values"},
		{"long pattern", objectSchema(`"a":{"pattern":"` + strings.Repeat("[a-z]", 50000/5) + `"}`), "is 50000 bytes; the limit is 1024"},
		{"pattern total", manyPatterns(20, 1000), "the patterns total more than 16384 bytes"},
		{"pattern program", objectSchema(`"a":{"pattern":"a{1000}b{1000}"}`), "instructions; the limit is 2000"},
		{"patternProperties", `{"type":"object","patternProperties":{"` + strings.Repeat("x", 2000) + `":{}}}`, "is 2000 bytes"},
		{"deep nesting", nested(40), "nested more than 64 deep"},
		{"deep arrays", `{"type":"object","default":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "nested more than 64 deep"},
		{"wide", wide(6000), "more than 5000 objects and booleans"},
		{"many empty subschemas", `{"type":"object","anyOf":[` + strings.TrimSuffix(strings.Repeat("{},", 80000), ",") + `]}`, "more than 5000 objects and booleans"},
		{"many boolean subschemas", `{"type":"object","anyOf":[` + strings.TrimSuffix(strings.Repeat("true,", 50000), ",") + `]}`, "more than 5000 objects and booleans"},
		{"ref explosion", doubling(40), "expand to more than 20000 schemas"},
		{"metaschema", objectSchema(`"a":{"$ref":"https://json-schema.org/draft/2020-12/schema"}`), "refers to the metaschema https://json-schema.org/draft/2020-12/schema"},
		{"huge number", objectSchema(`"a":{"minimum":1e999999}`), "exponent beyond ±1000"},
		{"long number", objectSchema(`"a":{"const":` + strings.Repeat("9", 2000) + `}`), "a number of 2000 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			s := compileSchema(tc.schema)
			if s.err == nil {
				t.Fatal("schema accepted")
			}
			if !strings.Contains(s.err.Error(), tc.want) {
				t.Errorf("error %q\n does not say %q", s.err, tc.want)
			}
			if len(s.err.Error()) > 400 {
				t.Errorf("error is %d bytes: %.200s…", len(s.err.Error()), s.err)
			}
			// Generous: refusal must not cost what the schema would.
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("refusal took %v", d)
			}
		})
	}
}

// TestSchemaLimitsAcceptRealSchemas: schemas as tools write them, including
// each limit's largest allowed value, still load.
func TestSchemaLimitsAcceptRealSchemas(t *testing.T) {
	for _, tc := range []struct{ name, schema string }{
		{"sdk struct", `{"type":"object","properties":{"city":{"type":"string","description":"city name, e.g. Paris"},"units":{"type":"string","description":"metric (default) or imperial"}},"required":["city"]}`},
		{"enum at limit", objectSchema(`"a":{"enum":` + enumOf(1000) + `}`)},
		{"patterns at limit", manyPatterns(16, 1000)},
		{"nested structs", nested(30)},
		{"wide", wide(4000)},
		{"recursive tree", `{"type":"object","$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"properties":{"root":{"$ref":"#/$defs/node"}}}`},
		{"draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"s":{"type":"string","pattern":"^[a-z]+$"}},"properties":{"a":{"$ref":"#/definitions/s"}},"additionalProperties":false}`},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true}}}`},
		{"refs reused", doubling(12)},
		{"numbers", objectSchema(`"a":{"type":"number","minimum":-1e300,"maximum":1.7976931348623157e308,"multipleOf":0.001}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s := compileSchema(tc.schema); s.err != nil {
				t.Fatal(s.err)
			}
		})
	}
}

// mustCompile compiles a schema the test expects to load.
func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s := compileSchema(schema)
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s
}

func mustParse(t testing.TB, input string) any {
	t.Helper()
	v, err := jsonparse.Parse(input)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidateReportIsCapped: inputs with many problems, or problems that
// the library would explain with the whole enum or the whole value, give a
// short report that still locates the first problems and counts the rest.
func TestValidateReportIsCapped(t *testing.T) {
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf(`"wrong-%d"`, i)
	}
	names := make([]string, 50000)
	for i := range names {
		names[i] = fmt.Sprintf(`"extra-%d":1`, i)
	}
	long := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		name, schema, input string
		want                []string
		notWant             []string
	}{
		{
			name:    "1000 wrong items against a 1000-value enum",
			schema:  objectSchema(`"a":{"type":"array","items":{"enum":` + enumOf(1000) + `}}`),
			input:   `{"a":[` + strings.Join(many, ",") + `]}`,
			want:    []string{`at /a/0: "wrong-0" is not one of the 1000 allowed values`, "at /a/9:", "… and 990 more problems"},
			notWant: []string{"value-999", "at /a/10:", "at /a/100:"},
		},
		{
			name:   "a small enum is listed",
			schema: objectSchema(`"a":{"enum":["x","y"]}`),
			input:  `{"a":"z"}`,
			want:   []string{`at /a: "z" is not one of "x", "y"`},
		},
		{
			name:    "a 1 MiB string that misses the pattern",
			schema:  objectSchema(`"a":{"type":"string","pattern":"^y"}`),
			input:   `{"a":"` + long + `"}`,
			want:    []string{`at /a: "xxxxxxxx`, `…" does not match pattern ^y`},
			notWant: []string{strings.Repeat("x", 100)},
		},
		{
			name:    "a 1 MiB string against const",
			schema:  objectSchema(`"a":{"const":"` + strings.Repeat("y", 1000) + `"}`),
			input:   `{"a":"` + long + `"}`,
			want:    []string{`at /a: "xxxx`, `must be "yyyy`},
			notWant: []string{strings.Repeat("y", 100)},
		},
		{
			name:    "50,000 additional properties",
			schema:  `{"type":"object","additionalProperties":false}`,
			input:   `{` + strings.Join(names, ",") + `}`,
			want:    []string{"additional properties not allowed:", "and 49995 more"},
			notWant: []string{"extra-49999"},
		},
		{
			name:    "a 1 MiB property name",
			schema:  `{"type":"object","propertyNames":{"maxLength":3}}`,
			input:   `{"` + long + `":1}`,
			want:    []string{"at /: maxLength: got 1,048,576, want 3"},
			notWant: []string{strings.Repeat("x", 100)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.schema)
			err := s.validate(mustParse(t, tc.input))
			if err == nil {
				t.Fatal("input accepted")
			}
			msg := err.Error()
			if len(msg) > maxReportBytes {
				t.Errorf("report is %d bytes, over %d", len(msg), maxReportBytes)
			}
			if n := strings.Count(msg, "\n  at "); n > maxProblems {
				t.Errorf("report lists %d problems", n)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("report does not say %q:\n%s", w, msg)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("report quotes %q:\n%.2000s", w, msg)
				}
			}
		})
	}
}

// TestValidateReportIsStable: the problems listed are the first by
// location, whatever order the library found them in (it walks objects in
// map order).
func TestValidateReportIsStable(t *testing.T) {
	var props, in []string
	for i := range 30 {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"integer"}`, i))
		in = append(in, fmt.Sprintf(`"p%02d":"no"`, i))
	}
	s := mustCompile(t, objectSchema(strings.Join(props, ",")))
	v := mustParse(t, "{"+strings.Join(in, ",")+"}")
	first := s.validate(v).Error()
	for range 20 {
		if got := s.validate(v).Error(); got != first {
			t.Fatalf("report changed:\n%s\n---\n%s", first, got)
		}
	}
	if !strings.Contains(first, "at /p00:") || strings.Contains(first, "at /p10:") || !strings.Contains(first, "and 20 more") {
		t.Errorf("report:\n%s", first)
	}
}

// TestValidateRefusesHugeNumbers: an input number the validator would turn
// into a huge exact rational is refused before validation, quickly.
func TestValidateRefusesHugeNumbers(t *testing.T) {
	s := mustCompile(t, objectSchema(`"a":{"type":"array","items":{"enum":[1,2,3],"minimum":0}}`))
	items := strings.TrimSuffix(strings.Repeat("1e999999,", 1000), ",")
	start := time.Now()
	err := s.validate(mustParse(t, `{"a":[`+items+`]}`))
	if err == nil || !strings.Contains(err.Error(), "at /a/0: number 1e999999 has an exponent beyond ±1000") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second { // 1,000 × 3 comparisons × ~25 ms without the limit
		t.Errorf("took %v", d)
	}
	if err := s.validate(mustParse(t, `{"a":[1, 2e0, 3.0e+0]}`)); err != nil {
		t.Errorf("ordinary numbers: %v", err)
	}
}

// TestValidateWorkLimits: whatever the deadline, a validation ends after a
// bounded amount of work, with a message that says which limit; an input
// within them is still checked in full.
func TestValidateWorkLimits(t *testing.T) {
	var patterns, props []string
	for i := range 25 {
		patterns = append(patterns, fmt.Sprintf(`"^a%d":{}`, i))
	}
	for i := range 100000 {
		props = append(props, fmt.Sprintf(`"b%d":1`, i))
	}
	ints := func(n int) string { return strings.TrimSuffix(strings.Repeat("1,", n), ",") }
	for _, tc := range []struct {
		name, schema, input, want string
	}{
		{
			name:   "checks",
			schema: `{"type":"object","patternProperties":{` + strings.Join(patterns, ",") + `}}`,
			input:  "{" + strings.Join(props, ",") + "}",
			want:   "checking it is over the limit of 2000000 checks",
		},
		{
			// A pattern of ~1,000 instructions, charged for its worst case
			// though this one fails at once.
			name:   "match",
			schema: objectSchema(`"a":{"type":"array","items":{"pattern":"^` + strings.Repeat("x", 1000) + `"}}`),
			input:  `{"a":[` + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("y", 1000)+`",`, 200), ",") + `]}`,
			want:   "checking it is over the limit of 2000000 checks and 2000000 match units",
		},
		{
			name:   "explain",
			schema: objectSchema(`"a":{"type":"array","items":{"type":"string"}}`),
			input:  `{"a":[` + ints(250000) + `]}`,
			want:   "locating its problems is over the limit of 200000 checks",
		},
		{
			name:   "within",
			schema: objectSchema(`"a":{"type":"array","items":{"type":"integer"}}`),
			input:  `{"a":[` + ints(200000) + `]}`,
		},
		{
			name:   "within, one problem",
			schema: objectSchema(`"a":{"type":"array","items":{"type":"integer"}}`),
			input:  `{"a":[` + ints(50000) + `,"x"]}`,
			want:   "at /a/50000: got string, want integer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.schema)
			err := s.validate(mustParse(t, tc.input))
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestValidateRefusesDeepInput: problems along one deep path cost depth²
// in the library (each records its full location), so depth is limited.
func TestValidateRefusesDeepInput(t *testing.T) {
	s := mustCompile(t, `{"type":"object","$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/a"}}},"properties":{"x":{"$ref":"#/$defs/a"}}}`)
	deep := func(d int) any { return mustParse(t, `{"x":`+strings.Repeat("[", d)+"1"+strings.Repeat("]", d)+`}`) }
	if err := s.validate(deep(9000)); err == nil || !strings.Contains(err.Error(), "nested more than 64 deep") {
		t.Errorf("depth 9000: %v", err)
	}
	if err := s.validate(deep(60)); err == nil || !strings.Contains(err.Error(), "got number, want array") {
		t.Errorf("depth 60: %v", err)
	}
}

// slowCases take far longer than a call's deadline to validate: each kind
// of step the limits allow, many times over.
var slowCases = []struct {
	name          string
	schema, input func() string
}{
	{
		// A pattern of ~2,000 instructions that never matches but keeps
		// every thread alive, against strings read in chunks.
		name: "pattern",
		schema: func() string {
			return objectSchema(`"a":{"type":"array","items":{"type":"string","pattern":"(?:[a-y]?){998}z"}}`)
		},
		input: func() string {
			item := `"` + strings.Repeat("a", 64<<10) + `"`
			return `{"a":[` + strings.TrimSuffix(strings.Repeat(item+",", 15), ",") + `]}`
		},
	},
	{
		// Each of many values checked against thousands of schemas.
		name: "references",
		schema: func() string {
			return strings.Replace(doubling(11), `{"type":"string"}`, `{"type":"array","items":{"type":"integer"}}`, 1)
		},
		input: func() string {
			// The last item fails every alternative, so all are tried.
			return `{"x":[` + strings.Repeat("1,", 100000) + `"no"]}`
		},
	},
}

// TestValidateCtxReturnsWhenCtxEnds: a validation that would take far longer
// than the call's deadline returns ctx's error promptly, and the work left
// behind stops too (its copy of the schema comes back to the pool).
func TestValidateCtxReturnsWhenCtxEnds(t *testing.T) {
	ends := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, sc := range slowCases {
		s, v := mustCompile(t, sc.schema()), mustParse(t, sc.input())
		for _, end := range ends {
			t.Run(sc.name+"/"+end.name, func(t *testing.T) {
				ctx, cancel := end.ctx()
				defer cancel()
				start := time.Now()
				err := s.validateCtx(ctx, v)
				if !errors.Is(err, end.want) {
					t.Fatalf("got %v, want %v", err, end.want)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("returned after %v", d)
				}
				// The abandoned validation ends at its next check; generous.
				deadline := time.Now().Add(10 * time.Second)
				for {
					s.mu.Lock()
					n := len(s.idle)
					s.mu.Unlock()
					if n == 1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the abandoned validation is still running")
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
}

// TestValidateSlowCasesAreSlow guards the test above: without cancellation
// each slow case takes longer than the 100 ms after which it is cancelled
// there (until a work limit ends it), so the prompt end is the
// cancellation's doing.
func TestValidateSlowCasesAreSlow(t *testing.T) {
	if testing.Short() {
		t.Skip("validates for seconds")
	}
	for _, sc := range slowCases {
		t.Run(sc.name, func(t *testing.T) {
			s, v := mustCompile(t, sc.schema()), mustParse(t, sc.input())
			// Run it on a copy of its own, stopped only after 300 ms,
			// three times the wait above. (That the test above gets ctx's
			// error, not a limit's message, shows the same.)
			c, err := s.take(new(atomic.Bool))
			if err != nil {
				t.Fatal(err)
			}
			stop := time.AfterFunc(300*time.Millisecond, func() { c.stop.Store(true) })
			defer stop.Stop()
			if err := c.validate(v, true); !errors.Is(err, context.Canceled) {
				t.Errorf("validation ended within 300ms (%v); the cancellation test proves little", err)
			}
		})
	}
}

// TestValidateConcurrent: many validations of one schema at once, some
// cancelled, under -race: each gets its own copy and its own answer.
func TestValidateConcurrent(t *testing.T) {
	s := mustCompile(t, objectSchema(`"a":{"type":"string","pattern":"^[a-z]+$"}`))
	slow, slowInput := mustCompile(t, slowCases[0].schema()), mustParse(t, slowCases[0].input())
	good, bad := mustParse(t, `{"a":"abc"}`), mustParse(t, `{"a":"ABC"}`)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // generous: the machine may be loaded; a hang still fails
				if err := s.validateCtx(ctx, good); err != nil {
					t.Errorf("good input: %v", err)
				}
				if err := s.validateCtx(ctx, bad); err == nil || !strings.Contains(err.Error(), "does not match pattern") {
					t.Errorf("bad input: %v", err)
				}
				cancel()
				if j%10 == i%10 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					if err := slow.validateCtx(ctx, slowInput); !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("slow input: %v", err)
					}
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	if s.mu.Lock(); len(s.idle) > maxIdleCopies {
		t.Errorf("%d idle copies kept", len(s.idle))
	}
	s.mu.Unlock()
}

// TestStoppableRegexpMatchesLikeMatchString: long strings are matched
// through a reader; the answers must be MatchString's, including invalid
// UTF-8 and anchors at chunk boundaries.
func TestStoppableRegexpMatchesLikeMatchString(t *testing.T) {
	s := mustCompile(t, objectSchema(`"a":{"type":"string"}`))
	c, _ := s.take(new(atomic.Bool))
	defer s.put(c)
	long := strings.Repeat("ab", matchChunk)
	for _, tc := range []struct{ pattern, input string }{
		{`^a`, long},
		{`b$`, long},
		{`^(ab)+$`, long},
		{`ba\z`, long + "ba"},
		{`\xff`, long + "\xff"},
		{`\x{fffd}`, long + "\xff"},
		{`^[ab]+$`, long + "\xff"},
		{`\bab`, long},
		{`é`, long[:matchChunk-1] + "é" + long},
		{`^$`, ""},
		{`c`, long},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			re := regexp.MustCompile(tc.pattern)
			got := stoppableRegexp{re: re, c: c}.MatchString(tc.input)
			if want := re.MatchString(tc.input); got != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// TestValidateAgreesWithLibrary: the hook takes over the library's type,
// const and enum checks (and the work counting must not change answers), so
// for each case maiden must accept exactly what the library alone accepts.
func TestValidateAgreesWithLibrary(t *testing.T) {
	schemas := []string{
		objectSchema(`"a":{"type":"integer"}`),
		objectSchema(`"a":{"type":["integer","string"]}`),
		objectSchema(`"a":{"type":"number","minimum":1}`),
		objectSchema(`"a":{"enum":[1,"1",null,true,[1,2],{"x":1,"y":[2]}]}`),
		objectSchema(`"a":{"const":{"x":1.0,"y":[2,{"z":null}]}}`),
		objectSchema(`"a":{"const":1e2}`),
		objectSchema(`"a":{"type":"array","items":{"enum":[1,2,3]},"uniqueItems":true}`),
		objectSchema(`"a":{"anyOf":[{"type":"string","pattern":"^x"},{"type":"array","items":{"type":"integer"}}]}`),
		objectSchema(`"a":{"not":{"type":"null"}}`),
		objectSchema(`"a":{"if":{"type":"string"},"then":{"minLength":2},"else":{"const":0}}`),
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"integer","enum":[1,2]}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"format":"email"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/t"}},"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"}}}}`,
	}
	inputs := []string{
		`{}`, `{"a":1}`, `{"a":1.0}`, `{"a":1.5}`, `{"a":1e2}`, `{"a":100}`, `{"a":"1"}`, `{"a":"x"}`, `{"a":"xy"}`,
		`{"a":null}`, `{"a":true}`, `{"a":false}`, `{"a":0}`, `{"a":0.0}`, `{"a":[1,2]}`, `{"a":[1,2.0]}`, `{"a":[2,1]}`,
		`{"a":[1,1]}`, `{"a":[[]]}`, `{"a":[[],[[]]]}`, `{"a":[1]}`, `{"a":{"y":[2],"x":1}}`, `{"a":{"x":1}}`,
		`{"a":{"x":1,"y":[2,{"z":null}]}}`, `{"a":{"y":[2,{"z":null}],"x":1.00}}`, `{"a":"a@b.c"}`, `{"a":"not an email"}`,
	}
	for i, sch := range schemas {
		lib := lib.NewCompiler()
		if err := lib.AddResource("lib.json", mustParse(t, sch)); err != nil {
			t.Fatal(err)
		}
		want, err := lib.Compile("lib.json")
		if err != nil {
			t.Fatal(err)
		}
		s := mustCompile(t, sch)
		for _, in := range inputs {
			v := mustParse(t, in)
			libOK := want.Validate(v) == nil
			err := s.validate(v)
			if (err == nil) != libOK {
				t.Errorf("schema %d, input %s: maiden %v, library valid=%v", i, in, err, libOK)
			}
			// The two-pass path must agree too.
			c, _ := s.take(new(atomic.Bool))
			err2 := c.validate(v, true)
			s.put(c)
			if (err2 == nil) != libOK {
				t.Errorf("schema %d, input %s (two passes): maiden %v, library valid=%v", i, in, err2, libOK)
			}
		}
	}
}

// TestSchemaCacheConcurrent: many calls asking for schemas at once, under
// -race, get one compiled schema per digest, and a slow schema does not
// hold up the others.
func TestSchemaCacheConcurrent(t *testing.T) {
	var c Cache[*Schema]
	slow := wide(1000) // takes a while to compile
	fast := objectSchema(`"a":{"type":"string"}`)
	var wg sync.WaitGroup
	got := make([]*Schema, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = c.Get("slow", slow, Compile)
		}()
	}
	start := time.Now()
	if s := c.Get("fast", fast, Compile); s.err != nil {
		t.Fatal(s.err)
	}
	fastDone := time.Since(start)
	wg.Wait()
	for _, s := range got {
		if s != got[0] || s.err != nil {
			t.Fatalf("schemas differ or failed: %v", s.err)
		}
	}
	t.Logf("fast schema ready after %v while the slow one compiled", fastDone)
}

// TestCheckInputLocates: a problem the walk before validation finds is
// located by its path, keys escaped as in a JSON Pointer, indexes in
// order from the top.
func TestCheckInputLocates(t *testing.T) {
	s := mustCompile(t, `{"type":"object"}`)
	for _, tc := range []struct{ input, want string }{
		{`{"a/b":{"c~d":[0,1,1e99999]}}`, "at /a~1b/c~0d/2: number 1e99999 has an exponent beyond ±1000"},
		{`{"x":[` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `]}`, "at " + truncate("/x"+strings.Repeat("/0", 63), 120) + ": nested more than 64 deep"},
		{`{"n":` + strings.Repeat("1", 1001) + `}`, "at /n: a number of 1001 characters; the limit is 1000"},
	} {
		err := s.validate(mustParse(t, tc.input))
		if err == nil || err.Error() != "input does not match the tool's schema:\n  "+tc.want {
			t.Errorf("%.60s: got %v, want %q", tc.input, err, tc.want)
		}
	}
}
