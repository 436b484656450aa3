package mcpserver

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkRoundTrip measures one tools/call of the tiny WAT echo tool
// (fresh instance per call) end to end, next to the same call made
// in-process with Host.Call: the difference is what MCP and its transport
// cost. bench/run prints the ratios.
func BenchmarkRoundTrip(b *testing.B) {
	path := filepath.Join(b.TempDir(), "agent.toml")
	writeAgentTOML(b, path, []toolLine{{"echo", "echo", ""}})
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: cache})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	srv := New(h, nil)
	if _, err := srv.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := map[string]any{"message": "hi"}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)

	callLoop := func(b *testing.B, cs *mcp.ClientSession) {
		b.Helper()
		params := &mcp.CallToolParams{Name: "echo", Arguments: args}
		b.ResetTimer()
		for b.Loop() {
			r, err := cs.CallTool(ctx, params)
			if err != nil || r.IsError {
				b.Fatalf("%v %+v", err, r)
			}
		}
	}

	b.Run("host-call", func(b *testing.B) {
		for b.Loop() {
			res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
			if err != nil || !res.OK {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
	b.Run("in-memory", func(b *testing.B) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.MCP().Connect(ctx, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ss.Close()
		cs, err := client.Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		callLoop(b, cs)
	})
	b.Run("stdio", func(b *testing.B) {
		cmd := exec.Command(buildMaiden(b), "serve", "-config", path, "-cache", cache, "-watch=false")
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		callLoop(b, cs)
	})
	b.Run("http", func(b *testing.B) {
		hs := httptest.NewServer(srv.HTTPHandler(HTTPOptions{}))
		defer hs.Close()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + Path}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		callLoop(b, cs)
	})
}
