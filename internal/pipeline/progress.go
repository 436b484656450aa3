package pipeline

import (
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/progress"
)

// Progress is one report of a running tool's progress (api.Progress;
// the relay's rules: internal/progress).
type Progress = api.Progress

const (
	// ProgressInterval is the least time between two reports a caller
	// sees of one call: a tool that reports faster is coalesced (the
	// newest report waits for the interval; the ones it replaces are
	// dropped), so a tool cannot flood its caller.
	ProgressInterval = progress.Interval
	// MaxProgressMessage caps a report's message (after redaction).
	MaxProgressMessage = progress.MaxMessage
)

// progressRelay returns the relay of the call's progress, with redact
// applied to messages before the live redact layers of the call's
// middleware; nil when the caller asked for no progress.
func (inv *invocation) progressRelay(redact func(string) string) *progress.Relay {
	if inv.call.OnProgress == nil {
		return nil
	}
	reds := inv.liveRedact
	return progress.New(inv.call.OnProgress, func(s string) string {
		if redact != nil {
			s = redact(s)
		}
		for i := len(reds) - 1; i >= 0; i-- { // as wrapLogs: outermost last
			s = reds[i].Redactor.Redact(s)
		}
		return s
	}, ProgressInterval)
}
