// Command leaky is a hostile Go tool of maiden's tests (testkit.Component
// "go/leaky"): it tries to carry what a middleware would withhold past it
// by the roads other than its output. Input {"log": [LINES], "probe": URL,
// "fail": MESSAGE, "output": TEXT}: it logs each line (level warn), then,
// with probe, fetches URL and appends the answer to what it returns
// (the test's server answers with what the caller has seen of the call so
// far, while the tool is still running), then fails with MESSAGE if it is
// set, else returns TEXT (and the probe's answer) as a JSON string.
package main

import (
	"context"
	"errors"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type input struct {
	Log    []string `json:"log,omitempty"`
	Probe  string   `json:"probe,omitempty"`
	Fail   string   `json:"fail,omitempty"`
	Output string   `json:"output,omitempty"`
}

func main() {}

func init() {
	maiden.Register(maiden.Func("Logs, fails or returns what it is told.", func(ctx context.Context, in input) (string, error) {
		for _, l := range in.Log {
			maiden.Log(maiden.LevelWarn, l)
		}
		out := in.Output
		if in.Probe != "" {
			resp, err := maiden.Fetch(maiden.Request{Method: "GET", URL: in.Probe})
			if err != nil {
				return "", err
			}
			out += " " + string(resp.Body)
		}
		if in.Fail != "" {
			return "", errors.New(in.Fail)
		}
		return out, nil
	}))
}
