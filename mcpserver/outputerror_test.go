package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestStructuredErrorFitsOutputSchema: clients hold every structuredContent
// to the tool's outputSchema, an error result's too (the TypeScript SDK
// throws "Structured content does not match the tool's output schema",
// which is how the model lost fs_read's sandbox_boundary_required error and
// its requiredExpansion). The outputSchema served for fs_read admits both
// its output and the structured error, and each result of the real server
// validates against it; garbage does not. A declared schema with
// $-keywords is served as declared, and a failure of such a tool comes
// without structuredContent.
func TestStructuredErrorFitsOutputSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inside, outside := filepath.Join(dir, "in"), filepath.Join(t.TempDir(), "out.txt")
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(inside, "f.txt"), outside} {
		if err := os.WriteFile(f, []byte("body"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newAgentsEnv(t, `
[agents.alice]
tools = ["fs_read"]
grants = ["tool:invoke fs_read --...", "fs:read /**"]
[agents.alice.boundary]
fs = [{ path = "`+inside+`", access = "read", match = "subtree" }]
`)
	srv := e.httpServer(HTTPOptions{})
	tok, _ := e.token("alice")
	cs, err := e.httpClient(srv.URL, bearer(tok))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools/list: %v %+v", err, list)
	}
	raw, _ := json.Marshal(list.Tools[0].OutputSchema)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("fs_read.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("fs_read.json")
	if err != nil {
		t.Fatalf("the served outputSchema does not compile: %v\n%s", err, raw)
	}
	valid := func(v any) error {
		b, _ := json.Marshal(v)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return schema.Validate(inst)
	}
	read := func(path string) *mcp.CallToolResult {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": path}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ok := read(filepath.Join(inside, "f.txt"))
	if ok.IsError || ok.StructuredContent == nil {
		t.Fatalf("read inside: %s", text(ok))
	}
	if err := valid(ok.StructuredContent); err != nil {
		t.Errorf("the output does not match the served outputSchema: %v", err)
	}
	refused := read(outside)
	sc, _ := refused.StructuredContent.(map[string]any)
	if !refused.IsError || sc["reason"] != "sandbox_boundary_required" || sc["requiredExpansion"] == nil {
		t.Fatalf("read outside: %s %v", text(refused), refused.StructuredContent)
	}
	if err := valid(refused.StructuredContent); err != nil {
		t.Errorf("the structured error does not match the served outputSchema: %v\n%s", err, raw)
	}
	missing := read(filepath.Join(inside, "nope.txt")) // the built-in's own structured error
	if !missing.IsError || missing.StructuredContent == nil {
		t.Fatalf("read a missing file: %s %v", text(missing), missing.StructuredContent)
	}
	if err := valid(missing.StructuredContent); err != nil {
		t.Errorf("the built-in's structured error does not match the served outputSchema: %v", err)
	}
	for _, bad := range []any{map[string]any{"content": 1}, map[string]any{"path": "/x"}, "text", map[string]any{"reason": 3}} {
		if valid(bad) == nil {
			t.Errorf("the served outputSchema admits %v", bad)
		}
	}

	// A declared schema with $-keywords: served as declared; a failure's
	// structured error is dropped (the text keeps it all).
	withRef := `{"type":"object","$defs":{"n":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/n"}}}`
	if got := servedOutputSchema(withRef); got != withRef {
		t.Errorf("a schema with $ref served as %s", got)
	}
	s := New(nil, nil)
	s.agents["alice"] = &agentServer{agent: "alice", served: map[string]servedTool{
		"refd": {outputSchema: withRef}, "plain": {outputSchema: `{"type":"object"}`}, "none": {}}}
	for tool, keep := range map[string]bool{"refd": false, "plain": true, "none": true} {
		r := &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"reason": "x"}}
		if got := s.fitOutputSchema("alice", tool, r).StructuredContent != nil; got != keep {
			t.Errorf("%s: structuredContent kept %v, want %v", tool, got, keep)
		}
	}
	if r := s.fitOutputSchema("alice", "refd", &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}}); r.StructuredContent == nil {
		t.Error("a success's structuredContent was dropped")
	}
}
