package mcphub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests of this file were written in the eighth mutation pass
// (docs/security-tests.md): each kills a planted bug the package's tests
// let through, by asserting the refusal the bug took away.

// namedServer is an SDK server on loopback whose tool "whoami" answers
// name.
func namedServer(t *testing.T, name string) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "says which server this is"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return ts.URL
}

func identity(s string) string { return s }

// TestChangedTableGetsANewUpstream: a reload that changes an import's
// table (here its URL; as well its credential, command, paths) has the
// next call made on an upstream of the new table, never on the one the old
// table started.
func TestChangedTableGetsANewUpstream(t *testing.T) {
	oldImp := &config.MCPImport{URL: namedServer(t, "old")}
	newImp := &config.MCPImport{URL: namedServer(t, "new")}
	var mu sync.Mutex
	inForce := oldImp
	hub := New(Options{
		Current: func(_ string, got *config.MCPImport) bool { mu.Lock(); defer mu.Unlock(); return got == inForce },
		Secret:  func(string) (string, bool) { return "", false },
	})
	t.Cleanup(hub.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(imp *config.MCPImport) Outcome {
		t.Helper()
		out, err := hub.Call(ctx, Call{Import: "srv", Table: imp, Exposed: "srv.whoami", Tool: "whoami", Timeout: 10 * time.Second, Redact: identity})
		if err != nil || out.Failure != nil {
			t.Fatalf("call: %+v %v", out.Failure, err)
		}
		return out
	}
	if out := call(oldImp); out.Output != "old" {
		t.Fatalf("under the old table: %q, want old", out.Output)
	}
	mu.Lock()
	inForce = newImp
	mu.Unlock()
	if out := call(newImp); out.Output != "new" {
		t.Errorf("a call under the changed table (url %s) reached %q; want the new table's server", newImp.URL, out.Output)
	}
}

// TestRetiredIdleUpstreamIsClosed: an import a reload removed, with no
// call running on it, is closed at once (its process stopped), not kept
// until the hub closes.
func TestRetiredIdleUpstreamIsClosed(t *testing.T) {
	imp := &config.MCPImport{URL: namedServer(t, "gone")}
	hub := New(Options{
		Current: func(_ string, got *config.MCPImport) bool { return got == imp },
		Secret:  func(string) (string, bool) { return "", false },
	})
	t.Cleanup(hub.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := hub.Get(ctx, "gone", imp)
	if err != nil {
		t.Fatal(err)
	}
	hub.Retire(func(string, *config.MCPImport) bool { return false })
	bound := time.Now().Add(testkit.Slack(t, 10*time.Second))
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := up.Call(cctx, "whoami", nil, nil, nil)
		ccancel()
		if errors.Is(err, api.ErrClosed) {
			return
		}
		if time.Now().After(bound) {
			t.Fatalf("the retired upstream, no call running on it, is still open: a call on it answered (error %v); want api.ErrClosed", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFailedProbeRefusesAConfinedStdioServer: a stdio server is started
// only when the confinement probe holds (or its table says unconfined).
func TestFailedProbeRefusesAConfinedStdioServer(t *testing.T) {
	imp := &config.MCPImport{Command: []string{"/bin/cat"}}
	hub := New(Options{
		Current:     func(_ string, got *config.MCPImport) bool { return got == imp },
		Secret:      func(string) (string, bool) { return "", false },
		Confinement: func(context.Context) error { return errors.New("landlock is not available") },
	})
	t.Cleanup(hub.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := hub.Get(ctx, "cat", imp)
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Down(); err == nil || !strings.Contains(err.Error(), "confinement is not in force here (landlock is not available)") {
		t.Errorf("a confined stdio server with the probe failing: down %v; want it not started, naming the failed probe", err)
	}
}

// TestProtocolErrorRedactedAndCut: an upstream's JSON-RPC error answering
// tools/call (not a tool's result) reaches the agent redacted, then cut
// to MaxOutputBytes.
func TestProtocolErrorRedactedAndCut(t *testing.T) {
	const secret = "Pq4-protocol-error-credential"
	srv := mcp.NewServer(&mcp.Implementation{Name: "rpcerr", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "x", Description: "never reached"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			return nil, struct{}{}, nil
		})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				return nil, &jsonrpc.Error{Code: -32000, Message: "refused for " + secret + " " + strings.Repeat("y", 2<<20)}
			}
			return next(ctx, method, req)
		}
	})
	hub, imp := hubOver(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := hub.Call(ctx, Call{Import: "rpcerr", Table: imp, Exposed: "rpcerr.x", Tool: "x", Timeout: 20 * time.Second,
		Redact: func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED:TOKEN]") }})
	if err != nil || out.Failure == nil || out.Failure.Kind != api.KindTool {
		t.Fatalf("an upstream's protocol error: %+v %v; want kind tool", out.Failure, err)
	}
	msg := out.Failure.Message
	if !strings.Contains(msg, "[REDACTED:TOKEN]") || strings.Contains(msg, secret) {
		t.Errorf("the protocol error the agent gets (%.80q…) is not redacted", msg)
	}
	if len(msg) > MaxOutputBytes {
		t.Errorf("the protocol error the agent gets is %d bytes; want at most %d (MaxOutputBytes)", len(msg), MaxOutputBytes)
	}
}

// TestOutputLimitIsExact: an answer of exactly MaxOutputBytes is passed
// on; one byte more is refused naming the limit.
func TestOutputLimitIsExact(t *testing.T) {
	type size struct {
		N int `json:"n"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "sized", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "sized", Description: "answers n bytes"},
		func(_ context.Context, _ *mcp.CallToolRequest, in size) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("z", in.N)}}}, nil, nil
		})
	hub, imp := hubOver(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range []int{MaxOutputBytes, MaxOutputBytes + 1} {
		out, err := hub.Call(ctx, Call{Import: "sized", Table: imp, Exposed: "sized.sized", Tool: "sized", Input: fmt.Appendf(nil, `{"n":%d}`, n),
			Timeout: 20 * time.Second, Redact: identity})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case n == MaxOutputBytes && (out.Failure != nil || len(out.Output) != n):
			t.Errorf("an answer of exactly %d bytes: %+v, %d bytes passed on; want it whole", n, out.Failure, len(out.Output))
		case n > MaxOutputBytes && (out.Failure == nil || !strings.Contains(out.Failure.Message, fmt.Sprintf("over the %d-byte output limit", MaxOutputBytes))):
			t.Errorf("an answer of %d bytes: %d bytes passed on (failure %+v); want it refused naming the %d-byte limit", n, len(out.Output), out.Failure, MaxOutputBytes)
		}
	}
}

// TestRetiredUpstreamKeptForItsCalls: a retired upstream is closed once
// the last call running on it returns, not when the first of several
// does.
func TestRetiredUpstreamKeptForItsCalls(t *testing.T) {
	imp := &config.MCPImport{URL: namedServer(t, "busy")}
	hub := New(Options{
		Current: func(_ string, got *config.MCPImport) bool { return got == imp },
		Secret:  func(string) (string, bool) { return "", false },
	})
	t.Cleanup(hub.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, release1, err := hub.Acquire(ctx, "busy", imp)
	if err != nil {
		t.Fatal(err)
	}
	up, release2, err := hub.Acquire(ctx, "busy", imp)
	if err != nil {
		t.Fatal(err)
	}
	hub.mu.Lock()
	e := hub.byName["busy"]
	hub.mu.Unlock()
	hub.Retire(func(string, *config.MCPImport) bool { return false })
	release1()
	select {
	case <-e.drained:
		t.Fatal("the retired upstream was let go with a call still running on it (2 acquired, 1 released)")
	default:
	}
	if res, err := up.Call(ctx, "whoami", nil, nil, nil); err != nil || res.Text != "busy" {
		t.Errorf("the call still running on the retired upstream: %+v %v; want it answered", res, err)
	}
	release2()
	<-e.drained
}
