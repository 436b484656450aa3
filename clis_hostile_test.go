//go:build linux

package maiden_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestWrappedCLIHostileNetwork is issue 22 (findings 1-3) through the Host:
// a network-enabled wrapped CLI (http_allow) built from
// testdata/hostilecli tries TCP Fast Open to a loopback port that is not
// the proxy's (IPv4 and IPv6), listen on an unbound socket, and io_uring.
// Each is refused with the seccomp filter's EPERM, and the target servers
// see no connection.
func TestWrappedCLIHostileNetwork(t *testing.T) {
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
