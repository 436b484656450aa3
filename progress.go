package maiden

import (
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// This file is a running call's own progress (Call.OnProgress): what a tool
// reports of how far it got, passed to the caller. Today an imported MCP
// server's notifications/progress for the call are the only source; the
// relay is the tool's, not the import's, so that a WebAssembly tool that one
// day reports progress goes through the same rules.

// Progress is one report of a running tool's progress.
type Progress struct {
	// Progress increases with each report a caller sees (MCP requires it);
	// its unit is the tool's.
	Progress float64 `json:"progress"`
	// Total is what Progress reaches when the work is done; 0 if unknown.
	Total float64 `json:"total,omitempty"`
	// Message is the tool's words, redacted like its logs and capped at
	// MaxProgressMessage bytes.
	Message string `json:"message,omitempty"`
}

const (
	// ProgressInterval is the least time between two reports a caller
	// sees of one call: a tool that reports faster is coalesced (the
	// newest report waits for the interval; the ones it replaces are
	// dropped), so a tool cannot flood its caller.
	ProgressInterval = 100 * time.Millisecond
	// MaxProgressMessage caps a report's message (after redaction).
	MaxProgressMessage = 1024
)

// progressRelay passes one call's progress reports to Call.OnProgress:
// each value above the last one accepted (others are dropped), the message
// redacted then capped, at most one report per ProgressInterval with the
// newest pending one sent at the end of the interval, and the pending one
// flushed when the call ends (finish), so that every report the caller sees
// precedes the call's return.
type progressRelay struct {
	out    func(Progress)
	redact func(string) string
	every  time.Duration

	mu       sync.Mutex // held while out runs, which must not block
	last     float64    // the last accepted value
	accepted bool
	pending  *Progress
	sentAt   time.Time
	timer    *time.Timer
	done     bool
}

// progressRelay returns the relay of the call's progress, with redact
// applied to messages before the live redact layers of the call's
// middleware; nil when the caller asked for no progress.
func (inv *invocation) progressRelay(redact func(string) string) *progressRelay {
	if inv.call.OnProgress == nil {
		return nil
	}
	reds := inv.liveRedact
	return &progressRelay{out: inv.call.OnProgress, every: ProgressInterval, redact: func(s string) string {
		if redact != nil {
			s = redact(s)
		}
		for i := len(reds) - 1; i >= 0; i-- { // as wrapLogs: outermost last
			s = reds[i].Redactor.Redact(s)
		}
		return s
	}}
}

// report takes one report from the tool; it never blocks for longer than
// the caller's OnProgress runs. A nil relay discards.
func (r *progressRelay) report(p Progress) {
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

func (r *progressRelay) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if !r.done {
		r.emit()
	}
}

// emit sends the pending report; r.mu is held.
func (r *progressRelay) emit() {
	p := r.pending
	if p == nil {
		return
	}
	r.pending = nil
	r.sentAt = time.Now()
	if p.Message != "" {
		p.Message = capMessage(r.redact(p.Message), MaxProgressMessage)
	}
	r.out(*p)
}

// finish sends the pending report, if any, and stops the relay: nothing
// reaches the caller after it returns.
func (r *progressRelay) finish() {
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

// capMessage cuts s to at most n bytes on a UTF-8 boundary, saying so.
func capMessage(s string, n int) string {
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
