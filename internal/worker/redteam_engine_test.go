package worker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The engine red team's workers (argv[1] "engine-*", served before
// TestMain as redteam_test.go's are): each answers a run as a worker its
// tool took over could, with a done (or logs) no sandbox would send.
func init() {
	if IsChild() && len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "engine-") {
		os.Exit(engineWorker(os.Args[1]))
	}
}

// engineEmptyLines is how many empty log lines engine-empty-logs sends.
const engineEmptyLines = 300_000

func engineWorker(mode string) int {
	conn := os.NewFile(ipcFD, "ipc")
	r := bufio.NewReader(conn)
	w := bufio.NewWriterSize(conn, 64<<10)
	write := func(b []byte) { _, _ = w.Write(b); _ = w.Flush() }
	write(hello{Version: protocolVersion, Fingerprint: "engine", Confinement: "none"}.encode())
	// Under the done frame's limit (twice the output limit and 64 KiB),
	// over the output limit.
	huge := strings.Repeat("e", 2*sandbox.DefaultMaxOutputBytes)
	for {
		typ, p, err := readFrame(r, maxFrame)
		if err != nil {
			return 0
		}
		switch typ {
		case msgLoad:
			m, _ := decodeLoad(p)
			takeCode(m)
			write(loadedMsg{Digest: m.Digest}.encode())
		case msgRun:
			m, _ := decodeRun(p)
			var done doneMsg
			switch mode {
			case "engine-empty-logs":
				// Empty lines cost no bytes of a budget that counts bytes
				// only: buffered, so the flood is as fast as the parent
				// reads.
				line := logMsg{ID: m.ID, Level: "info", Source: "log"}.encode()
				for range engineEmptyLines {
					_, _ = w.Write(line)
				}
				done = doneMsg{ID: m.ID, Output: "flooded"}
			case "engine-huge-error":
				done = doneMsg{ID: m.ID, FailKind: "tool", FailMessage: huge}
			case "engine-huge-host-error":
				done = doneMsg{ID: m.ID, HostErr: huge}
			case "engine-bad-utf8-output":
				done = doneMsg{ID: m.ID, Output: "ok \xff\xfe\x1b[2J"}
			case "engine-bad-utf8-error":
				done = doneMsg{ID: m.ID, FailKind: "tool", FailMessage: "no \xff\xfe"}
			default:
				done = doneMsg{ID: m.ID, Output: "ok"}
			}
			write(done.encode())
		}
	}
}

// TestRedTeamDoneBounded: what a worker answers is held to what a sandbox
// can answer in process, whatever the worker claims: an error message (the
// err variant) or a host error over the output limit is refused naming the
// limit, as an ok output over it is, and a string that is not UTF-8 (which
// the canonical ABI never lifts) is a protocol violation; nothing of it
// reaches the caller.
func TestRedTeamDoneBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mode, want string }{
		{"engine-huge-error", "execute returned an error message of 2097152 bytes, over the 1048576-byte limit"},
		{"engine-huge-host-error", "the tool's worker process misbehaved (bad done message: a host error of 2097152 bytes, over the 1048576-byte limit) and was stopped"},
		{"engine-bad-utf8-output", "the tool's worker process misbehaved (bad done message: not UTF-8 text) and was stopped"},
		{"engine-bad-utf8-error", "the tool's worker process misbehaved (bad done message: not UTF-8 text) and was stopped"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			p := fakePool(t, tc.mode, 1)
			out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: sandbox.Limits{Timeout: 30 * time.Second, Memory: 16 << 20}, Input: "{}"})
			if err != nil {
				t.Fatal(err)
			}
			if out.Output != "" || out.Failure == nil || out.Failure.Kind != sandbox.KindTrap || out.Failure.Message != tc.want {
				msg, n := "", 0
				if out.Failure != nil {
					msg, n = out.Failure.Message, len(out.Failure.Message)
					if n > 200 {
						msg = msg[:200] + "..."
					}
				}
				t.Fatalf("got output %q, failure %v %q (%d bytes); want a trap %q", out.Output, out.Failure != nil, msg, n, tc.want)
			}
		})
	}
}

// TestRedTeamEmptyLogLinesBounded: a worker that sends empty log lines
// (no bytes of the budget) gets at most as many kept as the budget allows
// lines (64 KiB at sandbox's 16 bytes a line), each relayed once, and the
// marker counts the rest.
func TestRedTeamEmptyLogLinesBounded(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "engine-empty-logs", 1)
	live := 0
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: sandbox.Limits{Timeout: 60 * time.Second, Memory: 16 << 20},
		Input: "{}", OnLog: func(sandbox.LogEntry) { live++ }})
	if err != nil || out.Failure != nil || out.Output != "flooded" {
		t.Fatalf("got %+v, %v", out.Failure, err)
	}
	const maxLines = sandbox.DefaultMaxLogBytes / 16
	if n := len(out.Logs) - 1; n > maxLines || live > maxLines {
		t.Errorf("kept %d empty lines of a worker's flood (%d relayed live), want at most %d", n, live, maxLines)
	}
	want := fmt.Sprintf("log truncated: %d more lines (0 bytes) dropped", engineEmptyLines-len(out.Logs)+1)
	if last := out.Logs[len(out.Logs)-1]; last.Source != sandbox.SourceHost || !strings.HasPrefix(last.Message, want) {
		t.Errorf("last entry %+v, want the marker %q...", last, want)
	}
}

// TestEmptyLogLinesInWorker: the same tool as sandbox's
// TestEmptyLogLinesBounded, in a worker: the worker's sandbox keeps (and
// relays) at most the budget's lines, so the parent sees few frames.
func TestEmptyLogLinesInWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	l := sandbox.Limits{Timeout: 60 * time.Second, Memory: 16 << 20}
	out := call(t, p, testkit.Component(t, "emptylines"), "log", l)
	if out.Failure != nil || out.Output != "flooded" {
		t.Fatalf("got %+v", out.Failure)
	}
	const maxLines = sandbox.DefaultMaxLogBytes / 16
	if n := len(out.Logs) - 1; n > maxLines {
		t.Errorf("kept %d empty lines, want at most %d", n, maxLines)
	}
	// The worker's marker, kept by the parent in the room its lines left:
	// it counts every line the tool wrote that was not kept.
	want := fmt.Sprintf("log truncated: %d more lines (0 bytes) dropped", 200_000-len(out.Logs)+1)
	if last := out.Logs[len(out.Logs)-1]; last.Source != sandbox.SourceHost || !strings.HasPrefix(last.Message, want) {
		t.Errorf("last entry %+v, want the marker %q...", last, want)
	}
}

// TestFetchPastTheDeadlineInWorker: a tool blocked in http-fetch, whose
// FetchFunc ignores the call's context (worse than the egress gate, which
// honours it), ends as a deadline at its timeout, not when the fetch
// returns: the worker's sandbox stops waiting at the deadline, and the
// parent would kill a worker that did not at the deadline plus the grace.
func TestFetchPastTheDeadlineInWorker(t *testing.T) {
	p := newPool(t, &Options{Size: 1})
	l := sandbox.Limits{Timeout: 300 * time.Millisecond, Memory: 16 << 20}
	tl, err := p.Open(context.Background(), testkit.Component(t, "fetcher"), l)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	asked := make(chan struct{}, 1)
	stuck := func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		asked <- struct{}{}
		<-release // ignores the context: a server that never answers
		return nil, &sandbox.FetchError{Kind: sandbox.FetchTimeout}
	}
	start := time.Now()
	out, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: "https://example.com/", Fetch: stuck})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	default:
		t.Fatal("the tool's fetch never reached the parent")
	}
	if out.Failure == nil || out.Failure.Kind != sandbox.KindDeadline || !strings.HasPrefix(out.Failure.Message, "did not finish within its 300ms timeout") {
		t.Fatalf("got %+v, want a deadline naming the 300ms timeout", out.Failure)
	}
	t.Logf("ended after %v", took)
	if took > testkit.Slack(t, time.Second) {
		t.Errorf("took %v for a 300ms deadline", took)
	}
}
