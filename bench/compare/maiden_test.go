package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// host is a maiden.Host over agentTOML(w, lang), its tool loaded (the first
// call, which compiles or deserializes the component, is made here, outside
// the samples).
func host(tb testing.TB, w *workload, lang string) *maiden.Host {
	return shared(tb, "host/"+w.name+"/"+lang, func() (*maiden.Host, func()) {
		cfg, err := config.Load(agentTOML(tb, w, lang))
		if err != nil {
			tb.Fatal(err)
		}
		h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: componentsDir(tb)})
		if err != nil {
			tb.Fatal(err)
		}
		if err := hostCall(h, w); err != nil {
			h.Close(context.Background())
			tb.Fatal(err)
		}
		return h, func() { h.Close(context.Background()) }
	})
}

func hostCall(h *maiden.Host, w *workload) error {
	res, err := h.Call(ctxBG, maiden.Call{Tool: w.name, Input: w.input})
	if err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("maiden: %s: %s", res.Error.Kind, res.Error.Message)
	}
	return check(res.Output, w.want)
}

// maidenRow is Host.Call in-process: admission, policy lookup, input JSON
// and schema check, compile-cache lookup, a fresh store and instance, the
// call, log capture and classification. What an embedder pays.
func maidenRow(lang string) func(testing.TB, *workload, int) *run {
	return func(tb testing.TB, w *workload, g int) *run {
		h := host(tb, w, lang)
		return &run{ops: repeat(g, func() error { return hostCall(h, w) })}
	}
}

// noEpochRow is sandbox.Execute on an engine without epoch interruption:
// no deadline can stop the guest. It exists only to measure what epochs
// cost maiden on the CPU workload.
func noEpochRow(tb testing.TB, w *workload, g int) *run {
	sb := shared(tb, "sandbox/noepoch", func() (*sandbox.Sandbox, func()) {
		sb, err := sandbox.New(&sandbox.Options{CacheDir: componentsDir(tb), Engine: &wasmtime.Config{NoEpochInterruption: true}})
		if err != nil {
			tb.Fatal(err)
		}
		return sb, func() { sb.Close() }
	})
	call := sandbox.Call{Path: toolPath(tb, w, "wat"), Limits: sandbox.Limits{Timeout: w.timeout, Memory: memoryLimit}, Input: w.input}
	op := func() error {
		out, err := sb.Execute(ctxBG, call)
		if err != nil {
			return err
		}
		if out.Failure != nil {
			return out.Failure
		}
		return check(out.Output, w.want)
	}
	if err := op(); err != nil { // loads the tool
		tb.Fatal(err)
	}
	return &run{ops: repeat(g, op)}
}

// maidenStdioRow is a tools/call round trip to `maiden serve` over stdio,
// started by the Go SDK's CommandTransport; one session shared by the
// goroutines, as an agent has. peak-rss-MiB is the server's.
func maidenStdioRow(lang, isolation string) func(testing.TB, *workload, int) *run {
	return func(tb testing.TB, w *workload, g int) *run {
		type server struct {
			cs  *mcp.ClientSession
			pid int
		}
		s := shared(tb, "maiden-stdio/"+w.name+"/"+lang+"/"+isolation, func() (server, func()) {
			cmd := exec.Command(maidenBinary(tb), "serve", "-config", agentTOML(tb, w, lang),
				"-cache", componentsDir(tb), "-watch=false", "-isolation", isolation)
			cs := connect(tb, &mcp.CommandTransport{Command: cmd})
			return server{cs, cmd.Process.Pid}, func() { cs.Close() }
		})
		return &run{ops: mcpOps(tb, s.cs, w, g), pid: s.pid}
	}
}

// maidenHTTPRow is a tools/call round trip over streamable HTTP: maiden's
// handler (mcpserver.HTTPHandler, as `maiden serve -http` uses) on a
// loopback httptest server, the client in the same process.
func maidenHTTPRow(lang string) func(testing.TB, *workload, int) *run {
	return func(tb testing.TB, w *workload, g int) *run { return maidenHTTP(tb, w, g, lang) }
}

func maidenHTTP(tb testing.TB, w *workload, g int, lang string) *run {
	cs := shared(tb, "maiden-http/"+w.name+"/"+lang, func() (*mcp.ClientSession, func()) {
		cfg, err := config.Load(agentTOML(tb, w, lang))
		if err != nil {
			tb.Fatal(err)
		}
		h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: componentsDir(tb)})
		if err != nil {
			tb.Fatal(err)
		}
		srv := mcpserver.New(h, nil)
		if problems, err := srv.Sync(ctxBG); err != nil || len(problems) > 0 {
			tb.Fatalf("mcpserver.Sync: %v %v", err, problems)
		}
		hs := httptest.NewServer(srv.HTTPHandler(mcpserver.HTTPOptions{}))
		cs := connect(tb, &mcp.StreamableClientTransport{Endpoint: hs.URL + mcpserver.Path})
		return cs, func() {
			cs.Close()
			hs.Close()
			h.Close(context.Background())
		}
	})
	return &run{ops: mcpOps(tb, cs, w, g)}
}

// connect opens a client session over t.
func connect(tb testing.TB, t mcp.Transport) *mcp.ClientSession {
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-compare", Version: "0"}, nil)
	cs, err := client.Connect(ctxBG, t, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// mcpOps are g operations calling w's tool over cs, the first made once
// here (outside the samples). The arguments are w's input verbatim. Each
// operation has its own CallToolParams: the SDK's CallTool writes the
// request's _meta into them, a data race if goroutines shared them.
func mcpOps(tb testing.TB, cs *mcp.ClientSession, w *workload, g int) []func() error {
	newOp := func() func() error {
		params := &mcp.CallToolParams{Name: w.name, Arguments: json.RawMessage(w.input)}
		return func() error {
			res, err := cs.CallTool(ctxBG, params)
			if err != nil {
				return err
			}
			if len(res.Content) != 1 {
				return fmt.Errorf("%d content items, want 1", len(res.Content))
			}
			text, ok := res.Content[0].(*mcp.TextContent)
			if !ok {
				return fmt.Errorf("content is a %T, want text", res.Content[0])
			}
			if res.IsError {
				return errors.New("tool error: " + text.Text)
			}
			return check(text.Text, w.want)
		}
	}
	ops := make([]func() error, g)
	for i := range ops {
		ops[i] = newOp()
	}
	if err := ops[0](); err != nil {
		tb.Fatal(err)
	}
	return ops
}

// repeat is g copies of op.
func repeat(g int, op func() error) []func() error {
	ops := make([]func() error, g)
	for i := range ops {
		ops[i] = op
	}
	return ops
}
