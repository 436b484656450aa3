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
	t.Parallel()
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
// closed-world; one with hosts allowed is open-world, not read-only and may
// be destructive; agent.toml's title and annotations override what was
// derived, one hint at a time.
func TestAnnotationsFollowPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{
		{name: "local", fixture: "echo"},
		{name: "net", fixture: "echo", extra: `http_allow = ["api.example.com"]`},
		{name: "tamed", fixture: "echo", extra: "http_allow = [\"api.example.com\"]\ntitle = \"Read the forecast\"\nannotations = { read_only = true, destructive = false }"},
	}, nil)
	list, err := e.client(nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type hints struct {
		title                                        string
		readOnly, destructive, idempotent, openWorld bool
	}
	want := map[string]hints{
		"local": {readOnly: true, idempotent: true},
		"net":   {destructive: true, openWorld: true},
		"tamed": {title: "Read the forecast", readOnly: true, openWorld: true},
	}
	for _, tl := range list.Tools {
		a := tl.Annotations
		if a == nil || a.OpenWorldHint == nil || a.DestructiveHint == nil {
			t.Fatalf("%s: incomplete annotations %+v", tl.Name, a)
		}
		got := hints{tl.Title, a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}
		if got != want[tl.Name] || a.Title != tl.Title {
			t.Errorf("%s: got %+v (annotations title %q), want %+v", tl.Name, got, a.Title, want[tl.Name])
		}
	}
}
