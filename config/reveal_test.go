package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReveal: [tools.NAME] reveal lists secrets of the tool whose value
// reveal may return; a binding's reveal narrows it; both are checked with
// the line and key.
func TestReveal(t *testing.T) {
	src := `version = 1
[tools.signer]
path = "s.wasm"
reveal = ["SIGNING_KEY", "SIGNING_KEY"]
secrets = ["SIGNING_KEY", "API_TOKEN"]
[tools.echo]
path = "e.wasm"

[agents.a.tools.signer]
reveal = ["SIGNING_KEY"]
[agents.b.tools.signer]
reveal = []
[agents.c]
tools = ["signer"]
`
	cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := cfg.Tool("signer")
	if diff := cmp.Diff([]string{"SIGNING_KEY"}, tool.Reveal); diff != "" {
		t.Errorf("tool reveal (-want +got):\n%s", diff)
	}
	if echo, _ := cfg.Tool("echo"); echo.Reveal != nil {
		t.Errorf("a tool without reveal has %q", echo.Reveal)
	}
	for agent, want := range map[string][]string{"a": {"SIGNING_KEY"}, "b": {}, "c": nil} {
		b, _, _ := cfg.AgentBinding(agent, "signer")
		if diff := cmp.Diff(want, b.Reveal); diff != "" || (want == nil) != (b.Reveal == nil) {
			t.Errorf("agent %s: binding reveal %#v, want %#v", agent, b.Reveal, want)
		}
	}
	// The returned copies do not share storage with the configuration.
	tool.Reveal[0] = "X"
	if again, _ := cfg.Tool("signer"); again.Reveal[0] != "SIGNING_KEY" {
		t.Error("Tool's Reveal shares storage")
	}
}

// TestRevealErrors: what maiden check says about a wrong reveal.
func TestRevealErrors(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"not a secret of the tool", `version = 1
[tools.signer]
path = "s.wasm"
secrets = ["API_TOKEN"]
reveal = ["SIGNING_KEY"]
`, `agent.toml:5: tools.signer.reveal[0]: secret "SIGNING_KEY" is not in the tool's secrets (tools.signer.secrets: API_TOKEN): a tool may reveal only a secret it may use`},
		{"no secrets at all", `version = 1
[tools.signer]
path = "s.wasm"
reveal = ["K"]
`, `tools.signer.reveal[0]: secret "K" is not in the tool's secrets (tools.signer.secrets: none)`},
		{"not a list", `version = 1
[tools.signer]
path = "s.wasm"
secrets = ["K"]
reveal = "K"
`, `tools.signer.reveal`},
		{"binding widens", `version = 1
[tools.signer]
path = "s.wasm"
secrets = ["K", "L"]
reveal = ["K"]
[agents.a.tools.signer]
reveal = ["L"]
`, `agent.toml:7: agents.a.tools.signer.reveal[0]: secret "L" is not in the tool's own reveal (tools.signer.reveal: K): a binding can only narrow`},
		{"binding of a tool without reveal", `version = 1
[tools.signer]
path = "s.wasm"
secrets = ["K"]
[agents.a.tools.signer]
reveal = ["K"]
`, `agents.a.tools.signer.reveal[0]: secret "K" is not in the tool's own reveal (tools.signer.reveal: none)`},
		{"a wrapped CLI has no reveal", `version = 1
[clis.git]
command = ["/usr/bin/git"]
path = "/usr/bin/git"
reveal = ["K"]
`, `clis.git.reveal: unknown key`},
		{"typo suggests reveal", `version = 1
[tools.signer]
path = "s.wasm"
reveals = ["K"]
`, `tools.signer.reveals: unknown key (did you mean "reveal"?)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("agent.toml", []byte(tt.src), "/cfg", fakeFiles(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}
