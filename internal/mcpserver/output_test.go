package mcpserver

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOutputSchemaServed: a tool that declares an output schema has it in
// tools/list; a kept promise comes back as structuredContent, a broken one
// as an error result of kind tool (never structuredContent that breaks the
// schema the client was shown).
func TestOutputSchemaServed(t *testing.T) {
	e := newEnv(t, []toolLine{{name: "out", fixture: "outschema"}, {name: "echo", fixture: "echo"}}, nil)
	cs := e.client(nil)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]any{}
	for _, tl := range list.Tools {
		schemas[tl.Name] = tl.OutputSchema
	}
	if schemas["out"] == nil {
		t.Errorf("tools/list has no outputSchema for the tool that declares one")
	}
	if schemas["echo"] != nil {
		t.Errorf("a 0.1.0 tool got an outputSchema: %v", schemas["echo"])
	}
	ok, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "out", Arguments: map[string]any{"n": 1}})
	if err != nil || ok.IsError || ok.StructuredContent == nil {
		t.Fatalf("kept promise: %+v, %v", ok, err)
	}
	bad, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "out", Arguments: map[string]any{"n": "one"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bad.IsError || bad.StructuredContent != nil || !strings.HasPrefix(text(bad), "tool: output does not match") {
		t.Fatalf("broken promise: %+v (%s)", bad, text(bad))
	}
}

// TestAnnotationsFollowPolicy: a tool with no network is read-only and
// closed-world; one with hosts allowed is open-world and not read-only.
func TestAnnotationsFollowPolicy(t *testing.T) {
	e := newEnv(t, []toolLine{
		{name: "local", fixture: "echo"},
		{name: "net", fixture: "echo", extra: `http_allow = ["api.example.com"]`},
	}, nil)
	list, err := e.client(nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		a := tl.Annotations
		if a == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s: no annotations", tl.Name)
		}
		wantOpen := tl.Name == "net"
		if *a.OpenWorldHint != wantOpen || a.ReadOnlyHint == wantOpen {
			t.Errorf("%s: readOnly %v openWorld %v", tl.Name, a.ReadOnlyHint, *a.OpenWorldHint)
		}
	}
}
