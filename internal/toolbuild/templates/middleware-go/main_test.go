package main

import (
	"testing"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// The middleware's logic runs on your machine too: maiden.Handle runs it on
// an event as maiden's call would, JSON in and JSON out.
func TestDecide(t *testing.T) {
	for _, tt := range []struct{ event, verdict string }{
		{`{"version":1,"phase":"before","tool":"weather","agent":"alice","input":{"city":"Atlantis"}}`,
			`{"verdict":"reject","message":"Atlantis is not on any map"}`},
		{`{"version":1,"phase":"before","tool":"weather","agent":"alice","input":{"city":"paris","days":3}}`,
			`{"verdict":"rewrite","input":{"city":"Paris","days":3}}`},
		{`{"version":1,"phase":"before","tool":"weather","agent":"alice","input":{"city":"Oslo"}}`,
			`{"verdict":"pass"}`},
		{`{"version":1,"phase":"after","tool":"weather","agent":"alice","input":{},"output":"sunny"}`,
			`{"verdict":"pass"}`},
		{`{"version":1,"phase":"after","tool":"weather","agent":"alice","input":{},"output":"the password is 1234"}`,
			`{"verdict":"rewrite","output":"[withheld by weather's middleware: the output mentioned a password]"}`},
		{`{"version":1,"phase":"after","tool":"weather","agent":"alice","input":{},"output":"sunny","logs":[{"level":"info","source":"log","message":"Password: 1234"}]}`,
			`{"verdict":"reject","message":"withheld by weather's middleware: its log mentioned a password"}`},
		{`{"version":1,"phase":"failed","tool":"weather","agent":"alice","input":{},"error":{"kind":"tool","message":"bad password 1234"},"logs":[]}`,
			`{"verdict":"reject","message":"withheld by weather's middleware: its error mentioned a password"}`},
		{`{"version":1,"phase":"failed","tool":"weather","agent":"alice","input":{},"error":{"kind":"tool","message":"no sun"},"logs":[{"level":"warn","source":"stderr","message":"password=1234"}]}`,
			`{"verdict":"reject","message":"withheld by weather's middleware: its log mentioned a password"}`},
		{`{"version":1,"phase":"failed","tool":"weather","agent":"alice","input":{},"error":{"kind":"deadline","message":"too slow"},"logs":[]}`,
			`{"verdict":"pass"}`},
	} {
		got, err := maiden.Handle(tt.event)
		if err != nil || got != tt.verdict {
			t.Errorf("Handle(%s) = %s, %v; want %s", tt.event, got, err, tt.verdict)
		}
	}
	if _, err := maiden.Handle(`{"version":1,"phase":"during","input":{}}`); err == nil {
		t.Error("an unknown phase was not an error")
	}
}
