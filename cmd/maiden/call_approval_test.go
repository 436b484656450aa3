package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestCallPendingThenApproved: `maiden call` of a call an approve rule
// matches, without waiting, exits 7 with the request's ID; after `maiden
// approve ID` the same call runs (exit 0), and once only: repeated, it is
// pending again.
func TestCallPendingThenApproved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	src := fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
[[middleware]]
use = "approve"
reason = "echo needs a human"
`, testkit.Component(t, "echo"))
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func() cliResult {
		return cli(t, "", "call", "-config", cfg, "-agent", "a", "-wait", "0", "-json", "echo", `{"message":"hi"}`)
	}
	r := call()
	if r.code != exitPending {
		t.Fatalf("call: exit %d, want %d; stdout %s stderr %s", r.code, exitPending, r.stdout, r.stderr)
	}
	var res struct {
		Error struct{ Kind, Message, Approval string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Error.Kind != "pending" || !strings.HasPrefix(res.Error.Approval, "apr_") ||
		!strings.Contains(res.Error.Message, "echo needs a human") {
		t.Fatalf("pending result %s (%v)", r.stdout, err)
	}
	if a := cli(t, "", "approve", "-config", cfg, res.Error.Approval); a.code != exitOK {
		t.Fatalf("approve: exit %d: %s", a.code, a.stderr)
	}
	if r := call(); r.code != exitOK || !strings.Contains(r.stdout, `"ok":true`) {
		t.Fatalf("after approval: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if r := call(); r.code != exitPending {
		t.Fatalf("repeated after the approved run: exit %d, want %d (an approval runs one call)", r.code, exitPending)
	}
}

// TestHelpWrappedCLI: maiden help TOOL [COMMAND...] prints a wrapped CLI's
// commands from its description (the worked example's git).
func TestHelpWrappedCLI(t *testing.T) {
	t.Parallel()
	root := testkit.RepoRoot(t)
	cfg := filepath.Join(root, "examples", "git", "agent.toml")
	r := cli(t, "", "help", "-config", cfg, "git", "log")
	if r.code != exitOK || !strings.Contains(r.stdout, "Usage: git log") || !strings.Contains(r.stdout, "--max-count") {
		t.Fatalf("help git log: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "help", "-config", cfg, "git")
	if r.code != exitOK || !strings.Contains(r.stdout, "status (st)") || strings.Contains(r.stdout, "\n  push") {
		t.Fatalf("help git: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, "", "help", "-config", cfg, "nosuchtool"); r.code != exitUsage {
		t.Fatalf("help of an unknown name: exit %d", r.code)
	}
}
