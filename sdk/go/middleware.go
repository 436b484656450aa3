package maiden

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Phases of an Event.
const (
	PhaseBefore = "before" // the tool has not run: Input may be rewritten
	PhaseAfter  = "after"  // the tool succeeded: Output may be rewritten
	// PhaseFailed: the tool ran and the call failed (Error says how); the
	// middleware may pass the failure on or replace it with Reject, never
	// rewrite it. Added on 2026-12-06: a middleware that errs on a phase
	// it does not know refuses every failed call it guards.
	PhaseFailed = "failed"
)

// EventError is a failed call's error (PhaseFailed).
type EventError struct {
	// Kind is the error's kind: "tool", "deadline", "memory", "trap",
	// "denied", ... (the kinds of maiden's results).
	Kind string `json:"kind"`
	// Message is the error's message as the agent would read it.
	Message string `json:"message"`
}

// EventLog is one of the call's log lines (PhaseAfter, PhaseFailed).
type EventLog struct {
	// Level is "debug", "info", "warn" or "error".
	Level string `json:"level"`
	// Source is what wrote it: "log" (the tool's Log), "stdout", "stderr"
	// or "host" (maiden's note that lines were dropped).
	Source string `json:"source"`
	// Message is the line.
	Message string `json:"message"`
}

// Event is what a middleware sees of one call (the JSON maiden passes to
// handle).
type Event struct {
	// Version is the event format's version, 1.
	Version int `json:"version"`
	// Phase is PhaseBefore, PhaseAfter or PhaseFailed.
	Phase string `json:"phase"`
	// Tool is the tool's name as the agent called it.
	Tool string `json:"tool"`
	// Agent is the calling agent's name.
	Agent string `json:"agent"`
	// Session is the call's session ("" when it has none).
	Session string `json:"session"`
	// Rendered is the input rendered as arguments ("--city=Paris --days=3"),
	// the form grants are written in.
	Rendered string `json:"rendered"`
	// Input is the call's input, a JSON object (see DecodeInput).
	Input json.RawMessage `json:"input"`
	// Output is the tool's output text (PhaseAfter only).
	Output string `json:"output,omitempty"`
	// Error is the call's failure (PhaseFailed only): the tool's own
	// error, its server's, or a rejection by a middleware inside this one.
	Error EventError `json:"error,omitzero"`
	// Logs are the call's log lines, in order (PhaseAfter and
	// PhaseFailed). The agent sees them only if every middleware let the
	// call through: a Reject withholds them with the output or error.
	Logs []EventLog `json:"logs,omitempty"`
}

// DecodeInput decodes the call's input into v as json.Unmarshal does,
// except that a key must be exactly a struct field's JSON name: one that
// differs from it only in case ("CITY" for "city") is an error, since
// maiden's schema, cards and conditions never read it as that field.
func (e Event) DecodeInput(v any) error {
	if err := unmarshalExact(e.Input, v); err != nil {
		return fmt.Errorf("decoding the %s event's input: %w", e.Tool, err)
	}
	return nil
}

// Verdict kinds.
const (
	VerdictPass    = "pass"
	VerdictReject  = "reject"
	VerdictRewrite = "rewrite"
)

// Verdict is what a middleware decided (the JSON handle returns). Make one
// with Pass, Reject, RewriteInput or RewriteOutput; maiden refuses the call
// when a verdict is anything but one of those four shapes.
type Verdict struct {
	Verdict string `json:"verdict"`
	// Message is what the agent sees of a rejection.
	Message string `json:"message,omitempty"`
	// Input replaces the input (a rewrite before the tool runs). maiden
	// validates it against the tool's schema and checks the agent's
	// authority for it again, as if the agent had sent it.
	Input json.RawMessage `json:"input,omitempty"`
	// Output replaces the tool's output (a rewrite after it ran).
	Output *string `json:"output,omitempty"`
}

// Pass lets the call (or its output) through unchanged.
func Pass() Verdict { return Verdict{Verdict: VerdictPass} }

// Reject refuses the call; message is what the agent sees. After the tool
// ran (PhaseAfter, PhaseFailed) it withholds the output or the error, and
// the call's log lines.
func Reject(message string) Verdict { return Verdict{Verdict: VerdictReject, Message: message} }

// RewriteInput replaces the call's input (PhaseBefore) with input encoded
// as JSON, which must be an object.
func RewriteInput(input any) (Verdict, error) {
	b, err := json.Marshal(input)
	if err != nil {
		return Verdict{}, fmt.Errorf("encoding the rewritten input: %w", err)
	}
	return Verdict{Verdict: VerdictRewrite, Input: b}, nil
}

// RewriteOutput replaces the tool's output (PhaseAfter only; its log lines
// are unchanged: Reject withholds them).
func RewriteOutput(output string) Verdict {
	return Verdict{Verdict: VerdictRewrite, Output: &output}
}

// MiddlewareFunc decides on one event. An error fails the hook: maiden
// refuses the call. A panic does the same.
type MiddlewareFunc func(ev Event) (Verdict, error)

var registeredMW struct {
	desc string
	fn   MiddlewareFunc
}

// Middleware makes fn the middleware this component exports, with a
// description for operators. Call it exactly once, from an init function
// of package main. It panics if fn is nil or a middleware is already
// registered.
func Middleware(description string, fn MiddlewareFunc) {
	if fn == nil {
		panic("maiden: Middleware(nil)")
	}
	if registeredMW.fn != nil {
		panic("maiden: Middleware called twice")
	}
	registeredMW.desc, registeredMW.fn = description, fn
	registeredHook()
}

// Handle runs the registered middleware on an event, as maiden's call of
// the component's handle export would: eventJSON in, the verdict's JSON
// out, an error where handle would return err. Tests of a middleware's
// package main use it on the development machine.
func Handle(eventJSON string) (string, error) {
	text, isErr := handleResult([]byte(eventJSON))
	if isErr {
		return "", errors.New(text)
	}
	return text, nil
}

// errNoMiddleware is the panic of an export called when no middleware was
// registered.
const errNoMiddleware = "maiden: no middleware registered: call maiden.Middleware(description, fn) from an init function in package main"

// handleResult decodes the event, runs the middleware and encodes its
// verdict, returning the text and whether it is handle's err.
func handleResult(event []byte) (text string, isErr bool) {
	if registeredMW.fn == nil {
		panic(errNoMiddleware)
	}
	var ev Event
	if err := json.Unmarshal(event, &ev); err != nil {
		return validUTF8("maiden: the event is not a JSON object of the expected shape: " + err.Error()), true
	}
	v, err := registeredMW.fn(ev)
	if err != nil {
		return validUTF8(err.Error()), true
	}
	switch v.Verdict {
	case VerdictPass, VerdictReject, VerdictRewrite:
	case "":
		return "maiden: the middleware returned an empty Verdict (use maiden.Pass, Reject, RewriteInput or RewriteOutput)", true
	default:
		return validUTF8(fmt.Sprintf("maiden: the middleware returned an unknown verdict %q", v.Verdict)), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return validUTF8("maiden: encoding the verdict: " + err.Error()), true
	}
	if !utf8.Valid(b) {
		return "maiden: the verdict is not valid UTF-8", true
	}
	return string(b), false
}
