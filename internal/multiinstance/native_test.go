package multiinstance

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// envNative makes this test binary a native Go MCP server instead of
// running tests (BenchmarkNativeFloor).
const envNative = "MAIDEN_MULTI_NATIVE_SERVER"

// serveNative serves an echo tool with the Go MCP SDK's streamable HTTP
// handler, stateless, on a free loopback port, says where on stderr as maiden serve
// does ("at http://…/mcp"), and returns on SIGTERM.
func serveNative() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "native", Version: "0"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoIn, error) {
		return nil, in, nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	// Stateless, as maiden serves a client of the current protocol (the
	// Go SDK's): mcpserver/http.go.
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	srv := &http.Server{Handler: mux}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	fmt.Fprintf(os.Stderr, "native MCP server at http://%s/mcp\n", l.Addr())
	if err := srv.Serve(l); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startNative runs this test binary as a native server (serveNative).
func startNative(tb testing.TB, name string) *instance {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envNative+"=1")
	return startInstance(tb, name, cmd)
}
