// Command dlp is a Go middleware of maiden's tests (testkit.Middleware
// "dlp"): a data-loss check on what a tool returns. Once the tool ran it
// rejects a call whose output (after phase), error (failed phase) or any
// log line (both) mentions a password, with a message that says which
// ("withheld by dlp: its log mentioned a password"), and passes the rest;
// it passes every call before the tool runs. A failed call whose error
// says "rewrite me" gets a rewrite, which the failed phase does not allow
// (the host must refuse the call as a failed middleware). An event of an
// unknown phase is an error (the host refuses the call).
package main

import (
	"fmt"
	"strings"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

func main() {}

func init() {
	maiden.Middleware("Withholds outputs, errors and log lines that mention a password.", decide)
}

func decide(ev maiden.Event) (maiden.Verdict, error) {
	switch ev.Phase {
	case maiden.PhaseBefore:
		return maiden.Pass(), nil
	case maiden.PhaseAfter, maiden.PhaseFailed:
	default:
		return maiden.Verdict{}, fmt.Errorf("unknown phase %q", ev.Phase)
	}
	for _, l := range ev.Logs {
		if secret(l.Message) {
			return maiden.Reject("withheld by dlp: its log mentioned a password"), nil
		}
	}
	if ev.Phase == maiden.PhaseAfter {
		if secret(ev.Output) {
			return maiden.Reject("withheld by dlp: the output mentioned a password"), nil
		}
		return maiden.Pass(), nil
	}
	switch {
	case secret(ev.Error.Message):
		return maiden.Reject("withheld by dlp: the " + ev.Error.Kind + " error mentioned a password"), nil
	case strings.Contains(ev.Error.Message, "rewrite me"):
		return maiden.RewriteOutput("rewritten failure"), nil
	}
	return maiden.Pass(), nil
}

func secret(s string) bool { return strings.Contains(strings.ToLower(s), "password") }
