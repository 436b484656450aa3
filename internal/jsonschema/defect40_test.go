package jsonschema_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonschema"
)

// Pass 40's defect: the load checks (checkCompiled) and the per-check
// charge (instrument) follow what a compiled schema contains, but not
// where a $dynamicRef lands when it runs: the outermost resource in scope
// with a $dynamicAnchor of that name, which can sit in $defs where no
// keyword applies it. A tool author's schema could put an enum of any
// size there, or references expanding to 2^40 checks of one value, none
// charged and none stopped by the call's context (2^22 ran 5.4 s under a
// 200 ms context). Nothing in maiden writes dynamic references; both
// keywords are now refused at load, wherever they stand.
func TestDynamicReferencesRefused(t *testing.T) {
	dynamicTarget := func(node, defs string) string {
		return `{"type":"object","properties":{"x":{"$ref":"urn:t:tree"}},"$defs":{` + defs +
			`"node":` + node + `,"tree":{"$id":"urn:t:tree","$dynamicAnchor":"node","type":"object","properties":{"c":{"$dynamicRef":"#node"}}}}}`
	}
	var doubling strings.Builder // $defs a0..a40, each applying the next twice
	for i := range 40 {
		fmt.Fprintf(&doubling, `"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]},`, i, i+1, i+1)
	}
	doubling.WriteString(`"a40":{"type":"integer"},`)
	vals := make([]string, 5000)
	for i := range vals {
		vals[i] = fmt.Sprint(i)
	}
	for _, tt := range []struct{ name, schema string }{
		{"a dynamic target with an enum of 5000 values", dynamicTarget(`{"$dynamicAnchor":"node","enum":[`+strings.Join(vals, ",")+`]}`, "")},
		{"a dynamic target expanding to 2^40 checks", dynamicTarget(`{"$dynamicAnchor":"node","$ref":"#/$defs/a0"}`, doubling.String())},
		{"a $dynamicRef alone", `{"type":"object","properties":{"x":{"$dynamicRef":"#/$defs/y"}},"$defs":{"y":{"type":"integer"}}}`},
		{"a $dynamicAnchor alone", `{"type":"object","$dynamicAnchor":"meta","properties":{"x":{"type":"integer"}}}`},
	} {
		s := jsonschema.Compile(tt.schema)
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "is not supported (where a dynamic reference lands is chosen at validation time") {
			t.Errorf("%s: Compile = %v; want refused: $dynamicRef/$dynamicAnchor is not supported", tt.name, err)
		}
	}
}
