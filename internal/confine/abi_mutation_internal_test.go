//go:build linux

package confine

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// hostileRun runs this test binary confined by Run in the external tests'
// "net" mode (hostileNet's verbs) and returns what it printed.
func hostileRun(t *testing.T, s Spec, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s.Path, s.Args, s.Env = exe, args, []string{"CONFINE_TEST_MODE=net"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, s)
	if err != nil {
		t.Fatalf("Run %q: %v (stderr %q)", args, err, res.Stderr)
	}
	return string(res.Stdout)
}

// pongServer is a loopback TCP server answering "pong", counting
// connections.
func pongServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Write([]byte("pong"))
			c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// TestOlderLandlockABIsConfine: on a kernel of each older Landlock ABI (the
// ruleset built for that ABI, as Run builds it there; this kernel enforces
// it), every right that ABI can withhold is withheld: truncating a
// read-only file (ABI 3), connecting to a port that is not the proxy's
// (ABI 4: Landlock's EACCES, before the network namespace could answer
// ECONNREFUSED), driving a device on a read path (ABI 5), signalling
// maiden (ABI 6). Below ABI 4, a run without network reaches no TCP port:
// seccomp refuses every socket, the only wall there.
func TestOlderLandlockABIsConfine(t *testing.T) {
	kernel, err := landlockABI()
	if err != nil {
		t.Skipf("no Landlock: %v", err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "data")
	if err := os.WriteFile(f, []byte("precious"), 0o666); err != nil {
		t.Fatal(err)
	}
	server, reached := pongServer(t)
	proxy, _ := pongServer(t)
	_, proxyPort, _ := net.SplitHostPort(proxy)
	pp, _ := strconv.Atoi(proxyPort)
	for abi := 1; abi < kernel && abi <= 6; abi++ {
		t.Run("ABI "+strconv.Itoa(abi), func(t *testing.T) {
			withABI(t, abi)
			expect := func(s Spec, want string, args ...string) {
				t.Helper()
				if got := hostileRun(t, s, args...); got != want {
					t.Errorf("ABI %d: %q: %q, want %q", abi, args, got, want)
				}
			}
			ro := Spec{ReadOnly: []string{dir}}
			if abi >= 3 {
				expect(ro, "refused: EACCES", "truncate", f)
				expect(ro, "refused: EACCES", "open-trunc", f)
			}
			if abi >= 4 {
				expect(Spec{ProxyPort: pp}, "refused: EACCES", "tcpconnect", server)
			} else {
				expect(Spec{}, "refused: EACCES", "tcpconnect", server)
			}
			if abi >= 5 {
				expect(Spec{ReadOnly: []string{"/dev/urandom"}}, "refused: EACCES", "ioctl-entcnt", "/dev/urandom")
			}
			if abi >= 6 {
				expect(Spec{}, "refused: EPERM", "signal", strconv.Itoa(os.Getpid()))
			}
		})
	}
	if b, _ := os.ReadFile(f); string(b) != "precious" {
		t.Errorf("the read-only file holds %q", b)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the server was reached %d times", n)
	}
}
