package command

import (
	"errors"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// parseBoth fails t unless ParseJSON of in and ParseValue of its strictly
// decoded value agree: the same command call, or both refused.
func parseBoth(t *testing.T, s *Spec, in string) {
	t.Helper()
	want, werr := s.ParseJSON([]byte(in))
	var got *Invocation
	v, err := jsonparse.ParseStrict(in)
	if err == nil {
		got, err = s.ParseValue(v)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("ParseValue of %q: bad error %v", in, err)
		}
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: ParseJSON's error %v, ParseValue's %v", in, werr, err)
	}
	if err == nil && (got.String() != want.String() || string(got.JSON()) != string(want.JSON())) {
		t.Fatalf("%q: ParseValue %q, ParseJSON %q", in, got.String(), want.String())
	}
}

var parseValueCases = []string{
	`{"command":"log","max-count":5,"oneline":true,"paths":["a"]}`, `{"command":"log","oneline":false,"verbose":0}`,
	`{"command":"log","no-pager":true,"no-merges":true}`, `{"command":"show","object":"v1.0"}`,
	`{"command":"status","short":true}`, `{"command":"st"}`, `{"command":"log","max-count":"5"}`,
	`{"command":"log","max-count":5.0}`, `{"command":"log","max-count":1e1}`, `{"command":"log","paths":"a"}`,
	`{"command":"log","max-count":5,"max-count":6}`, `{}`, `{"max-count":5}`, `["log"]`, `"log"`, `null`,
	`{"command":"log","paths":["-x","a b"],"author":["*"],"color":"never","verbose":2}`,
	`{"command":"show","object":"HEAD","stat":true}`, "{\"command\":\"log\",\"author\":[\"\xff\"]}",
	`{"command":"log","author":["\ud800"]}`, `{"command":"log","":1}`,
}

// TestParseValueIsParseJSON: reading the decoded value is reading the text.
func TestParseValueIsParseJSON(t *testing.T) {
	s := loadGit(t)
	for _, in := range parseValueCases {
		parseBoth(t, s, in)
	}
}

func FuzzParseValue(f *testing.F) {
	s := loadGit(f)
	for _, in := range parseValueCases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		parseBoth(t, s, in)
	})
}
