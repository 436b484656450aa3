package inbox

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// loginLimiter bounds failed logins: a token bucket per source address and
// one for all sources together, each refilling at a steady rate, so that
// guessing operator tokens over the network is slow however many
// addresses the guesser has, and nobody is locked out for longer than
// the refill takes once the failures stop. A login attempt takes one token
// from its source's bucket and one from the global bucket before the
// token is checked; a login that succeeds (or that the backend could not
// check) gives them back, so only failures count.
//
// Memory is bounded: at most maxSources buckets are kept; a bucket that
// has refilled is worth nothing and is dropped first, and a source that
// finds the table full of draining buckets (an attacker rotating
// addresses) is held to the global bucket alone. A source that logged in
// successfully is remembered (at most maxTrusted, for trustedFor) and
// passes the global bucket, still within its own: an attacker spending
// the global budget from many addresses does not lock out an operator
// who has logged in from where they are now. (A logged-in operator's
// session is never limited: only POST /ui/login is.)
type loginLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	source  rate
	global  rate
	all     bucket
	sources map[netip.Prefix]bucket
	trusted map[netip.Prefix]time.Time
}

// rate is a bucket's shape: burst tokens, one more every every.
type rate struct {
	burst int
	every time.Duration
}

// bucket is a token bucket's state: tokens as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// The bounds of the limiter's tables.
const (
	maxSources = 4096
	maxTrusted = 256
	trustedFor = 24 * time.Hour
)

func newLoginLimiter(source, global rate, now func() time.Time) *loginLimiter {
	return &loginLimiter{now: now, source: source, global: global,
		all:     bucket{tokens: float64(global.burst), at: now()},
		sources: map[netip.Prefix]bucket{}, trusted: map[netip.Prefix]time.Time{}}
}

// refill is b's state at now under r.
func (r rate) refill(b bucket, now time.Time) bucket {
	if d := now.Sub(b.at); d > 0 {
		b.tokens += float64(d) / float64(r.every)
	}
	b.tokens = min(b.tokens, float64(r.burst))
	b.at = now
	return b
}

// wait is how long until b holds one token under r.
func (r rate) wait(b bucket) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(r.every))
}

// sourceOf is the key of a request's source: its IPv4 address, or the /64
// of an IPv6 one (one host holds a whole /64). A RemoteAddr that does not
// parse is one shared source.
func sourceOf(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.WithZone("").Prefix(64)
	return p
}

// take takes a login attempt's tokens for src, or reports how long until
// it may try (retry > 0) and whether it was the global bucket that said
// no.
func (l *loginLimiter) take(src netip.Prefix) (retry time.Duration, global bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, known := l.sources[src]
	if !known {
		b = bucket{tokens: float64(l.source.burst), at: now}
	}
	b = l.source.refill(b, now)
	if b.tokens < 1 {
		l.sources[src] = b
		return max(l.source.wait(b), time.Second), false
	}
	l.all = l.global.refill(l.all, now)
	trusted := now.Sub(l.trusted[src]) < trustedFor
	if !trusted && l.all.tokens < 1 {
		return max(l.global.wait(l.all), time.Second), true
	}
	b.tokens--
	if !trusted {
		l.all.tokens--
	}
	if known || l.room(now) {
		l.sources[src] = b
	}
	return 0, false
}

// room makes room for one more source bucket if it can (dropping those
// that have refilled: they are the same as none) and reports whether there
// is.
func (l *loginLimiter) room(now time.Time) bool {
	if len(l.sources) < maxSources {
		return true
	}
	for k, b := range l.sources {
		if l.source.refill(b, now).tokens >= float64(l.source.burst) {
			delete(l.sources, k)
		}
	}
	return len(l.sources) < maxSources
}

// refund gives back an attempt's tokens (it did not fail: a success, or a
// backend that could not answer); ok marks src as an operator's.
func (l *loginLimiter) refund(src netip.Prefix, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if b, known := l.sources[src]; known {
		b = l.source.refill(b, now)
		b.tokens = min(b.tokens+1, float64(l.source.burst))
		l.sources[src] = b
	}
	trusted := now.Sub(l.trusted[src]) < trustedFor
	if !trusted {
		l.all = l.global.refill(l.all, now)
		l.all.tokens = min(l.all.tokens+1, float64(l.global.burst))
	}
	if !ok {
		return
	}
	if _, known := l.trusted[src]; !known && len(l.trusted) >= maxTrusted {
		// Forget the oldest: it is the likeliest to have moved on.
		var oldest netip.Prefix
		var at time.Time
		for k, t := range l.trusted {
			if at.IsZero() || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(l.trusted, oldest)
	}
	l.trusted[src] = now
}
