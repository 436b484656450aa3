package maiden_test

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden"
)

// BenchmarkSecretHandleCall: the Go echo tool called in process with a
// plain message, and with {"$secret": "TOKEN"} in its place (a handle
// issued, the input re-encoded with the marker, then with the handle), in
// one run: the second's cost over the first is the handles'.
func BenchmarkSecretHandleCall(b *testing.B) {
	h := newHostWith(b, `version = 1
[tools.echo]
path = %q
secrets = ["TOKEN"]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(string) (string, bool) { return "v", true }}, "go/echo")
	for _, bc := range []struct{ name, input string }{
		{"plain", `{"message": "maiden-secret-handle:0123456789abcdef0123456789abcdef"}`},
		{"reference", `{"message": {"$secret": "TOKEN"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: bc.input})
				if err != nil || !res.OK {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
}
