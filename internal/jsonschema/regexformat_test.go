package jsonschema

import (
	"fmt"
	"strings"
	"testing"
)

// draft7 declares draft-07, under which the library asserts format (and so
// "regex": is each string a regular expression?).
const draft7 = `"$schema":"http://json-schema.org/draft-07/schema#",`

// TestValidateChargesRegexFormat: a schema that says "format": "regex"
// is charged like any other, and so are the strings the format check
// parses: an agent's string is parsed by Go's regexp parser, up to ~6 µs
// and ~2 KB per byte, and Go's compiler turns \pL{1000} (9 bytes) into a
// million instructions.
func TestValidateChargesRegexFormat(t *testing.T) {
	// A tree of inline schemas (a $ref's siblings do not count in
	// draft-07), all saying format regex, in which only the last leaf
	// takes a number: 2,047 schemas for each number.
	var tree func(depth int, last bool) string
	tree = func(depth int, last bool) string {
		if depth == 0 {
			if last {
				return `{"format":"regex","type":"number"}`
			}
			return `{"format":"regex","type":"string"}`
		}
		return `{"format":"regex","anyOf":[` + tree(depth-1, false) + `,` + tree(depth-1, last) + `]}`
	}
	var props []string
	for i := range 2000 {
		props = append(props, fmt.Sprintf(`"b%d":1`, i))
	}
	strs := func(n, size int) string {
		return `{"a":[` + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("a", size)+`",`, n), ",") + `]}`
	}
	for _, tc := range []struct {
		name, schema, input, want string
	}{
		{
			// Each of 2,000 numbers meets 2,047 schemas: 4 M checks.
			name:   "schemas",
			schema: `{` + draft7 + `"type":"object","format":"regex","additionalProperties":` + tree(10, true) + `}`,
			input:  "{" + strings.Join(props, ",") + "}",
			want:   "checking it is over the limit of 2000000 checks",
		},
		{
			// 640 KiB of patterns to parse, cheap ones here.
			name:   "strings",
			schema: `{` + draft7 + `"type":"object","properties":{"a":{"type":"array","items":{"type":"string","format":"regex"}}}}`,
			input:  strs(40, 16<<10),
			want:   "checking it is over the limit of 2000000 checks and 2000000 match units",
		},
		{
			name:   "long string",
			schema: `{` + draft7 + `"type":"object","properties":{"a":{"type":"array","items":{"type":"string","format":"regex"}}}}`,
			input:  strs(1, 16<<10+1),
			want:   `at /a/0: "` + strings.Repeat("a", 40) + `…" is not a valid regex`,
		},
		{
			name:   "within",
			schema: `{` + draft7 + `"type":"object","properties":{"a":{"type":"array","items":{"type":"string","format":"regex"}}}}`,
			input:  `{"a":["^[a-z]+$","\\pL{1000}"]}`,
		},
		{
			name:   "not a pattern",
			schema: `{` + draft7 + `"type":"object","properties":{"a":{"type":"array","items":{"type":"string","format":"regex"}}}}`,
			input:  `{"a":["^[a-z]+$","a{1001}"]}`,
			want:   `at /a/1: "a{1001}" is not a valid regex`,
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
