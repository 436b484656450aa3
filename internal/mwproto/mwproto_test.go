package mwproto

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMiddlewareEventJSON(t *testing.T) {
	before, err := Event{Phase: Before, Tool: "weather", Agent: "alice", Session: "s1", Rendered: "--city=Paris", Input: json.RawMessage(`{"city":"Paris"}`), Output: "ignored"}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"phase":"before","tool":"weather","agent":"alice","session":"s1","rendered":"--city=Paris","input":{"city":"Paris"}}`
	if before != want {
		t.Errorf("before event:\n got %s\nwant %s", before, want)
	}
	after, err := Event{Phase: After, Tool: "weather", Input: json.RawMessage(`{}`), Output: ""}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	// The after phase always carries output, even when it is empty.
	if !strings.HasSuffix(after, `"input":{},"output":""}`) {
		t.Errorf("after event: %s", after)
	}
	for _, bad := range []Event{
		{Phase: "during", Input: json.RawMessage(`{}`)},
		{Phase: Before, Input: json.RawMessage(`[1]`)},
		{Phase: Before, Input: json.RawMessage(`{"a":`)},
		{Phase: Before},
	} {
		if _, err := bad.JSON(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestMiddlewareParseVerdict: a layer's verdict is parsed strictly. A verdict
// that tries to skip a layer ({"verdict":"pass","skip":true}) or say anything
// beyond pass, reject or rewrite is an error, not a way round the chain
// (CARDS.md A14: skipping a layer is impossible by construction or an error;
// a layer is given no handle to act with after it returned).
func TestMiddlewareParseVerdict(t *testing.T) {
	good := []struct {
		phase Phase
		text  string
		want  Verdict
	}{
		{Before, `{"verdict":"pass"}`, Verdict{Kind: Pass}},
		{After, ` {"verdict":"pass"} `, Verdict{Kind: Pass}},
		{Before, `{"verdict":"reject","message":"not Atlantis"}`, Verdict{Kind: Reject, Message: "not Atlantis"}},
		{After, `{"message":"no","verdict":"reject"}`, Verdict{Kind: Reject, Message: "no"}},
		{Before, `{"verdict":"rewrite","input":{ "city" : "Paris" }}`, Verdict{Kind: Rewrite, Input: json.RawMessage(`{"city":"Paris"}`)}},
		{After, `{"verdict":"rewrite","output":""}`, Verdict{Kind: Rewrite}},
		{After, `{"verdict":"rewrite","output":"HELLO"}`, Verdict{Kind: Rewrite, Output: "HELLO"}},
	}
	for _, g := range good {
		got, err := ParseVerdict(g.phase, g.text)
		if err != nil {
			t.Errorf("%s %s: %v", g.phase, g.text, err)
			continue
		}
		if got.Kind != g.want.Kind || got.Message != g.want.Message || string(got.Input) != string(g.want.Input) || got.Output != g.want.Output {
			t.Errorf("%s %s: got %+v, want %+v", g.phase, g.text, got, g.want)
		}
	}
	bad := []struct {
		phase Phase
		text  string
		want  string // part of the error
	}{
		{Before, ``, "not JSON"},
		{Before, `pass`, "not JSON"},
		{Before, `"pass"`, "not a JSON object"},
		{Before, `[{"verdict":"pass"}]`, "not a JSON object"},
		{Before, `{}`, `no "verdict" key (got an empty object)`},
		{Before, `{"Verdict":"pass"}`, `no "verdict" key (got keys "Verdict")`},
		{Before, `{"verdict":"allow"}`, `unknown verdict "allow"`},
		{Before, `{"verdict":"PASS"}`, `unknown verdict "PASS"`},
		{Before, `{"verdict":true}`, `"verdict" is a boolean`},
		{Before, `{"verdict":"pass","skip":true}`, `unexpected key "skip"`},
		{Before, `{"verdict":"pass","message":"x"}`, `unexpected key "message" in a "pass" verdict`},
		{Before, `{"verdict":"pass"}{"verdict":"reject","message":"x"}`, "data after the JSON object"},
		{Before, `{"verdict":"pass"} x`, "data after the JSON object"},
		{Before, `{"verdict":"reject","verdict":"pass"}`, `key "verdict" appears twice`},
		{Before, `{"verdict":"pass","verdict":"reject","message":"x"}`, `key "verdict" appears twice`},
		{Before, `{"verdict":"reject"}`, `needs a "message"`},
		{Before, `{"verdict":"reject","message":"  "}`, "is empty"},
		{Before, `{"verdict":"reject","message":7}`, `"message" is a number`},
		{Before, `{"verdict":"reject","message":"` + strings.Repeat("x", MaxMessage+1) + `"}`, "over the limit"},
		{Before, `{"verdict":"rewrite"}`, `needs "input"`},
		{Before, `{"verdict":"rewrite","input":"{}"}`, `"input" is a string, want a JSON object`},
		{Before, `{"verdict":"rewrite","input":null}`, `"input" is null`},
		{Before, `{"verdict":"rewrite","output":"x"}`, `in the before phase may not set "output"`},
		{After, `{"verdict":"rewrite","input":{}}`, `in the after phase may not set "input"`},
		{After, `{"verdict":"rewrite"}`, `needs "output"`},
		{After, `{"verdict":"rewrite","output":{"a":1}}`, `"output" is an object, want a string`},
		{Before, "{\"verdict\":\"pass\xff\"}", "not valid UTF-8"},
	}
	for _, b := range bad {
		_, err := ParseVerdict(b.phase, b.text)
		if err == nil {
			t.Errorf("%s %.60s: accepted", b.phase, b.text)
			continue
		}
		if !strings.Contains(err.Error(), b.want) || !strings.HasPrefix(err.Error(), "middleware verdict: ") {
			t.Errorf("%s %.60s: error %q, want it to contain %q", b.phase, b.text, err, b.want)
		}
	}
	if _, err := ParseVerdict("during", `{"verdict":"pass"}`); err == nil {
		t.Error("unknown phase accepted")
	}
}

// FuzzMiddlewareParseVerdict: whatever a component returns, ParseVerdict
// either refuses it or returns a verdict that is one of the documented
// shapes, and never panics.
func FuzzMiddlewareParseVerdict(f *testing.F) {
	for _, s := range []string{`{"verdict":"pass"}`, `{"verdict":"reject","message":"m"}`, `{"verdict":"rewrite","input":{"a":[1,{"b":null}]}}`, `{"verdict":"rewrite","output":"o"}`, `{"a":1,"a":2}`, `[`, `{"verdict":"pass"} `} {
		f.Add(true, s)
		f.Add(false, s)
	}
	f.Fuzz(func(t *testing.T, before bool, text string) {
		phase := After
		if before {
			phase = Before
		}
		v, err := ParseVerdict(phase, text)
		if err != nil {
			return
		}
		switch v.Kind {
		case Pass:
		case Reject:
			if strings.TrimSpace(v.Message) == "" || len(v.Message) > MaxMessage {
				t.Fatalf("bad reject accepted: %q", text)
			}
		case Rewrite:
			if phase == Before && !isObject(v.Input) {
				t.Fatalf("rewrite without an object input accepted: %q", text)
			}
			if phase == After && v.Input != nil {
				t.Fatalf("after rewrite with input accepted: %q", text)
			}
		default:
			t.Fatalf("unknown kind %q accepted from %q", v.Kind, text)
		}
	})
}
