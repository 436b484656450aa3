package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkStdioFrontEnd is one tools/call of the WAT echo tool over real
// pipes, served by RunStdio in this process (what `maiden serve` does with
// its stdin and stdout), next to the same SDK's own server over the same
// pipes with a native Go echo tool (bench/compare's native-mcp-stdio row)
// and next to Host.Call alone: maiden-stdio minus host-call minus
// native-sdk-stdio is what maiden's front end adds to a call; Host.Call on
// a fresh goroutine and through warmRunners from one (see warm.go). Profile a
// sub-benchmark with -cpuprofile; -benchmem counts the front end's
// allocations.
func BenchmarkStdioFrontEnd(b *testing.B) {
	path := filepath.Join(b.TempDir(), "agent.toml")
	writeAgentTOML(b, path, []toolLine{{"echo", "echo", ""}})
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	const input = `{"message":"hello"}`

	b.Run("host-call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: input})
			if err != nil || !res.OK {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
	// Each call on a goroutine of its own, as the SDK runs a request's
	// handler, and handed to a warm runner from there, as runCall does.
	fresh := func(b *testing.B, call func()) {
		for b.Loop() {
			done := make(chan struct{})
			go func() {
				call()
				close(done)
			}()
			<-done
		}
	}
	hostCall := func() {
		res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: input})
		if err != nil || !res.OK {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.Run("host-call-fresh-goroutine", func(b *testing.B) { fresh(b, hostCall) })
	b.Run("host-call-warm-runner", func(b *testing.B) {
		w := newWarmRunners()
		fresh(b, func() { w.run(hostCall) })
	})
	b.Run("maiden-stdio", func(b *testing.B) {
		srv := New(h, nil)
		if _, err := srv.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		stdioLoop(b, func(ctx context.Context, r *os.File, w *os.File) error { return srv.RunStdio(ctx, r, w) }, input)
	})
	b.Run("native-sdk-stdio", func(b *testing.B) {
		srv := mcp.NewServer(&mcp.Implementation{Name: "native", Version: "0"}, nil)
		type echoIn struct {
			Message string `json:"message"`
		}
		mcp.AddTool(srv, &mcp.Tool{
			Name:        "echo",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
		}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoIn, error) {
			return nil, in, nil
		})
		stdioLoop(b, func(ctx context.Context, r *os.File, w *os.File) error {
			return srv.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
		}, input)
	})
}

// stdioLoop serves over two pipes with serve and calls echo over them with
// the SDK's client, as a desktop agent does a child's stdio.
func stdioLoop(b *testing.B, serve func(ctx context.Context, r, w *os.File) error, input string) {
	b.Helper()
	cr, sw, err := os.Pipe() // server → client
	if err != nil {
		b.Fatal(err)
	}
	sr, cw, err := os.Pipe() // client → server
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, sr, sw) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		cs.Close()
		cw.Close() // the server's EOF
		cancel()
		<-served
		for _, f := range []*os.File{cr, sw, sr} {
			f.Close()
		}
	}()
	params := &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(input)}
	b.ReportAllocs()
	for b.Loop() {
		r, err := cs.CallTool(ctx, params)
		if err != nil || r.IsError || len(r.Content) != 1 {
			b.Fatalf("%v %+v", err, r)
		}
	}
}
