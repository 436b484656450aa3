package inbox

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves: nothing waits on the wall clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// clientFrom is a client whose connections come from loopback address
// local (Linux routes all of 127/8 to lo), so that one test can be many
// sources.
func clientFrom(t *testing.T, srv *httptest.Server, local string) *client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Jar: jar, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &client{t: t, base: srv.URL, c: hc, site: "same-origin"}
}

// TestLoginRateLimited: failed inbox logins are bounded per source and for
// all sources together (a guesser rotating addresses), answered 429 with
// Retry-After and words that say so, before the token is checked (the
// right token too: no oracle); the bound lifts as the buckets refill, so
// nobody is locked out for good, and a source that has logged in before
// passes the global bound that other addresses exhausted.
func TestLoginRateLimited(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	srv := httptest.NewServer(build(newFake(), &Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		LoginBurst: 3, LoginEvery: time.Minute, GlobalLoginBurst: 5, GlobalLoginEvery: time.Minute}, clock.now))
	t.Cleanup(srv.Close)
	limited := func(what string, resp *http.Response, body, words string, wantRetry int) {
		t.Helper()
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, words) {
			t.Fatalf("%s: %d, want 429 saying %q\n%s", what, resp.StatusCode, words, body)
		}
		if got, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || got != wantRetry {
			t.Fatalf("%s: Retry-After %q, want %d", what, resp.Header.Get("Retry-After"), wantRetry)
		}
	}

	// The operator logs in from 127.0.0.1 once: that source is known.
	op := clientFrom(t, srv, "127.0.0.1")
	if resp, body := op.login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's login: %d\n%s", resp.StatusCode, body)
	}

	// Per source: three failures, then 429, the right token included.
	a := clientFrom(t, srv, "127.0.0.2")
	for i := range 3 {
		if resp, body := a.login(agentToken); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("failure %d: %d, want 403\n%s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := a.login(agentToken)
	limited("a fourth failure from one source", resp, body, "from your address", 60)
	resp, body = a.login(operatorToken)
	limited("the right token from a source past its bound", resp, body, "from your address", 60)

	// Globally: two more failures from another source use up the five;
	// a third source is refused before its first try.
	b := clientFrom(t, srv, "127.0.0.3")
	for range 2 {
		if resp, body := b.login(agentToken); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a second source's failure: %d\n%s", resp.StatusCode, body)
		}
	}
	c := clientFrom(t, srv, "127.0.0.4")
	resp, body = c.login(operatorToken)
	limited("a new source once the global bound is spent", resp, body, "from many addresses", 60)
	// The operator's known source is not locked out by the others.
	if resp, body := clientFrom(t, srv, "127.0.0.1").login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's known source, global bound spent: %d\n%s", resp.StatusCode, body)
	}

	// The buckets refill: a minute on, one more try each.
	clock.add(time.Minute)
	if resp, body := c.login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a new source after the global refill: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := a.login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the limited source after its refill, right token: %d\n%s", resp.StatusCode, body)
	}
}

// TestLoginLimiterBounded: an attacker rotating source addresses does not
// grow the limiter's tables without bound, and once they are full of
// draining buckets a new source is still held to the global bound.
func TestLoginLimiterBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newLoginLimiter(rate{3, time.Minute}, rate{1 << 30, time.Nanosecond}, clock.now)
	for i := range 3 * maxSources {
		src := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.%d/32", i>>16&255, i>>8&255, i&255))
		if retry, _ := l.take(src); retry != 0 {
			t.Fatalf("source %d's first try refused", i)
		}
		l.refund(src, i%2 == 0) // half of them log in: the trusted table fills too
	}
	if len(l.sources) > maxSources || len(l.trusted) > maxTrusted {
		t.Fatalf("tables grew to %d sources, %d trusted (bounds %d, %d)", len(l.sources), len(l.trusted), maxSources, maxTrusted)
	}
	// Full of draining buckets: a source not in the table still takes
	// from the global bucket, which bounds it.
	l = newLoginLimiter(rate{3, time.Minute}, rate{maxSources + 1, time.Hour}, clock.now)
	for i := range maxSources {
		l.take(netip.MustParsePrefix(fmt.Sprintf("10.0.%d.%d/32", i>>8&255, i&255)))
	}
	extra := netip.MustParsePrefix("192.0.2.1/32")
	if retry, _ := l.take(extra); retry != 0 {
		t.Fatal("the last global token was refused")
	}
	if retry, global := l.take(extra); retry == 0 || !global {
		t.Fatalf("an untracked source past the global bound: retry %v, global %v", retry, global)
	}
	if len(l.sources) > maxSources {
		t.Fatalf("%d sources kept", len(l.sources))
	}
}

// TestSourceOf: an IPv6 source is its /64 (one host holds a whole one).
func TestSourceOf(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.2:5555":           "127.0.0.2/32",
		"[2001:db8:1:2:aa::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bb::9]:1":   "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":    "192.0.2.7/32",
		"[fe80::1%eth0]:80":        "fe80::/64",
		"not an address":           "invalid Prefix",
	} {
		if got := sourceOf(in).String(); got != want {
			t.Errorf("sourceOf(%q) = %s, want %s", in, got, want)
		}
	}
}
