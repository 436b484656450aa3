package inbox

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The login limiter's buckets, its tables and the options that shape
// them, written when planted bugs in them left the package's own suite green
// (docs/security-tests.md, "Fourth pass: the inbox and mcpserver's
// authentication"): each test fails with one of those bugs.

// TestLoginBucketsHoldAtMostTheirBurst: a bucket refills up to its burst
// and no further, however long nobody tried: after an hour of quiet a
// source may fail its burst of logins and all sources together theirs,
// then they are refused, as at the start.
func TestLoginBucketsHoldAtMostTheirBurst(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newLoginLimiter(rate{3, time.Minute}, rate{5, time.Minute}, clock.now)
	src := netip.MustParsePrefix("192.0.2.1/32")
	if retry, _ := l.take(src); retry != 0 {
		t.Fatal("the first try refused")
	}
	clock.add(time.Hour)
	for i := range 3 {
		if retry, _ := l.take(src); retry != 0 {
			t.Fatalf("try %d after an hour of quiet refused", i+1)
		}
	}
	if retry, global := l.take(src); retry == 0 || global {
		t.Fatalf("a fourth try within the source's burst of 3 after an hour of quiet: retry %v, global %v; want refused by the source's bound", retry, global)
	}
	// The global bucket, full again after another hour: five sources' tries, then none.
	clock.add(time.Hour)
	for i := range 5 {
		if retry, _ := l.take(netip.MustParsePrefix(fmt.Sprintf("198.51.100.%d/32", i))); retry != 0 {
			t.Fatalf("source %d's try after an hour of quiet refused", i)
		}
	}
	if retry, global := l.take(netip.MustParsePrefix("198.51.100.99/32")); retry == 0 || !global {
		t.Fatalf("a sixth source's try within the global burst of 5 after an hour of quiet: retry %v, global %v; want refused by the global bound", retry, global)
	}
}

// TestLoginLimiterFullTableStillBoundsKnownSources: a source already in
// the limiter's table keeps its bucket when the table is full (of sources
// still draining), so it is still refused past its burst: filling the
// table from other addresses does not lift the bound of one it holds.
func TestLoginLimiterFullTableStillBoundsKnownSources(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newLoginLimiter(rate{2, time.Hour}, rate{1 << 30, time.Nanosecond}, clock.now)
	src := netip.MustParsePrefix("192.0.2.1/32")
	l.take(src)
	for i := 0; len(l.sources) < maxSources; i++ {
		l.take(netip.MustParsePrefix(fmt.Sprintf("10.0.%d.%d/32", i>>8&255, i&255)))
	}
	if retry, _ := l.take(src); retry != 0 {
		t.Fatal("the known source's second try (of a burst of 2) refused")
	}
	if retry, global := l.take(src); retry == 0 || global {
		t.Fatalf("the known source's third try, table full: retry %v, global %v; want refused by its own bound", retry, global)
	}
}

// TestLoginLimiterDropsRefilledBuckets: a full table drops the buckets
// that have refilled (they hold what a new source's would) to make room,
// so a new source is tracked and held to its own bound, not only to the
// global one.
func TestLoginLimiterDropsRefilledBuckets(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newLoginLimiter(rate{3, time.Minute}, rate{1 << 30, time.Nanosecond}, clock.now)
	for i := range maxSources {
		l.take(netip.MustParsePrefix(fmt.Sprintf("10.0.%d.%d/32", i>>8&255, i&255)))
	}
	clock.add(time.Minute) // each has its one token back: full
	src := netip.MustParsePrefix("192.0.2.1/32")
	for i := range 3 {
		if retry, _ := l.take(src); retry != 0 {
			t.Fatalf("the new source's try %d refused", i+1)
		}
	}
	if retry, global := l.take(src); retry == 0 || global {
		t.Fatalf("the new source's fourth try (burst 3), the table full of refilled buckets: retry %v, global %v; want refused by its own bound", retry, global)
	}
	if len(l.sources) > maxSources {
		t.Fatalf("%d sources kept, bound %d", len(l.sources), maxSources)
	}
}

// TestLoginRateHalfSetIsTheDefault: a rate given by half (a burst without
// its refill period, or the period alone) is the default rate whole: never
// a bucket that refills at once (no bound at all) nor one of no tokens
// (every login refused, the right token included).
func TestLoginRateHalfSetIsTheDefault(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	serve := func(o *Options, clock *fakeClock) *httptest.Server {
		o.Logger = logger
		srv := httptest.NewServer(build(newFake(), o, clock.now))
		t.Cleanup(srv.Close)
		return srv
	}
	limited := func(resp *http.Response, body, words string) bool {
		return resp.StatusCode == http.StatusTooManyRequests && strings.Contains(body, words)
	}

	// A burst without its period: the default, 10 failures, then 429,
	// though the clock moves on a millisecond between tries.
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	a := clientFrom(t, serve(&Options{LoginBurst: 2}, clock), "127.0.0.2")
	for i := range DefaultLoginBurst {
		clock.add(time.Millisecond)
		if resp, body := a.login(agentToken); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("LoginBurst 2 alone, failure %d: %d, want 403 (the default burst is %d)\n%s", i+1, resp.StatusCode, DefaultLoginBurst, body)
		}
	}
	clock.add(time.Millisecond)
	if resp, body := a.login(agentToken); !limited(resp, body, "from your address") {
		t.Fatalf("LoginBurst 2 alone, failure %d a millisecond later: %d, want 429 from the source's bound", DefaultLoginBurst+1, resp.StatusCode)
	}
	// A period alone: the right token logs in.
	if resp, body := clientFrom(t, serve(&Options{LoginEvery: time.Hour}, clock), "127.0.0.2").login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("LoginEvery alone, the operator's token: %d, want 303\n%s", resp.StatusCode, body)
	}

	// The global bound likewise: a burst without its period is the
	// default, 100 failures from as many sources, then 429.
	clock = &fakeClock{t: time.Unix(1_700_000_000, 0)}
	srv := serve(&Options{GlobalLoginBurst: 2}, clock)
	for i := range DefaultGlobalLoginBurst {
		clock.add(time.Microsecond)
		if resp, body := clientFrom(t, srv, fmt.Sprintf("127.0.1.%d", i+1)).login(agentToken); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GlobalLoginBurst 2 alone, failure %d: %d, want 403 (the default global burst is %d)\n%s", i+1, resp.StatusCode, DefaultGlobalLoginBurst, body)
		}
	}
	clock.add(time.Microsecond)
	if resp, body := clientFrom(t, srv, "127.0.2.1").login(agentToken); !limited(resp, body, "from many addresses") {
		t.Fatalf("GlobalLoginBurst 2 alone, failure %d: %d, want 429 from the global bound", DefaultGlobalLoginBurst+1, resp.StatusCode)
	}
	if resp, body := clientFrom(t, serve(&Options{GlobalLoginEvery: time.Hour}, clock), "127.0.0.2").login(operatorToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GlobalLoginEvery alone, the operator's token: %d, want 303\n%s", resp.StatusCode, body)
	}
}

// TestLoginTrustLastsADay: a source an operator logged in from passes the
// global bound for trustedFor (a day) after that login, and then no
// longer: an address is not exempt for good because an operator once
// used it (a shared or reassigned address).
func TestLoginTrustLastsADay(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newLoginLimiter(rate{10, time.Minute}, rate{2, 24 * time.Hour}, clock.now)
	op := netip.MustParsePrefix("192.0.2.1/32")
	l.take(op)
	l.refund(op, true) // logged in
	spend := func(i int) {
		t.Helper()
		for j := range 2 {
			if retry, _ := l.take(netip.MustParsePrefix(fmt.Sprintf("198.51.%d.%d/32", i, j))); retry != 0 {
				t.Fatalf("round %d: another source's failure %d refused", i, j+1)
			}
		}
	}
	clock.add(trustedFor - time.Minute)
	spend(1)
	if retry, _ := l.take(op); retry != 0 {
		t.Fatalf("the operator's source a minute within the day, global bound spent: refused (retry %v)", retry)
	}
	clock.add(2 * time.Minute)
	if retry, global := l.take(op); retry == 0 || !global {
		t.Fatalf("the operator's source a minute past the day, global bound spent: retry %v, global %v; want refused by the global bound", retry, global)
	}
}

// TestLoginTrustForgetsTheOldest: when the table of operators' sources is
// full, a new one replaces the one whose login is oldest; the others
// still pass the global bound.
func TestLoginTrustForgetsTheOldest(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newLoginLimiter(rate{10, time.Minute}, rate{maxTrusted + 1, 24 * time.Hour}, clock.now)
	src := func(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("10.1.%d.%d/32", i>>8&255, i&255)) }
	for i := range maxTrusted + 1 {
		clock.add(time.Second)
		l.take(src(i))
		l.refund(src(i), true)
	}
	for l.all.tokens >= 1 {
		l.take(netip.MustParsePrefix(fmt.Sprintf("198.51.100.%d/32", int(l.all.tokens)%250)))
	}
	if retry, global := l.take(src(0)); retry == 0 || !global {
		t.Fatalf("the oldest operator source, forgotten for a newer one: retry %v, global %v; want refused by the global bound", retry, global)
	}
	for _, i := range []int{1, maxTrusted - 1, maxTrusted} {
		if retry, _ := l.take(src(i)); retry != 0 {
			t.Errorf("operator source %d of %d, global bound spent: refused (retry %v); only the oldest is forgotten", i, maxTrusted, retry)
		}
	}
}

// TestTrustedLoginsLeaveTheGlobalBucket: a source an operator logged in
// from neither spends the global bucket nor fills it: its logins, however
// many, give the other sources no more tries than the global bound.
func TestTrustedLoginsLeaveTheGlobalBucket(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newLoginLimiter(rate{10, time.Minute}, rate{3, time.Hour}, clock.now)
	op := netip.MustParsePrefix("192.0.2.1/32")
	l.take(op)
	l.refund(op, true)
	other := func(i int) (time.Duration, bool) {
		return l.take(netip.MustParsePrefix(fmt.Sprintf("198.51.100.%d/32", i)))
	}
	other(1)
	other(2)
	for range 3 { // the operator logs in three times more
		if retry, _ := l.take(op); retry != 0 {
			t.Fatal("the operator's login refused")
		}
		l.refund(op, true)
	}
	if retry, _ := other(3); retry != 0 {
		t.Fatal("the third failure of all sources, global burst 3, refused")
	}
	if retry, global := other(4); retry == 0 || !global {
		t.Fatalf("a fourth failure of other sources, global burst 3, after the operator's logins: retry %v, global %v; want refused by the global bound", retry, global)
	}
}
