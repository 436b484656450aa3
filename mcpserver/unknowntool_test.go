package mcpserver

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maiden-run/maiden"
)

// TestUnknownToolCallsAudited: an agent calling a tool it does not have
// (one bound to another agent, a guessed name, a long name with a control
// character) gets "unknown tool" as before, and each attempt is in the
// audit trail as a call-refused record naming the agent, the name asked for
// (valid UTF-8, cut at 128 bytes and marked) and the refusal, without the
// list of the agent's tools; a call through the Go API (Host.Call) of such
// a tool is recorded the same way. Without it an agent probing for tools
// left no trace.
func TestUnknownToolCallsAudited(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	srv := e.httpServer(HTTPOptions{})
	aliceTok, _ := e.token("alice")
	alice, err := e.httpClient(srv.URL, bearer(aliceTok))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	long := "shell\x1b[2J" + strings.Repeat("é", 100) // 209 bytes
	for _, name := range []string{"logger", "shell", long} {
		if _, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Fatalf("alice calling %q: %v, want unknown tool", name, err)
		}
	}
	if _, err := e.host.Call(context.Background(), maiden.Call{Agent: "alice", Tool: "exec", Input: "{}"}); err == nil {
		t.Fatal("Host.Call of a tool alice does not have succeeded")
	}

	recs, err := e.host.AuditTail(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut := "shell\x1b[2J" + strings.Repeat("é", 59) + "…" // 9 + 118 bytes (the 128th is inside an é), then the mark
	want := map[string]bool{"logger": false, "shell": false, cut: false, "exec": false}
	for _, r := range recs {
		if r.Kind != "call-refused" || r.Agent != "alice" {
			continue
		}
		if _, ok := want[r.Tool]; !ok {
			t.Errorf("a call-refused record of alice for tool %q, asked for none such", r.Tool)
			continue
		}
		var body struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if w := `no tool ` + strconv.Quote(r.Tool) + ` for agent "alice"`; body.Error != w {
			t.Errorf("the record of %q says %q, want %q", r.Tool, body.Error, w)
		}
		want[r.Tool] = true
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("no call-refused record of alice's call of %q in the audit trail", name)
		}
	}
}
