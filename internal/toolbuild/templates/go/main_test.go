package main

import (
	"context"
	"testing"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// The tool's logic runs on your machine too: `go test` builds for your
// GOOS, where the SDK's Log writes to stderr and Fetch is refused unless a
// test installs a stand-in host with maiden.SetHost.
func TestEcho(t *testing.T) {
	tool := maiden.Registered()
	for _, tt := range []struct{ in, out, err string }{
		{`{"message":"hi"}`, `{"reply":"hi"}`, ""},
		{`{"message":"hi","shout":true}`, `{"reply":"HI"}`, ""},
		{`{}`, "", "message is empty"},
	} {
		out, err := tool.Execute(context.Background(), []byte(tt.in))
		if string(out) != tt.out || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("Execute(%s) = %s, %v; want %s, %q", tt.in, out, err, tt.out, tt.err)
		}
	}
}
