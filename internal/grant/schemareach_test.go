package grant_test

import (
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/grant"
)

// TestSchemaReach: what a tool grant can match of a JSON tool, read from
// its input schema. Grants match arguments exactly (CARDS.md A10), the
// prohibiting ones too (A4), so a grant that does not name a required
// argument, and has no --..., matches no call the schema accepts; one that
// names an argument a closed schema refuses matches none either; and one
// without --... is escaped by any argument it does not name.
func TestSchemaReach(t *testing.T) {
	const greet = `{"type":"object","properties":{"message":{"type":"string"},"loud":{"type":"boolean"}},"required":["message"]}`
	const closed = `{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}`
	const open = `{"type":"object","properties":{"message":{"type":"string"}}}`
	for _, tc := range []struct {
		name, grant, schema string
		never, escapes      string // substrings; "" = must be empty
	}{
		{"A10 no arguments: the required message is never named", "tool:invoke greet", greet, `requires the argument "message"`, ""},
		{"A10 --... matches every call", "tool:invoke greet --...", greet, "", ""},
		{"A10 the required argument named: loud escapes", "tool:invoke greet --message=hello", greet, "", "--loud"},
		{"A10 every property named, schema open: unlisted arguments escape", "tool:invoke greet --loud --message=*", greet, "", "any argument its input schema does not list"},
		{"A10 every property named, schema closed: nothing escapes", "tool:invoke greet --message=*", closed, "", ""},
		{"A10 an argument a closed schema refuses", "tool:invoke greet --message=hi --colour=red", closed, `accepts no argument "colour"`, ""},
		{"A10 an argument a closed schema refuses, even with --...", "tool:invoke greet --colour=red --...", closed, `accepts no argument "colour"`, ""},
		{"A10 an unknown argument of an open schema may be passed", "tool:invoke greet --colour=red --...", greet, "", ""},
		{"A10 nothing required: the argument-less call matches, others escape", "tool:invoke greet", open, "", "--message"},
		{"a schema that is not JSON tells nothing", "tool:invoke greet", "not json", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := grant.Parse(tc.grant)
			if err != nil {
				t.Fatal(err)
			}
			never, escapes := grant.SchemaReach(g, tc.schema)
			if tc.never == "" && never != "" || tc.never != "" && !strings.Contains(never, tc.never) {
				t.Errorf("never = %q, want %q", never, tc.never)
			}
			if tc.escapes == "" && escapes != "" || tc.escapes != "" && !strings.Contains(escapes, tc.escapes) {
				t.Errorf("escapes = %q, want %q", escapes, tc.escapes)
			}
		})
	}
}
