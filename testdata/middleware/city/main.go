// Command city is the Go middleware of maiden's tests (testkit.Middleware
// "city"). Before the tool runs it rejects input.city "Atlantis" and
// rewrites "paris" to "Paris"; everything else passes, and so does every
// output and every failure (the after and failed phases change nothing). An
// event of an unknown phase is an error (the host refuses the call).
package main

import (
	"fmt"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

func main() {}

func init() {
	maiden.Middleware("Refuses Atlantis and capitalises Paris.", decide)
}

func decide(ev maiden.Event) (maiden.Verdict, error) {
	switch ev.Phase {
	case maiden.PhaseAfter, maiden.PhaseFailed:
		return maiden.Pass(), nil
	case maiden.PhaseBefore:
	default:
		return maiden.Verdict{}, fmt.Errorf("unknown phase %q", ev.Phase)
	}
	var in map[string]any
	if err := ev.DecodeInput(&in); err != nil {
		return maiden.Verdict{}, err
	}
	maiden.Log(maiden.LevelInfo, fmt.Sprintf("%s called %s with %s", ev.Agent, ev.Tool, ev.Rendered))
	switch in["city"] {
	case "Atlantis":
		return maiden.Reject("Atlantis is not a city the weather service knows"), nil
	case "paris":
		in["city"] = "Paris"
		return maiden.RewriteInput(in)
	}
	return maiden.Pass(), nil
}
