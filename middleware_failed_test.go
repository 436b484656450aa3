package maiden_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A middleware component sees a call before its tool runs and, once it
// ran, its result: the output and log lines of a success (phase after),
// the error and log lines of a failure (phase failed). Before the failed
// phase, a hostile tool carried data past a data-loss component by
// failing with it (the after phase ran only for successes) or by logging
// it (log lines went to the caller live, and stayed in the result when
// the component withheld the output), and an imported tool by its
// progress messages. These tests are those attacks, against the Go `dlp`
// component (testdata/middleware/dlp), which withholds whatever mentions
// a password.

// liveSink is what a caller's OnLog and OnProgress saw of a call.
type liveSink struct {
	mu       sync.Mutex
	lines    []string
	progress []string
	first    chan struct{} // closed at the first line
	once     sync.Once
}

func newLiveSink() *liveSink { return &liveSink{first: make(chan struct{})} }

func (s *liveSink) onLog(e maiden.LogEntry) {
	s.mu.Lock()
	s.lines = append(s.lines, e.Message)
	s.mu.Unlock()
	s.once.Do(func() { close(s.first) })
}

func (s *liveSink) onProgress(p maiden.Progress) {
	s.mu.Lock()
	s.progress = append(s.progress, p.Message)
	s.mu.Unlock()
}

func (s *liveSink) seen() (lines, progress []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.lines...), append([]string{}, s.progress...)
}

// leakyIn is the input of the imported leaky tool: the MCP twin of the
// go/leaky component (log each line, report progress with the lines and
// the failure, then fail with fail or return output).
type leakyIn struct {
	Log      []string `json:"log,omitempty"`
	Fail     string   `json:"fail,omitempty"`
	Output   string   `json:"output,omitempty"`
	Progress bool     `json:"progress,omitempty"`
}

// leakyUpstream is an MCP server on loopback whose tool "act" logs, reports
// progress and fails as its input says; tokens counts the calls that
// carried a progress token (a caller the host relays progress to).
func leakyUpstream(t *testing.T) (url string, tokens *atomic.Int32) {
	t.Helper()
	tokens = &atomic.Int32{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "act", Description: "logs, reports progress and fails as told"},
		func(ctx context.Context, req *mcp.CallToolRequest, in leakyIn) (*mcp.CallToolResult, addOut, error) {
			for _, l := range in.Log {
				//lint:ignore SA1019 MCP logging is deprecated upstream (SEP-2577) but still how servers send logs, which maiden relays
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: l})
			}
			if tok := req.Params.GetProgressToken(); tok != nil {
				tokens.Add(1)
				// A message that carries what the tool would leak.
				msg := strings.Join(append(in.Log, in.Fail), "; ")
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: msg})
			}
			if in.Fail != "" {
				return nil, addOut{}, errors.New(in.Fail)
			}
			return nil, addOut{Sum: len(in.Output)}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL, tokens
}

// leakyHost is a host with the go/leaky component as tool leaky and the
// leaky upstream as up.act, both under chain (agent.toml lines), and its
// operator's log.
func leakyHost(t *testing.T, iso maiden.Isolation, chain string) (*maiden.Host, *atomic.Int32, *syncBuffer) {
	t.Helper()
	up, tokens := leakyUpstream(t)
	var oplog syncBuffer
	h := newHostWith(t, `version = 1
[tools.leaky]
path = %q
timeout_ms = 20000
[mcp.up]
accept_new_tools = true
url = "`+up+`"
[middleware.dlp]
path = "`+testkit.Middleware(t, "dlp")+`"
timeout_ms = 20000
`+chain, maiden.Options{Isolation: iso, Logger: slog.New(slog.NewTextHandler(&oplog, nil))}, "go/leaky")
	return h, tokens, &oplog
}

// syncBuffer is a bytes.Buffer for a logger that several goroutines use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// leakyKinds are the tools the attacks are made with: a WebAssembly
// component in process and in a worker (its lines come live over the
// worker's pipe), and an imported MCP tool (its lines and progress come
// as notifications).
var leakyKinds = []struct {
	name string
	iso  maiden.Isolation
	tool string
}{
	{"wasm/process", maiden.InProcess, "leaky"},
	{"wasm/workers", maiden.Workers, "leaky"},
	{"mcp", maiden.InProcess, "up.act"},
}

// leakyInput is the input of kind's tool that logs lines and then fails
// with fail or returns output.
func leakyInput(tool string, lines []string, fail, output string) string {
	in := leakyIn{Log: lines, Fail: fail, Output: output, Progress: tool == "up.act"}
	return mustJSON(in)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestFailedCallMessageJudgedByComponent: a tool that fails with the data
// as its error message (an upstream's error, for an imported tool) does not
// get it past the component: the agent sees the component's rejection,
// kind denied, and the secret nowhere (not in the error, the result's
// logs, a line seen live or a progress report). A harmless failure goes on
// as it is, with its lines.
func TestFailedCallMessageJudgedByComponent(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-f41l"
	for _, k := range leakyKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			h, tokens, _ := leakyHost(t, k.iso, "[[middleware]]\nuse = \"dlp\"\n")
			live := newLiveSink()
			res := mustCall(t, h, maiden.Call{Tool: k.tool, Input: leakyInput(k.tool, []string{"working on it"}, "cannot log in: the password is "+secret, ""),
				OnLog: live.onLog, OnProgress: live.onProgress})
			lines, progress := live.seen()
			if all := fmt.Sprintf("%+v %+v %q %q", res, res.Error, lines, progress); strings.Contains(all, secret) {
				t.Fatalf("the failed call's secret reached the caller: %s", all)
			}
			wantKind(t, res, maiden.KindDenied, "withheld by dlp: the tool error mentioned a password")
			if len(res.Logs) != 0 || len(lines) != 0 || len(progress) != 0 {
				t.Errorf("the withheld call's lines reached the caller: result %+v, live %q, progress %q", res.Logs, lines, progress)
			}
			if n := tokens.Load(); n != 0 {
				t.Errorf("the upstream was given %d progress tokens for a call a component watches", n)
			}

			// A failure the component passes reaches the agent as the
			// tool said it, its lines after the chain.
			live = newLiveSink()
			res = mustCall(t, h, maiden.Call{Tool: k.tool, Input: leakyInput(k.tool, []string{"working on it"}, "the tool gave up", ""), OnLog: live.onLog})
			wantKind(t, res, maiden.KindTool, "the tool gave up")
			if lines, _ := live.seen(); strings.Join(lines, "|") != "working on it" || len(res.Logs) != 1 {
				t.Errorf("a passed failure's lines: live %q, result %+v", lines, res.Logs)
			}
		})
	}
}

// TestLoggedSecretWithheldByComponent: a tool that logs the data and then
// succeeds with a harmless output, or fails with a harmless message, does
// not get it past the component: the component sees the lines (and
// rejects), the caller's OnLog sees no line at all, during the call or
// after it, and the result carries none.
func TestLoggedSecretWithheldByComponent(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-l0g"
	for _, k := range leakyKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			h, tokens, _ := leakyHost(t, k.iso, "[[middleware]]\nuse = \"dlp\"\n")
			for _, fail := range []string{"", "the tool gave up"} {
				live := newLiveSink()
				res := mustCall(t, h, maiden.Call{Tool: k.tool, Input: leakyInput(k.tool, []string{"step 1", "the password is " + secret, "step 3"}, fail, "harmless"),
					OnLog: live.onLog, OnProgress: live.onProgress})
				lines, progress := live.seen()
				if all := fmt.Sprintf("%+v %+v %q %q", res, res.Error, lines, progress); strings.Contains(all, secret) {
					t.Fatalf("fail %q: the logged secret reached the caller: %s", fail, all)
				}
				wantKind(t, res, maiden.KindDenied, "withheld by dlp: its log mentioned a password")
				if len(lines) != 0 || len(res.Logs) != 0 || len(progress) != 0 {
					t.Errorf("fail %q: lines of a call the component withheld reached the caller: live %q, result %+v, progress %q", fail, lines, res.Logs, progress)
				}
			}
			if n := tokens.Load(); n != 0 {
				t.Errorf("the upstream was given %d progress tokens for calls a component watches", n)
			}
		})
	}
}

// probeServer is a TLS server on loopback, probe.example to the host, that
// the go/leaky tool fetches after it logged, while it runs: it answers
// "saw N", N the lines the caller's OnLog saw so far; asked with
// ?wait, only once the caller saw one (or the tool's request ended).
func probeServer(t *testing.T, live *liveSink) (port, ca string) {
	t.Helper()
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("wait") {
			select {
			case <-live.first:
			case <-r.Context().Done():
			}
		}
		lines, _ := live.seen()
		fmt.Fprintf(w, "saw %d", len(lines))
	}), "probe.example")
	u, _ := url.Parse(srv.URL)
	return u.Port(), ca
}

// probeHost is a host with go/leaky allowed to fetch the probe, under chain.
func probeHost(t *testing.T, port, ca, chain string) *maiden.Host {
	t.Helper()
	return newHostWith(t, `version = 1
[tools.leaky]
path = %q
timeout_ms = 20000
http_allow = ["probe.example"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
[middleware.dlp]
path = "`+testkit.Middleware(t, "dlp")+`"
timeout_ms = 20000
`+chain, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("probe.example")}, "go/leaky")
}

// TestHarmlessLogsHeldThenDelivered: the lines of a call a component
// watches are held, not lost: none reaches the caller while the tool runs
// (the probe, fetched after the tool logged, answers "saw 0"); once the
// component passed the result they reach OnLog, in order, and the result
// keeps them.
func TestHarmlessLogsHeldThenDelivered(t *testing.T) {
	t.Parallel()
	live := newLiveSink()
	port, ca := probeServer(t, live)
	h := probeHost(t, port, ca, "[[middleware]]\nuse = \"dlp\"\n")
	res := mustCall(t, h, maiden.Call{Tool: "leaky", Input: `{"log":["one","two","three"],"probe":"https://probe.example:` + port + `/","output":"harmless"}`, OnLog: live.onLog})
	if !res.OK || res.Output != `"harmless saw 0"` {
		t.Fatalf("result %+v (error %+v), want the output \"harmless saw 0\": no line reaches the caller while the tool runs", res, res.Error)
	}
	var kept []string
	for _, l := range res.Logs {
		kept = append(kept, l.Message)
	}
	lines, _ := live.seen()
	if strings.Join(lines, "|") != "one|two|three" || strings.Join(kept, "|") != "one|two|three" {
		t.Errorf("held lines: OnLog saw %q, the result keeps %q; want one, two, three in order in both", lines, kept)
	}
}

// TestLogsLiveWithoutComponent: a call no component watches (none in its
// chain, or one whose when does not hold) keeps its live lines: the probe,
// fetched after the tool logged, answers only once the caller's OnLog saw
// the line, while the tool waits for it.
func TestLogsLiveWithoutComponent(t *testing.T) {
	t.Parallel()
	for name, chain := range map[string]string{
		"no component":       "[[middleware]]\nuse = \"redact\"\npatterns = [\"TCK-[0-9]+\"]\n",
		"when does not hold": "[[middleware]]\nuse = \"dlp\"\nwhen = 'tool == \"other\"'\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			live := newLiveSink()
			port, ca := probeServer(t, live)
			h := probeHost(t, port, ca, chain)
			res := mustCall(t, h, maiden.Call{Tool: "leaky", Input: `{"log":["live line"],"probe":"https://probe.example:` + port + `/?wait","output":"done"}`, OnLog: live.onLog})
			if !res.OK || res.Output != `"done saw 1"` {
				t.Fatalf("result %+v (error %+v), want the output \"done saw 1\": the line reaches the caller while the tool runs", res, res.Error)
			}
		})
	}
}

// TestFailedPhaseRewriteRefused: a failure cannot be rewritten; a component
// that answers the failed phase with a rewrite has failed, which refuses
// the call (the agent sees neither the tool's message nor the rewrite), and
// the operator's log names the phase.
func TestFailedPhaseRewriteRefused(t *testing.T) {
	t.Parallel()
	h, _, oplog := leakyHost(t, maiden.InProcess, "[[middleware]]\nuse = \"dlp\"\n")
	res := mustCall(t, h, maiden.Call{Tool: "leaky", Input: `{"log":["a line"],"fail":"please rewrite me"}`})
	wantKind(t, res, maiden.KindDenied, "refused by policy: a check on this call's error failed")
	if strings.Contains(res.Error.Message, "rewrite") || len(res.Logs) != 0 {
		t.Errorf("the refused call carries the tool's failure or the rewrite: %+v, logs %+v", res.Error, res.Logs)
	}
	if log := oplog.String(); !strings.Contains(log, `not allowed in the failed phase`) {
		t.Errorf("the operator's log does not name the phase:\n%s", log)
	}
}

// TestComponentJudgesWhatItSawBefore: a component whose condition held
// before the run judges the result, even when an inner layer's rewrite
// turned its condition false since. Here the outer dlp watches calls
// whose city is "paris"; the inner city component rewrites it to
// "Paris"; the echo tool returns its input, password and all. Judged by
// its condition after the run, dlp would skip the call and the output
// would reach the agent.
func TestComponentJudgesWhatItSawBefore(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[middleware.dlp]
path = "`+testkit.Middleware(t, "dlp")+`"
[middleware.city]
path = "`+testkit.Middleware(t, "city")+`"
[[middleware]]
use = "dlp"
when = 'args.city == "paris"'
[[middleware]]
use = "city"
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res := mustCall(t, h, maiden.Call{Tool: "echo", Input: `{"city":"paris","message":"the password is hunter2-rw"}`})
	if res.OK || strings.Contains(res.Output, "hunter2") {
		t.Fatalf("result %+v (error %+v): the output went past the component that judged the call before its rewrite", res, res.Error)
	}
	wantKind(t, res, maiden.KindDenied, "withheld by dlp: the output mentioned a password")
}
