package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWrappedGitOverMCP: the worked example (examples/git) end to end over
// MCP with the Go SDK client: tools/list shows git with its command
// schema; git log with a count runs; status is denied by the card; push
// and injection attempts through arguments (--upload-pack, -c, a
// positional starting with '-') are refused as input.
func TestWrappedGitOverMCP(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	gitIn := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitIn("init", "-q")
	os.WriteFile(filepath.Join(repo, "f.txt"), []byte("x"), 0o644)
	gitIn("add", "f.txt")
	gitIn("commit", "-q", "-m", "the only commit")
	root := testkit.RepoRoot(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.toml")
	body := `version = 1
[clis.git]
path = "/usr/bin/git"
command_file = "` + filepath.Join(root, "examples", "git", "git.command.json") + `"
dir = "` + repo + `"
read_paths = ["` + repo + `"]
env = ["GIT_PAGER=cat", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"]
[agents.reader]
tools = ["git"]
grants = ["tool:invoke git log --max-count=*"]
`
	if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	srv := New(h, &Options{Agent: "reader"})
	if _, err := srv.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.serverFor(context.Background(), "reader").mcp.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "git-test", Version: "0"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "git" {
		t.Fatalf("tools/list: %+v %v", list, err)
	}
	schema, _ := json.Marshal(list.Tools[0].InputSchema)
	if !strings.Contains(string(schema), `"command"`) {
		t.Errorf("git's schema has no command: %s", schema)
	}
	call := func(args string) (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "git", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		return res, text.String()
	}
	if res, text := call(`{"command":"log","max-count":1}`); res.IsError || !strings.Contains(text, "the only commit") {
		t.Fatalf("git log: %v %s", res.IsError, text)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"command":"status"}`, "no card"},
		{`{"command":"push"}`, "push"},
		{`{"command":"log","max-count":1,"upload-pack":"touch /tmp/x"}`, "upload-pack"},
		{`{"command":"log","max-count":1,"c":"core.sshCommand=touch /tmp/x"}`, `"c"`},
		{`{"command":"log","max-count":1,"paths":["-rf"]}`, "no card"},
	} {
		if res, text := call(tc.args); !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("%s: isError %v, %q (want %q)", tc.args, res.IsError, text, tc.want)
		}
	}
}

// TestUnconfinedInMeta: a result of a wrapped CLI that ran without
// Landlock says so in its _meta, failed or not (the issue: "in every
// result's metadata"); a confined one does not.
func TestUnconfinedInMeta(t *testing.T) {
	t.Parallel()
	for _, res := range []maiden.Result{
		{OK: true, Output: "x", Unconfined: true},
		{Error: &maiden.ToolError{Kind: maiden.KindTool, Message: "exit 1"}, Unconfined: true},
	} {
		if got := toolResult(res).Meta[MetaUnconfined]; got != true {
			t.Errorf("%+v: _meta %v", res, toolResult(res).Meta)
		}
	}
	if m := toolResult(maiden.Result{OK: true, Output: "x"}).Meta; m[MetaUnconfined] != nil {
		t.Errorf("a confined result carries %v", m)
	}
}
