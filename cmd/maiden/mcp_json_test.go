package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestMCPAcceptJSONEscapesUpstreamText: maiden mcp accept -json is a review
// too (piped to jq or less on the operator's terminal): the upstream's
// bidirectional and zero-width controls (U+202E in the wide pay's
// description, which reverses what follows on screen) come out as JSON \u
// escapes, the same JSON value, never raw, so that what the operator reads
// is what is pinned.
func TestMCPAcceptJSONEscapesUpstreamText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := testkit.Binary(t, "./testdata/mcpstdio")
	cfg := filepath.Join(dir, "agent.toml")
	body := "version = 1\n[mcp.shop]\ncommand = [\"" + bin + "\"]\nenv = [\"MCPSTDIO_PAY=wide\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "mcp", "accept", "-config", cfg, "-dry-run", "-json", "shop", "pay")
	if r.code != exitOK {
		t.Fatalf("mcp accept -json: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\u202e") {
		t.Errorf("mcp accept -json wrote the upstream's controls raw:\n%q", r.stdout)
	}
	var reviews []struct {
		Offered struct{ Description string } `json:"offered"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &reviews); err != nil || len(reviews) != 1 || !strings.Contains(reviews[0].Offered.Description, "\u202e") {
		t.Errorf("the JSON does not decode to the upstream's description (%v): %s", err, r.stdout)
	}
}
