package egress_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestTunnelThatCannotPaySendsNothing guards the ClientHello's payment: a
// session whose tunnels pay before they send (SetPay) pays for the
// ClientHello too, the first bytes a server gets, and a tunnel that cannot
// pay for it is closed before the server gets a byte, the refusal kept as
// the session's Stopped. The server here is a plain loopback listener that
// counts what reaches it.
func TestTunnelThatCannotPaySendsNothing(t *testing.T) {
	t.Parallel()
	s, got, tunnelTo := countedTunnel(t)
	var mu sync.Mutex
	var asked []int64
	s.SetPay(func(n int64) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, n)
		return errors.New("budget-exhausted: nothing left (test)")
	})

	c, tc0 := tunnelTo(5 * time.Second)
	tc := tls.Client(tc0, &tls.Config{ServerName: "api.example.com", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Fatal("a TLS handshake through a tunnel that cannot pay for its ClientHello succeeded")
	}
	c.Close()
	select {
	case n := <-got:
		if n != 0 {
			t.Fatalf("the server received %d bytes through a tunnel that could not pay for its ClientHello; want none", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server's connection was never closed")
	}
	if why := s.Stopped(); why != "budget-exhausted: nothing left (test)" {
		t.Fatalf("Stopped: %q; want the payment's refusal", why)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != 64<<10 || asked[1] <= 0 || asked[1] >= 64<<10 {
		t.Fatalf("payments asked %v; want a block of 65536, then exactly the ClientHello's bytes", asked)
	}
}

// countedTunnel is a proxy session allowed to a loopback listener (as
// api.example.com) that counts what reaches it, sent on got when the
// connection ends; tunnelTo opens a CONNECT tunnel through the session to
// it and returns the raw connection (its deadline d from now) and the
// tunnel's reading end. The caller sets the session's SetPay.
func countedTunnel(t *testing.T) (s *egress.ProxySession, got <-chan int64, tunnelTo func(d time.Duration) (net.Conn, net.Conn)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	counted := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		counted <- n
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	e := newProxyEnv(t, testkit.Loopback("api.example.com"))
	s, err = e.proxy.Open(policy(t, egress.Rules{
		Hosts: []string{"api.example.com"}, Ports: []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}), nil, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, counted, func(d time.Duration) (net.Conn, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(e.proxy.Port()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(d))
		target := "api.example.com:" + strconv.Itoa(port)
		if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+basic(s)+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c, &bufConn{Conn: c, r: br}
	}
}

// bufConn reads what a bufio.Reader over Conn kept first.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// helloThenWrite is a client conn whose first Write (a ClientHello) is
// reported on hello.
type helloThenWrite struct {
	net.Conn
	hello chan struct{}
	once  sync.Once
}

func (c *helloThenWrite) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.once.Do(func() { close(c.hello) })
	return n, err
}

// TestTunnelThatCannotPayIsClosedBothWays guards the close of a tunnel
// whose write could not be paid for: both its ends are closed at once, so
// the server is not left holding half a request (until the call's end
// closes the session) and the CLI's connection ends; what reaches the
// server is what was paid, byte for byte. The ClientHello is paid
// (exactly, a block of 64 KiB refused), nothing after it can be.
func TestTunnelThatCannotPayIsClosedBothWays(t *testing.T) {
	t.Parallel()
	s, got, tunnelTo := countedTunnel(t)
	var paidOnce atomic.Bool
	var paid atomic.Int64
	s.SetPay(func(n int64) error {
		if n > 4096 || paidOnce.Swap(true) {
			return errors.New("budget-exhausted: the ClientHello only (test)")
		}
		paid.Store(n)
		return nil
	})
	c, tc0 := tunnelTo(20 * time.Second)
	hc := &helloThenWrite{Conn: tc0, hello: make(chan struct{})}
	handshake := make(chan error, 1)
	go func() {
		handshake <- tls.Client(hc, &tls.Config{ServerName: "api.example.com", InsecureSkipVerify: true}).Handshake()
	}()
	<-hc.hello
	if _, err := c.Write(make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n <= 0 || n != paid.Load() {
			t.Fatalf("the server received %d bytes, %d paid; want the ClientHello only, every byte of it paid", n, paid.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's side of a tunnel closed for what it could not pay was still open after 10 s")
	}
	select {
	case err := <-handshake:
		if err == nil {
			t.Fatal("the TLS handshake through a tunnel closed for what it could not pay succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the CLI's side of a tunnel closed for what it could not pay was still open after 10 s")
	}
	if why := s.Stopped(); why != "budget-exhausted: the ClientHello only (test)" {
		t.Fatalf("Stopped: %q", why)
	}
}
