package jsonschema

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonparse"
	lib "github.com/santhosh-tekuri/jsonschema/v6"
)

// plainSchemas are schemas of the kind the fast check reads, each with the
// forms that kind allows.
var plainSchemas = []string{
	`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`,
	`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":["integer","string"],"minLength":2,"maxLength":3}}}`,
	`{"type":"object","properties":{"a":{"enum":[1,"1",null,true,[1,2],{"x":1,"y":[2]}]}}}`,
	`{"type":"object","properties":{"a":{"const":{"x":1.0,"y":[2,{"z":null}]}}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":2}}}`,
	`{"type":"object","properties":{"a":{"type":"array","items":false}}}`,
	`{"type":"object","properties":{"a":true,"b":false},"minProperties":1,"maxProperties":2}`,
	`{"type":"object","additionalProperties":{"type":"object","properties":{"x":{"type":"null"}},"required":["x"]}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"string","description":"d","default":"x","examples":["y"]}},"required":["a"]}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"integer","enum":[1,2]}},"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":"string","minLength":1}}}`,
}

var agreementInputs = []string{
	`{}`, `{"a":1}`, `{"a":1.0}`, `{"a":1.5}`, `{"a":1e2}`, `{"a":"1"}`, `{"a":"x"}`, `{"a":"xy"}`, `{"a":"xyz"}`,
	`{"a":"wxyz"}`, `{"a":"é"}`, `{"a":"éé"}`, `{"a":null}`, `{"a":true}`, `{"a":[]}`, `{"a":[1]}`, `{"a":[1,2]}`,
	`{"a":[1,2,3]}`, `{"a":["x"]}`, `{"a":{"y":[2],"x":1}}`, `{"a":{"x":1,"y":[2,{"z":null}]}}`,
	`{"a":{"y":[2,{"z":null}],"x":1.00}}`, `{"b":1}`, `{"a":1,"b":2}`, `{"a":1,"b":2,"c":3}`, `{"message":"hi"}`,
	`{"message":1}`, `{"message":"hi","data":[{"id":1}]}`, `{"a":{"x":null}}`, `{"a":{"x":0}}`, `{"a":{}}`,
}

// TestFastAgreesWithLibrary: on plain schemas the fast check says yes
// exactly where the library alone, and maiden's path without the fast
// check, say yes; and every plain schema gets one.
func TestFastAgreesWithLibrary(t *testing.T) {
	for i, sch := range plainSchemas {
		s := mustCompile(t, sch)
		if s.fast == nil {
			t.Fatalf("schema %d has no fast check: %s", i, sch)
		}
		for _, in := range agreementInputs {
			if d := disagreement(t, sch, s, mustParse(t, in)); d != "" {
				t.Errorf("schema %d, input %s: %s", i, in, d)
			}
		}
	}
}

// disagreement compares the fast check with the library alone and with
// maiden's path without the fast check; "" if they agree.
func disagreement(t testing.TB, sch string, s *Schema, v any) string {
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
	libOK := ls.Validate(v) == nil
	fast := s.fast.fastFits(v, new(atomic.Bool))
	slow := mustCompile(t, sch)
	slow.fast = nil
	slowErr := slow.validateCtx(context.Background(), v)
	switch {
	case fast && !libOK:
		return "fast yes, library no"
	case fast && slowErr != nil:
		return fmt.Sprintf("fast yes, maiden's path: %v", slowErr)
	case !fast && libOK && slowErr == nil:
		return "fast no, both others yes" // not unsafe, but the fast check should read this
	}
	return ""
}

// TestFastIsOnlyForPlainSchemas: a keyword outside the plain kind, or a
// form of one it does not read, leaves the whole schema to the library.
func TestFastIsOnlyForPlainSchemas(t *testing.T) {
	for _, sch := range []string{
		objectSchema(`"a":{"type":"string","pattern":"^x"}`),
		objectSchema(`"a":{"type":"string","format":"email"}`),
		objectSchema(`"a":{"anyOf":[{"type":"string"},{"type":"integer"}]}`),
		objectSchema(`"a":{"$ref":"#/$defs/t"}`) + ``,
		`{"type":"object","patternProperties":{"^x":{}}}`,
		objectSchema(`"a":{"type":"array","items":[{"type":"string"}]}`),
		objectSchema(`"a":{"type":"array","uniqueItems":true}`),
		objectSchema(`"a":{"type":"number","minimum":1}`),
		objectSchema(`"a":{"type":"string","minLength":2.0}`),
		objectSchema(`"a":{"not":{"type":"null"}}`),
		objectSchema(`"a":{"$schema":"http://json-schema.org/draft-07/schema#"}`),
		`{"type":"object","x-unknown":1}`,
		`{"type":"object","$id":"https://example.com/s"}`,
	} {
		s := compileSchema(sch)
		if s.err != nil {
			continue // the $ref one: its target is missing; refused anyway
		}
		if s.fast != nil {
			t.Errorf("fast check for %s", sch)
		}
	}
}

// TestFastCountsWork: an input of a plain schema that the library's path
// refuses for its work is refused the same way, not let through by the
// fast check.
func TestFastCountsWork(t *testing.T) {
	// Each item: a check and its 64-value enum (4), and its share of the
	// array's charge (5): 10 per item, 2.5 M for 250,000.
	sch := objectSchema(`"a":{"type":"array","items":{"enum":` + numbers(64) + `}}`)
	s := mustCompile(t, sch)
	if s.fast == nil {
		t.Fatal("no fast check")
	}
	items := strings.TrimSuffix(strings.Repeat("1,", 250000), ",")
	err := s.validate(mustParse(t, `{"a":[`+items+`]}`))
	if err == nil || !strings.Contains(err.Error(), "over the limit of 2000000 checks") {
		t.Fatalf("got %v", err)
	}
	items = strings.TrimSuffix(strings.Repeat("1,", 150000), ",")
	if err := s.validate(mustParse(t, `{"a":[`+items+`]}`)); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
}

// TestFastStops: a stopped validation's fast check says no.
func TestFastStops(t *testing.T) {
	s := mustCompile(t, objectSchema(`"a":{"type":"array","items":{"type":"integer"}}`))
	v := mustParse(t, `{"a":[`+strings.TrimSuffix(strings.Repeat("1,", 10000), ",")+`]}`)
	stop := new(atomic.Bool)
	stop.Store(true)
	if s.fast.fastFits(v, stop) {
		t.Fatal("a stopped fast check said yes")
	}
	if !s.fast.fastFits(v, new(atomic.Bool)) {
		t.Fatal("it fits")
	}
}

// FuzzFastAgreesWithLibrary builds a plain schema and an input from the
// fuzzer's bytes (the input mostly following the schema, so both answers
// come up) and holds the fast check to the library's answer and maiden's
// path's: a fast yes where either says no fails; and the check on an
// object's members to the check on its value.
//
//	go test -run '^$' -fuzz FuzzFastAgreesWithLibrary ./internal/jsonschema/
func FuzzFastAgreesWithLibrary(f *testing.F) {
	for _, seed := range []string{"", "\x00", "\x01\x02\x03\x04\x05\x06\x07\x08", "\xff\xfe\xfd\xfc\x10\x20\x30\x40\x50\x60\x70\x80\x90",
		"schema and input bytes, some more", strings.Repeat("\x07\x03", 40)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		sch := g.schema(0, true)
		text, err := json.Marshal(sch)
		if err != nil {
			t.Fatal(err)
		}
		s := compileSchema(string(text))
		if s.err != nil {
			return // the generator made a schema the library refuses
		}
		if s.fast == nil {
			t.Fatalf("no fast check for a plain schema: %s", text)
		}
		in, err := json.Marshal(g.value(sch, 0))
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonparse.Parse(string(in))
		if err != nil {
			t.Fatal(err)
		}
		if checkInput(v, new(inputSize)) != nil {
			return
		}
		if d := disagreement(t, string(text), s, v); d != "" {
			t.Errorf("%s\nschema %s\ninput %s", d, text, in)
		}
		// The check on an object's members (ValidateScanned's) says yes
		// only where the check on the value does, after as much work.
		if sc, err := ScanInput(string(in)); err == nil && sc.Object {
			full := fastWalk{checks: 6, limit: maxChecks, stop: new(atomic.Bool)}
			members := full
			if s.fast.fitsMembers(sc.Members, &members) && (!s.fast.fits(v, &full) || members.checks != full.checks) {
				t.Errorf("the members' check says yes after %d checks, the value's %v after %d\nschema %s\ninput %s", members.checks, s.fast.fits(v, &fastWalk{checks: 6, limit: maxChecks, stop: new(atomic.Bool)}), full.checks, text, in)
			}
		}
	})
}

// gen draws choices from the fuzzer's bytes; zeros once they run out.
type gen struct {
	data []byte
	i    int
}

func (g *gen) n(k int) int {
	if g.i >= len(g.data) {
		return 0
	}
	b := g.data[g.i]
	g.i++
	return int(b) % k
}

var genStrings = []string{"", "a", "ab", "é", "éé", "abc", "x", "message"}

func (g *gen) scalar() any {
	switch g.n(8) {
	case 0:
		return nil
	case 1:
		return g.n(2) == 1
	case 2:
		return json.Number([]string{"0", "1", "1.0", "1.5", "-2", "1e2", "100", "2"}[g.n(8)])
	case 3:
		return []any{}
	case 4:
		return map[string]any{}
	}
	return genStrings[g.n(len(genStrings))]
}

// schema is a plain schema (an object; the root's type is object).
func (g *gen) schema(depth int, root bool) any {
	if !root && g.n(8) == 0 {
		return g.n(2) == 1
	}
	s := map[string]any{}
	types := []string{"object", "array", "string", "integer", "number", "boolean", "null"}
	if root {
		s["type"] = "object"
	} else if g.n(2) == 0 {
		if g.n(3) == 0 {
			s["type"] = []any{types[g.n(7)], types[g.n(7)]}
		} else {
			s["type"] = types[g.n(7)]
		}
	}
	if depth < 3 {
		if g.n(2) == 0 || root {
			props := map[string]any{}
			for range g.n(4) {
				props[genStrings[g.n(len(genStrings))]] = g.schema(depth+1, false)
			}
			s["properties"] = props
		}
		if g.n(3) == 0 {
			s["additionalProperties"] = g.schema(depth+1, false)
		}
		if g.n(3) == 0 {
			s["items"] = g.schema(depth+1, false)
		}
	}
	if g.n(3) == 0 {
		var req []any
		for range 1 + g.n(2) {
			req = append(req, genStrings[g.n(len(genStrings))])
		}
		s["required"] = req
	}
	if g.n(5) == 0 {
		var enum []any
		for range 1 + g.n(4) {
			enum = append(enum, g.scalar())
		}
		s["enum"] = enum
	}
	if g.n(7) == 0 {
		s["const"] = g.scalar()
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"} {
		if g.n(6) == 0 {
			s[k] = json.Number(fmt.Sprint(g.n(4)))
		}
	}
	if g.n(4) == 0 {
		s["description"] = "d"
	}
	return s
}

// value is an input for schema sch: mostly of its shape, sometimes not.
func (g *gen) value(sch any, depth int) any {
	m, ok := sch.(map[string]any)
	if !ok || depth > 4 || g.n(6) == 0 {
		return g.scalar()
	}
	if e, ok := m["enum"].([]any); ok && g.n(2) == 0 {
		return e[g.n(len(e))]
	}
	if c, ok := m["const"]; ok && g.n(2) == 0 {
		return c
	}
	t, _ := m["type"].(string)
	if tt, ok := m["type"].([]any); ok {
		t, _ = tt[g.n(len(tt))].(string)
	}
	if t == "" {
		t = []string{"object", "array", "string", "integer"}[g.n(4)]
	}
	switch t {
	case "object":
		out := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		for k, p := range props {
			if g.n(4) != 0 {
				out[k] = g.value(p, depth+1)
			}
		}
		for range g.n(3) {
			out[genStrings[g.n(len(genStrings))]] = g.value(m["additionalProperties"], depth+1)
		}
		return out
	case "array":
		var out []any
		for range g.n(4) {
			out = append(out, g.value(m["items"], depth+1))
		}
		if out == nil {
			return []any{}
		}
		return out
	case "string":
		return genStrings[g.n(len(genStrings))]
	case "integer", "number":
		return json.Number([]string{"0", "1", "1.0", "1.5", "-2", "1e2", "3"}[g.n(7)])
	case "boolean":
		return g.n(2) == 1
	}
	return nil
}
