package egress_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/testkit"
)

// A session opened with OpenEach gives every CONNECT its own Authorizer
// and reports each outcome once: the host's audit writes one record per
// tunnel with the decisions that Authorizer noted, so a CONNECT must never
// be decided by another request's Authorizer, go unreported, or be
// reported twice — also when a CLI opens tunnels concurrently.
func TestConnectProxyOpenEachReportsEveryConnect(t *testing.T) {
	lport := holdingListener(t)
	e := newProxyEnv(t, testkit.Loopback("api.example.com", "card.example.com"))
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

	type pair struct {
		asked   []string // the targets this request's Authorizer was asked about
		reports []egress.Tunnel
	}
	var mu sync.Mutex
	var pairs []*pair
	s, err := e.proxy.OpenEach(policy(t, egress.Rules{
		Hosts: []string{"api.example.com", "card.example.com"}, Ports: []uint16{uint16(lport)}, AllowCIDRs: loopback,
	}), "alice", func() (egress.Authorizer, func(egress.Tunnel)) {
		p := &pair{}
		mu.Lock()
		pairs = append(pairs, p)
		mu.Unlock()
		return func(host string, port int, cred string) error {
				mu.Lock()
				p.asked = append(p.asked, host+":"+strconv.Itoa(port))
				mu.Unlock()
				if host == "card.example.com" {
					return &egress.Refusal{Rule: "network-card", Reason: "no card grants network:connect " + host}
				}
				return nil
			}, func(tn egress.Tunnel) {
				mu.Lock()
				p.reports = append(p.reports, tn)
				mu.Unlock()
			}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	target := func(h string) string { return h + ":" + strconv.Itoa(lport) }

	cases := []struct {
		name, target string
		status       int
		want         egress.Tunnel
		asked        int // how many times the request's own Authorizer was asked
	}{
		{"off the list: refused before the cards", target("evil.example.com"), 403,
			egress.Tunnel{Host: "evil.example.com", Port: lport, Rule: egress.RuleAllowlist}, 0},
		{"refused by the cards", target("card.example.com"), 403,
			egress.Tunnel{Host: "card.example.com", Port: lport, Rule: "network-card"}, 1},
		{"allowed", target("api.example.com"), 200,
			egress.Tunnel{Host: "api.example.com", Port: lport, Allowed: true, Rule: egress.RuleAllowed}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			before := len(pairs)
			mu.Unlock()
			if status, err := connectStatus(e.proxy.Port(), c.target, basic(s)); err != nil || status != c.status {
				t.Fatalf("status %d (%v), want %d", status, err, c.status)
			}
			// A refusal is reported before its 403; an allowed tunnel once
			// its ClientHello is decided.
			waitReports(t, &mu, func() bool { return len(pairs) == before+1 && len(pairs[before].reports) > 0 })
			mu.Lock()
			defer mu.Unlock()
			if len(pairs) != before+1 {
				t.Fatalf("each was called %d times for one CONNECT, want 1", len(pairs)-before)
			}
			p := pairs[len(pairs)-1]
			if len(p.reports) != 1 {
				t.Fatalf("the CONNECT was reported %d times, want once: %+v", len(p.reports), p.reports)
			}
			got := p.reports[0]
			if got.Reason == "" && !got.Allowed {
				t.Fatalf("a refusal reported without its reason: %+v", got)
			}
			got.Reason = ""
			if got != c.want {
				t.Fatalf("reported %+v, want %+v", got, c.want)
			}
			if len(p.asked) != c.asked {
				t.Fatalf("its Authorizer was asked %v, want %d time(s)", p.asked, c.asked)
			}
		})
	}

	// Concurrent CONNECTs: each decided by its own Authorizer and reported
	// once, on that request's pair.
	mu.Lock()
	pairs = nil
	mu.Unlock()
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := "api.example.com"
			if i%2 == 1 {
				h = "card.example.com"
			}
			if _, err := connectStatus(e.proxy.Port(), target(h), basic(s)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitReports(t, &mu, func() bool {
		for _, p := range pairs {
			if len(p.reports) == 0 {
				return false
			}
		}
		return len(pairs) == n
	})
	mu.Lock()
	defer mu.Unlock()
	if len(pairs) != n {
		t.Fatalf("each was called %d times for %d CONNECTs", len(pairs), n)
	}
	for i, p := range pairs {
		if len(p.asked) != 1 || len(p.reports) != 1 {
			t.Fatalf("pair %d: asked %v, reported %+v: want one of each", i, p.asked, p.reports)
		}
		if want := p.reports[0].Host + ":" + strconv.Itoa(lport); p.asked[0] != want {
			t.Fatalf("pair %d decided %s but reported %s", i, p.asked[0], want)
		}
		if p.reports[0].Allowed != (p.reports[0].Host == "api.example.com") {
			t.Fatalf("pair %d: %+v", i, p.reports[0])
		}
	}
}

// holdingListener accepts connections on loopback and holds each until its
// peer closes it: a server that never ends a tunnel first, so an allowed
// tunnel's report is decided by its ClientHello alone.
func holdingListener(t *testing.T) (port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitReports waits (at most 10 s) until done, read under mu, holds: an
// allowed tunnel is reported once its ClientHello is decided, after the 200
// its client saw.
func waitReports(t *testing.T, mu *sync.Mutex, done func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		ok := done()
		mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatal("the proxy did not report every CONNECT within 10 s")
		}
	}
}

// connectStatus is rawConnect for another goroutine than the test's: it
// returns its error instead of failing the test. Once a tunnel is open it
// starts a TLS handshake naming the target's host, which the proxy checks
// (the listener behind it speaks no TLS, so the handshake itself fails).
func connectStatus(proxyPort int, target, auth string) (int, error) {
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(proxyPort))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+auth+"\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		host, _, _ := net.SplitHostPort(target)
		// The ClientHello is written whatever the load (a deadline on the
		// write failed it under make test's, and the proxy then reported
		// a tunnel that did not start with one); only the wait for an
		// answer the holding server never sends is bounded.
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_ = tls.Client(c, &tls.Config{ServerName: host, InsecureSkipVerify: true}).Handshake()
	}
	return resp.StatusCode, nil
}
