package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/maiden-run/maiden/internal/wasmtime"
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

func stateOf(c *wasmtime.Caller) *callState { return c.Store().Data().(*callState) }

func hostLog(c *wasmtime.Caller, p []wasmtime.Val) ([]wasmtime.Val, error) {
	if len(p) != 2 || p[0].Kind != wasmtime.KindEnum || p[1].Kind != wasmtime.KindString {
		return nil, errors.New("log: unexpected arguments")
	}
	stateOf(c).logs.add(Level(p[0].Case), SourceLog, p[1].Str)
	return nil, nil
}

func hostFetch(c *wasmtime.Caller, p []wasmtime.Val) ([]wasmtime.Val, error) {
	cs := stateOf(c)
	req, err := fetchRequestFromVal(p)
	if err != nil {
		return nil, err
	}
	fetch := cs.fetch
	if fetch == nil {
		fetch = NoNetwork
	}
	resp, ferr := fetch(cs.ctx, req)
	if err := cs.ctx.Err(); err != nil {
		// The deadline (or the caller) ended the call while it waited: stop
		// the guest now rather than let it run on past its budget.
		return nil, fmt.Errorf("http-fetch: %w", context.Cause(cs.ctx))
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
	ok := wasmtime.Record(
		wasmtime.FieldOf("status", wasmtime.U16(uint16(resp.Status))),
		wasmtime.FieldOf("headers", headersVal(resp.Headers)),
		wasmtime.FieldOf("body", wasmtime.Bytes(resp.Body)),
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

func fetchRequestFromVal(p []wasmtime.Val) (FetchRequest, error) {
	if len(p) != 1 || p[0].Kind != wasmtime.KindRecord {
		return FetchRequest{}, errors.New("http-fetch: unexpected arguments")
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
				return FetchRequest{}, errors.New("http-fetch: malformed header")
			}
			req.Headers = append(req.Headers, Header{Name: t.List[0].Str, Value: t.List[1].Str})
		}
	}
	if v, ok := r.Field("body"); ok {
		b, ok := v.AsBytes()
		if !ok {
			return FetchRequest{}, errors.New("http-fetch: malformed body")
		}
		req.Body = b
	}
	if v, ok := r.Field("credential"); ok && v.Payload != nil {
		req.Credential, req.HasCredential = v.Payload.Str, true
	}
	return req, nil
}
