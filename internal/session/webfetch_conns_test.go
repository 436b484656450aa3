package session

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestWebFetchLeavesNoConnectionOpen (hostile review of web_fetch): each
// web_fetch call compiles its binding's policy, and with it a connection
// pool nothing else can use. A connection left idle in it held a socket
// and two goroutines for the pool's idle timeout (30 s) after the call: an
// agent making calls in a loop held one per call. The server on loopback
// counts the connections still open once the calls have returned.
func TestWebFetchLeavesNoConnectionOpen(t *testing.T) {
	var open atomic.Int64
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }), "api.example.com")
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	u, _ := url.Parse(srv.URL)
	file := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(file, []byte(`version = 1
[agents.a]
grants = ["tool:invoke web_fetch --..."]
[agents.a.boundary]
network = true
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [`+u.Port()+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	w := WebFetch{
		Gate:      egress.New(&egress.Options{Resolver: testkit.Loopback("api.example.com")}),
		Materials: &Materials{},
		Lookup:    func(string) (string, bool) { return "", false },
	}
	s := store.Session{ID: "s1", Agent: "a", Boundary: boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Network: true}}
	const calls = 5
	for range calls {
		if _, terr := w.Run(context.Background(), cfg, "a", s, nil, []byte(`{"url":"https://api.example.com:`+u.Port()+`/"}`)); terr != nil {
			t.Fatal(terr)
		}
	}
	deadline := time.Now().Add(10 * time.Second) // the green path ends at the last close
	for open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := open.Load(); n != 0 {
		t.Fatalf("%d of %d calls' connections still open 10 s after the calls returned; want 0", n, calls)
	}
}
