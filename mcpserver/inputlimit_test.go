package mcpserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestEmbedderInputLimitOverMCP: an embedder's Options.MaxInputBytes is the
// one input limit over MCP too, on both transports: an input larger than
// agent.toml's max_input_bytes (and larger than that plus the envelope, so
// the transports' bound follows it as well) but under the embedder's limit
// runs; one over the embedder's limit is refused as kind input with the one
// message, naming the embedder's number. Before the fix the MCP front end
// read only agent.toml's max_input_bytes.
func TestEmbedderInputLimitOverMCP(t *testing.T) {
	t.Parallel()
	const limit = 200 << 10
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, &maiden.Options{Isolation: maiden.InProcess, MaxInputBytes: limit})
	e.setMaxInput(1024) // agent.toml says 1 KiB; the embedder's option wins
	if got := e.host.MaxInputBytes(); got != limit {
		t.Fatalf("Host.MaxInputBytes() = %d, want the embedder's %d", got, limit)
	}
	fits := strings.Repeat("a", 120<<10) // over 1 KiB + the 64 KiB envelope, under the embedder's limit
	over := strings.Repeat("b", limit)   // over the limit, within the envelope

	t.Run("stdio", func(t *testing.T) {
		c := e.rawStdio()
		c.initialize()
		r := callRaw(c, 1, "echo", fmt.Sprintf(`{"message":%q}`, fits))
		if r["isError"] == true {
			t.Fatalf("an input under Options.MaxInputBytes was refused: %.300v", r)
		}
		r = callRaw(c, 2, "echo", fmt.Sprintf(`{"message":%q}`, over))
		content, _ := r["content"].([]any)
		var text string
		if len(content) > 0 {
			first, _ := content[0].(map[string]any)
			text, _ = first["text"].(string)
		}
		want := fmt.Sprintf("input: the input is %d bytes, more than the %d-byte limit", len(over)+len(`{"message":""}`), limit)
		if r["isError"] != true || !strings.HasPrefix(text, want) {
			t.Errorf("an input over Options.MaxInputBytes answered %.300v; want %q", r, want)
		}
	})
	t.Run("http", func(t *testing.T) {
		srv := e.httpServer(HTTPOptions{})
		cs, err := e.httpClient(srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if r := call(t, cs, "echo", map[string]any{"message": fits}); r.IsError {
			t.Fatalf("an input under Options.MaxInputBytes was refused: %.300s", text(r))
		}
		r := call(t, cs, "echo", map[string]any{"message": over})
		want := fmt.Sprintf("more than the %d-byte limit", limit)
		if !r.IsError || !strings.HasPrefix(text(r), "input: the input is ") || !strings.Contains(text(r), want) ||
			r.Meta[MetaErrorKind] != string(maiden.KindInput) {
			t.Errorf("an input over Options.MaxInputBytes: %.300s; want kind input naming %q", text(r), want)
		}
	})
}
