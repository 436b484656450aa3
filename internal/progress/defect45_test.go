package progress

import (
	"testing"

	"github.com/maiden-run/maiden/api"
)

// Pass 45's finding: a tool's (today an imported MCP server's) progress
// message reached the caller's client with its control characters as
// sent: an OSC retitling a window, a CSI clearing the screen, a bell, a
// carriage return overwriting what the line said, a C1 CSI, a
// right-to-left override. It is a status line a human reads, so it is
// now escaped as maiden's terminal escapes a tool's text (safetext), after
// the redaction and before the cap.
func TestProgressMessageEscaped(t *testing.T) {
	var got []api.Progress
	r := New(func(p api.Progress) { got = append(got, p) }, func(s string) string { return s }, 0)
	r.Report(api.Progress{Progress: 1, Message: "step 1\x1b]0;owned\a\x1b[2J\rmaiden: approved\u009b31m \u202egnp.exe"})
	r.Finish()
	const want = `step 1\x1b]0;owned\a\x1b[2J\rmaiden: approved\u009b31m \u202egnp.exe`
	if len(got) != 1 || got[0].Message != want {
		t.Fatalf("progress sent %+v; want one report with the message %s", got, want)
	}
}
