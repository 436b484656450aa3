package maiden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Tool is what a maiden tool implements. The host calls Describe and Schema
// when it loads the tool, and Execute once per call, each time in a fresh
// instance: nothing survives from one call to the next.
type Tool interface {
	// Describe returns one paragraph telling an agent what the tool does.
	Describe() string
	// Schema returns the JSON Schema (as text) of the input Execute accepts.
	// SchemaFor derives one from a Go type.
	Schema() string
	// Execute runs the tool on input, a JSON document. The output must be
	// UTF-8 text (usually JSON). A non-nil error becomes the call's tool
	// error: its message is what the agent sees. ctx is never cancelled by
	// the host today; the host enforces the tool's timeout by stopping the
	// instance.
	Execute(ctx context.Context, input []byte) ([]byte, error)
}

// OutputSchemer is implemented by a Tool that declares the JSON Schema of
// what Execute returns on success. The host reads it once when it loads the
// tool (maiden:tool@0.2.0's output-schema) and MCP clients see it as the
// tool's outputSchema. A Tool without it declares none. Func implements it.
type OutputSchemer interface {
	// OutputSchema returns the JSON Schema (as text) of Execute's output, or
	// "" for none. MCP requires an object schema, so a tool whose output is
	// not a JSON object should return "".
	OutputSchema() string
}

// outputSchemaOf is t's output schema, or "" when it declares none.
func outputSchemaOf(t Tool) string {
	if o, ok := t.(OutputSchemer); ok {
		return o.OutputSchema()
	}
	return ""
}

var registered Tool

// Register makes t the tool this component exports. Call it exactly once,
// from an init function of package main (main itself never runs; see the
// package documentation). It panics if t is nil or a tool is already
// registered.
func Register(t Tool) {
	if t == nil {
		panic("maiden: Register(nil)")
	}
	if registered != nil {
		panic("maiden: Register called twice")
	}
	registered = t
	registeredHook()
}

// Registered returns the tool passed to Register, or nil. Tests of a tool's
// package main use it to call the tool on the development machine.
func Registered() Tool { return registered }

// Func returns a Tool whose input and output are the Go types In and Out,
// encoded as JSON. Its schema is SchemaFor[In](). Its output schema (see
// OutputSchemer) is SchemaFor[Out]() when Out is a struct or a pointer to
// one whose JSON encoding is not custom, and none otherwise: MCP's output
// schemas describe JSON objects. Input that does not decode into In is a
// tool error that names the problem, and so is a key that differs from a
// field's JSON name only in case (see "Input keys" in the package
// documentation).
func Func[In, Out any](description string, fn func(ctx context.Context, in In) (Out, error)) Tool {
	return &funcTool[In, Out]{desc: description, fn: fn}
}

type funcTool[In, Out any] struct {
	desc      string
	fn        func(context.Context, In) (Out, error)
	schema    string
	outSchema *string // nil until computed; "" is a valid answer
}

func (f *funcTool[In, Out]) Describe() string { return f.desc }

func (f *funcTool[In, Out]) Schema() string {
	if f.schema == "" {
		f.schema = SchemaFor[In]()
	}
	return f.schema
}

func (f *funcTool[In, Out]) OutputSchema() string {
	if f.outSchema == nil {
		s := ""
		if isPlainStruct(reflect.TypeFor[Out]()) {
			s = SchemaFor[Out]()
		}
		f.outSchema = &s
	}
	return *f.outSchema
}

// isPlainStruct tells whether t (or what it points to) is a struct that
// encoding/json encodes field by field, i.e. as a JSON object SchemaFor
// describes.
func isPlainStruct(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for _, m := range []reflect.Type{jsonMarshalerType, textMarshalerType} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return false
		}
	}
	return true
}

func (f *funcTool[In, Out]) Execute(ctx context.Context, input []byte) ([]byte, error) {
	var in In
	if err := unmarshalExact(input, &in); err != nil {
		return nil, fmt.Errorf("invalid input: %w", err)
	}
	out, err := f.fn(ctx, in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Level is the severity of a log line.
type Level uint8

// Log levels, in the order of the host interface's level enum.
const (
	LevelDebug Level = iota
	LevelInfo
	LevelWarn
	LevelError
)

func (l Level) String() string {
	switch l {
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	case LevelError:
		return "error"
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// Log appends msg to the call's log at the given level. The host bounds a
// call's log (64 KiB by default) and drops lines past the bound. Invalid
// UTF-8 is replaced with U+FFFD; a level out of range is logged as error.
func Log(level Level, msg string) {
	if level > LevelError {
		level = LevelError
	}
	hostLog(level, validUTF8(msg))
}

// Logf is Log with fmt.Sprintf formatting.
func Logf(level Level, format string, args ...any) {
	Log(level, fmt.Sprintf(format, args...))
}

// Header is one HTTP header field.
type Header struct {
	Name, Value string
}

// Headers is an ordered list of header fields; a name may repeat.
type Headers []Header

// Get returns the value of the first field named name, compared
// case-insensitively, or "".
func (h Headers) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Request is an HTTP request for Fetch.
type Request struct {
	// Method is the HTTP method; "" means GET.
	Method string
	// URL is an absolute https URL whose host the tool's policy allows.
	URL string
	// Header fields to send. The host refuses Authorization, Cookie, Host,
	// Proxy-* and hop-by-hop fields: credentials are attached by the host.
	Header Headers
	// Body is the request body; nil means none.
	Body []byte
	// Credential is the NAME of a secret listed in the tool's policy
	// (agent.toml `secrets`), never a value. The host resolves it and sends
	// it as "Authorization: Bearer <value>"; the value never enters the tool.
	// "" means no credential.
	Credential string
}

// Response is the host's answer to a Fetch. Redirects are not followed: a
// 3xx arrives as an ordinary response.
type Response struct {
	Status int
	Header Headers
	Body   []byte
}

// FetchErrorKind is why a Fetch got no response.
type FetchErrorKind uint8

// The cases of the host's fetch-error variant, in WIT order.
const (
	// FetchDenied: refused by policy before anything was sent; Message names
	// the rule.
	FetchDenied FetchErrorKind = iota
	// FetchTimeout: the call's deadline ran out while waiting.
	FetchTimeout
	// FetchTooLarge: the response body was larger than the tool's cap.
	FetchTooLarge
	// FetchFailed: the request was sent or attempted and failed
	// (connection, TLS, ...); Message says how.
	FetchFailed
)

func (k FetchErrorKind) String() string {
	switch k {
	case FetchDenied:
		return "denied"
	case FetchTimeout:
		return "timeout"
	case FetchTooLarge:
		return "too-large"
	case FetchFailed:
		return "failed"
	}
	return fmt.Sprintf("FetchErrorKind(%d)", uint8(k))
}

// Errors that errors.Is matches against a *FetchError of the same kind.
var (
	ErrDenied   = errors.New("maiden: request denied by policy")
	ErrTimeout  = errors.New("maiden: request timed out")
	ErrTooLarge = errors.New("maiden: response too large")
	ErrFailed   = errors.New("maiden: request failed")
)

// FetchError is the host's refusal or failure of a Fetch. Test for a kind
// with errors.Is(err, maiden.ErrDenied) and so on, or errors.As.
type FetchError struct {
	Kind FetchErrorKind
	// Message explains a denied or failed request ("" for the others).
	Message string
}

func (e *FetchError) Error() string {
	if e.Message == "" {
		return "fetch " + e.Kind.String()
	}
	return "fetch " + e.Kind.String() + ": " + e.Message
}

// Is reports whether target is the sentinel error of e's kind.
func (e *FetchError) Is(target error) bool {
	switch target {
	case ErrDenied:
		return e.Kind == FetchDenied
	case ErrTimeout:
		return e.Kind == FetchTimeout
	case ErrTooLarge:
		return e.Kind == FetchTooLarge
	case ErrFailed:
		return e.Kind == FetchFailed
	}
	return false
}

// Fetch sends req through the host, which checks it against the tool's
// policy first. The error is a *FetchError when the host refused or could not
// complete the request, and a plain error when req itself cannot be sent (a
// string that is not valid UTF-8). Fetch may be called from several
// goroutines; requests are sent one at a time.
func Fetch(req Request) (Response, error) {
	for _, s := range []struct{ what, v string }{{"method", req.Method}, {"URL", req.URL}, {"credential", req.Credential}} {
		if !utf8.ValidString(s.v) {
			return Response{}, fmt.Errorf("maiden: fetch: %s is not valid UTF-8", s.what)
		}
	}
	for _, h := range req.Header {
		if !utf8.ValidString(h.Name) || !utf8.ValidString(h.Value) {
			return Response{}, fmt.Errorf("maiden: fetch: header %q is not valid UTF-8", validUTF8(h.Name))
		}
	}
	return hostFetch(req)
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
