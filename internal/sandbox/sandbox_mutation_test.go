package sandbox

// Tests added by the ninth mutation pass (docs/security-tests.md, "Ninth
// pass: the sandbox"): each kills a planted bug the package's other tests
// let through, with the tool as the adversary.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestHostCallDeadlineIsTheCalls: a host call's context ends at the call's
// deadline, Limits.Timeout after the call started, not later: a fetch or a
// reveal waits no longer than the tool may run. (TestDeadlineCoversHostCalls
// blocks until the context ends, so a later deadline still looked right.)
func TestHostCallDeadlineIsTheCalls(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "fetcher")
	if _, err := sb.Load(context.Background(), path, defaultLimits); err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second
	var deadline time.Time
	var has bool
	fetch := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
		deadline, has = ctx.Deadline()
		return &FetchResponse{Status: 200, Body: []byte("ok")}, nil
	}
	before := time.Now()
	out, err := sb.Execute(context.Background(), Call{Path: path, Limits: Limits{Timeout: timeout, Memory: 16 << 20}, Input: "https://x.test/", Fetch: fetch})
	if err != nil || out.Failure != nil {
		t.Fatalf("got %+v, %v", out, err)
	}
	// The deadline is set when the call starts, a moment after before.
	if !has || deadline.Before(before.Add(timeout)) || deadline.After(before.Add(timeout+timeout/4)) {
		t.Fatalf("http-fetch's context ends %v after the call started (set %t); want the call's %v timeout", deadline.Sub(before), has, timeout)
	}
}

// TestOutputCapAtItsEdge: an output (or an error message) of exactly
// MaxOutputBytes is returned, one byte more is a trap naming the limit.
func TestOutputCapAtItsEdge(t *testing.T) {
	t.Parallel()
	const limit = 100
	sb := newSandbox(t, &Options{MaxOutputBytes: limit})
	echo := testkit.Component(t, "echo")
	for _, n := range []int{limit, limit + 1} {
		out := execute(t, sb, echo, strings.Repeat("a", n), defaultLimits)
		switch {
		case n <= limit && (out.Failure != nil || len(out.Output) != n):
			t.Errorf("an output of %d bytes under a %d-byte cap: %+v, want it returned", n, limit, out.Failure)
		case n > limit && (out.Failure == nil || out.Failure.Kind != KindTrap || !strings.Contains(out.Failure.Message, "over the 100 bytes limit")):
			t.Errorf("an output of %d bytes under a %d-byte cap: returned %d bytes (failure %+v); want a trap over the 100 bytes limit", n, limit, len(out.Output), out.Failure)
		}
	}
	// fetcher returns err("denied: " + the refusal's message): the error
	// message's length is the test's to choose.
	fetcher := testkit.Component(t, "fetcher")
	for _, n := range []int{limit, limit + 1} {
		msg := strings.Repeat("d", n-len("denied: "))
		deny := func(context.Context, FetchRequest) (*FetchResponse, *FetchError) {
			return nil, &FetchError{Kind: FetchDenied, Message: msg}
		}
		out, err := sb.Execute(context.Background(), Call{Path: fetcher, Limits: defaultLimits, Input: "https://x.test/", Fetch: deny})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case n <= limit && (out.Failure == nil || out.Failure.Kind != KindTool || len(out.Failure.Message) != n):
			t.Errorf("an error message of %d bytes under a %d-byte cap: %+v, want it returned as the tool's error", n, limit, out.Failure)
		case n > limit && (out.Failure == nil || out.Failure.Kind != KindTrap || !strings.Contains(out.Failure.Message, "error message of 101 bytes, over the 100 bytes limit")):
			t.Errorf("an error message of %d bytes under a %d-byte cap: %+v; want a trap over the 100 bytes limit", n, limit, out.Failure)
		}
	}
}

// TestRequestBodyCapAtItsEdge: a request body of exactly MaxRequestBody
// reaches the host's http-fetch whole, one byte more is the tool's error
// "failed: request body is ... bytes" and nothing is sent, for both body
// encodings: 0.1.0's list<u8> (rawbody.wat) and 0.2.0's string
// (bodyfetcher.wat).
func TestRequestBodyCapAtItsEdge(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	for _, tool := range []string{"rawbody", "bodyfetcher"} {
		path := testkit.Component(t, tool)
		for _, n := range []int{MaxRequestBody, MaxRequestBody + 1} {
			t.Run(fmt.Sprintf("%s/%d", tool, n), func(t *testing.T) {
				sent := -1
				fetch := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
					sent = len(req.Body)
					return &FetchResponse{Status: 200, Body: []byte("ok")}, nil
				}
				// The timeout is only a bound (the calls take 1-9 s under
				// make test's load, race detector on; 12 s once, beside a
				// make demo): what is checked is what was sent.
				out, err := sb.Execute(context.Background(), Call{Path: path, Limits: Limits{Timeout: time.Minute, Memory: 32 << 20}, Input: strings.Repeat("a", n), Fetch: fetch})
				if err != nil {
					t.Fatal(err)
				}
				if n <= MaxRequestBody {
					if out.Failure != nil || sent != n {
						t.Fatalf("a body of %d bytes: %+v, %d bytes sent; want it sent whole", n, out.Failure, sent)
					}
					return
				}
				want := fmt.Sprintf("failed: request body is %d bytes; the limit is %d", n, MaxRequestBody)
				if sent >= 0 || out.Failure == nil || out.Failure.Kind != KindTool || out.Failure.Message != want {
					t.Fatalf("a body of %d bytes: %d bytes sent, failure %+v; want nothing sent and the tool's error %q", n, sent, out.Failure, want)
				}
			})
		}
	}
}

// TestRunawayStopsAtItsTimeout: a guest that never returns is stopped at
// its Limits.Timeout (the store's deadline fires on the engine's timer, not
// a clock tick), not at some later time: TestHostileTools allows 2 s of
// slack for a 500 ms timeout, within which a doubled deadline passed.
func TestRunawayStopsAtItsTimeout(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "loop")
	if _, err := sb.Load(context.Background(), path, defaultLimits); err != nil {
		t.Fatal(err)
	}
	const timeout = time.Second
	start := time.Now()
	out := execute(t, sb, path, "{}", Limits{Timeout: timeout, Memory: 16 << 20})
	took := time.Since(start)
	if out.Failure == nil || out.Failure.Kind != KindDeadline {
		t.Fatalf("got %+v, want kind deadline", out.Failure)
	}
	if took < timeout || took > timeout+timeout/2 {
		t.Fatalf("a runaway guest under a %v timeout ran %v", timeout, took)
	}
}

// TestUnterminatedOutputIsBounded: a tool's stdout with no line break is
// held by the host only up to the log's budget, however much the tool
// writes (16 MiB here, looked at from inside the call, when the host
// would still hold it), and the log says what was dropped even though no
// whole line was. Not parallel: it reads the process's live heap.
func TestUnterminatedOutputIsBounded(t *testing.T) {
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "unterminated")
	if _, err := sb.Load(context.Background(), path, defaultLimits); err != nil {
		t.Fatal(err)
	}
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fetch := func(context.Context, FetchRequest) (*FetchResponse, *FetchError) {
		runtime.GC()
		runtime.ReadMemStats(&during)
		return nil, &FetchError{Kind: FetchDenied, Message: "no"}
	}
	out, err := sb.Execute(context.Background(), Call{Path: path, Limits: Limits{Timeout: 20 * time.Second, Memory: 16 << 20}, Input: "{}", Fetch: fetch})
	if err != nil || out.Failure != nil || out.Output != "written" {
		t.Fatalf("got %+v, %v", out, err)
	}
	grew := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("the live heap grew by %d KiB during the call", grew>>10)
	if grew > 4<<20 {
		t.Errorf("after 16 MiB of stdout without a newline the host's live heap grew by %d MiB; want at most the log's %d KiB budget (and slack)", grew>>20, DefaultMaxLogBytes>>10)
	}
	last := LogEntry{}
	if len(out.Logs) > 0 {
		last = out.Logs[len(out.Logs)-1]
	}
	if last.Source != SourceHost || !strings.Contains(last.Message, "log truncated") {
		t.Errorf("log %+v: want the truncation marker saying 16 MiB of stdout were dropped", out.Logs)
	}
}

// TestRedactReachesToolErrors: a tool's error message leaves the sandbox
// redacted like its output: here a secret a server echoed into the refusal
// the tool passes on ("denied: ...").
func TestRedactReachesToolErrors(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	echoed := func(context.Context, FetchRequest) (*FetchResponse, *FetchError) {
		return nil, &FetchError{Kind: FetchDenied, Message: "token s3cr3t rejected"}
	}
	out, err := sb.Execute(context.Background(), Call{
		Path: testkit.Component(t, "fetcher"), Limits: defaultLimits, Input: "https://x.test/", Fetch: echoed,
		Redact: func(s string) string { return strings.ReplaceAll(s, "s3cr3t", "[redacted]") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Failure == nil || out.Failure.Kind != KindTool || out.Failure.Message != "denied: token [redacted] rejected" {
		t.Fatalf("got %+v; want the tool's error with the secret redacted", out.Failure)
	}
}

// TestOpenPinnedRefusesAPrefix: a pinned digest is compared whole: its
// prefix, or "sha256:" with no hex at all, pins nothing and is refused.
func TestOpenPinnedRefusesAPrefix(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "echo")
	own := fileSHA256(t, path)
	for _, want := range []string{"sha256:", own[:len("sha256:")+16], own[:len(own)-1]} {
		_, err := sb.OpenPinned(context.Background(), path, want, defaultLimits)
		var de *DigestError
		if !errors.As(err, &de) || de.Got != own {
			t.Errorf("OpenPinned(%q) of bytes hashing to %s: %v; want a *DigestError", want, own, err)
		}
	}
}

// TestOtherWASIPackagesRefused: a tool may import the WASI 0.2 cli, clocks,
// filesystem, io and random interfaces and no other WASI package: one
// importing wasi:sockets is refused at load, naming the import, before any
// of its code runs (the engine's WASI context would refuse its addresses,
// but the allowlist is the first wall).
func TestOtherWASIPackagesRefused(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, testkit.Component(t, "sockimport"), "{}", defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindInvalid || !strings.Contains(out.Failure.Message, `imports "wasi:sockets/tcp@0.2.0"`) {
		t.Fatalf("got %+v; want kind invalid naming the wasi:sockets import", out.Failure)
	}
}

// TestRevealPastTheDeadlineIsNotAnswered: a reveal that returns after the
// call's deadline is not answered: the tool never gets the late value (the
// revealer logs what it got). Without the host's check the value reaches
// the guest whenever its lifting (cabi_realloc, the first epoch check after
// the host call) runs before the engine's deadline timer bumps the epoch, a
// race the guest often wins: the call even succeeded with ok("late-value")
// past its deadline. So the call is made 300 times; TestRevealDeadline,
// once and looking at the kind only, passed with the check dropped.
func TestRevealPastTheDeadlineIsNotAnswered(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "revealer")
	lim := defaultLimits
	lim.Timeout = 10 * time.Millisecond
	slow := func(ctx context.Context, _ string) (string, error) {
		<-ctx.Done()
		return "late-value", nil
	}
	for i := range 300 {
		out, err := sb.Execute(context.Background(), Call{Path: path, Limits: lim, Input: "h", Reveal: slow})
		if err != nil || out.Failure == nil || out.Failure.Kind != KindDeadline {
			t.Fatalf("call %d: got %+v, %v; want a deadline", i, out, err)
		}
		for _, l := range out.Logs {
			if strings.Contains(l.Message, "late-value") {
				t.Fatalf("call %d: the tool logged %q: it got reveal's answer after its deadline", i, l.Message)
			}
		}
	}
}
