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
	// order is the orphans in the order they were made, the oldest first,
	// so that making one drops the expired and the oldest from its front
	// without looking at the others: one POST may carry thousands of
	// requests (a batch), each made an orphan when the client closes the
	// POST (or the SDK refuses the batch), and a scan of every orphan for
	// each made a 1 MiB batch of pings cost 3.3 s of CPU, a share of it
	// under the lock every HTTP request of every agent takes. An entry
	// whose orphan was taken, or made again later, is stale: skipped.
	order []orphan
}

// orphan is one entry of inflight.order.
type orphan struct {
	k  callKey
	at time.Time
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
	for len(f.order) > 0 {
		o := f.order[0]
		at, live := f.orphans[o.k]
		live = live && at.Equal(o.at)
		if live && now.Sub(at) <= ttl && len(f.orphans) < maxOrphans {
			break // the oldest is young enough, and there is room
		}
		if live {
			delete(f.orphans, o.k)
		}
		f.order[0] = orphan{}
		f.order = f.order[1:]
	}
	f.orphans[k] = now
	f.order = append(f.order, orphan{k, now})
	if len(f.order) > 2*maxOrphans {
		// Mostly stale entries (orphans taken): keep the live ones, once
		// in maxOrphans orphans made at most.
		live := make([]orphan, 0, len(f.orphans))
		for _, o := range f.order {
			if at, ok := f.orphans[o.k]; ok && at.Equal(o.at) {
				live = append(live, o)
			}
		}
		f.order = live
	}
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
// version is the request's MCP-Protocol-Version header.
func (s *Server) trackHTTP(w http.ResponseWriter, session, version string, body []byte) (_ http.ResponseWriter, done func(), answered bool) {
	if session == "" {
		return w, func() {}, false // initialize: nothing to cancel yet
	}
	var raws []json.RawMessage
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		if !batchProtocols[version] {
			// The SDK refuses the batch whole (400: batches are gone from
			// 2025-06-18, and an unknown version is refused) and runs
			// none of its requests. Tracked, every one would end an
			// orphan, and one such POST would push out the orphans of
			// every session.
			return w, func() {}, false
		}
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

// batchProtocols are the MCP-Protocol-Version headers of a request whose
// JSON-RPC batch the SDK serves: none (the SDK takes 2025-03-26) and the
// revisions before batches were dropped in 2025-06-18.
var batchProtocols = map[string]bool{"": true, "2025-03-26": true, "2024-11-05": true}

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

// callHandlers are the server's tools/call handlers running now, for the
// two things that must reach all of them or a group of them:
//
//   - a client ending its HTTP session (DELETE) cancels that session's
//     handlers. The SDK's session close waits for the session's handlers
//     without cancelling them: a call waiting for a human's approval waited
//     on for a client that had left (and its DELETE with it), and, if
//     approved meanwhile, ran for nobody;
//   - a stopping server (Drain) ends every wait for a human with the pending
//     result instead of dropping the connection under it, then waits for
//     every handler to return.
type callHandlers struct {
	mu        sync.Mutex
	all       map[*callHandler]struct{}
	bySession map[string]map[*callHandler]struct{}
	idle      chan struct{} // closed when all becomes empty; nil while nobody waits for that
}

// callHandler is one tools/call handler in flight.
type callHandler struct {
	session string             // its HTTP session; "" for none (stdio, stateless)
	cancel  context.CancelFunc // ends the handler's context
	watch   *approvalWatch     // its wait for a human, once one may begin; nil before
}

// add registers a handler of session that cancel ends; remove forgets it.
func (hs *callHandlers) add(session string, cancel context.CancelFunc) (h *callHandler, remove func()) {
	h = &callHandler{session: session, cancel: cancel}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.all == nil {
		hs.all = map[*callHandler]struct{}{}
		hs.bySession = map[string]map[*callHandler]struct{}{}
	}
	hs.all[h] = struct{}{}
	if session != "" {
		if hs.bySession[session] == nil {
			hs.bySession[session] = map[*callHandler]struct{}{}
		}
		hs.bySession[session][h] = struct{}{}
	}
	return h, func() {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		delete(hs.all, h)
		if session != "" {
			delete(hs.bySession[session], h)
			if len(hs.bySession[session]) == 0 {
				delete(hs.bySession, session)
			}
		}
		if len(hs.all) == 0 && hs.idle != nil {
			close(hs.idle)
			hs.idle = nil
		}
	}
}

// setWatch records h's approval watch, for Drain.
func (hs *callHandlers) setWatch(h *callHandler, w *approvalWatch) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h.watch = w
}

// cancelSession cancels every handler of session and reports how many.
func (hs *callHandlers) cancelSession(session string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for h := range hs.bySession[session] {
		h.cancel()
	}
	return len(hs.bySession[session])
}

// watches are the approval watches of the handlers in flight.
func (hs *callHandlers) watches() []*approvalWatch {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	ws := make([]*approvalWatch, 0, len(hs.all))
	for h := range hs.all {
		if h.watch != nil {
			ws = append(ws, h.watch)
		}
	}
	return ws
}

// waitIdle waits until no handler is in flight (0), or for ctx (how many
// still are).
func (hs *callHandlers) waitIdle(ctx context.Context) int {
	for {
		hs.mu.Lock()
		if len(hs.all) == 0 {
			hs.mu.Unlock()
			return 0
		}
		if hs.idle == nil {
			hs.idle = make(chan struct{})
		}
		idle := hs.idle
		hs.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			hs.mu.Lock()
			defer hs.mu.Unlock()
			return len(hs.all)
		}
	}
}
