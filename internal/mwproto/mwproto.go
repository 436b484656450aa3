// Package mwproto is the JSON contract between maiden and an operator's
// middleware component (wit/maiden-middleware.wit, maiden:middleware@0.1.0):
// the event the host passes to handle() and the verdict the component
// returns. The host builds events with Event.JSON and reads verdicts with
// ParseVerdict, which refuses anything that is not exactly one of the
// documented verdicts for the event's phase (the caller then refuses the
// call).
//
//	ev, _ := mwproto.Event{Phase: mwproto.Failed, Tool: "weather", Input: in,
//		Error: mwproto.Failure{Kind: "tool", Message: msg}, Logs: logs}.JSON()
//	v, err := mwproto.ParseVerdict(mwproto.Failed, text) // pass or reject
//
// The package is pure (encoding/json) and imports of maiden's only api, the
// leaf of shared value types whose log line the event carries, so both the
// root package and tests can use it. sdk/go mirrors these types for
// middleware authors; its tests hold the two to the same JSON.
package mwproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
)

// Version is the event version of maiden:middleware@0.1.0.
const Version = 1

// Phase is when a hook runs.
type Phase string

// Phases.
const (
	Before Phase = "before" // before the tool runs: the input may be rewritten
	After  Phase = "after"  // after the tool succeeded: the output may be rewritten
	// Failed is after the tool ran and the call failed (its own error, an
	// upstream's, or a layer inside this one withheld it): the failure may
	// be passed on or replaced by a rejection, never rewritten. Added on
	// 2026-12-06 within event version 1.
	Failed Phase = "failed"
)

// known reports whether p is one of the phases.
func (p Phase) known() bool { return p == Before || p == After || p == Failed }

// Failure is a failed call's error as the Failed event carries it.
type Failure struct {
	// Kind is the error's kind (api.ErrorKind: "tool", "deadline", ...).
	Kind string `json:"kind"`
	// Message is the error's message as the layers inside this one left
	// it.
	Message string `json:"message"`
}

// Event is what a middleware's handle() receives, as JSON.
type Event struct {
	// Phase is Before, After or Failed.
	Phase Phase
	// Tool is the tool's name as the agent called it.
	Tool string
	// Agent is the calling agent.
	Agent string
	// Session is the call's session boundary ("" when it has none).
	Session string
	// Rendered is the canonical rendering of the input ("--city=Paris
	// --days=3"), the form grants are written in.
	Rendered string
	// Input is the parsed input object, as JSON. It must be a JSON object.
	Input json.RawMessage
	// Output is the tool's output text; it is sent in the After phase only.
	Output string
	// Error is the call's failure; it is sent in the Failed phase only.
	Error Failure
	// Logs are the call's log lines as the layers inside this one left
	// them; they are sent in the After and Failed phases (an empty list
	// when there are none). Added on 2026-12-06 within event version 1.
	Logs []api.LogEntry
}

// wireEvent is Event's JSON form.
type wireEvent struct {
	Version  int             `json:"version"`
	Phase    Phase           `json:"phase"`
	Tool     string          `json:"tool"`
	Agent    string          `json:"agent"`
	Session  string          `json:"session"`
	Rendered string          `json:"rendered"`
	Input    json.RawMessage `json:"input"`
	Output   *string         `json:"output,omitempty"`
	Error    *Failure        `json:"error,omitempty"`
	Logs     *[]api.LogEntry `json:"logs,omitempty"` // present, possibly [], after the run
}

// JSON encodes the event as handle() receives it. It fails on an unknown
// phase or an input that is not a JSON object.
func (e Event) JSON() (string, error) {
	if !e.Phase.known() {
		return "", fmt.Errorf("middleware event: phase %q, want %q, %q or %q", e.Phase, Before, After, Failed)
	}
	if !isObject(e.Input) {
		return "", errors.New("middleware event: input is not a JSON object")
	}
	w := wireEvent{Version: Version, Phase: e.Phase, Tool: e.Tool, Agent: e.Agent, Session: e.Session, Rendered: e.Rendered, Input: e.Input}
	switch e.Phase {
	case After:
		out := e.Output
		w.Output = &out
	case Failed:
		failure := e.Error
		w.Error = &failure
	}
	if e.Phase != Before {
		logs := e.Logs
		if logs == nil {
			logs = []api.LogEntry{}
		}
		w.Logs = &logs
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("middleware event: %w", err)
	}
	return string(b), nil
}

// Kind is a verdict's kind.
type Kind string

// Verdict kinds.
const (
	Pass    Kind = "pass"
	Reject  Kind = "reject"
	Rewrite Kind = "rewrite"
)

// Verdict is what a middleware decided, as ParseVerdict read it.
type Verdict struct {
	Kind Kind
	// Message is a rejection's text for the agent (Reject only).
	Message string
	// Input replaces the call's input (Rewrite in the Before phase): a JSON
	// object, compacted. The host validates it against the tool's schema and
	// authorizes it again, as if the agent had sent it.
	Input json.RawMessage
	// Output replaces the tool's output (Rewrite in the After phase).
	Output string
}

// MaxMessage bounds a rejection's message, in bytes: it is shown to the
// agent, and a middleware should say why in a sentence, not a document.
const MaxMessage = 4096

// ParseVerdict reads what handle() returned for an event of the given
// phase. Exactly these objects are accepted:
//
//	{"verdict":"pass"}
//	{"verdict":"reject","message":"..."}   a non-empty message, at most MaxMessage bytes
//	{"verdict":"rewrite","input":{...}}    Before only
//	{"verdict":"rewrite","output":"..."}   After only
//
// In the Failed phase there is nothing to rewrite: a failure is passed on
// or replaced by a rejection, and a rewrite is an error naming the phase.
//
// Anything else (not JSON, not an object, a repeated or unknown key, an
// unknown verdict, a field of the wrong type or phase, trailing data) is an
// error that says what was wrong; the host refuses the call.
func ParseVerdict(phase Phase, text string) (Verdict, error) {
	if !phase.known() {
		return Verdict{}, fmt.Errorf("middleware verdict: phase %q, want %q, %q or %q", phase, Before, After, Failed)
	}
	fields, err := objectFields(text)
	if err != nil {
		return Verdict{}, fmt.Errorf("middleware verdict: %w", err)
	}
	raw, ok := fields["verdict"]
	if !ok {
		return Verdict{}, fmt.Errorf("middleware verdict: no \"verdict\" key (got %s)", keyList(fields))
	}
	var kind string
	if err := json.Unmarshal(raw, &kind); err != nil {
		return Verdict{}, fmt.Errorf("middleware verdict: \"verdict\" is %s, want a string", jsonType(raw))
	}
	allowed := map[Kind][]string{Pass: nil, Reject: {"message"}}
	switch phase {
	case Before:
		allowed[Rewrite] = []string{"input"}
	case After:
		allowed[Rewrite] = []string{"output"}
	}
	want, known := allowed[Kind(kind)]
	if !known {
		if phase == Failed && Kind(kind) == Rewrite {
			return Verdict{}, fmt.Errorf("middleware verdict: a \"rewrite\" is not allowed in the %s phase: a failure is passed (\"pass\") or replaced by a rejection (\"reject\" with a message)", phase)
		}
		return Verdict{}, fmt.Errorf("middleware verdict: unknown verdict %q, want \"pass\", \"reject\" or \"rewrite\"", kind)
	}
	for k := range fields {
		if k == "verdict" || contains(want, k) {
			continue
		}
		if Kind(kind) == Rewrite && (k == "input" || k == "output") {
			return Verdict{}, fmt.Errorf("middleware verdict: a rewrite in the %s phase may not set %q (before: input, after: output)", phase, k)
		}
		return Verdict{}, fmt.Errorf("middleware verdict: unexpected key %q in a %q verdict", k, kind)
	}
	v := Verdict{Kind: Kind(kind)}
	switch v.Kind {
	case Reject:
		raw, ok := fields["message"]
		if !ok {
			return Verdict{}, errors.New("middleware verdict: a \"reject\" verdict needs a \"message\" for the agent")
		}
		if err := json.Unmarshal(raw, &v.Message); err != nil {
			return Verdict{}, fmt.Errorf("middleware verdict: \"message\" is %s, want a string", jsonType(raw))
		}
		if strings.TrimSpace(v.Message) == "" {
			return Verdict{}, errors.New("middleware verdict: \"message\" is empty; a rejection must say why")
		}
		if len(v.Message) > MaxMessage {
			return Verdict{}, fmt.Errorf("middleware verdict: \"message\" is %d bytes, over the limit of %d", len(v.Message), MaxMessage)
		}
	case Rewrite:
		if phase == Before {
			raw, ok := fields["input"]
			if !ok {
				return Verdict{}, errors.New("middleware verdict: a \"rewrite\" in the before phase needs \"input\" (a JSON object)")
			}
			if !isObject(raw) {
				return Verdict{}, fmt.Errorf("middleware verdict: \"input\" is %s, want a JSON object", jsonType(raw))
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, raw); err != nil {
				return Verdict{}, fmt.Errorf("middleware verdict: \"input\": %w", err)
			}
			v.Input = buf.Bytes()
		} else {
			raw, ok := fields["output"]
			if !ok {
				return Verdict{}, errors.New("middleware verdict: a \"rewrite\" in the after phase needs \"output\" (a string)")
			}
			if err := json.Unmarshal(raw, &v.Output); err != nil {
				return Verdict{}, fmt.Errorf("middleware verdict: \"output\" is %s, want a string", jsonType(raw))
			}
		}
	}
	return v, nil
}

// objectFields splits a JSON object into its keys' raw values, refusing a
// repeated key (encoding/json would keep the last one silently, and two
// readers of the same text must not see two verdicts) and trailing data.
func objectFields(text string) (map[string]json.RawMessage, error) {
	if !utf8.ValidString(text) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object (starts with %s)", tokenString(tok))
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		key := tok.(string) // inside an object, Token returns keys as strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("not JSON: value of %q: %v", key, err)
		}
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		fields[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("data after the JSON object")
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the JSON object: %v", err)
	}
	return fields, nil
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil
}

func jsonType(raw json.RawMessage) string {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return "empty"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func tokenString(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", tok)
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

func keyList(fields map[string]json.RawMessage) string {
	if len(fields) == 0 {
		return "an empty object"
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	return "keys " + strings.Join(keys, ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
