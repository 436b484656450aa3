// Package progress is a running call's own progress (Call.OnProgress):
// what a tool reports of how far it got, passed to the caller under rules
// that keep a tool from flooding it or going backwards (MCP requires
// progress to increase). Today an imported MCP server's
// notifications/progress for the call are the only source; the relay is
// the call's, not the import's, so that a WebAssembly tool that one day
// reports progress goes through the same rules.
//
//	r := progress.New(call.OnProgress, redact, progress.Interval)
//	r.Report(api.Progress{Progress: 1, Total: 10})
//	r.Finish() // before the call returns
package progress

import (
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/safetext"
)

const (
	// Interval is the least time between two reports a caller sees of
	// one call: a tool that reports faster is coalesced (the newest
	// report waits for the interval; the ones it replaces are dropped),
	// so a tool cannot flood its caller.
	Interval = 100 * time.Millisecond
	// MaxMessage caps a report's message (after redaction).
	MaxMessage = 1024
)

// Relay passes one call's progress reports to Call.OnProgress:
// each value above the last one accepted (others are dropped), the message
// redacted then capped, at most one report per Interval with the
// newest pending one sent at the end of the interval, and the pending one
// flushed when the call ends (Finish), so that every report the caller sees
// precedes the call's return.
type Relay struct {
	out    func(api.Progress)
	redact func(string) string
	every  time.Duration

	mu       sync.Mutex // held while out runs, which must not block
	last     float64    // the last accepted value
	accepted bool
	pending  *api.Progress
	sentAt   time.Time
	timer    *time.Timer
	done     bool
}

// New returns the relay of one call's progress to out, with redact
// applied to each message before it is capped, at most one report per
// every.
func New(out func(api.Progress), redact func(string) string, every time.Duration) *Relay {
	return &Relay{out: out, every: every, redact: redact}
}

// Report takes one report from the tool; it never blocks for longer than
// the caller's OnProgress runs. A nil relay discards.
func (r *Relay) Report(p api.Progress) {
	if r == nil || math.IsNaN(p.Progress) || math.IsInf(p.Progress, 0) {
		return
	}
	if math.IsNaN(p.Total) || math.IsInf(p.Total, 0) || p.Total < 0 {
		p.Total = 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done || (r.accepted && p.Progress <= r.last) {
		return // MCP: progress must increase
	}
	r.last, r.accepted = p.Progress, true
	r.pending = &p
	if r.timer != nil {
		return // the timer sends the newest (it may be late: it still goes first)
	}
	if wait := r.every - time.Since(r.sentAt); wait > 0 {
		r.timer = time.AfterFunc(wait, r.tick)
		return
	}
	r.emit()
}

func (r *Relay) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if !r.done {
		r.emit()
	}
}

// emit sends the pending report; r.mu is held.
func (r *Relay) emit() {
	p := r.pending
	if p == nil {
		return
	}
	r.pending = nil
	if p.Message != "" {
		// A status line, shown by the caller's client: escaped after the
		// redaction (so a secret still matches) and before the cap, so
		// that no escape sequence, carriage return or bidirectional
		// control of a tool's rewrites what a human reads there.
		p.Message = CapMessage(safetext.Escape(r.redact(p.Message)), MaxMessage)
	}
	r.out(*p)
	// The interval counts from when the caller had the report, not from
	// when its redaction began: a report delayed (a slow redaction, a
	// preempted thread) must not leave the next one a moment behind it
	// (TestImportedProgressFlood saw two reports 20 µs apart on a busy
	// machine when this was read before the redaction).
	r.sentAt = time.Now()
}

// Finish sends the pending report, if any, and stops the relay: nothing
// reaches the caller after it returns.
func (r *Relay) Finish() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.emit()
	r.done = true
}

// CapMessage cuts s to at most n bytes on a UTF-8 boundary, saying so.
func CapMessage(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const mark = " [truncated by maiden]"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
