package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestImportRestartingAnswersUnavailable (issue 22, finding 12): while an
// imported server is down and restarting (testdata/mcpstdio killed, and
// failing to start again while its MCPSTDIO_DOWN file exists), its tools
// stay listed to the MCP client and a call answers as a failed result of
// kind unavailable naming the server, not the JSON-RPC error "unknown
// tool" (-32602); once it is back, the call runs.
func TestImportRestartingAnswersUnavailable(t *testing.T) {
	t.Parallel()
	bin := testkit.Binary(t, "./testdata/mcpstdio")
	flags := t.TempDir()
	down := filepath.Join(flags, "down")
	path := filepath.Join(t.TempDir(), "agent.toml")
	body := "version = 1\n[mcp.shop]\naccept_new_tools = true\ncommand = [\"" + bin + "\"]\nenv = [\"MCPSTDIO_DOWN=" + down + "\"]\nread_paths = [\"" + flags + "\"]\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	s := New(h, &Options{ProgressEvery: time.Minute})
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The server's own change callback (Sync), and a signal for the test.
	changed := make(chan struct{}, 64)
	h.OnToolsChanged(func() {
		if _, err := s.Sync(ctx); err != nil && !errors.Is(err, maiden.ErrClosed) {
			t.Error(err)
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	wait := func(what string, done func() bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for !done() {
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("never: %s", what)
			}
		}
	}
	e := &env{t: t, cfg: path, host: h, server: s}
	cs := e.client(nil)
	call := func(name string) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	}
	res, err := call("shop.pid")
	if err != nil || res.IsError {
		t.Fatalf("shop.pid: %v %+v", err, res)
	}
	var out struct{ PID int }
	if err := json.Unmarshal([]byte(text(res)), &out); err != nil || out.PID <= 0 {
		t.Fatalf("shop.pid: %q", text(res))
	}

	// Down, and failing to come back.
	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(out.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait("the host sees the upstream down", func() bool { return toolDown(t, h, "shop.pid") })
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, tool := range lt.Tools {
		listed = listed || tool.Name == "shop.pid"
	}
	if !listed {
		t.Errorf("shop.pid is no longer listed while its server restarts: %+v", lt.Tools)
	}
	res, err = call("shop.pid")
	if err != nil {
		t.Fatalf("a call while the server restarts: %v (want a result of kind unavailable)", err)
	}
	if !res.IsError || !strings.HasPrefix(text(res), "unavailable") || !strings.Contains(text(res), `"shop"`) {
		t.Fatalf("a call while the server restarts: %+v %q", res, text(res))
	}

	// Back.
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	wait("the server answers again", func() bool { return !toolDown(t, h, "shop.pid") })
	if res, err = call("shop.pid"); err != nil || res.IsError {
		t.Fatalf("after the server could start again: %v %+v", err, res)
	}
}

func toolDown(t *testing.T, h *maiden.Host, name string) bool {
	t.Helper()
	infos, err := h.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.Name == name {
			return i.Error != nil && i.Error.Kind == maiden.KindUnavailable
		}
	}
	return false
}
