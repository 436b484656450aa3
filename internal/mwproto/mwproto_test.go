package mwproto

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
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
	// The after phase always carries output, even when it is empty, and
	// the logs, even when there are none.
	if !strings.HasSuffix(after, `"input":{},"output":"","logs":[]}`) {
		t.Errorf("after event: %s", after)
	}
	logs := []api.LogEntry{{Level: api.LevelWarn, Source: api.SourceLog, Message: "line \"1\""}, {Level: api.LevelInfo, Source: api.SourceStdout, Message: ""}}
	after, err = Event{Phase: After, Tool: "weather", Input: json.RawMessage(`{}`), Output: "sunny", Logs: logs}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `"input":{},"output":"sunny","logs":[{"level":"warn","source":"log","message":"line \"1\""},{"level":"info","source":"stdout","message":""}]}`; !strings.HasSuffix(after, want) {
		t.Errorf("after event with logs:\n got %s\nwant its end %s", after, want)
	}
	// The failed phase: the after event's keys without output, with the
	// failure (as the layers inside left it) and the logs.
	failed, err := Event{Phase: Failed, Tool: "weather", Agent: "alice", Session: "s1", Rendered: "--city=Paris", Input: json.RawMessage(`{"city":"Paris"}`),
		Output: "ignored", Error: Failure{Kind: "tool", Message: "upstream said: no"}, Logs: logs[:1]}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want = `{"version":1,"phase":"failed","tool":"weather","agent":"alice","session":"s1","rendered":"--city=Paris","input":{"city":"Paris"},` +
		`"error":{"kind":"tool","message":"upstream said: no"},"logs":[{"level":"warn","source":"log","message":"line \"1\""}]}`
	if failed != want {
		t.Errorf("failed event:\n got %s\nwant %s", failed, want)
	}
	// An empty failure is still a failure; no logs is an empty list.
	failed, err = Event{Phase: Failed, Input: json.RawMessage(`{}`)}.JSON()
	if err != nil || !strings.HasSuffix(failed, `"input":{},"error":{"kind":"","message":""},"logs":[]}`) {
		t.Errorf("failed event without error or logs: %s, %v", failed, err)
	}
	// The logs a failed event carries read back as the api's log lines:
	// the same JSON as a Result's logs.
	var back struct {
		Logs []api.LogEntry `json:"logs"`
	}
	if err := json.Unmarshal([]byte(after), &back); err != nil || len(back.Logs) != 2 || back.Logs[0] != logs[0] || back.Logs[1] != logs[1] {
		t.Errorf("logs read back: %+v, %v", back.Logs, err)
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
		{Failed, `{"verdict":"pass"}`, Verdict{Kind: Pass}},
		{Failed, `{"verdict":"reject","message":"the error mentioned a password"}`, Verdict{Kind: Reject, Message: "the error mentioned a password"}},
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
		// A failure has nothing to rewrite: refused, naming the phase,
		// whatever the rewrite carries.
		{Failed, `{"verdict":"rewrite","output":"x"}`, `a "rewrite" is not allowed in the failed phase`},
		{Failed, `{"verdict":"rewrite","input":{}}`, `a "rewrite" is not allowed in the failed phase`},
		{Failed, `{"verdict":"rewrite"}`, `a "rewrite" is not allowed in the failed phase`},
		{Failed, `{"verdict":"reject"}`, `needs a "message"`},
		{Failed, `{"verdict":"pass","output":"x"}`, `unexpected key "output" in a "pass" verdict`},
		{Failed, `{"verdict":"allow"}`, `unknown verdict "allow"`},
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

// phases are the fuzz tests' phases, chosen by a byte.
var phases = [...]Phase{Before, After, Failed}

// FuzzMiddlewareParseVerdict: whatever a component returns, ParseVerdict
// either refuses it or returns a verdict that is one of the documented
// shapes, and never panics.
func FuzzMiddlewareParseVerdict(f *testing.F) {
	for _, s := range []string{`{"verdict":"pass"}`, `{"verdict":"reject","message":"m"}`, `{"verdict":"rewrite","input":{"a":[1,{"b":null}]}}`, `{"verdict":"rewrite","output":"o"}`, `{"a":1,"a":2}`, `[`, `{"verdict":"pass"} `, `{"verdict":"rewrite"}`} {
		for p := range phases {
			f.Add(byte(p), s)
		}
	}
	f.Fuzz(func(t *testing.T, p byte, text string) {
		phase := phases[int(p)%len(phases)]
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
			if phase == Failed {
				t.Fatalf("rewrite accepted in the failed phase: %q", text)
			}
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

// FuzzMiddlewareEventJSON: whatever a tool put in its error and its log
// lines (they reach the Failed and After events as it wrote them, invalid
// UTF-8 and quotes included), the event is one JSON object that reads back
// with the phase, the failure and the lines in order: a tool cannot break
// out of its field into a key the middleware would read as maiden's.
func FuzzMiddlewareEventJSON(f *testing.F) {
	for _, s := range []string{"", "password=1234", `","phase":"before`, "\xff\xfe", "line\nnext", `\u0000`} {
		for p := range phases {
			f.Add(byte(p), s, s+"!")
		}
	}
	f.Fuzz(func(t *testing.T, p byte, message, line string) {
		phase := phases[int(p)%len(phases)]
		text, err := Event{Phase: phase, Tool: "t", Input: json.RawMessage(`{}`), Output: line,
			Error: Failure{Kind: "tool", Message: message}, Logs: []api.LogEntry{{Level: api.LevelInfo, Source: api.SourceLog, Message: line}, {Message: message}}}.JSON()
		if err != nil {
			t.Fatal(err)
		}
		fields, err := objectFields(text)
		if err != nil {
			t.Fatalf("the event is not one JSON object: %v: %s", err, text)
		}
		var back struct {
			Phase Phase
			Error *Failure
			Logs  []api.LogEntry
		}
		if err := json.Unmarshal([]byte(text), &back); err != nil {
			t.Fatal(err)
		}
		_, hasOutput := fields["output"]
		if back.Phase != phase || (back.Error != nil) != (phase == Failed) || (back.Logs != nil) != (phase != Before) || hasOutput != (phase == After) {
			t.Fatalf("%s event read back as %+v (output key %v): %s", phase, back, hasOutput, text)
		}
		if phase == Before {
			return
		}
		// encoding/json writes each invalid byte as U+FFFD, as a
		// conversion to runes reads it.
		valid := func(s string) string { return string([]rune(s)) }
		if len(back.Logs) != 2 || back.Logs[0].Message != valid(line) || back.Logs[1].Message != valid(message) {
			t.Fatalf("logs read back as %+v from %s", back.Logs, text)
		}
		if phase == Failed && (back.Error.Kind != "tool" || back.Error.Message != valid(message)) {
			t.Fatalf("error read back as %+v from %s", back.Error, text)
		}
	})
}

// TestVerdictCutShortOrOverLong: a verdict cut short (its object never
// closed) is not JSON, whatever it held up to there; a rejection's
// message is bounded in bytes, not in characters: exactly MaxMessage
// bytes are accepted, one more refused, and so are MaxMessage/2+1
// two-byte characters.
func TestVerdictCutShortOrOverLong(t *testing.T) {
	for _, b := range []struct {
		phase Phase
		text  string
	}{
		{Before, `{"verdict":"pass"`},
		{After, `{"verdict":"rewrite","output":"x"`},
		{Failed, `{"verdict":"reject","message":"no" `},
	} {
		if v, err := ParseVerdict(b.phase, b.text); err == nil || !strings.HasPrefix(err.Error(), "middleware verdict: not JSON") {
			t.Errorf("%s %s: %+v, %v; want it refused as not JSON", b.phase, b.text, v, err)
		}
	}
	exact := strings.Repeat("x", MaxMessage)
	if v, err := ParseVerdict(Before, `{"verdict":"reject","message":"`+exact+`"}`); err != nil || v.Message != exact {
		t.Errorf("a message of exactly %d bytes: %v; want it accepted", MaxMessage, err)
	}
	for _, msg := range []string{exact + "x", strings.Repeat("é", MaxMessage/2+1)} {
		want := fmt.Sprintf(`middleware verdict: "message" is %d bytes, over the limit of %d`, len(msg), MaxMessage)
		if v, err := ParseVerdict(Failed, `{"verdict":"reject","message":"`+msg+`"}`); err == nil || err.Error() != want {
			t.Errorf("a message of %d bytes (%d characters): %d bytes accepted, error %v; want %q", len(msg), utf8.RuneCountInString(msg), len(v.Message), err, want)
		}
	}
}
