//lint:file-ignore SA1019 the tests exercise MCP logging, deprecated upstream but still served

package mcpserver

// The twenty-second mutation pass (docs/mutation/mcpserver-stdio-cancel.tsv):
// an agent's cancellations, its stdio stream and its log notifications. Each
// test names the planted bug it was written to kill.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestCancelOfUnknownRequestsHoldsNothing: cancellations of requests that
// are not running (never sent, or finished) are accepted and held nowhere:
// the set of requests in flight holds only requests being served, so an
// agent cannot grow it by cancelling ids. Kills c01 (cancel marking any
// key, running or not).
func TestCancelOfUnknownRequestsHoldsNothing(t *testing.T) {
	t.Parallel()
	var f inflight
	f.begin(callKey{session: "s", id: mustID(t, 1)}) // one running
	k := callKey{session: "s", id: mustID(t, 7)}
	if ok := f.cancel(k); ok || f.len() != 1 {
		t.Fatalf("cancel of a request never begun = %v, %d requests held; want false, the 1 running", ok, f.len())
	}
	f.begin(k)
	f.finish(k)
	if ok := f.cancel(k); ok || f.len() != 1 {
		t.Fatalf("cancel of a finished request = %v, %d requests held; want false, the 1 running", ok, f.len())
	}

	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv := e.httpServer(HTTPOptions{})
	session := rawSession(t, srv.URL)
	for i := range 50 {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, 1000+i)
		if code, _, resp := post(t, srv.URL, session, strings.NewReader(body)); code != http.StatusAccepted {
			t.Fatalf("cancel of request %d, never sent: %d %q", 1000+i, code, resp)
		}
	}
	if n := e.server.httpCalls.len(); n != 0 {
		t.Errorf("after 50 cancellations of requests never sent, %d requests are held as in flight; want none", n)
	}
	if code, _, body := post(t, srv.URL, session, strings.NewReader(`{"jsonrpc":"2.0","id":1000,"method":"ping"}`)); code != http.StatusOK || !strings.Contains(body, `"result":{}`) {
		t.Errorf("ping 1000 after its id was cancelled before it was sent: %d %q", code, body)
	}
}

// TestCancelEndsOnlyItsOwnSessionsRequest: a client's notifications/cancelled
// names a request of its own session; another session's request with the same
// id is neither cancelled nor deprived of its response. Session B cancels id
// 5 while session A's request 5 runs: A still gets its answer (here the
// tool's deadline). Kills c24 (the session dropped from the key of the
// requests in flight, so ids of every session share one namespace).
func TestCancelEndsOnlyItsOwnSessionsRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 1000"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	srv := e.httpServer(HTTPOptions{})
	a, b := rawSession(t, srv.URL), rawSession(t, srv.URL)
	done := make(chan string, 1)
	go func() {
		_, _, body := post(t, srv.URL, a, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"loop","arguments":{}}}`))
		done <- body
	}()
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 1 })
	if code, _, body := post(t, srv.URL, b, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)); code != http.StatusAccepted {
		t.Fatalf("session B's cancel of its own (absent) request 5: %d %q", code, body)
	}
	var body string
	select {
	case body = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("session A's request 5 got no answer in 20s")
	}
	if !strings.Contains(body, `"id":5`) || !strings.Contains(body, `"result"`) {
		t.Errorf("session A's request 5, after session B cancelled its own id 5: %q; want A's result (the tool's deadline)", body)
	}
	if n := e.server.httpCalls.len(); n != 0 {
		t.Errorf("%d requests still tracked after all were answered", n)
	}
}

// TestCancelFilterFindsTheEventData: a JSON-mode response whose text holds
// "data: " is still one message: an error without a code gets the internal
// error code (and a cancelled one would be dropped). Kills c36 (the SSE
// data line found anywhere, not only at a line's start).
func TestCancelFilterFindsTheEventData(t *testing.T) {
	t.Parallel()
	in := `{"jsonrpc":"2.0","id":3,"error":{"code":0,"message":"read data: EOF"}}`
	want := `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"maiden: read data: EOF"}}`
	rec := &recorder{header: http.Header{}}
	f := &cancelFilter{ResponseWriter: rec, calls: &inflight{}, session: "s"}
	if n, err := f.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if got := rec.body.String(); got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	// A cancelled request's response with the same text is dropped.
	calls := &inflight{}
	k := callKey{session: "s", id: mustID(t, 3)}
	calls.begin(k)
	calls.cancel(k)
	rec = &recorder{header: http.Header{}}
	f = &cancelFilter{ResponseWriter: rec, calls: calls, session: "s"}
	if n, err := f.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if got := rec.body.String(); got != "" {
		t.Errorf("the cancelled request's response was written: %q", got)
	}
}

// TestOrphanRemadeSurvivesItsStaleEntry: when the orphans are at their
// bound, making one drops the oldest, and only that one. An id whose orphan
// was taken and later orphaned again is among the newest, and is kept: the
// stale entry of its first orphan, once at the front of the order, drops
// nothing. Kills c11 (an entry taken for live whatever instant it recorded:
// the newer orphan dropped for it) and c12 (the front entry's key deleted
// whether or not it is live).
func TestOrphanRemadeSurvivesItsStaleEntry(t *testing.T) {
	t.Parallel()
	var f inflight
	now := time.Now()
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	k := func(i int) callKey { return callKey{session: "s", id: mustID(t, int64(i))} }
	orphan := func(i, s int) {
		f.begin(k(i))
		f.end(k(i), at(s), time.Hour)
	}
	orphan(2, 1)
	orphan(1, 1)
	if !f.takeOrphan(k(1), at(1), time.Hour) {
		t.Fatal("the first orphan of id 1 was not taken")
	}
	for i := 3; i <= maxOrphans; i++ {
		orphan(i, 2)
	}
	orphan(1, 3)            // id 1 reused: the table is full
	orphan(maxOrphans+1, 4) // drops id 2; id 1's stale entry now at the front
	orphan(maxOrphans+2, 5) // drops id 3
	if !f.takeOrphan(k(1), at(5), time.Hour) {
		t.Error("the newer orphan of id 1 was dropped for the stale entry of its first; its cancellation no longer reaches it")
	}
	if f.takeOrphan(k(2), at(5), time.Hour) || f.takeOrphan(k(3), at(5), time.Hour) || !f.takeOrphan(k(4), at(5), time.Hour) {
		t.Error("the bound did not drop the oldest orphans, ids 2 and 3, and only them")
	}
}

// TestOrphanOrderBounded: behind one orphan that is kept (its client never
// cancelled it), orphans made and taken leave stale entries; their number
// stays within twice the bound of orphans; so do the entries of one id
// orphaned again and again. Kills c13 (the compaction of the order dropped:
// it grew by one entry per orphan ever made) and c14 (the compaction keeping
// every entry of an id still orphaned, whatever instant it recorded).
func TestOrphanOrderBounded(t *testing.T) {
	t.Parallel()
	var f inflight
	now := time.Now()
	k := func(i int) callKey { return callKey{session: "s", id: mustID(t, int64(i))} }
	f.begin(k(0))
	f.end(k(0), now, time.Hour)
	for i := 1; i <= 3*maxOrphans; i++ {
		f.begin(k(i))
		f.end(k(i), now, time.Hour)
		f.takeOrphan(k(i), now, time.Hour)
	}
	if n := len(f.order); n > 2*maxOrphans+1 {
		t.Errorf("%d entries in the orphans' order after %d orphans made and taken behind one kept; want at most %d", n, 3*maxOrphans, 2*maxOrphans+1)
	}
	if !f.takeOrphan(k(0), now, time.Hour) {
		t.Error("the orphan kept was lost")
	}
	// One id orphaned again and again, never taken: each orphan replaces
	// the last, whose entry is stale.
	f.begin(k(0))
	f.end(k(0), now, time.Hour)
	for i := 1; i <= 2*maxOrphans+10; i++ {
		f.begin(k(1))
		f.end(k(1), now.Add(time.Duration(i)*time.Millisecond), time.Hour)
	}
	if n := len(f.order); n > 2*maxOrphans+1 {
		t.Errorf("%d entries in the orphans' order after one id was orphaned %d times behind one kept; want at most %d", n, 2*maxOrphans+10, 2*maxOrphans+1)
	}
}

// TestOrphanKeptForItsWholeTTL: an orphan is kept until its ttl has passed,
// to the instant: one made exactly ttl ago is still taken, and making
// another does not drop it. Kills c07 (<= ttl made < ttl).
func TestOrphanKeptForItsWholeTTL(t *testing.T) {
	t.Parallel()
	var f inflight
	now := time.Now()
	k := func(i int) callKey { return callKey{session: "s", id: mustID(t, int64(i))} }
	f.begin(k(1))
	f.end(k(1), now, time.Minute)
	f.begin(k(2))
	f.end(k(2), now.Add(time.Minute), time.Minute)
	if !f.takeOrphan(k(1), now.Add(time.Minute), time.Minute) {
		t.Error("an orphan exactly its ttl old was dropped")
	}
}

// TestOrphanTTLCoversTheLongestCall: an orphan (a request whose POST ended)
// is kept as long as the slowest tool may run plus the longest wait for a
// human, so that a cancellation arriving late still stops it. Kills c33
// (the tools' timeout left out) and c34 (the shorter of the two waits).
func TestOrphanTTLCoversTheLongestCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 600000"}}, nil)
	if ttl, want := e.server.orphanTTL(), 10*time.Minute+maiden.DefaultApprovalWait; ttl < want {
		t.Errorf("orphanTTL with a tool of a 10-minute timeout, no approval wait set = %v; want at least %v", ttl, want)
	}
}

// TestCallHandlersForgetEndedSessions: a session whose handlers have all
// returned leaves nothing behind in the table by session. Kills c41 (the
// session's empty set kept, one per session ever served).
func TestCallHandlersForgetEndedSessions(t *testing.T) {
	t.Parallel()
	var hs callHandlers
	for i := range 100 {
		_, remove := hs.add(fmt.Sprintf("session-%d", i), func() {})
		remove()
	}
	hs.mu.Lock()
	n, all := len(hs.bySession), len(hs.all)
	hs.mu.Unlock()
	if n != 0 || all != 0 {
		t.Errorf("after 100 sessions' handlers returned: %d sessions and %d handlers held; want none", n, all)
	}
}

// TestOnlyCancelledCancels: a notification other than notifications/cancelled
// that carries a requestId cancels nothing: the request it names is answered.
// Kills c20 (any notification naming a requestId taken for a cancellation:
// the response was dropped and the client waited for it for ever).
func TestOnlyCancelledCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 500"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	c := e.rawStdio()
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"loop","arguments":{}}}`)
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 1 })
	c.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"requestId":5}}`)
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 0 })
	// The ping's answer may come first (the call's handler writes its
	// answer after the call ends); request 5's must come within 10 s of it.
	c.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
	var late <-chan time.Time
	for {
		select {
		case m, ok := <-c.frames:
			if !ok {
				t.Fatal("the server closed its output before answering request 5")
			}
			if m["method"] != nil {
				continue
			}
			if m["id"] == float64(5) {
				return // answered
			}
			if m["id"] == "after" {
				late = time.After(10 * time.Second)
			}
		case <-late:
			t.Fatal("request 5 got no answer within 10 s of a ping sent after it ended: a notification naming its id cancelled it")
		case <-time.After(30 * time.Second):
			t.Fatal("no frame from the server in 30s")
		}
	}
}

// TestStdioAnswersBeforeLeaving: a client that closes its input right after
// a request still gets the answer, and once it has, RunStdio returns at
// once, not after the longest call's timeout. Kills s09 (no drain: the
// answer was lost) and s12 (the drain waiting on with nothing in flight).
func TestStdioAnswersBeforeLeaving(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 500"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	c := e.rawStdio()
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"loop","arguments":{}}}`)
	c.in.Close()
	for {
		m, ok := <-c.frames
		if !ok {
			t.Fatal("the server closed its output without answering request 5, sent before the client closed its input")
		}
		if m["id"] == float64(5) {
			break
		}
	}
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("RunStdio = %v after the client left", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("RunStdio still running 5s after the client closed its input and its last request was answered")
	}
}

// TestStdioReloadedInputCap: a max_input_bytes lowered by a reload while a
// stdio client is connected bounds the lines read afterwards: the transport
// reads the limit line by line. Kills s26 (the limit read once, at connect).
func TestStdioReloadedInputCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	c := e.rawStdio()
	c.initialize()
	c.ping(1)
	e.setMaxInput(1024)
	// The limit of the line the reader is waiting for was read before the
	// reload; the next is read with the new one.
	c.ping(2)
	line := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("a", 200<<10) + `"}}}`
	c.send(line)
	m := c.next()
	if code, msg := errCode(m); code != -32600 || m["id"] != float64(3) || !strings.Contains(msg, fmt.Sprintf("%d bytes", len(line))) {
		t.Errorf("a %d-byte line after max_input_bytes was lowered to 1024: %v; want -32600 refusing its size", len(line), m)
	}
	c.ping(4)
}

// TestLogForwarderNeverBlocksTheTool: a client that does not read its
// stream never makes the tool wait: each log line is queued or counted as
// dropped at once, and once the client reads again it is told how many were
// dropped, after the lines that were sent. The client here is a raw stdio
// stream that stops reading after the handshake, so the forwarder's writes
// block. Kills l05 (send waiting for room in the queue) and l06b (the count
// of dropped lines not sent).
func TestLogForwarderNeverBlocksTheTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	ctx := context.Background()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	ss, err := e.server.MCP().Connect(ctx, &stdioTransport{r: inR, w: outW, maxLine: e.server.maxMessage, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	out := bufio.NewReader(outR)
	exchange := func(line string, answered bool) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if answered {
			if _, err := out.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
	}
	exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, true)
	exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)
	exchange(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, true)
	// From here the client reads nothing until every line was handed over.
	f := startLogForwarder(ctx, ss, "flood", slog.New(slog.NewTextHandler(io.Discard, nil)))
	const n = 4 * logQueue
	sent := make(chan struct{})
	go func() {
		for i := range n {
			f.send(maiden.LogEntry{Level: "info", Message: fmt.Sprintf("line %d", i)})
		}
		close(sent)
	}()
	var lines []string
	read := make(chan struct{})
	readAll := func() {
		defer close(read)
		for {
			l, err := out.ReadString('\n')
			if err != nil {
				return
			}
			var m struct {
				Params struct {
					Data string `json:"data"`
				} `json:"params"`
			}
			if json.Unmarshal([]byte(l), &m) == nil {
				lines = append(lines, m.Params.Data)
			}
			if strings.Contains(l, "log lines not sent") {
				return
			}
		}
	}
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		go readAll()
		t.Fatalf("queueing %d log lines for a client that does not read them did not return in 5s: the tool waits for the network", n)
	}
	go readAll()
	finished := make(chan struct{})
	go func() { f.finish(); close(finished) }()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		outR.Close()
		<-read
	}
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "log lines not sent") {
		t.Fatalf("the client got %d notifications, the last %q; want the lines queued then one saying how many were not sent", len(lines), last(lines))
	}
	var dropped int
	if _, err := fmt.Sscanf(lines[len(lines)-1], "%d log lines not sent", &dropped); err != nil || dropped+len(lines)-1 != n {
		t.Errorf("%d lines sent and %q: want the sent and the dropped to make the %d logged", len(lines)-1, lines[len(lines)-1], n)
	}
	<-finished
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// TestSessionlessCancelNotAnotherClients: a POST without a session (an
// initialize; 2026-07-28 requests never reach the tracking) is not tracked,
// so a cancellation posted without a session cannot name another client's
// initialize in flight and drop its answer. Kills c23 (sessionless POSTs
// tracked under the session "", shared by every client).
func TestSessionlessCancelNotAnotherClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	s := e.server
	recA := &recorder{header: http.Header{}}
	wA, doneA, answered := s.trackHTTP(recA, "", "", []byte(initializeBody))
	if answered {
		t.Fatal("client A's initialize was answered by the tracking")
	}
	defer doneA()
	if n := s.httpCalls.len(); n != 0 {
		t.Errorf("client A's initialize, without a session, is tracked (%d requests); want none", n)
	}
	recB := &recorder{header: http.Header{}}
	_, doneB, _ := s.trackHTTP(recB, "", "", []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`))
	doneB()
	resp := `{"jsonrpc":"2.0","id":1,"result":{}}`
	if _, err := wA.Write([]byte(resp)); err != nil {
		t.Fatal(err)
	}
	if got := recA.body.String(); got != resp {
		t.Errorf("client A's initialize answer, after client B posted a cancellation of id 1 without a session: %q; want %q", got, resp)
	}
}

// TestBatchWithAStrayCancelIsServed: in a session of a revision with batches
// (2025-03-26), a batch holding a cancellation of a request not running is
// served whole: its requests are answered. Only a lone such cancellation is
// answered 202 by the tracking. Kills c27 (the "lone" clause dropped: the
// batch was answered 202 and its requests never ran).
func TestBatchWithAStrayCancelIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	srv := e.httpServer(HTTPOptions{})
	const version = "2025-03-26"
	send := func(session, body string) (int, string, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
	}
	code, session, body := send("", strings.Replace(initializeBody, "2025-06-18", version, 1))
	if code != http.StatusOK || session == "" || !strings.Contains(body, version) {
		t.Fatalf("initialize at %s: %d %q", version, code, body)
	}
	if code, _, body := send(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %q", code, body)
	}
	code, _, body = send(session, `[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	if code != http.StatusOK || !strings.Contains(body, `"id":1`) || !strings.Contains(body, `"result":{}`) {
		t.Errorf("a batch of a stray cancellation and ping 1: %d %q; want ping 1 answered", code, body)
	}
}

// TestFileStateEqual: the watch sees a file's size change even when its
// modification time is the same (a coarse clock, an editor keeping it), and
// a file added to or gone from the set watched. Kills a09 (the size
// ignored) and a10 (the sets' lengths not compared: a file only in the
// newer state went unseen).
func TestFileStateEqual(t *testing.T) {
	t.Parallel()
	mt := time.Unix(1_700_000_000, 0)
	a := fileState{"agent.toml": {mt, 10}}
	if !a.equal(fileState{"agent.toml": {mt, 10}}) {
		t.Fatal("equal states differ")
	}
	if a.equal(fileState{"agent.toml": {mt, 11}}) {
		t.Error("agent.toml's size changed, its mtime not: equal")
	}
	if a.equal(fileState{"agent.toml": {mt, 10}, "tool.wasm": {}}) {
		t.Error("a tool file added to the set watched: equal")
	}
	if (fileState{"agent.toml": {mt, 10}, "tool.wasm": {}}).equal(a) {
		t.Error("a tool file gone from the set watched: equal")
	}
}

// TestConfigChangesMovedTool: a reload that only moves a tool's table
// within agent.toml reports no change; one that changes the tool names it.
// Kills a11 (a tool's line compared). (An agent's table moved is reported
// changed on the code as written: ConfigChanges zeroes the agent's Line and
// BoundaryLine but not its bindings' Line; see the pass's notes.)
func TestConfigChangesMovedTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wasm := testkit.Component(t, "echo")
	parse := func(src string) *config.Config { return parseConfig(t, dir, src) }
	tool := fmt.Sprintf("[tools.echo]\npath = %q\n", wasm)
	base := parse("version = 1\n" + tool)
	moved := parse("version = 1\n\n\n" + tool)
	if got, want := ConfigChanges(base, moved), "no change to tools, agents, middleware or operators"; got != want {
		t.Errorf("moving [tools.echo]: %q, want %q", got, want)
	}
	changed := parse("version = 1\n" + tool + "timeout_ms = 1234\n")
	if got, want := ConfigChanges(base, changed), "tools changed: echo"; got != want {
		t.Errorf("changing echo's timeout: %q, want %q", got, want)
	}
}

// TestWaitIdleWakesWhenTheLastReturns: Drain's wait for the handlers in
// flight ends as soon as the last one returns, not at its deadline. Kills
// c42 (the idle channel never closed: Drain waited out its whole context,
// and reported 0 only because the handlers had gone meanwhile;
// TestCallHandlers's waitIdle could start after the removes and so never
// waited, and TestDrainAnswersWaitingCallsPending passed after its 30 s).
func TestWaitIdleWakesWhenTheLastReturns(t *testing.T) {
	t.Parallel()
	var one callHandlers
	one.add("A", func() {})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if n := one.waitIdle(ctx); n != 1 {
		t.Errorf("waitIdle with one handler running = %d when its context ended, want 1", n)
	}
	var hs callHandlers
	_, remove1 := hs.add("A", func() {})
	_, remove2 := hs.add("", func() {})
	done := make(chan int, 1)
	go func() { done <- hs.waitIdle(context.Background()) }()
	waitFor(t, 5*time.Second, func() bool {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		return hs.idle != nil // waitIdle is waiting
	})
	remove1()
	remove2()
	select {
	case n := <-done:
		if n != 0 {
			t.Errorf("waitIdle = %d after every handler returned", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitIdle still waiting 5s after the last handler returned")
	}
}

// TestStdioErrorWithoutCodeGetsOne: on stdio too, an error response
// without a JSON-RPC code (a handler's plain error, which the SDK sends
// with code 0) goes out with the internal-error code, and the message
// whole. Kills s02 (the stdio Write not passing responses through
// withErrorCode; no test over a pipe reaches a code-0 error).
func TestStdioErrorWithoutCodeGetsOne(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	c := &stdioConn{w: &out, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	id := mustID(t, 4)
	c.calls.begin(callKey{id: id})
	if err := c.Write(context.Background(), &jsonrpc.Response{ID: id, Error: errors.New("the store is closed")}); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"maiden: the store is closed"}}` + "\n"
	if got := out.String(); got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	if n := c.calls.len(); n != 0 {
		t.Errorf("%d requests still tracked after the answer", n)
	}
}

// TestStdioDrainBounded: after the client's EOF, the wait for answers still
// owed is bounded by drainFor (the server's longest call), not only by a
// fixed minute: a request never answered does not hold the session open
// longer. Kills s11 (drainFor ignored: the minute always).
func TestStdioDrainBounded(t *testing.T) {
	t.Parallel()
	c := &stdioConn{
		drainFor: func() time.Duration { return 50 * time.Millisecond },
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		closed:   make(chan struct{}),
	}
	c.calls.begin(callKey{id: mustID(t, 1)}) // never answered
	done := make(chan struct{})
	go func() { c.drain(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.Close()
		t.Fatal("the drain of a request never answered, drainFor 50ms, still waiting after 5s")
	}
}

// TestStrayCancelSparesTheNextRequest: a cancellation of a request that is
// not running is dropped by the transport, never passed to the SDK, which
// would cancel the next request reusing the id (its cancellation is
// asynchronous). Each round cancels id 9 while nothing runs, then calls a
// tool with id 9: the call runs to its own end (its deadline), not
// cancelled. Kills s18 (the stray cancellation passed on: "maiden: context
// canceled" in the first round).
func TestStrayCancelSparesTheNextRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 200"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	c := e.rawStdio()
	c.initialize()
	for i := range 5 {
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)
		c.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"loop","arguments":{}}}`)
		for {
			m := c.next()
			if m["method"] != nil {
				continue
			}
			r, _ := m["result"].(map[string]any)
			if m["id"] != float64(9) || r == nil || !strings.Contains(fmt.Sprint(r["content"]), "deadline") {
				t.Fatalf("round %d: request 9, sent after a cancellation of id 9 while nothing ran, answered %v; want its deadline result", i, m)
			}
			break
		}
	}
}

// TestStdioStopsWhenItsContextEnds: `maiden serve` stopping (RunStdio's
// context ends, say on SIGINT) ends the stdio session at once, though the
// client, still connected, sends nothing more: Close unblocks the pending
// Read. Kills s30 (Read not watching for Close: RunStdio waited for the
// client's next line or its EOF).
func TestStdioStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	go io.Copy(io.Discard, outR)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.server.RunStdio(ctx, inR, outW) }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunStdio = %v after its context ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunStdio still running 5s after its context ended, the client connected and silent")
	}
}

// TestWatchDefaults: Watch with zero options (as maiden serve calls it
// unless told otherwise) polls at its default interval: an edit of
// agent.toml is reloaded within seconds. Kills a01 (the default interval
// made 500 s: every test sets its own interval, so none saw it).
func TestWatchDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 16)
	e.server.Watch(ctx, e.cfg, WatchOptions{OnReload: func(err error, _ []Problem) { reloads <- err }})
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", "echo", "timeout_ms = 1234"}})
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reload within 5s of agent.toml changing, with the default interval and settle")
	}
}

// TestWatchWaitsForTheFilesToSettle: agent.toml written in two steps, the
// second well within Settle of the first, is reloaded once, complete: the
// half-written file is never loaded (its errors never reported). Kills a03
// (Settle ignored: the watch reloaded at the first tick that saw no
// change, the half-written file, and reported its errors).
func TestWatchWaitsForTheFilesToSettle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 16)
	e.server.Watch(ctx, e.cfg, WatchOptions{Interval: 20 * time.Millisecond, Settle: 2 * time.Second, OnReload: func(err error, _ []Problem) { reloads <- err }})
	full, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	full = append(full, "timeout_ms = 1234\n"...)
	if err := os.WriteFile(e.cfg, full[:len(full)-12], 0o644); err != nil { // "timeout_ms =" cut short: an error
		t.Fatal(err)
	}
	// The second step comes ten ticks later, well within Settle.
	time.Sleep(200 * time.Millisecond)
	if err := os.WriteFile(e.cfg, full, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("the first reload: %v; want the complete file loaded, the half-written one never", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10s")
	}
	if tools := e.host.Config().Tools(); len(tools) != 1 || tools[0].Timeout != 1234*time.Millisecond {
		t.Errorf("after the reload, the tools are %+v; want echo with its 1234ms timeout", tools)
	}
}

// TestNamedPaths: the tool files a refused agent.toml names are resolved as
// config.Load resolves them, a relative path against agent.toml's
// directory, not the process's working directory. Kills a12 (a relative
// path kept as written: the watch stat'ed a file that is not the tool's,
// and a tool built later beside agent.toml was never noticed; every watch
// test names its tools by absolute path).
func TestNamedPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.toml")
	src := "version = 1\n[tools.b]\npath = \"tools/b.wasm\"\n[tools.a]\npath = \"/abs/a.wasm\"\n[tools.c]\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := namedPaths(path)
	want := []string{"/abs/a.wasm", filepath.Join(dir, "tools", "b.wasm")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("namedPaths = %q, want %q", got, want)
	}
}

// TestConfigChangesMovedBoundary: a reload that only moves an agent's
// boundary table within agent.toml reports no change. Kills a14 (the
// agent's Line and BoundaryLine compared).
func TestConfigChangesMovedBoundary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	parse := func(src string) *config.Config { return parseConfig(t, dir, src) }
	boundary := "[agents.alice.boundary]\nnetwork = false\n"
	base := parse("version = 1\n[agents.alice]\ntools = []\n" + boundary)
	moved := parse("version = 1\n[agents.alice]\ntools = []\n\n\n" + boundary)
	if got, want := ConfigChanges(base, moved), "no change to tools, agents, middleware or operators"; got != want {
		t.Errorf("moving [agents.alice.boundary]: %q, want %q", got, want)
	}
}

// TestStdioLeavesAfterACancelledRequest: a request the client cancelled is
// forgotten once its (dropped) response goes by, so a client that then
// closes its input is not kept waiting for it: RunStdio returns at once.
// Kills c45 (finish keeping a cancelled request in flight: the drain at EOF
// waited for it for the longest call's timeout).
func TestStdioLeavesAfterACancelledRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 60000"}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	c := e.rawStdio()
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"loop","arguments":{}}}`)
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 1 })
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 0 })
	c.ping(6) // the cancelled request's response went by before this
	c.in.Close()
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("RunStdio = %v after the client left", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("RunStdio still running 5s after the client closed its input, its one request cancelled")
	}
}

// TestConfigChangesMovedBindings: an agent's table moved (its bindings'
// and grants' lines with it), or put before the tools', is no change; a
// grant that changed is one. The defect pass 22 found (watch.go cleared
// the agent's own lines only: moving [agents.alice] logged "agents
// changed: alice").
func TestConfigChangesMovedBindings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wasm := testkit.Component(t, "echo")
	parse := func(src string) *config.Config { return parseConfig(t, dir, src) }
	tool := fmt.Sprintf("[tools.echo]\npath = %q\nhttp_allow = [\"api.example.com\"]\n", wasm)
	agent := "[agents.alice]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n"
	base := parse("version = 1\n" + tool + agent)
	for what, src := range map[string]string{
		"the agent's table moved":   "version = 1\n" + tool + "\n\n" + agent,
		"the tool's table moved":    "version = 1\n\n\n" + tool + agent,
		"the agent before the tool": "version = 1\n" + agent + tool,
	} {
		if got, want := ConfigChanges(base, parse(src)), "no change to tools, agents, middleware or operators"; got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	if got, want := ConfigChanges(base, parse("version = 1\n"+tool+strings.Replace(agent, "--...", "--message=*", 1))), "agents changed: alice"; got != want {
		t.Errorf("a grant changed: %q, want %q", got, want)
	}
}

// TestConfigChangesWrappedCLIWithSubcommands: a wrapped CLI whose command
// tree has subcommands (each knows its parent: a cycle of pointers) is
// compared, not followed round its cycle for ever: moved, it is no
// change; a subcommand's option added is one. (sameBesidesLines without
// its record of the pointers it compares overflowed the stack here.)
func TestConfigChangesWrappedCLIWithSubcommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	parse := func(src string) *config.Config { return parseConfig(t, dir, src) }
	cli := func(spec string) string {
		return "[clis.t]\npath = \"/bin/true\"\ncommand = '" + spec + "'\n"
	}
	spec := `{"maiden_command": 1, "name": "t", "commands": [{"name": "list", "options": [{"name": "n", "type": "integer"}], "commands": [{"name": "all"}]}, {"name": "rm"}]}`
	base := parse("version = 1\n" + cli(spec))
	if got, want := ConfigChanges(base, parse("version = 1\n\n\n"+cli(spec))), "no change to tools, agents, middleware or operators"; got != want {
		t.Errorf("the CLI's table moved: %q, want %q", got, want)
	}
	more := strings.Replace(spec, `{"name": "all"}`, `{"name": "all", "options": [{"name": "q", "kind": "bool"}]}`, 1)
	if got, want := ConfigChanges(base, parse("version = 1\n"+cli(more))), "tools changed: t"; got != want {
		t.Errorf("a subcommand's option added: %q, want %q", got, want)
	}
}

// TestWatchSeesThePinsFile: the pin file of imported tools (maiden-pins.json
// beside agent.toml unless the host was given another) is watched like
// agent.toml: an operator's maiden mcp accept in another process writes it,
// and the clients' tool lists must follow at the next tick, not at the
// next edit of agent.toml (pass 22's open plant: the pin file not
// stamped). Here it appears beside an unchanged agent.toml.
func TestWatchSeesThePinsFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	pins := e.host.MCPPinsPath()
	if pins == "" || filepath.Dir(pins) != filepath.Dir(e.cfg) {
		t.Fatalf("the host's pin file is %q; want one beside %s", pins, e.cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 16)
	e.server.Watch(ctx, e.cfg, WatchOptions{Interval: 20 * time.Millisecond, Settle: 50 * time.Millisecond, OnReload: func(err error, _ []Problem) { reloads <- err }})
	if err := os.WriteFile(pins, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("reload after the pin file was written: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no reload within 10s of the pin file %s being written, agent.toml unchanged: the watch does not look at the pin file", pins)
	}
}

// TestReloadReportsAFailedSync: a reload whose configuration loads but
// whose Sync of the clients' tool lists fails (here: the host was closed,
// so its tool list is ErrClosed) reports Sync's error, so the operator's
// log does not say "reloaded" over tool lists that were not brought up to
// date (pass 22's open plant: Sync's error dropped by reload).
func TestReloadReportsAFailedSync(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 16)
	e.server.Watch(ctx, e.cfg, WatchOptions{Interval: 20 * time.Millisecond, Settle: 50 * time.Millisecond, OnReload: func(err error, _ []Problem) { reloads <- err }})
	if err := e.host.Close(ctx); err != nil {
		t.Fatal(err)
	}
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", "echo", "timeout_ms = 1234"}})
	select {
	case err := <-reloads:
		if !errors.Is(err, maiden.ErrClosed) {
			t.Fatalf("a reload whose Sync met a closed host: %v; want %v (Sync's error reported)", err, maiden.ErrClosed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10s of agent.toml changing")
	}
}
