package mcphub

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
)

// closedURL is an MCP URL on a loopback port nothing listens on: the
// upstream is made, never up.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/mcp"
}

// TestHubLifecycle: an upstream is made on first need and kept for the
// same table; a table no longer in force is refused (ErrRetired) and its
// call answered unavailable before anything is sent; Retire takes it out
// of service; after Close nothing is made again.
func TestHubLifecycle(t *testing.T) {
	imp := &config.MCPImport{URL: closedURL(t)}
	var current atomic.Bool
	current.Store(true)
	hub := New(Options{
		Current: func(name string, got *config.MCPImport) bool { return current.Load() && name == "calc" && got == imp },
		Secret:  func(string) (string, bool) { return "", false },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := hub.Get(ctx, "calc", imp)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hub.Get(ctx, "calc", imp)
	if err != nil || a != b || hub.Running() != 1 {
		t.Fatalf("second Get: %p %p %v, %d running; want the same upstream, 1 running", a, b, err, hub.Running())
	}
	if _, err := hub.Get(ctx, "calc", &config.MCPImport{URL: imp.URL}); !errors.Is(err, ErrRetired) {
		t.Errorf("another table than the configuration's: %v, want ErrRetired", err)
	}
	current.Store(false)
	out, err := hub.Call(ctx, Call{Import: "calc", Table: imp, Exposed: "calc.add", Tool: "add", Input: []byte(`{}`), Timeout: time.Second, Redact: func(s string) string { return s }})
	if err != nil || out.Failure == nil || out.Failure.Kind != api.KindUnavailable || !strings.Contains(out.Failure.Message, ErrRetired.Error()) || out.Logs != nil {
		t.Errorf("a call on a retired table: %+v %v, want kind unavailable naming the reload and no logs", out, err)
	}
	hub.Retire(func(string, *config.MCPImport) bool { return false })
	if n := hub.Running(); n != 0 {
		t.Errorf("%d upstreams running after Retire, want 0", n)
	}
	hub.Close()
	current.Store(true)
	if _, err := hub.Get(ctx, "calc", imp); !errors.Is(err, api.ErrClosed) {
		t.Errorf("Get after Close: %v, want api.ErrClosed", err)
	}
	hub.Close() // twice is fine
}
