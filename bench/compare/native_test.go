package compare

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// nativeRow is the Go tool's own code (the SDK tool that maiden-go runs
// sandboxed) as a plain function call: the input and the output are
// converted between string and []byte as they cross, nothing else.
func nativeRow(tb testing.TB, w *workload, g int) *run {
	op := func() error {
		out, err := w.native.Execute(ctxBG, []byte(w.input))
		if err != nil {
			return err
		}
		return check(string(out), w.want)
	}
	if err := op(); err != nil {
		tb.Fatal(err)
	}
	return &run{ops: repeat(g, op)}
}

// echoIn and jsonIn are the typed inputs of the native tools.
type echoIn struct {
	Message string `json:"message"`
}

type jsonIn struct {
	Target string `json:"target"`
}

// echoTool and jsonTool declare the native tools; the input schemas are the
// maiden tools' (AddTool would infer ones that refuse the json workload's
// other members). echoWork and jsonWork are their work, shared by the
// native server and by the child of the native-mcp-stdio-child row.
var (
	echoTool = &mcp.Tool{
		Name:        "echo",
		Description: "Echoes its input back unchanged.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
	}
	jsonTool = &mcp.Tool{
		Name:        "json",
		Description: `Returns the top-level "target" string of a JSON object, as JSON text.`,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}`),
	}
)

func echoWork(in echoIn) echoIn { return in }
func jsonWork(in jsonIn) string { return in.Target }

// nativeServer is what a Go developer writes without a sandbox: the
// workloads as typed tools of the official Go SDK (mcp.AddTool), which
// validates the arguments against the input schema, decodes them into the
// input type and encodes the output as text and structured content, as
// maiden does for a tool's result.
func nativeServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "native", Version: "0"}, nil)
	mcp.AddTool(s, echoTool, typed(echoWork))
	mcp.AddTool(s, jsonTool, typed(jsonWork))
	return s
}

// typed is work as a typed tool handler of the SDK.
func typed[In, Out any](work func(In) Out) mcp.ToolHandlerFor[In, Out] {
	return func(_ context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		return nil, work(in), nil
	}
}

// serveNativeStdio is the native MCP server over stdio; TestMain runs it
// when the native-mcp-stdio row starts this test binary with
// COMPARE_SERVE=native-mcp.
func serveNativeStdio() int {
	if err := nativeServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// nativeStdioRow is a tools/call round trip to the native server over
// stdio (this test binary, started by the SDK's CommandTransport).
// peak-rss-MiB is the server's.
func nativeStdioRow(tb testing.TB, w *workload, g int) *run {
	s := shared(tb, "native-stdio", func() (stdioServer, func()) { return startNativeStdio(tb, "native-mcp") })
	return &run{ops: mcpOps(tb, s.cs, w, g), pid: s.pid}
}

// stdioServer is a client session with this test binary as an MCP server
// over stdio, and the server's pid.
type stdioServer struct {
	cs  *mcp.ClientSession
	pid int
}

// startNativeStdio starts this test binary as the server TestMain runs for
// COMPARE_SERVE=serve and connects to it; the func closes the session,
// which waits for the server to exit.
func startNativeStdio(tb testing.TB, serve string) (stdioServer, func()) {
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "COMPARE_SERVE="+serve)
	cs := connect(tb, &mcp.CommandTransport{Command: cmd})
	return stdioServer{cs, cmd.Process.Pid}, func() { cs.Close() }
}

// nativeHTTPRow is a tools/call round trip to the native server over
// streamable HTTP (the SDK's handler, default options, as maiden's) on a
// loopback httptest server.
func nativeHTTPRow(tb testing.TB, w *workload, g int) *run {
	cs := shared(tb, "native-http", func() (*mcp.ClientSession, func()) {
		srv := nativeServer()
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		cs := connect(tb, &mcp.StreamableClientTransport{Endpoint: hs.URL})
		return cs, func() {
			cs.Close()
			hs.Close()
		}
	})
	return &run{ops: mcpOps(tb, cs, w, g)}
}
