package command

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestJSONSchemaValidates: the projection compiles with the JSON Schema
// library the call pipeline uses, accepts what ParseJSON accepts for the
// git example and refuses undeclared options, unknown commands and
// another command's options (the schema and the parser agree).
func TestJSONSchemaValidates(t *testing.T) {
	s := loadGit(t)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s.JSONSchema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("git.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("git.json")
	if err != nil {
		t.Fatalf("the projection does not compile: %v", err)
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"command":"log","max-count":5,"oneline":true,"paths":["a"],"no-pager":true}`, true},
		{`{"command":"show","object":"HEAD","stat":true}`, true},
		{`{"command":"status","short":true,"branch":true}`, true},
		{`{"command":"log","upload-pack":"x"}`, false},
		{`{"command":"push"}`, false},
		{`{"command":"show","max-count":5}`, false},
		{`{"command":"log","max-count":"5"}`, false},
		{`{"command":"log","color":"sometimes"}`, false},
		{`{"max-count":5}`, false},
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		schemaOK := sch.Validate(v) == nil
		_, perr := s.ParseJSON([]byte(tc.in))
		if schemaOK != tc.ok || (perr == nil) != tc.ok {
			t.Errorf("%s: schema accepts %v, ParseJSON error %v; want accepted %v by both", tc.in, schemaOK, perr, tc.ok)
		}
	}
}
