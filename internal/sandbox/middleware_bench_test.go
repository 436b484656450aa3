package sandbox

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden/internal/mwproto"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkMiddlewareHook measures one middleware hook (a fresh instance
// running handle on a before event) in process, next to the tiny WAT echo
// tool's call as the baseline of the same run:
//
//	go test ./internal/sandbox -run '^$' -bench MiddlewareHook -count 6
func BenchmarkMiddlewareHook(b *testing.B) {
	sb := newSandbox(b, nil)
	ev := event(b, mwproto.Before, `{"city":"Oslo","days":3}`, "")
	for _, c := range []struct{ name, path, input string }{
		{"tool/wat-echo", testkit.Component(b, "echo"), `{"message":"hi"}`},
		{"middleware/wat-pass", testkit.Middleware(b, "pass"), ev},
		{"middleware/go-city", testkit.Middleware(b, "city"), ev},
		{"middleware/js-city", testkit.Middleware(b, "js/city"), ev},
	} {
		b.Run(c.name, func(b *testing.B) {
			lim := Limits{Timeout: defaultLimits.Timeout, Memory: 128 << 20}
			tool, err := sb.Open(context.Background(), c.path, lim)
			if err != nil {
				b.Fatal(err)
			}
			call := Call{Limits: lim, Input: c.input}
			for b.Loop() {
				out, err := tool.Execute(context.Background(), call)
				if err != nil || out.Failure != nil {
					b.Fatalf("%+v, %v", out.Failure, err)
				}
			}
		})
	}
}
