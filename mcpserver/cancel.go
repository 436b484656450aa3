package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/maiden-run/maiden"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK answers a request cancelled by notifications/cancelled with an
// error response of code 0 (the handler's context.Canceled, which carries no
// JSON-RPC code). The MCP spec says a cancelled request gets no response at
// all, and 0 is not a JSON-RPC code; so each transport notes which requests
// are in flight and which of them the client cancelled, and drops the
// response to a cancelled one on its way out.

// callKey names one client request: the HTTP session ("" on stdio) and the
// request's ID as the SDK normalises it (jsonrpc.MakeID).
type callKey struct {
	session string
	id      jsonrpc.ID
}

// inflight is the set of requests being served and whether each was
// cancelled. It only ever holds requests that have not been answered, so a
// client cannot grow it with cancellations of unknown or finished requests.
//
// A request whose POST ended before its response was written (the client
// closed it: the Go SDK's client does so when the caller's context ends,
// and only then sends notifications/cancelled) is kept as an orphan for a
// while: in a session the SDK's handler outlives the POST, so the
// cancellation that follows must still reach it, or the tool (or a call
// waiting for a human's approval) runs on for nobody.
type inflight struct {
	mu      sync.Mutex
	calls   map[callKey]bool      // true: cancelled
	orphans map[callKey]time.Time // POST ended unanswered, at
}

// maxOrphans bounds the orphans kept; beyond it the oldest is dropped (its
// cancellation is then ignored, as before orphans were kept).
const maxOrphans = 4096

func (f *inflight) begin(k callKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[callKey]bool{}
	}
	f.calls[k] = false
}

// cancel marks k cancelled and reports whether it is in flight.
func (f *inflight) cancel(k callKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.calls[k]; !ok {
		return false
	}
	f.calls[k] = true
	return true
}

// finish forgets k and reports whether it was cancelled.
func (f *inflight) finish(k callKey) (cancelled bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cancelled = f.calls[k]
	delete(f.calls, k)
	return cancelled
}

// end forgets k when its POST ended; a request not yet answered becomes
// an orphan until ttl has passed.
func (f *inflight) end(k callKey, now time.Time, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, running := f.calls[k]; !running {
		return // answered
	}
	delete(f.calls, k)
	if f.orphans == nil {
		f.orphans = map[callKey]time.Time{}
	}
	var oldest callKey
	var oldestAt time.Time
	for o, at := range f.orphans {
		if now.Sub(at) > ttl {
			delete(f.orphans, o)
		} else if oldestAt.IsZero() || at.Before(oldestAt) {
			oldest, oldestAt = o, at
		}
	}
	if len(f.orphans) >= maxOrphans {
		delete(f.orphans, oldest)
	}
	f.orphans[k] = now
}

// takeOrphan reports whether k is an orphan younger than ttl, and forgets
// it.
func (f *inflight) takeOrphan(k callKey, now time.Time, ttl time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.orphans[k]
	delete(f.orphans, k)
	return ok && now.Sub(at) <= ttl
}

func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// withErrorCode gives an error response without a JSON-RPC code (the SDK
// sends code 0 for a handler error that is not a *jsonrpc.Error, such as a
// context error when the SDK itself cancelled the request) the internal
// error code: 0 is not a JSON-RPC code.
func withErrorCode(resp *jsonrpc.Response) *jsonrpc.Response {
	if resp.Error == nil {
		return resp
	}
	var we *jsonrpc.Error
	if errors.As(resp.Error, &we) && we.Code != 0 {
		return resp
	}
	out := *resp
	out.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "maiden: " + resp.Error.Error()}
	return &out
}

// cancelledID returns the request a notifications/cancelled names.
func cancelledID(req *jsonrpc.Request) (jsonrpc.ID, bool) {
	if req.Method != "notifications/cancelled" || req.IsCall() {
		return jsonrpc.ID{}, false
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil || p.RequestID == nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil && id.IsValid()
}

// trackHTTP does for one POST what stdioConn does per line: it notes the
// requests it carries (in a session) and the cancellations, and returns a
// ResponseWriter that drops the response to a request the client cancelled
// and gives a code to an error response without one. done forgets the
// POST's requests. A lone cancellation of a request that is not running is
// accepted here (answered is true) and not passed on, because the SDK
// cancels asynchronously and could hit a later request reusing the id.
func (s *Server) trackHTTP(w http.ResponseWriter, session string, body []byte) (_ http.ResponseWriter, done func(), answered bool) {
	if session == "" {
		return w, func() {}, false // initialize: nothing to cancel yet
	}
	var raws []json.RawMessage
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		if json.Unmarshal(b, &raws) != nil {
			return w, func() {}, false // the SDK answers malformed bodies
		}
	} else {
		raws = []json.RawMessage{body}
	}
	var keys []callKey
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			continue
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			continue
		}
		if req.IsCall() {
			k := callKey{session: session, id: req.ID}
			s.httpCalls.begin(k)
			keys = append(keys, k)
		} else if id, ok := cancelledID(req); ok {
			k := callKey{session: session, id: id}
			if !s.httpCalls.cancel(k) && len(raws) == 1 && !s.httpCalls.takeOrphan(k, time.Now(), s.orphanTTL()) {
				w.WriteHeader(http.StatusAccepted)
				return w, func() {}, true
			}
		}
	}
	if len(keys) == 0 {
		return w, func() {}, false
	}
	fw := &cancelFilter{ResponseWriter: w, calls: &s.httpCalls, session: session}
	return fw, func() {
		now, ttl := time.Now(), s.orphanTTL()
		for _, k := range keys {
			s.httpCalls.end(k, now, ttl)
		}
	}, false
}

// orphanTTL is how long a request whose POST ended may still be running:
// the slowest tool, after the longest wait for a human's approval.
func (s *Server) orphanTTL() time.Duration {
	return s.longestCall() + max(s.opts.ApprovalWait, maiden.DefaultApprovalWait)
}

// cancelFilter passes a POST's response through, except the response to a
// cancelled request. The SDK writes each message whole in one Write: an SSE
// event ("event: message\ndata: {...}\n\n") or, in JSON mode, the message.
type cancelFilter struct {
	http.ResponseWriter
	calls   *inflight
	session string
}

func (f *cancelFilter) Write(p []byte) (int, error) {
	prefix, data, suffix := splitEvent(p)
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return f.ResponseWriter.Write(p)
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return f.ResponseWriter.Write(p)
	}
	if f.calls.finish(callKey{session: f.session, id: resp.ID}) {
		return len(p), nil // cancelled: no response at all
	}
	if fixed := withErrorCode(resp); fixed != resp {
		if enc, err := jsonrpc.EncodeMessage(fixed); err == nil {
			if _, err := f.ResponseWriter.Write(append(append(append([]byte{}, prefix...), enc...), suffix...)); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return f.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Flush on the real writer.
func (f *cancelFilter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (f *cancelFilter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// splitEvent finds the JSON of an SSE event's single data line, or takes p
// whole as JSON.
func splitEvent(p []byte) (prefix, data, suffix []byte) {
	i := bytes.Index(p, []byte("data: "))
	if i < 0 || (i > 0 && p[i-1] != '\n') {
		return nil, p, nil
	}
	start := i + len("data: ")
	end := bytes.IndexByte(p[start:], '\n')
	if end < 0 {
		return p[:start], p[start:], nil
	}
	return p[:start], p[start : start+end], p[start+end:]
}

// sessionCalls are the tools/call handlers running in each HTTP session,
// so that a client ending its session (DELETE) cancels them. The SDK's
// session close waits for the session's handlers without cancelling them:
// a call waiting for a human's approval waited on for a client that had
// left (and its DELETE with it), and, if approved meanwhile, ran for
// nobody.
type sessionCalls struct {
	mu sync.Mutex
	m  map[string]map[*context.CancelFunc]struct{}
}

// add registers a running call of session; remove forgets it.
func (c *sessionCalls) add(session string, cancel context.CancelFunc) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]map[*context.CancelFunc]struct{}{}
	}
	if c.m[session] == nil {
		c.m[session] = map[*context.CancelFunc]struct{}{}
	}
	k := &cancel
	c.m[session][k] = struct{}{}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.m[session], k)
		if len(c.m[session]) == 0 {
			delete(c.m, session)
		}
	}
}

// cancel cancels every running call of session and reports how many.
func (c *sessionCalls) cancel(session string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m[session] {
		(*k)()
	}
	return len(c.m[session])
}
