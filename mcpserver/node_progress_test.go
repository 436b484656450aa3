package mcpserver

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestNodeClientProgress: the TypeScript SDK drives `maiden serve` over
// stdio and calls a tool of an imported stdio MCP server (testdata/mcpstdio,
// confined) that reports its own progress: the client gets the tool's
// reports on the token it chose, and a flood of them coalesced
// (testdata/node-client/progress.mjs).
func TestNodeClientProgress(t *testing.T) {
	t.Parallel()
	bin := buildMaiden(t)
	dir := npmDir(t, "node-client", "client.mjs", "progress.mjs")
	upstream := testkit.Binary(t, "./testdata/mcpstdio")
	cfg := nodeAgentTOML(t)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n[mcp.up]\naccept_new_tools = true\ncommand = [\"" + upstream + "\"]\ntimeout_ms = 30000\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "progress.mjs", "stdio", bin, cfg)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("node progress.mjs stdio:\n%s", out)
	if err != nil || !regexp.MustCompile(`[1-9]\d* passed, 0 failed`).Match(out) {
		t.Fatalf("node progress.mjs: %v", err)
	}
}
