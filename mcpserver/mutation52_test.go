package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMutation52BuiltinCallFollowsCardsWithoutList: a built-in is brought
// up to date with the agent's cards before a call of it, not only before a
// tools/list: a card granted since the last list makes cards_list callable
// at once, and once the card is revoked the call is "unknown tool" again,
// without the client listing in between.
func TestMutation52BuiltinCallFollowsCardsWithoutList(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	srv := e.httpServer(HTTPOptions{})
	tok, _ := e.token("alice")
	alice, err := e.httpClient(srv.URL, bearer(tok))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if got := toolNames(t, alice); strings.Join(got, ",") != "echo" {
		t.Fatalf("alice without cards sees %v", got)
	}
	c := e.grant("alice", "card:inspect *")
	r, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "cards_list", Arguments: map[string]any{}})
	if err != nil || r.IsError {
		t.Fatalf("cards_list right after a card allowing it was granted (no tools/list between): %v %v; want it served", err, r)
	}
	if _, err := e.st.Revoke(context.Background(), store.Operator(), c.ID); err != nil {
		t.Fatal(err)
	}
	_, err = alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "cards_list", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("cards_list after its card was revoked (no tools/list between): %v; want unknown tool", err)
	}
}

// TestMutation52ServedDespite: of the tools the host reports with an error,
// only an imported tool with its accepted definition whose upstream is
// restarting (unavailable) or changed it since (denied) is listed, so that
// its call gets the host's reason; one never accepted (no definition) and
// one failing otherwise are not listed at all.
func TestMutation52ServedDespite(t *testing.T) {
	t.Parallel()
	s := New(nil, nil)
	as := s.newAgentServer("alice")
	schema := `{"type":"object"}`
	infos := []maiden.ToolInfo{
		{Name: "up.restarting", InputSchema: schema, Error: &maiden.ToolError{Kind: maiden.KindUnavailable, Message: "restarting"}},
		{Name: "up.changed", InputSchema: schema, Error: &maiden.ToolError{Kind: maiden.KindDenied, Message: "changed upstream"}},
		{Name: "up.neveraccepted", Error: &maiden.ToolError{Kind: maiden.KindDenied, Message: "not accepted"}},
		{Name: "up.neverseen", Error: &maiden.ToolError{Kind: maiden.KindUnavailable, Message: "down"}},
		{Name: "broken", InputSchema: schema, Error: &maiden.ToolError{Kind: maiden.KindInvalid, Message: "bad schema"}},
		{Name: "fine", InputSchema: schema},
	}
	s.apply(as, infos, func(string) bool { return true }, s.handler)
	var got []string
	for name := range as.served {
		got = append(got, name)
	}
	slices.Sort(got)
	if want := []string{"fine", "up.changed", "up.restarting"}; !slices.Equal(got, want) {
		t.Fatalf("tools listed %v; want %v (an import without its accepted definition, or failing otherwise, is not listed)", got, want)
	}
}

// TestMutation52ProtocolErrorCodes: a call the host could not make is the
// JSON-RPC error of its cause: an unknown tool (a tool gone between a reload
// and the list's sync) is invalid params, as the SDK answers a name never
// listed, an overloaded host CodeOverloaded (retry later), a cancelled call
// its context's error (no response), anything else an internal error
// that says "maiden: " once.
func TestMutation52ProtocolErrorCodes(t *testing.T) {
	t.Parallel()
	s := New(nil, nil)
	for _, tc := range []struct {
		err  error
		code int64
		msg  string
	}{
		{fmt.Errorf("%w %q for agent %q (echo)", maiden.ErrUnknownTool, "gone", "alice"), jsonrpc.CodeInvalidParams, "no tool \"gone\""},
		{fmt.Errorf("%w: 8 calls running", maiden.ErrOverloaded), CodeOverloaded, "overloaded"},
		{errors.New("the store is locked"), jsonrpc.CodeInternalError, "maiden: the store is locked"},
		{fmt.Errorf("%w: cannot read", maiden.ErrState), jsonrpc.CodeInternalError, "maiden: "},
	} {
		err := s.protocolError("echo", tc.err)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != tc.code || strings.HasPrefix(je.Message, "maiden: maiden: ") || !strings.Contains(je.Message, tc.msg) {
			t.Errorf("protocolError(%v) = %#v; want code %d, a message with %q (\"maiden: \" at most once)", tc.err, err, tc.code, tc.msg)
		}
	}
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		if err := s.protocolError("echo", fmt.Errorf("call: %w", cause)); !errors.Is(err, cause) {
			t.Errorf("protocolError(%v) = %#v; want the context's error itself (no JSON-RPC answer)", cause, err)
		}
	}
}

// TestMutation52NewDigestTellsClients: a tool whose code changed (a new
// digest, the same title, description and schemas) is listed anew, so its
// clients are sent notifications/tools/list_changed.
func TestMutation52NewDigestTellsClients(t *testing.T) {
	t.Parallel()
	s := New(nil, nil)
	as := s.newAgentServer("alice")
	info := maiden.ToolInfo{Name: "echo", Description: "echoes", InputSchema: `{"type":"object"}`, Digest: "sha256:aaaa"}
	s.apply(as, []maiden.ToolInfo{info}, func(string) bool { return true }, s.handler)
	changed := make(chan struct{}, 8)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := as.mcp.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	info.Digest = "sha256:bbbb"
	s.apply(as, []maiden.ToolInfo{info}, func(string) bool { return true }, s.handler)
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatalf("the tool's code changed (digest sha256:aaaa -> sha256:bbbb), its listing alike: no notifications/tools/list_changed within 20s; want one")
	}
	if got := as.served["echo"].digest; got != "sha256:bbbb" {
		t.Errorf("served digest %q; want sha256:bbbb", got)
	}
}

// TestMutation52FormOnlyClientGetsNoURLElicitation: maiden asks a client
// only for URL-mode elicitation, and only of one that declared it: a
// client declaring form elicitation alone is sent no elicitation while its
// 2025-11-25 call waits (progress says what it waits for), and its
// 2026-07-28 call gets the pending result, not an input-required one it
// could not fulfil.
func TestMutation52FormOnlyClientGetsNoURLElicitation(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	el := &elicitLog{action: "accept"}
	var prog progressLog
	formOnly := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
	cs := e.client(legacyProtocol, &mcp.ClientOptions{ElicitationHandler: el.handler, ElicitationCompleteHandler: el.complete,
		ProgressNotificationHandler: prog.handler, Capabilities: formOnly})
	p := &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")}
	p.SetProgressToken("form-only")
	ch := callAsync(context.Background(), cs, p)
	req := e.pendingOne()
	// The elicitation would go out as the wait begins; the progress ticks
	// (every 100 ms) come after it.
	waitFor(t, 30*time.Second, func() bool {
		prog.mu.Lock()
		defer prog.mu.Unlock()
		return len(prog.msgs) >= 3
	})
	if got := el.elicitations(); len(got) != 0 {
		t.Fatalf("a client that declared form elicitation only was sent %d elicitation(s): %+v; want none", len(got), got[0])
	}
	e.decide(req.ID, true, "")
	recv(t, ch, 30*time.Second).ok(t, "200 hit 1")

	modern := e.client(ModernProtocol, &mcp.ClientOptions{ElicitationHandler: el.handler,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, Capabilities: formOnly})
	r, err := modern.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("b")})
	if err != nil {
		t.Fatal(err)
	}
	if r.NeedsInput() || !r.IsError || r.Meta[MetaErrorKind] != "pending" {
		t.Fatalf("a 2026-07-28 call of a client declaring form elicitation only: needs input %v, isError %v, meta %v; want the pending result", r.NeedsInput(), r.IsError, r.Meta)
	}
	checkPending(t, r, e.pendingOne().ID, "")
}

// TestMutation52RequestStateTagUnguessable: the tag of a request state is
// 16 bytes of HMAC; a client guessing one for an approval ID (every
// one-byte and every two-byte tag) opens nothing.
func TestMutation52RequestStateTagUnguessable(t *testing.T) {
	t.Parallel()
	k := newStateKey()
	sealed := k.seal("alice", "fetcher", "apr_1")
	tag, err := base64.RawURLEncoding.DecodeString(sealed[strings.LastIndexByte(sealed, '.')+1:])
	if err != nil || len(tag) != 16 {
		t.Fatalf("seal = %q: a tag of %d bytes (%v); want 16", sealed, len(tag), err)
	}
	for i := range 1 << 16 {
		for _, guess := range [][]byte{{byte(i)}, {byte(i), byte(i >> 8)}} {
			state := "apr_1." + base64.RawURLEncoding.EncodeToString(guess)
			if id, ok := k.open(state, "alice", "fetcher"); ok {
				t.Fatalf("a guessed request state %q opened (approval %q); want none of the one- and two-byte tags to", state, id)
			}
		}
	}
}

// TestMutation52RetryWithoutAcceptDoesNotWait: a 2026-07-28 retry carrying
// the request state but not the client's accept of the approval page (it
// cancelled, or sent no answer) does not wait for the human: it gets the
// pending result at once.
func TestMutation52RetryWithoutAcceptDoesNotWait(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Hour})
	cs := e.client(ModernProtocol, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}})
	args := e.fetch("a")
	first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetcher", Arguments: args})
	if err != nil || !first.NeedsInput() || first.RequestState == "" {
		t.Fatalf("first modern call: %+v %v; want input required", first, err)
	}
	id := e.pendingOne().ID
	for _, action := range []string{"cancel", "decline", ""} {
		var answer mcp.InputResponseMap
		if action != "" {
			answer = mcp.InputResponseMap{approvalInput: &mcp.ElicitResult{Action: action}}
		}
		// Ended with the test, so that a call still waiting does not hold
		// the host's Close.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: args, RequestState: first.RequestState, InputResponses: answer})
		select {
		case o := <-ch:
			if o.err != nil {
				t.Fatalf("retry with action %q: %v", action, o.err)
			}
			checkPending(t, o.res, id, e.srv.URL+InboxPath+id)
		case <-time.After(20 * time.Second):
			t.Fatalf("a retry whose client did not accept the approval page (action %q) still waited after 20s; want the pending result at once", action)
		}
	}
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the tool ran %d times without a human's approval", n)
	}
}

// TestMutation52WaitBegunAfterDrainIsPending: once Drain ran, a call that
// then comes to wait for a human is answered pending at once, its request
// ID included, and the request stays for an operator.
func TestMutation52WaitBegunAfterDrainIsPending(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Hour})
	cs := e.client(legacyProtocol, nil)
	if n := e.server.Drain(context.Background()); n != 0 {
		t.Fatalf("Drain with no call in flight = %d", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatal(o.err)
		}
		req := e.pendingOne()
		checkPending(t, o.res, req.ID, e.srv.URL+InboxPath+req.ID)
		if !strings.Contains(text(o.res), "the server is stopping") {
			t.Errorf("pending after Drain: %q; want it to say the server is stopping", text(o.res))
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("a call that came to wait for a human after Drain still waited after 20s; want the pending result at once")
	}
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the tool ran %d times without a human's approval", n)
	}
}

// TestMutation52NoCompletionWithoutElicitation: notifications/elicitation/complete
// follows only an elicitation maiden sent: a client able to take URL
// elicitation, served where there is no inbox URL to send (stdio without
// PublicURL), is told of no completion when the human decides.
func TestMutation52NoCompletionWithoutElicitation(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	el := &elicitLog{action: "accept"}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.server.serverFor(context.Background(), "alice").mcp.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "0"}, el.options()).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ch := callAsync(context.Background(), cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	req := e.pendingOne()
	e.decide(req.ID, true, "")
	recv(t, ch, 30*time.Second).ok(t, "200 hit 1")
	// The watch's check as its poll makes it, once the request is decided
	// (the call may have returned before a poll saw the decision).
	w := &approvalWatch{s: e.server, ctx: context.Background(), ss: ss, every: time.Second, done: make(chan struct{}), req: req, begun: true}
	if !w.check() {
		t.Fatalf("check of the decided request %s = false", req.ID)
	}
	// One more round trip: a notification sent before the result has
	// been handled by now.
	call(t, cs, "echo", map[string]any{"message": "after"})
	if got, c := el.elicitations(), el.completions(); len(got) != 0 || len(c) != 0 {
		t.Fatalf("without an inbox URL: %d elicitation(s), completions %v; want neither", len(got), c)
	}
}

// TestMutation52ElicitationCancelEndsTheWait: a client that cancels (or
// dismisses) the approval page's elicitation ends the call's wait as a
// decline does: the call returns pending at once, and nothing is approved.
func TestMutation52ElicitationCancelEndsTheWait(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Hour})
	el := &elicitLog{action: "cancel"}
	cs := e.client(legacyProtocol, el.options())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatal(o.err)
		}
		req := e.pendingOne()
		checkPending(t, o.res, req.ID, e.srv.URL+InboxPath+req.ID)
		if s := e.state(req.ID); s != "pending" {
			t.Errorf("after the client cancelled the elicitation the request is %s; want pending", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the client cancelled the approval elicitation; the call still waited after 20s; want the pending result at once")
	}
	if n := e.hits.Load(); n != 0 {
		t.Fatalf("the tool ran %d times without a human's approval", n)
	}
}

// TestMutation52UnansweredElicitationHoldsNoCall: a client that never
// answers the approval elicitation does not hold its call: once a human
// approves, the call runs and returns while the elicitation is still
// unanswered (it is withdrawn with the call).
func TestMutation52UnansweredElicitationHoldsNoCall(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Hour})
	release := make(chan struct{})
	defer close(release)
	asked := make(chan string, 1)
	cs := e.client(legacyProtocol, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params.ElicitationID
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	req := e.pendingOne()
	select {
	case id := <-asked:
		if id != req.ID {
			t.Fatalf("elicitation of %s; want %s", id, req.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no elicitation within 30s")
	}
	e.decide(req.ID, true, "")
	select {
	case o := <-ch:
		o.ok(t, "200 hit 1")
	case <-time.After(20 * time.Second):
		t.Fatalf("approved, the tool ran %d time(s), but the call had not returned 20s later: held by the client's unanswered elicitation", e.hits.Load())
	}
}

// TestMutation52DeclineAfterApprovalRuns: a client's decline that comes
// after a human approved the request gives up nothing: the call, approved,
// runs and returns its result (only a request still pending is given up).
func TestMutation52DeclineAfterApprovalRuns(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Hour})
	el := &elicitLog{action: "decline"}
	el.onElicit = func(p *mcp.ElicitParams) { e.decide(p.ElicitationID, true, "") }
	cs := e.client(legacyProtocol, el.options())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := recv(t, callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")}), 30*time.Second)
	if o.err != nil || o.res.IsError || !strings.Contains(text(o.res), "200 hit 1") {
		t.Fatalf("approved by a human, then declined on the client: %q (isError %v, meta %v) %v; want the call run: 200 hit 1", text(o.res), o.res != nil && o.res.IsError, o.res.Meta, o.err)
	}
}

// TestMutation52NoElicitationWithoutInbox: where there is no inbox URL to
// send (stdio without PublicURL) a client that declared URL elicitation is
// sent no elicitation/create at all, not one with an empty URL (the Go
// client refuses such a request before its handler, so a raw client
// reads what the server sends).
func TestMutation52NoElicitationWithoutInbox(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t, Options{ApprovalWait: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.server.serverFor(ctx, "alice").mcp.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	write := func(raw string) {
		t.Helper()
		m, err := jsonrpc.DecodeMessage([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m, err := conn.Read(ctx); err != nil {
		t.Fatal(err)
	} else if r, ok := m.(*jsonrpc.Response); !ok || r.Error != nil {
		t.Fatalf("initialize: %#v", m)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fetcher","arguments":{"url":"` + e.counter + `?a"},"_meta":{"progressToken":"raw"}}}`)
	progress, decided := 0, false
	for {
		m, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("reading the server's messages: %v", err)
		}
		switch m := m.(type) {
		case *jsonrpc.Request:
			switch m.Method {
			case "elicitation/create":
				t.Fatalf("without an inbox URL the server sent elicitation/create %s; want none", m.Params)
			case "notifications/progress":
				// The elicitation would go out as the wait begins; the
				// progress ticks come after it.
				if progress++; progress == 3 && !decided {
					decided = true
					e.decide(e.pendingOne().ID, true, "")
				}
			}
		case *jsonrpc.Response:
			if m.Error != nil || !strings.Contains(string(m.Result), "200 hit 1") {
				t.Fatalf("tools/call: %s %v; want 200 hit 1", m.Result, m.Error)
			}
			return
		}
	}
}

// newSlowApprovalEnv is newApprovalEnv whose counter server holds each
// fetch until release is closed, telling entered when one arrives: an
// approved call is then running for as long as the test wants.
func newSlowApprovalEnv(t *testing.T, o Options) (e *approvalEnv, entered <-chan struct{}, release chan struct{}) {
	t.Helper()
	in := make(chan struct{}, 16)
	release = make(chan struct{})
	e = newApprovalEnvServing(t, o, func(e *approvalEnv) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := e.hits.Add(1)
			in <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "hit %d", n)
		})
	})
	return e, in, release
}

// TestMutation52DrainLeavesAnApprovedCallRunning: Drain gives up only the
// waits of requests still pending; a call a human approved, running when
// Drain comes, finishes with its result.
func TestMutation52DrainLeavesAnApprovedCallRunning(t *testing.T) {
	t.Parallel()
	e, entered, release := newSlowApprovalEnv(t, Options{ApprovalWait: time.Hour})
	cs := e.client(legacyProtocol, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")})
	e.decide(e.pendingOne().ID, true, "")
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call did not reach the counter within 30s")
	}
	// Drain's pass over the waits, with a context already ended so that it
	// returns without waiting for the running call.
	done, stop := context.WithCancel(context.Background())
	stop()
	if n := e.server.Drain(done); n != 1 {
		t.Errorf("Drain = %d calls in flight; want 1 (the approved call, running)", n)
	}
	close(release)
	o := recv(t, ch, 30*time.Second)
	if o.err != nil || o.res.IsError || !strings.Contains(text(o.res), "200 hit 1") {
		t.Fatalf("an approved call running when Drain came: %q (meta %v) %v; want it finished: 200 hit 1", text(o.res), o.res.Meta, o.err)
	}
}

// TestMutation52ProgressStopsSayingWaitingOnceDecided: once a human
// approved, the progress of the running call no longer says it waits for
// approval.
func TestMutation52ProgressStopsSayingWaitingOnceDecided(t *testing.T) {
	t.Parallel()
	e, entered, release := newSlowApprovalEnv(t, Options{ApprovalWait: time.Hour})
	defer close(release)
	var prog progressLog
	cs := e.client(legacyProtocol, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &mcp.CallToolParams{Name: "fetcher", Arguments: e.fetch("a")}
	p.SetProgressToken("decided")
	callAsync(ctx, cs, p)
	e.decide(e.pendingOne().ID, true, "")
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call did not reach the counter within 30s")
	}
	prog.mu.Lock()
	seen := len(prog.msgs)
	prog.mu.Unlock()
	var after []string
	waitFor(t, 30*time.Second, func() bool {
		prog.mu.Lock()
		defer prog.mu.Unlock()
		after = append([]string(nil), prog.msgs[seen:]...)
		return len(after) >= 10 || len(after) > 0 && strings.Contains(after[len(after)-1], "running for")
	})
	if last := after[len(after)-1]; !strings.Contains(last, "fetcher running for") {
		t.Fatalf("the approved call runs; its progress since: %q; want \"fetcher running for …\", not waiting for approval", after)
	}
}
