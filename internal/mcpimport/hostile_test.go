package mcpimport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/maiden-run/maiden/internal/testkit"
)

// This test binary re-executed with MAIDEN_FAKE_UPSTREAM set is a minimal
// hostile stdio MCP server (an init runs before any test).
func init() {
	if mode := os.Getenv("MAIDEN_FAKE_UPSTREAM"); mode != "" {
		fakeStdioUpstream(mode)
		os.Exit(0)
	}
}

// fakeStdioUpstream serves stdin and stdout. Mode "wedge" answers
// initialize and tools/list, then never reads its stdin again (nor exits);
// "chatty" sends chattyLines log messages before its tools/list answer;
// "relist" follows each tools/list answer with a list_changed;
// "relisterr" answers its first tools/list and follows it with a
// list_changed, then refuses every tools/list with an error quoting the
// credential (chattyToken).
func fakeStdioUpstream(mode string) {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		out.WriteString(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + "}\n")
		out.Flush()
	}
	listed := 0
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue
		}
		switch m.Method {
		case "initialize":
			v, _ := json.Marshal(m.Params.ProtocolVersion)
			reply(m.ID, `{"protocolVersion":`+string(v)+`,"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
		case "tools/list":
			if mode == "many" {
				manyToolsPage(out, line)
				continue
			}
			if listed++; mode == "relisterr" && listed > 1 {
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32001,"message":"listing refused for token ` + chattyToken + `"}}` + "\n")
				out.Flush()
				continue
			}
			if mode == "chatty" {
				// Before its answer, so that they are all read by
				// the time Start returns: log messages no call owns,
				// each echoing the credential.
				for i := range chattyLines {
					out.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"line ` + strconv.Itoa(i) + ` ` + chattyToken + `"}}` + "\n")
				}
			}
			reply(m.ID, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`)
			if mode == "relist" || mode == "relisterr" {
				// Every answer is followed by a list_changed: the
				// client lists again, and again, for as long as it
				// lets itself.
				out.WriteString(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n")
				out.Flush()
			}
			if mode == "wedge" {
				time.Sleep(time.Hour) // never reads stdin again
			}
		default:
			reply(m.ID, `{"content":[{"type":"text","text":"ok"}]}`)
		}
	}
}

// manyToolsPage answers a tools/list request (line) with a page of
// manyPerPage tools, and a cursor to the next page for manyPages pages.
func manyToolsPage(out *bufio.Writer, line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	_ = json.Unmarshal(line, &m)
	page, _ := strconv.Atoi(m.Params.Cursor)
	out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tools":[`)
	for i := range manyPerPage {
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`{"name":"t` + strconv.Itoa(page*manyPerPage+i) + `","inputSchema":{"type":"object"}}`)
	}
	out.WriteString(`]`)
	if page+1 < manyPages {
		out.WriteString(`,"nextCursor":"` + strconv.Itoa(page+1) + `"`)
	}
	out.WriteString("}}\n")
	out.Flush()
}

const (
	manyPages, manyPerPage = 100, 2000
)

const (
	chattyLines = 500
	chattyToken = "tok-7f3a9c1e55d2"
)

func fakeUpstream(t *testing.T, mode string) *mcpimport.Upstream {
	t.Helper()
	return fakeUpstreamWith(t, mode, mcpimport.Options{Logger: testLogger(t)})
}

func fakeUpstreamWith(t *testing.T, mode string, o mcpimport.Options) *mcpimport.Upstream {
	t.Helper()
	o.Name, o.BackoffInitial = "fake", time.Hour
	o.Command = []string{os.Args[0]}
	o.Env = []string{"MAIDEN_FAKE_UPSTREAM=" + mode}
	u, err := mcpimport.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestCallDeadlineUpstreamNotReading: an upstream that stops reading its
// stdin must not hold a call past its deadline. The request (larger than a
// pipe's buffer) cannot be written; the call still returns at its deadline
// (plus a short grace), not when the upstream chooses to read or die.
func TestCallDeadlineUpstreamNotReading(t *testing.T) {
	u := fakeUpstream(t, "wedge")
	big, _ := json.Marshal(map[string]string{"m": strings.Repeat("x", 1<<20)})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := u.Call(ctx, "echo", big, nil, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the call succeeded against an upstream that reads nothing")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the call's error: %v, want its deadline's", err)
		}
		t.Logf("returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(testkit.Slack(t, 10*time.Second)):
		t.Fatalf("the call is still running %v after its 500ms deadline: an upstream that does not read its stdin holds it", time.Since(start).Round(time.Second))
	}
}

// TestHTTPJSONResponseBounded: a streamable HTTP upstream answers a POST
// with Content-Type application/json and a body that does not end. The
// SDK reads such a body whole (io.ReadAll; only SSE events are bounded by
// MaxEventSize), so maiden must bound it itself: MaxMessageBytes, as for a
// stdio line or an SSE event. Here the server gives up after 256 MiB and
// counts what maiden read.
func TestHTTPJSONResponseBounded(t *testing.T) {
	var written atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		chunk := []byte(`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 1<<20))
		for i := 0; i < 256; i++ {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
			chunk = []byte(strings.Repeat("x", 1<<20))
		}
	}))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	u, err := mcpimport.New(mcpimport.Options{Name: "endless", URL: ts.URL, BackoffInitial: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = u.Start(ctx)
	t.Logf("start: %v; the server wrote %d MiB", err, written.Load()>>20)
	if err == nil || !strings.Contains(err.Error(), "over the 4194304-byte message cap") {
		t.Fatalf("start: %v; want a refusal naming the 4 MiB message cap", err)
	}
	if n := written.Load(); n > 32<<20 {
		t.Errorf("maiden read %d MiB of one application/json answer: want it cut at MaxMessageBytes (4 MiB)", n>>20)
	}
}

// TestOperatorLogPacedAndRedacted: an upstream's log messages that no call
// owns go to the operator's log; nothing else bounds how many an upstream
// sends, and it holds the credential maiden sends it. 500 such messages,
// each echoing the credential, reach the log at most opLogPerSecond (20)
// a second (the burst may straddle two seconds), none with the value.
func TestOperatorLogPacedAndRedacted(t *testing.T) {
	var buf testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	start := time.Now().Unix()
	fakeUpstreamWith(t, "chatty", mcpimport.Options{Logger: log,
		Redact: func(s string) string { return strings.ReplaceAll(s, chattyToken, "[REDACTED:TOKEN]") }})
	seconds := int(time.Now().Unix()-start) + 1 // the clock's seconds the burst can span
	text := buf.String()
	logged := strings.Count(text, `msg="MCP upstream log message"`)
	t.Logf("%d of %d log messages logged, over at most %d seconds", logged, chattyLines, seconds)
	if logged == 0 || logged > 20*seconds {
		t.Errorf("%d of the upstream's %d log messages reached the operator's log in at most %d seconds, want 1 to %d (20 a second)", logged, chattyLines, seconds, 20*seconds)
	}
	if strings.Contains(text, chattyToken) {
		t.Errorf("the credential reached the operator's log:\n%.500s", text)
	}
	if !strings.Contains(text, "[REDACTED:TOKEN]") {
		t.Errorf("no redacted line in the operator's log:\n%.500s", text)
	}
}

// TestRelistErrorRedacted: an upstream's error answering a re-list (after
// its list_changed) goes to the operator's log; the upstream holds the
// credential and may quote it there, so the warning is redacted
// (Options.Redact) as its log messages are.
func TestRelistErrorRedacted(t *testing.T) {
	var buf testkit.SyncBuffer
	fakeUpstreamWith(t, "relisterr", mcpimport.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil)),
		Redact: func(s string) string { return strings.ReplaceAll(s, chattyToken, "[REDACTED:TOKEN]") }})
	const warning = "re-listing tools after list_changed failed"
	bound := time.Now().Add(testkit.Slack(t, 10*time.Second))
	for !strings.Contains(buf.String(), warning) && time.Now().Before(bound) {
		time.Sleep(10 * time.Millisecond)
	}
	text := buf.String()
	switch {
	case !strings.Contains(text, warning):
		t.Fatalf("no failed re-list in the operator's log:\n%.1000s", text)
	case strings.Contains(text, chattyToken):
		t.Errorf("the credential the upstream quoted reached the operator's log:\n%.1000s", text)
	case !strings.Contains(text, "[REDACTED:TOKEN]"):
		t.Errorf("the failed re-list's warning was not redacted:\n%.1000s", text)
	}
}

// TestListChangedFloodPaced: an upstream that follows every tools/list
// answer with notifications/tools/list_changed makes the client list
// again as fast as the round trip allows, forever. Each re-list calls the
// OnChange callbacks, which the host's front end answers by listing every
// agent's tools again (mcpserver's Sync): one goroutine each, unbounded,
// had thousands of them pile up behind a slow callback. Re-lists are
// paced, and the callbacks of one upstream never run concurrently.
func TestListChangedFloodPaced(t *testing.T) {
	u := fakeUpstream(t, "relist")
	var running, maxRunning, calls atomic.Int32
	u.OnChange(func() {
		n := running.Add(1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		calls.Add(1)
		time.Sleep(20 * time.Millisecond) // a front end listing for its clients
		running.Add(-1)
	})
	// The flood has begun once the first callback ran (a loaded machine
	// can take seconds to start the upstream); then a rate over 2 s.
	bound := time.Now().Add(testkit.Slack(t, 10*time.Second))
	for calls.Load() == 0 && time.Now().Before(bound) {
		time.Sleep(5 * time.Millisecond)
	}
	if calls.Load() == 0 {
		t.Fatal("the upstream's first listing never reached OnChange")
	}
	before := calls.Load()
	time.Sleep(2 * time.Second) // the window the rate is measured over
	n := calls.Load() - before
	t.Logf("%d OnChange calls in 2s, at most %d at once", n, maxRunning.Load())
	if m := maxRunning.Load(); m > 1 {
		t.Errorf("%d OnChange callbacks of one upstream ran at once, want 1", m)
	}
	if n > 40 {
		t.Errorf("%d OnChange calls in 2s of a list_changed flood, want at most 40 (re-lists paced at ten a second)", n)
	}
}

// TestToolCountBounded: at most 100 pages of tools are read, but nothing
// bounded a page but the 4 MiB message cap, so an upstream could list
// millions of tools (some 90,000 names fit in one page), each then named,
// pinned against the pin file and described on every listing of every
// agent. Here 100 pages of 2,000: the listing is refused past MaxTools,
// as past 100 pages.
func TestToolCountBounded(t *testing.T) {
	u, err := mcpimport.New(mcpimport.Options{Name: "many", Command: []string{os.Args[0]}, Env: []string{"MAIDEN_FAKE_UPSTREAM=many"},
		BackoffInitial: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = u.Start(ctx)
	n := len(u.Tools())
	t.Logf("start: %v; %d tools kept", err, n)
	if n > mcpimport.MaxTools {
		t.Errorf("%d tools of one upstream kept, want at most %d", n, mcpimport.MaxTools)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d tools", mcpimport.MaxTools)) {
		t.Errorf("start: %v; want the listing refused naming the cap", err)
	}
}
