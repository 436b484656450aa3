package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/safetext"
)

// TestHelpEscapesTheDescriptionsText (pass 54's defect): `maiden help
// TOOL` prints the tool's command help, which copies its description's
// text (summaries, enum values, defaults, error names): a WebAssembly
// tool's own schema() text, or a [clis] table's. It reaches the
// operator's terminal escaped, as maiden tools escapes the same
// description, its newlines and tabs kept: no window title, screen clear,
// carriage return over a line, or right-to-left override.
func TestHelpEscapesTheDescriptionsText(t *testing.T) {
	t.Parallel()
	const evil = `list\u001b]0;owned\u0007\u001b[2J\rmaiden: approved\u202e`
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	body := `version = 1
[clis.t]
path = "/bin/true"
command = '{"maiden_command": 1, "name": "t", "summary": "s ` + evil + `", "commands": [{"name": "c", "summary": "` + evil + `", "options": [{"name": "o", "summary": "` + evil + `", "enum": ["` + evil + `"]}], "errors": [{"name": "` + evil + `", "exit_code": 3}]}]}'
`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"t"}, {"t", "c"}} {
		r := cli(t, "", append([]string{"help", "-config", cfg}, args...)...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Usage: t") {
			t.Fatalf("maiden help %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		if i := strings.IndexFunc(r.stdout, func(r rune) bool { return r != '\n' && r != '\t' && safetext.Unsafe(r) }); i >= 0 {
			t.Errorf("maiden help %s printed %q: %q at byte %d reaches the terminal; want the description's control and bidirectional characters escaped", strings.Join(args, " "), r.stdout, r.stdout[i:min(i+12, len(r.stdout))], i)
		}
		if !strings.Contains(r.stdout, `list\x1b]0;owned\a\x1b[2J\rmaiden: approved\u202e`) {
			t.Errorf("maiden help %s printed %q; want the text there, escaped", strings.Join(args, " "), r.stdout)
		}
	}
}
