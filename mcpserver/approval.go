package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/inbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call that a middleware rule sends to a human (use = "approve") reaches
// the client in one of two ways, by the era of the request:
//
//   - 2025-11-25 and older (sessions): the call waits (Options.ApprovalWait,
//     or the host's default). While it waits, a client that gave a progress
//     token gets progress notifications saying what it waits for, and a
//     client that declared URL-mode elicitation is sent elicitation/create
//     in URL mode, pointing at the inbox page of the request; when a human
//     has decided, notifications/elicitation/complete follows.
//   - 2026-07-28 (stateless): the server may not send requests of its own.
//     The call does not wait; a client that declared URL-mode elicitation
//     gets the multi-round-trip "input required" result carrying the same
//     URL elicitation and a request state naming the approval; its retry
//     (after its user opened the page) waits for the human's decision. A
//     client without URL elicitation gets the pending result at once.
//
// The client's answer to the elicitation is never consent: only an
// operator decides, on the server (maiden approve, the inbox). Accepting
// means "my user opened the page"; declining ends the wait early, the call
// then returns pending, and the request stays for an operator to decide.
//
// A call whose wait ended undecided returns an isError result of kind
// pending, with the approval's ID and inbox URL; repeating the same call
// (same tool and arguments) after a human approved runs it, once.

// InboxPath is the path under which the inbox serves the page of one
// approval request (InboxPath + ID), relative to the public URL.
const InboxPath = inbox.Path + "/approvals/"

// Keys of a pending or denied result's _meta, beside MetaErrorKind.
const (
	// MetaApproval is the approval request's ID.
	MetaApproval = "maiden/approval"
	// MetaInbox is the URL of the request's inbox page, when there is one.
	MetaInbox = "maiden/inbox"
)

// approvalInput is the key of the approval elicitation in an input-required
// result's inputRequests (and of the client's answer in inputResponses).
const approvalInput = "approval"

// inboxHeader carries the inbox base URL of one HTTP request from the HTTP
// front end to the tool handler, which the SDK hands the request's header.
// The front end sets it itself after dropping any value a client sent.
const inboxHeader = "Maiden-Inbox-Base"

// credentialHeader carries the credential the HTTP front end authenticated
// for one request (maiden.TokenCredential) from the HTTP handler to the
// tool handler, like inboxHeader: set by the handler after deleting any
// the client sent.
const credentialHeader = "Maiden-Credential"

// StdioCredential is the credential of every call of a stdio client
// (RunStdio; maiden.Call.Credential): the stdio front end of its agent is
// a principal of its own, as each of the agent's tokens is over HTTP. So
// its session_open handles are bound to it, a 2026-07-28 request of it
// naming no handle runs in a default session of its own
// ("default-AGENT/stdio"), and it cannot name, as a handle, a session bound
// to no credential: every token's default session (whose ID is made of the
// token's ID, which is no secret) and every 2025-11-25 HTTP session are, and
// naming one ran a stdio client under the boundary a human widened for
// that token (TestStdioHandleNotAnotherCredentials). No token's credential
// is this one ("token:" and its ID).
const StdioCredential = "stdio"

// callCredential is the credential req was authenticated with: over HTTP
// the one the front end set (a token's, or "" without [agents], where one
// credential serves all); StdioCredential over stdio; "" for a transport
// this package does not wrap (MCP()), as for an embedder's Host.Call.
func (s *Server) callCredential(req *mcp.CallToolRequest) string {
	if req.Extra != nil && req.Extra.Header != nil {
		return req.Extra.Header.Get(credentialHeader)
	}
	if s.stdio.Load() {
		return StdioCredential
	}
	return ""
}

// errDeclined ends an approval wait early: the client's user declined (or
// dismissed) the elicitation that opens the inbox page.
var errDeclined = errors.New("the client declined the approval elicitation")

// errDraining ends an approval wait because the server is stopping (Drain):
// the call answers pending with its request ID, and the request stays for
// an operator; the client repeats the call after the restart.
var errDraining = errors.New("the server is stopping")

// inboxBaseFor is the base URL of the inbox for an HTTP request: the
// configured public URL, else the request's own scheme and host name when
// that host is loopback (a human on this machine can open it) with the
// port the request really reached (the listener's: a client's Host
// header could name another local port, where another program answers),
// else none.
func (s *Server) inboxBaseFor(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return s.opts.PublicURL
	}
	if !loopbackHost(r.Host) {
		return ""
	}
	host, port := r.Host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = h, p
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		if _, p, err := net.SplitHostPort(local.String()); err == nil {
			port = p
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	return scheme + "://" + host
}

// inboxBase is the inbox base URL for one tools/call: what the HTTP front
// end found for its request, else the configured public URL (stdio).
func (s *Server) inboxBase(req *mcp.CallToolRequest) string {
	if req.Extra != nil && req.Extra.Header != nil {
		return req.Extra.Header.Get(inboxHeader)
	}
	return s.opts.PublicURL
}

// inboxURL is the inbox page of approval request id, or "" without a base.
func inboxURL(base, id string) string {
	if base == "" || id == "" {
		return ""
	}
	return base + InboxPath + url.PathEscape(id)
}

// supportsURLElicitation reports whether a client declared URL-mode
// elicitation.
func supportsURLElicitation(caps *mcp.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// stateKey signs the request state of input-required results, so that a
// retry's state is known to be one this server issued for the same agent
// and tool (the spec asks servers to sign what clients echo). The key
// lives as long as the process: a state from before a restart is treated
// as absent, which costs the client one more round trip, nothing else.
type stateKey [32]byte

func newStateKey() *stateKey {
	var k stateKey
	if _, err := rand.Read(k[:]); err != nil {
		panic("mcpserver: no randomness for the request-state key: " + err.Error())
	}
	return &k
}

func (k *stateKey) mac(agent, tool, id string) []byte {
	m := hmac.New(sha256.New, k[:])
	fmt.Fprintf(m, "maiden approval state v1\x00%s\x00%s\x00%s", agent, tool, id)
	return m.Sum(nil)[:16]
}

// seal is the request state naming approval id for agent's call of tool.
func (k *stateKey) seal(agent, tool, id string) string {
	return id + "." + base64.RawURLEncoding.EncodeToString(k.mac(agent, tool, id))
}

// open returns the approval ID a request state names, if this server
// issued it for the same agent and tool.
func (k *stateKey) open(state, agent, tool string) (string, bool) {
	i := strings.LastIndexByte(state, '.')
	if i <= 0 {
		return "", false
	}
	id := state[:i]
	tag, err := base64.RawURLEncoding.DecodeString(state[i+1:])
	if err != nil || !hmac.Equal(tag, k.mac(agent, tool, id)) {
		return "", false
	}
	return id, true
}

// elicitAction is the client's answer to the approval elicitation of an
// input-required result ("accept", "decline", "cancel"; "" if none).
func elicitAction(m mcp.InputResponseMap) string {
	if r, ok := m[approvalInput].(*mcp.ElicitResult); ok && r != nil {
		return r.Action
	}
	return ""
}

// runCall runs one tools/call through the host, carrying it through a
// human's approval when a middleware rule asks for one.
func (s *Server) runCall(ctx context.Context, req *mcp.CallToolRequest, c maiden.Call) (*mcp.CallToolResult, error) {
	session := ""
	if req.Session != nil {
		session = req.Session.ID()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	handler, remove := s.calls.add(session, cancel)
	defer remove()
	inbox := s.inboxBase(req)
	modern := isDate(req.ProtocolVersion()) && req.ProtocolVersion() >= ModernProtocol
	urlElicit := inbox != "" && supportsURLElicitation(req.ClientCapabilities())
	w := &approvalWatch{s: s, ctx: ctx, ss: req.Session, inbox: inbox, every: s.opts.ProgressEvery, done: make(chan struct{})}
	c.OnApproval = w.begin
	var stateID string
	if modern {
		// No server-to-client requests: never wait on a first call; the
		// client hears of the approval in the result.
		c.ApprovalWait = -1
		if id, ok := s.states.open(req.Params.RequestState, c.Agent, c.Tool); ok {
			stateID = id
			if elicitAction(req.Params.InputResponses) == "accept" {
				// The client's user opened the inbox page: wait for the
				// human there, as a legacy call does. (Not consent: the
				// operator's decision is what the wait is for.)
				c.ApprovalWait = s.opts.ApprovalWait
			}
		}
	} else {
		c.ApprovalWait = s.opts.ApprovalWait
		w.elicit = urlElicit
	}
	c.Credential = s.callCredential(req)
	sess, bad := s.callSession(ctx, req, c.Agent, c.Credential, modern)
	if bad != nil {
		return bad, nil
	}
	c.Session = sess
	c.TraceParent, c.TraceState = callTrace(req)
	waitCtx, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	w.stopWait = stopWait
	s.calls.setWatch(handler, w)
	stopProgress, onProgress := s.startProgress(ctx, req, c.Tool, w)
	c.OnProgress = onProgress
	var res maiden.Result
	var err error
	s.warm.run(func() { res, err = s.host.Call(waitCtx, c) })
	if modern {
		s.touchHandle(ctx, sess)
	}
	stopProgress()
	w.end()
	if err != nil {
		// The host ends a wait its context ends with a pending result; this
		// is the case of a decline that came as the call was resuming
		// after an approval (nothing was consumed: repeating it runs it).
		if ctx.Err() == nil && errors.Is(context.Cause(waitCtx), errDeclined) {
			if r, ok := w.request(); ok {
				return s.pendingResult(c, r.ID, inbox, fmt.Sprintf(
					"the call waits for a human's approval (request %s: %s); the approval page was declined on the client, which decides nothing: an operator does", r.ID, r.Reason)), nil
			}
		}
		if ctx.Err() == nil && errors.Is(context.Cause(waitCtx), errDraining) {
			if r, ok := w.request(); ok {
				return s.pendingResult(c, r.ID, inbox, fmt.Sprintf(
					"the call waits for a human's approval (request %s: %s); the server is stopping, and the request stays: repeat the call once it is back", r.ID, r.Reason)), nil
			}
		}
		return nil, s.protocolError(c.Tool, err)
	}
	if !res.OK && res.Error != nil {
		switch res.Error.Kind {
		case api.KindPending:
			if modern && urlElicit && res.Error.Approval != "" && res.Error.Approval != stateID {
				return s.inputRequired(c, res.Error, inbox), nil
			}
			msg := res.Error.Message
			switch cause := context.Cause(waitCtx); {
			case errors.Is(cause, errDeclined):
				msg = "the approval page was declined on the client, which decides nothing: an operator does. " + msg
			case errors.Is(cause, errDraining):
				msg = "the server is stopping; the request stays for an operator: repeat the call once it is back. " + msg
			}
			return s.pendingResult(c, res.Error.Approval, inbox, msg), nil
		case api.KindDenied:
			out := toolResult(res) // with a boundary's structured error, if any
			if res.Error.Approval != "" {
				out.Meta[MetaApproval] = res.Error.Approval
			}
			return out, nil
		}
	}
	return toolResult(res), nil
}

// inputRequired is the 2026-07-28 multi-round-trip result of a call that
// waits for approval: a URL elicitation of the inbox page, and a signed
// request state naming the approval, for the client's retry.
func (s *Server) inputRequired(c maiden.Call, e *maiden.ToolError, inbox string) *mcp.CallToolResult {
	u := inboxURL(inbox, e.Approval)
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approvalInput: &mcp.ElicitParams{
			Mode:          "url",
			Message:       fmt.Sprintf("maiden: a human must approve %s's call of %s (approval %s) before it runs; open the page to see it. Opening it is not approving: an operator decides there.", c.Agent, c.Tool, e.Approval),
			URL:           u,
			ElicitationID: e.Approval,
		}},
		RequestState: s.states.seal(c.Agent, c.Tool, e.Approval),
	}
}

// pendingResult is the result of a call whose wait for approval ended
// without a decision. Its structured content names the request and its
// inbox page (left out for a tool with an output schema, which
// structuredContent must match; the _meta has the same).
func (s *Server) pendingResult(c maiden.Call, id, inbox, msg string) *mcp.CallToolResult {
	u := inboxURL(inbox, id)
	text := msg
	if u != "" {
		text += "; a human decides at " + u
	}
	text += ". Once it is approved, repeat the same call with the same arguments: it runs then, once"
	out := errorResult(api.KindPending, text)
	out.Meta[MetaApproval] = id
	if u != "" {
		out.Meta[MetaInbox] = u
	}
	if !s.hasOutputSchema(c.Agent, c.Tool) {
		sc := map[string]any{"status": "pending", "approval": id}
		if u != "" {
			sc["inbox"] = u
		}
		out.StructuredContent = sc
	}
	return out
}

// hasOutputSchema reports whether agent's listing of tool declares an
// output schema.
func (s *Server) hasOutputSchema(agent, tool string) bool {
	s.mu.Lock()
	as := s.agents[agent]
	s.mu.Unlock()
	if as == nil {
		return false
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.served[tool].outputSchema != ""
}

// approvalWatch follows one call's approval request while the call waits:
// it sends the URL elicitation (legacy era), polls the request's state so
// progress says what the call is doing, and tells the client when a human
// has decided (notifications/elicitation/complete).
type approvalWatch struct {
	s        *Server
	ctx      context.Context // the tools/call's: its notifications belong to its request
	ss       *mcp.ServerSession
	inbox    string
	elicit   bool // send a URL elicitation
	every    time.Duration
	stopWait context.CancelCauseFunc
	done     chan struct{}
	wg       sync.WaitGroup

	mu        sync.Mutex
	req       maiden.ApprovalRequest
	begun     bool
	decided   bool // the request was seen decided (or gone)
	elicited  bool // an elicitation was sent
	completed bool // and its completion notified
}

// begin is Call.OnApproval: the request is persisted, the call is about to
// wait.
func (w *approvalWatch) begin(r maiden.ApprovalRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := !w.begun
	w.req, w.begun, w.decided = r, true, false
	if w.s.draining.Load() {
		// The server is stopping: the request is stored; answer pending
		// now rather than wait for a human the server will not be there for.
		w.stopWait(errDraining)
		return
	}
	if !first {
		return
	}
	w.wg.Add(1)
	go w.poll()
	if w.elicit && w.ss != nil {
		w.elicited = true
		w.wg.Add(1)
		go w.sendElicitation(r)
	}
}

// request returns the approval request the call waits (or waited) for.
func (w *approvalWatch) request() (maiden.ApprovalRequest, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.req, w.begun
}

// waiting is the progress message while the call waits for a human, or ""
// once it does not (no approval asked, or decided).
func (w *approvalWatch) waiting() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.begun || w.decided {
		return ""
	}
	msg := fmt.Sprintf("waiting for approval %s: %s", w.req.ID, w.req.Reason)
	if u := inboxURL(w.inbox, w.req.ID); u != "" {
		msg += " (" + u + ")"
	}
	return msg
}

// poll checks the request's state every interval until a human decided,
// then notifies the elicitation's completion.
func (w *approvalWatch) poll() {
	defer w.wg.Done()
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-w.ctx.Done():
			return
		case <-t.C:
			if w.check() {
				return
			}
		}
	}
}

// check reads the request's state; once it is no longer pending it marks
// it decided, notifies the completion of an elicitation sent, and reports
// true.
func (w *approvalWatch) check() bool {
	r, _ := w.request()
	a, err := w.s.host.Approval(w.ctx, r.ID)
	if err != nil {
		if !errors.Is(err, maiden.ErrUnknownApproval) {
			w.s.log.Debug("could not read an approval request's state", "approval", r.ID, "error", err)
			return false
		}
	} else if a.State == "pending" {
		return false
	}
	w.mu.Lock()
	w.decided = true
	notify := w.elicited && !w.completed
	w.completed = w.completed || notify
	w.mu.Unlock()
	if notify {
		if err := w.ss.NotifyElicitationComplete(w.ctx, &mcp.ElicitationCompleteParams{ElicitationID: r.ID}); err != nil {
			w.s.log.Debug("elicitation completion notification failed", "approval", r.ID, "error", err)
		}
	}
	return true
}

// sendElicitation asks the client to open the request's inbox page. A
// decline or cancel ends the call's wait (the call returns pending) if the
// request is still undecided; an accept changes nothing.
func (w *approvalWatch) sendElicitation(r maiden.ApprovalRequest) {
	defer w.wg.Done()
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	go func() {
		select {
		case <-w.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := w.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode: "url",
		Message: fmt.Sprintf("maiden: a human must approve this call of %s (approval %s: %s). Open the page to see it; opening it is not approving: an operator decides there.",
			r.Tool, r.ID, r.Reason),
		URL:           inboxURL(w.inbox, r.ID),
		ElicitationID: r.ID,
	})
	if err != nil {
		if ctx.Err() == nil {
			w.s.log.Debug("approval elicitation failed", "approval", r.ID, "error", err)
		}
		return
	}
	if res.Action == "accept" {
		return
	}
	// Only a request still waiting is given up; one a human approved in the
	// meantime may be running already, and is left to finish.
	if a, err := w.s.host.Approval(w.ctx, r.ID); err == nil && a.State == "pending" {
		w.stopWait(errDeclined)
	}
}

// end stops the watch when the call returned, and notifies the completion
// of an elicitation sent if a human decided before the poll saw it.
func (w *approvalWatch) end() {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	pending := w.begun && w.elicited && !w.completed
	w.mu.Unlock()
	if pending && w.ctx.Err() == nil {
		w.check()
	}
}

// Drain is for a stopping server: every call that waits for a human
// (an approval or a boundary request still pending) is answered now with its
// pending result, request ID included, and the request stays in the store
// for an operator; calls already running are left to finish. Drain returns
// when no tools/call is in flight any more, or when ctx ends, with how many
// calls are still in flight. Call it after the listener stopped accepting
// and before closing connections, so the answers reach the clients.
func (s *Server) Drain(ctx context.Context) int {
	s.draining.Store(true)
	for _, w := range s.calls.watches() {
		r, begun := w.request()
		if !begun {
			continue
		}
		// As for a declined elicitation: only a request still pending is
		// given up; one a human approved meanwhile is running, and finishes.
		if a, err := s.host.Approval(context.WithoutCancel(ctx), r.ID); err == nil && a.State == "pending" {
			w.stopWait(errDraining)
		}
	}
	return s.calls.waitIdle(ctx)
}
