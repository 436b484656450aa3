package progress

import (
	"math"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
)

// TestRelay: only increasing, finite values reach the caller; a fast
// tool's reports are coalesced to the newest, which Finish flushes before
// the call returns; messages are redacted then capped on a character
// boundary; nothing reaches the caller after Finish.
func TestRelay(t *testing.T) {
	var mu sync.Mutex
	var got []api.Progress
	r := New(func(p api.Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}, func(s string) string { return strings.ReplaceAll(s, "secret", "[redacted]") }, Interval)
	r.Report(api.Progress{Progress: 1, Total: 10, Message: "a secret"}) // sent at once
	r.Report(api.Progress{Progress: 1})                                 // not above the last
	r.Report(api.Progress{Progress: math.NaN()})
	r.Report(api.Progress{Progress: 0.5})
	r.Report(api.Progress{Progress: 2, Total: math.Inf(1)}) // pending, replaced by the next
	r.Report(api.Progress{Progress: 3, Message: strings.Repeat("é", MaxMessage)})
	r.Report(api.Progress{Progress: 2.5}) // below the newest: dropped, not pending
	r.Finish()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("reports %+v, want 2 (the first, then the newest flushed by Finish)", got)
	}
	if got[0].Progress != 1 || got[0].Total != 10 || got[0].Message != "a [redacted]" {
		t.Errorf("first report %+v", got[0])
	}
	if last := got[1]; last.Progress != 3 || len(last.Message) > MaxMessage || !utf8.ValidString(last.Message) || !strings.HasSuffix(last.Message, "[truncated by maiden]") {
		t.Errorf("last report: progress %v, message of %d bytes (valid %v)", last.Progress, len(last.Message), utf8.ValidString(last.Message))
	}
	// With no interval every report goes at once: none after Finish.
	var after []api.Progress
	r = New(func(p api.Progress) { after = append(after, p) }, func(s string) string { return s }, 0)
	r.Report(api.Progress{Progress: 1})
	r.Finish()
	r.Report(api.Progress{Progress: 2})
	if len(after) != 1 {
		t.Errorf("reports %+v, want only the one before Finish", after)
	}
	var none *Relay // a call that asked for no progress
	none.Report(api.Progress{Progress: 1})
	none.Finish()
}
