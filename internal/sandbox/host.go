package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// Header is one HTTP header, in the order the tool or server gave it.
type Header struct {
	Name, Value string
}

// FetchRequest is a tool's http-fetch request, as the tool wrote it: nothing
// in it has been checked.
type FetchRequest struct {
	Method  string
	URL     string
	Headers []Header
	Body    []byte
	// Credential is the name of a secret the tool asks the host to attach.
	Credential    string
	HasCredential bool
}

// FetchResponse is what http-fetch returns to the tool.
type FetchResponse struct {
	Status  int
	Headers []Header
	Body    []byte
}

// FetchErrorKind is the case of the WIT fetch-error variant.
type FetchErrorKind string

// Fetch error cases.
const (
	FetchDenied   FetchErrorKind = "denied"
	FetchTimeout  FetchErrorKind = "timeout"
	FetchTooLarge FetchErrorKind = "too-large"
	FetchFailed   FetchErrorKind = "failed"
)

// FetchError is a refused or failed request, returned to the tool as a value.
type FetchError struct {
	Kind    FetchErrorKind
	Message string // for denied and failed
}

func (e *FetchError) Error() string {
	if e.Message == "" {
		return string(e.Kind)
	}
	return string(e.Kind) + ": " + e.Message
}

// FetchFunc serves http-fetch for one call. ctx carries the call's deadline.
// It returns either a response or an error for the tool; it never fails the
// call itself.
type FetchFunc func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError)

// NoNetwork is the FetchFunc of a call that has none: every request is
// denied before anything is sent.
func NoNetwork(context.Context, FetchRequest) (*FetchResponse, *FetchError) {
	return nil, &FetchError{Kind: FetchDenied, Message: "this call has no network access"}
}

// RevealFunc serves reveal (maiden:tool@0.3.0) for one call: the value of
// the secret the handle stands for, or a refusal for the tool (a message
// that names what was missing, never a value). ctx carries the call's
// deadline. The policy (which handles, which secrets, which agent) is the
// caller's; the sandbox only carries the question and the answer.
type RevealFunc func(ctx context.Context, handle string) (value string, refusal error)

// NoReveal is the RevealFunc of a call that has none: every handle is
// refused.
func NoReveal(context.Context, string) (string, error) {
	return "", errors.New("this call has no secret handles to reveal")
}

// MaxRequestBody bounds the body a tool may pass to http-fetch, like the
// response cap: a larger body is a fetch error (failed), never sent.
const MaxRequestBody = 2 << 20

// defineHost links every version of the host interface (wit.Contracts), so
// that tools built against 0.1.0 keep working next to 0.2.0 and 0.3.0 tools
// (0.1.0 and 0.2.0 differ in how http-fetch carries bodies; 0.3.0 adds
// reveal), and the middleware host interface, which has only log.
func defineHost(l *wasmtime.Linker) error {
	for _, c := range wit.Contracts {
		fetch := hostFetchBytes
		if c.StringBodies {
			fetch = hostFetchString
		}
		funcs := map[string]wasmtime.HostFunc{
			"log":        hostLog,
			"http-fetch": fetch,
		}
		if c.Reveal {
			funcs[wit.RevealImport] = hostReveal
		}
		if err := l.DefineInstance(c.HostInterface, funcs); err != nil {
			return err
		}
	}
	// Middleware components get the log and nothing else.
	return l.DefineInstance(wit.Middleware.HostInterface, map[string]wasmtime.HostFunc{"log": hostLog})
}

func stateOf(c *wasmtime.Caller) *callState { return c.Store().Data().(*callState) }

func hostLog(c *wasmtime.Caller, p []wasmtime.Val) ([]wasmtime.Val, error) {
	if len(p) != 2 || p[0].Kind != wasmtime.KindEnum || p[1].Kind != wasmtime.KindString {
		return nil, errors.New("log: unexpected arguments")
	}
	stateOf(c).logs.add(Level(p[0].Case), SourceLog, p[1].Str)
	return nil, nil
}

// hostReveal is maiden:tool/host@0.3.0's reveal: the call's RevealFunc
// decides; a refusal is err(message) for the tool, never a trap.
func hostReveal(c *wasmtime.Caller, p []wasmtime.Val) ([]wasmtime.Val, error) {
	if len(p) != 1 || p[0].Kind != wasmtime.KindString {
		return nil, errors.New("reveal: unexpected arguments")
	}
	cs := stateOf(c)
	reveal := cs.reveal
	if reveal == nil {
		reveal = NoReveal
	}
	ctx := cs.context()
	v, refusal := reveal(ctx, p[0].Str)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reveal: %w", context.Cause(ctx))
	}
	if refusal != nil {
		msg := wasmtime.String(refusal.Error())
		return []wasmtime.Val{wasmtime.Err(&msg)}, nil
	}
	val := wasmtime.String(v)
	return []wasmtime.Val{wasmtime.Ok(&val)}, nil
}

// hostFetchBytes is maiden:tool/host@0.1.0's http-fetch: bodies are
// list<u8>.
func hostFetchBytes(c *wasmtime.Caller, p []wasmtime.Val) ([]wasmtime.Val, error) {
	return hostFetch(c, p, false)
}

// hostFetchString is maiden:tool/host@0.2.0's http-fetch: bodies are strings
// with one character per byte (see encodeBody).
func hostFetchString(c *wasmtime.Caller, p []wasmtime.Val) ([]wasmtime.Val, error) {
	return hostFetch(c, p, true)
}

func hostFetch(c *wasmtime.Caller, p []wasmtime.Val, stringBodies bool) ([]wasmtime.Val, error) {
	cs := stateOf(c)
	ctx := cs.context()
	req, ferr, err := fetchRequestFromVal(p, stringBodies)
	if err != nil {
		return nil, err
	}
	var resp *FetchResponse
	if ferr == nil {
		fetch := cs.fetch
		if fetch == nil {
			fetch = NoNetwork
		}
		resp, ferr = fetch(ctx, req)
	}
	if err := ctx.Err(); err != nil {
		// The deadline (or the caller) ended the call while it waited: stop
		// the guest now rather than let it run on past its budget.
		return nil, fmt.Errorf("http-fetch: %w", context.Cause(ctx))
	}
	if ferr == nil && resp == nil {
		ferr = &FetchError{Kind: FetchFailed, Message: "no response"}
	}
	if ferr != nil {
		var payload *wasmtime.Val
		if ferr.Kind == FetchDenied || ferr.Kind == FetchFailed {
			s := wasmtime.String(ferr.Message)
			payload = &s
		}
		e := wasmtime.Variant(string(ferr.Kind), payload)
		return []wasmtime.Val{wasmtime.Err(&e)}, nil
	}
	if resp.Status < 0 || resp.Status > 0xffff {
		return nil, fmt.Errorf("http-fetch: status %d out of range", resp.Status)
	}
	body := wasmtime.Bytes(resp.Body)
	if stringBodies {
		body = wasmtime.String(encodeBody(resp.Body))
	}
	ok := wasmtime.Record(
		wasmtime.FieldOf("status", wasmtime.U16(uint16(resp.Status))),
		wasmtime.FieldOf("headers", headersVal(resp.Headers)),
		wasmtime.FieldOf("body", body),
	)
	return []wasmtime.Val{wasmtime.Ok(&ok)}, nil
}

func headersVal(hs []Header) wasmtime.Val {
	l := make([]wasmtime.Val, len(hs))
	for i, h := range hs {
		l[i] = wasmtime.Tuple(wasmtime.String(h.Name), wasmtime.String(h.Value))
	}
	return wasmtime.List(l...)
}

// fetchRequestFromVal reads http-fetch's argument. A body the tool should
// not have sent (too large, badly encoded) is a *FetchError for the tool;
// only arguments of the wrong shape, which the type check at link time rules
// out, are errors that trap.
func fetchRequestFromVal(p []wasmtime.Val, stringBody bool) (FetchRequest, *FetchError, error) {
	if len(p) != 1 || p[0].Kind != wasmtime.KindRecord {
		return FetchRequest{}, nil, errors.New("http-fetch: unexpected arguments")
	}
	r := p[0]
	var req FetchRequest
	if v, ok := r.Field("method"); ok {
		req.Method = v.Str
	}
	if v, ok := r.Field("url"); ok {
		req.URL = v.Str
	}
	if v, ok := r.Field("headers"); ok {
		for _, t := range v.List {
			if t.Kind != wasmtime.KindTuple || len(t.List) != 2 {
				return FetchRequest{}, nil, errors.New("http-fetch: malformed header")
			}
			req.Headers = append(req.Headers, Header{Name: t.List[0].Str, Value: t.List[1].Str})
		}
	}
	if v, ok := r.Field("body"); ok {
		if stringBody {
			if v.Kind != wasmtime.KindString {
				return FetchRequest{}, nil, errors.New("http-fetch: malformed body")
			}
			b, ferr := decodeBody(v.Str)
			if ferr != nil {
				return FetchRequest{}, ferr, nil
			}
			req.Body = b
		} else {
			b, ok := v.AsBytes()
			if !ok {
				return FetchRequest{}, nil, errors.New("http-fetch: malformed body")
			}
			if len(b) > MaxRequestBody {
				return FetchRequest{}, bodyTooLarge(len(b)), nil
			}
			req.Body = b
		}
	}
	if v, ok := r.Field("credential"); ok && v.Payload != nil {
		req.Credential, req.HasCredential = v.Payload.Str, true
	}
	return req, nil, nil
}

func bodyTooLarge(n int) *FetchError {
	return &FetchError{Kind: FetchFailed, Message: fmt.Sprintf("request body is %d bytes; the limit is %d", n, MaxRequestBody)}
}

// encodeBody is the body encoding of maiden:tool@0.2.0: byte b becomes the
// code point U+0000+b in UTF-8 ("latin-1 in UTF-8"). ASCII is unchanged, so a
// text or JSON body costs one copy; a byte >= 0x80 takes two bytes. Chosen
// over base64 because most bodies are text (no growth at all, against a
// third for base64). The loop is table-driven with no branch on the data:
// random binary would mispredict a branch on every other byte, which made
// encoding it three times slower.
func encodeBody(b []byte) string {
	high := 0
	for _, c := range b {
		high += int(c >> 7)
	}
	if high == 0 {
		return string(b)
	}
	out := make([]byte, len(b)+high+1) // +1: each step writes two bytes
	n := 0
	for _, c := range b {
		e := encodeTab[c]
		out[n], out[n+1] = byte(e), byte(e>>8)
		n += 1 + int(c>>7)
	}
	return string(out[:n])
}

// encodeTab[b] is b's encoding, first byte low (the second byte of an ASCII
// entry is overwritten by the next step).
var encodeTab = func() (t [256]uint16) {
	for c := range 256 {
		if c < 0x80 {
			t[c] = uint16(c)
		} else {
			t[c] = uint16(0xc0|c>>6) | uint16(0x80|c&0x3f)<<8
		}
	}
	return t
}()

// decodeBody undoes encodeBody. A string longer than any encoded body within
// MaxRequestBody is refused before decoding, so a hostile tool's huge string
// costs no more host work than its length check. A character above U+00FF
// has no byte to stand for and is refused, naming its offset.
func decodeBody(s string) ([]byte, *FetchError) {
	if len(s) > 2*MaxRequestBody {
		return nil, bodyTooLarge(len(s))
	}
	if s == "" {
		return nil, nil // like an empty list<u8>: no body
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x80:
			out = append(out, c)
		case (c == 0xc2 || c == 0xc3) && i+1 < len(s) && s[i+1]&0xc0 == 0x80:
			out = append(out, c<<6|s[i+1]&0x3f)
			i++
		default:
			return nil, &FetchError{Kind: FetchFailed, Message: fmt.Sprintf(
				"request body: the character at byte offset %d is not in U+0000..U+00FF; a body carries one byte per character (latin-1 in UTF-8, see maiden-tool.wit)", i)}
		}
	}
	if len(out) > MaxRequestBody {
		return nil, bodyTooLarge(len(out))
	}
	return out, nil
}
