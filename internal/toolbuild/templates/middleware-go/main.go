// Command middleware is a maiden middleware written in Go: a WebAssembly
// component that the operator puts around tool calls in agent.toml. Before
// a tool runs it sees the call and may pass it, reject it (the agent sees
// the message) or rewrite its input; after the tool succeeded it sees the
// output and the log lines and may pass, reject or rewrite it; after the
// tool ran and the call failed it sees the error and the log lines and may
// pass or reject it. It has no network and no files.
//
// Build it with `maiden build` (see README.md).
package main

import (
	"fmt"
	"strings"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// decide is the middleware. It is called once before the tool runs
// (ev.Phase is maiden.PhaseBefore, ev.Input the call's input) and once after:
// maiden.PhaseAfter when the tool succeeded (ev.Output its output) or
// maiden.PhaseFailed when the call failed (ev.Error its error), both with
// ev.Logs, the tool's log lines, which the agent sees only if this passes.
// A returned error makes maiden refuse the call; so does a panic (and so
// does an unknown phase, below: a phase added later is refused, not passed).
func decide(ev maiden.Event) (maiden.Verdict, error) {
	switch ev.Phase {
	case maiden.PhaseBefore:
		var in map[string]any
		if err := ev.DecodeInput(&in); err != nil {
			return maiden.Verdict{}, err
		}
		city, _ := in["city"].(string)
		switch {
		case city == "Atlantis":
			return maiden.Reject("Atlantis is not on any map"), nil
		case city != "" && strings.ToLower(city) == city:
			// "paris" → "Paris". maiden checks the rewritten input against
			// the tool's schema and the agent's cards again.
			in["city"] = strings.ToUpper(city[:1]) + city[1:]
			maiden.Log(maiden.LevelInfo, fmt.Sprintf("%s: city %q capitalised", ev.Agent, city))
			return maiden.RewriteInput(in)
		}
		return maiden.Pass(), nil
	case maiden.PhaseAfter, maiden.PhaseFailed:
		// A tool could log what it may not return, or fail with it: the
		// log lines and the error get the output's check. Only a reject
		// withholds log lines (a rewrite replaces the output alone), and
		// a failure cannot be rewritten.
		for _, l := range ev.Logs {
			if mentionsPassword(l.Message) {
				return maiden.Reject("withheld by " + ev.Tool + "'s middleware: its log mentioned a password"), nil
			}
		}
		if ev.Phase == maiden.PhaseFailed {
			if mentionsPassword(ev.Error.Message) {
				return maiden.Reject("withheld by " + ev.Tool + "'s middleware: its error mentioned a password"), nil
			}
			return maiden.Pass(), nil
		}
		if mentionsPassword(ev.Output) {
			return maiden.RewriteOutput("[withheld by " + ev.Tool + "'s middleware: the output mentioned a password]"), nil
		}
		return maiden.Pass(), nil
	}
	return maiden.Verdict{}, fmt.Errorf("unknown phase %q", ev.Phase)
}

func mentionsPassword(s string) bool { return strings.Contains(strings.ToLower(s), "password") }

// init registers the middleware; main never runs (maiden runs the
// component as a WASI reactor, one fresh instance per hook).
func init() {
	maiden.Middleware("Refuses Atlantis, capitalises city names and withholds outputs that mention a password.", decide)
}

func main() {}
