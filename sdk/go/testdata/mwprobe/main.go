// Command mwprobe is a middleware that probes the SDK's middleware build
// (sdk/go middleware_test.go): by the event's tool name it tries the
// network, panics, fails, returns an empty verdict, or rewrites.
package main

import (
	"errors"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

func main() {}

func init() {
	maiden.Middleware("Probes the SDK's middleware build.", func(ev maiden.Event) (maiden.Verdict, error) {
		maiden.Log(maiden.LevelWarn, "probe "+ev.Tool)
		switch ev.Tool {
		case "fetch":
			_, err := maiden.Fetch(maiden.Request{URL: "https://example.com/"})
			var fe *maiden.FetchError
			if errors.As(err, &fe) {
				return maiden.Reject(fe.Error()), nil
			}
			return maiden.Reject("fetch did not fail"), nil
		case "panic":
			panic("probe panics")
		case "fail":
			return maiden.Verdict{}, errors.New("probe failed")
		case "empty":
			return maiden.Verdict{}, nil
		case "output":
			return maiden.RewriteOutput(ev.Output + "!"), nil
		}
		return maiden.Pass(), nil
	})
}
