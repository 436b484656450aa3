package progress

import (
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
)

// collect is a relay with no interval and no redaction, and what it sent.
func collect() (*Relay, *[]api.Progress) {
	var got []api.Progress
	return New(func(p api.Progress) { got = append(got, p) }, func(s string) string { return s }, 0), &got
}

// TestMutation45NonFiniteValues: a NaN or infinite progress never reaches
// the caller, and neither stops later finite reports; a NaN, infinite or
// negative total is sent as 0 (unknown).
func TestMutation45NonFiniteValues(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r, got := collect()
		r.Report(api.Progress{Progress: v})
		r.Report(api.Progress{Progress: 1})
		r.Finish()
		if len(*got) != 1 || (*got)[0].Progress != 1 {
			t.Errorf("progress %v then 1: sent %+v; want only 1", v, *got)
		}
	}
	for _, total := range []float64{math.NaN(), math.Inf(1), -5} {
		r, got := collect()
		r.Report(api.Progress{Progress: 1, Total: total})
		r.Finish()
		if len(*got) != 1 || (*got)[0].Total != 0 {
			t.Errorf("total %v: sent %+v; want one report with total 0", total, *got)
		}
	}
}

// TestMutation45ProgressMustIncrease: a report equal to the last one
// accepted is dropped (MCP requires progress to increase).
func TestMutation45ProgressMustIncrease(t *testing.T) {
	r, got := collect()
	r.Report(api.Progress{Progress: 1, Message: "first"})
	r.Report(api.Progress{Progress: 1, Message: "again"})
	r.Finish()
	if len(*got) != 1 {
		t.Errorf("progress 1 twice: sent %+v; want the first only", *got)
	}
}

// TestMutation45RedactedBeforeCapped: a secret the cap would cut in two is
// redacted whole first, so no part of it reaches the caller.
func TestMutation45RedactedBeforeCapped(t *testing.T) {
	const secret = "SECRETVALUE-0123456789abcdefghij"
	var got []api.Progress
	r := New(func(p api.Progress) { got = append(got, p) }, func(s string) string {
		return strings.ReplaceAll(s, secret, "[redacted]")
	}, 0)
	// The cap keeps MaxMessage-22 bytes: the secret straddles that cut.
	msg := strings.Repeat("a", MaxMessage-30) + secret
	r.Report(api.Progress{Progress: 1, Message: msg})
	r.Finish()
	if len(got) != 1 {
		t.Fatalf("sent %d reports; want 1", len(got))
	}
	if m := got[0].Message; strings.Contains(m, "SECRET") || len(m) > MaxMessage {
		t.Errorf("a message whose secret straddles the cap: sent %q (%d bytes); want the secret redacted whole, at most %d bytes", m[len(m)-40:], len(m), MaxMessage)
	}
}

// TestMutation45CapMessageValidUTF8: a short message that is not UTF-8 is
// made valid, not passed through.
func TestMutation45CapMessageValidUTF8(t *testing.T) {
	if got := CapMessage("ok\xff\xfe\x80", 100); !utf8.ValidString(got) || got != "ok\uFFFD" {
		t.Errorf("CapMessage(%q, 100) = %q; want %q", "ok\xff\xfe\x80", got, "ok\uFFFD")
	}
}

// TestMutation45FloodCoalesced: a tool reporting as fast as it can is
// seen at most once per interval (before Finish) by its caller.
func TestMutation45FloodCoalesced(t *testing.T) {
	const every = 5 * time.Millisecond
	const want = 20
	var mu sync.Mutex
	var at []time.Time
	enough := make(chan struct{})
	r := New(func(api.Progress) {
		mu.Lock()
		at = append(at, time.Now())
		if len(at) == want {
			close(enough)
		}
		mu.Unlock()
	}, func(s string) string { return s }, every)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-enough:
				return
			default:
			}
			r.Report(api.Progress{Progress: float64(i)})
		}
	}()
	<-done
	mu.Lock()
	seen := slices.Clone(at)
	mu.Unlock()
	r.Finish()
	for i := 1; i < len(seen); i++ {
		if gap := seen[i].Sub(seen[i-1]); gap < every {
			t.Fatalf("reports %d and %d reached the caller %v apart; want at least %v", i-1, i, gap, every)
		}
	}
}
