package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

var defaultLimits = Limits{Timeout: 2 * time.Second, Memory: 32 << 20}

func newSandbox(t testing.TB, opts *Options) *Sandbox {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.CacheDir == "" {
		opts.CacheDir = testkit.CompileCache(t)
	}
	sb, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func execute(t testing.TB, sb *Sandbox, path, input string, lim Limits) Outcome {
	t.Helper()
	out, err := sb.Execute(context.Background(), Call{Path: path, Limits: lim, Input: input})
	if err != nil {
		t.Fatalf("Execute(%s): unexpected host error: %v", filepath.Base(path), err)
	}
	return out
}

func TestEcho(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "echo")
	info, err := sb.Load(context.Background(), path, defaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.Description, "Echoes") || !strings.Contains(info.Schema, `"message"`) {
		t.Errorf("describe/schema = %q / %q", info.Description, info.Schema)
	}
	out := execute(t, sb, path, `{"message":"héllo"}`, defaultLimits)
	if out.Failure != nil || out.Output != `{"message":"héllo"}` {
		t.Fatalf("got %+v", out)
	}
	if out.MemoryPeak == 0 || out.MemoryPeak > defaultLimits.Memory {
		t.Errorf("memory peak %d outside (0, %d]", out.MemoryPeak, defaultLimits.Memory)
	}
}

func TestLogLevels(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	var live []LogEntry
	var mu sync.Mutex
	out, err := sb.Execute(context.Background(), Call{
		Path: testkit.Component(t, "logger"), Limits: defaultLimits, Input: "{}",
		OnLog: func(e LogEntry) { mu.Lock(); live = append(live, e); mu.Unlock() },
	})
	if err != nil || out.Failure != nil {
		t.Fatalf("got %+v, %v", out, err)
	}
	var levels []string
	for _, l := range out.Logs {
		if l.Source != SourceLog {
			t.Errorf("source %q, want log", l.Source)
		}
		levels = append(levels, string(l.Level))
	}
	if got := strings.Join(levels, ","); got != "debug,info,warn,error" {
		t.Errorf("levels %s, want debug,info,warn,error", got)
	}
	if len(live) != len(out.Logs) {
		t.Errorf("OnLog saw %d lines, result has %d", len(live), len(out.Logs))
	}
}

func TestToolError(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, testkit.Component(t, "toolerr"), "{}", defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindTool || out.Failure.Message != "the tool refused: bad input" {
		t.Fatalf("got %+v", out.Failure)
	}
}

// TestHostileTools runs one hostile tool per attack. Each must end in its
// error kind, within a bounded time, and leave the host able to serve the
// next call.
func TestHostileTools(t *testing.T) {
	sb := newSandbox(t, nil)
	echo := testkit.Component(t, "echo")
	tight := Limits{Timeout: 500 * time.Millisecond, Memory: 16 << 20}
	tests := []struct {
		tool    string
		kind    Kind
		message string // a substring the message must contain
	}{
		{"loop", KindDeadline, "did not finish within its 500ms timeout"},
		{"startloop", KindDeadline, "timeout"},
		{"memgrow", KindMemory, "memory ceiling of 16 MiB"},
		{"memgrow_err", KindMemory, "memory ceiling of 16 MiB"},
		{"recursion", KindTrap, "stack"},
		{"tablegrow", KindTrap, "unreachable"},
		{"hugeoutput", KindTrap, "over the 1 MiB limit"},
		{"trap", KindTrap, "unreachable"},
		{"divzero", KindTrap, "divide by zero"},
		{"oob", KindTrap, "out of bounds"},
		{"badimport", KindInvalid, `imports "evil:net/socket@0.1.0"`},
		{"noexecute", KindInvalid, `missing export "execute"`},
		{"wrongsig", KindInvalid, `export "execute" has type func(input: u32) -> string`},
		{"notwasm", KindInvalid, "not a WebAssembly component"},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			path := testkit.Component(t, tc.tool)
			start := time.Now()
			out := execute(t, sb, path, `{"message":"x"}`, tight)
			took := time.Since(start)
			if out.Failure == nil {
				t.Fatalf("succeeded with %q, want %s", out.Output, tc.kind)
			}
			if out.Failure.Kind != tc.kind || !strings.Contains(out.Failure.Message, tc.message) {
				t.Fatalf("got %s %q, want %s containing %q", out.Failure.Kind, out.Failure.Message, tc.kind, tc.message)
			}
			if took > tight.Timeout+2*time.Second {
				t.Errorf("took %v; the deadline is %v", took, tight.Timeout)
			}
			if out.MemoryPeak > tight.Memory {
				t.Errorf("memory peak %d over the %d ceiling", out.MemoryPeak, tight.Memory)
			}
			if ok := execute(t, sb, echo, `{"message":"after"}`, tight); ok.Failure != nil {
				t.Fatalf("host unusable after %s: %+v", tc.tool, ok.Failure)
			}
		})
	}
}

func TestTruncatedComponent(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	b, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "truncated.wasm")
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	out := execute(t, sb, path, "{}", defaultLimits)
	// The load-time scan sees the cut before the compiler would.
	if out.Failure == nil || out.Failure.Kind != KindInvalid || !strings.Contains(out.Failure.Message, "runs past the end") {
		t.Fatalf("got %+v", out.Failure)
	}
}

func TestMissingFile(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, filepath.Join(t.TempDir(), "gone.wasm"), "{}", defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindInvalid || !strings.Contains(out.Failure.Message, "no such file") {
		t.Fatalf("got %+v", out.Failure)
	}
}

func TestCoreModuleIsRefused(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := filepath.Join(t.TempDir(), "core.wasm")
	// The smallest core module: magic and version 1.
	if err := os.WriteFile(path, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := execute(t, sb, path, "{}", defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindInvalid || !strings.Contains(out.Failure.Message, "core module") {
		t.Fatalf("got %+v", out.Failure)
	}
}

// TestMemoryIsFreshEachCall: maiden reuses released memory reservations;
// a call must never see what an earlier call left in memory. dirtymem's
// memory (two pages, grown to three) is zeroed page by page as the kernel
// reports them resident, dirtysmall's (one page) whole
// (MAIDEN_ZERO_WHOLE_MAX in internal/wasmtime/shim.c); one dirtymem call,
// then two dirtysmall, so each gets reservations the other released and
// dirtysmall its own.
func TestMemoryIsFreshEachCall(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	mem, small := testkit.Component(t, "dirtymem"), testkit.Component(t, "dirtysmall")
	for i := 0; i < 45; i++ {
		path := small
		if i%3 == 0 {
			path = mem
		}
		out := execute(t, sb, path, "{}", defaultLimits)
		if out.Failure != nil || out.Output != "clean" {
			t.Fatalf("call %d (%s): %+v", i, filepath.Base(path), out)
		}
	}
}

func TestLogIsBounded(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, testkit.Component(t, "logflood"), "{}", Limits{Timeout: 10 * time.Second, Memory: 16 << 20})
	if out.Failure != nil || out.Output != "flooded" {
		t.Fatalf("got %+v", out.Failure)
	}
	total := 0
	for _, l := range out.Logs {
		total += len(l.Message)
	}
	last := out.Logs[len(out.Logs)-1]
	if last.Source != SourceHost || !strings.Contains(last.Message, "log truncated") {
		t.Errorf("last entry %+v, want the truncation marker", last)
	}
	if total > DefaultMaxLogBytes+200 {
		t.Errorf("kept %d bytes of log, limit %d", total, DefaultMaxLogBytes)
	}
}

// TestEmptyLogLinesBounded: a line costs the host an entry whatever its
// length, so the budget counts every line (logLineCost): hundreds of
// thousands of empty lines (4,096 fit the budget), by the host's log or by
// WASI stdout, leave at most the budget's worth of entries, each seen live
// once, and the marker counts the rest. (Two million lines before
// 2026-12-06: 54 s of a make test run under the race detector, for a
// bound this many already exceed fifty times.)
func TestEmptyLogLinesBounded(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "emptylines")
	maxLines := DefaultMaxLogBytes / logLineCost
	for _, tc := range []struct {
		name, input string
		lines       int
	}{
		{"log", "log", 200_000},
		{"stdout", "stdout", 20 * 32768},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			live := 0
			out, err := sb.Execute(context.Background(), Call{Path: path, Input: tc.input,
				Limits: Limits{Timeout: 60 * time.Second, Memory: 16 << 20}, OnLog: func(LogEntry) { live++ }})
			if err != nil || out.Failure != nil || out.Output != "flooded" {
				t.Fatalf("got %+v, %v", out.Failure, err)
			}
			kept := len(out.Logs) - 1
			if kept > maxLines || live > maxLines {
				t.Errorf("kept %d empty lines (%d seen live), want at most %d (%d bytes at %d a line)", kept, live, maxLines, DefaultMaxLogBytes, logLineCost)
			}
			want := fmt.Sprintf("log truncated: %d more lines (0 bytes) dropped past the 65536-byte limit", tc.lines-kept)
			if last := out.Logs[len(out.Logs)-1]; last.Source != SourceHost || last.Message != want {
				t.Errorf("last entry %+v, want the marker %q", last, want)
			}
			total := 0
			for _, l := range out.Logs {
				total += len(l.Message) + logLineCost
			}
			if total > DefaultMaxLogBytes {
				t.Errorf("the log, marker included, costs %d bytes of its %d-byte budget", total, DefaultMaxLogBytes)
			}
		})
	}
}

// TestCancellation: a caller giving up stops a runaway guest at its next
// epoch check, and the call reports the caller's error, not a tool kind.
func TestCancellation(t *testing.T) {
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "loop")
	if _, err := sb.Load(context.Background(), path, defaultLimits); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := sb.Execute(ctx, Call{Path: path, Limits: Limits{Timeout: time.Minute, Memory: 16 << 20}, Input: "{}"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("cancellation took %v", took)
	}
}

func TestFetchWithoutNetwork(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, testkit.Component(t, "fetcher"), "https://example.com/", defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindTool || !strings.Contains(out.Failure.Message, "denied: this call has no network access") {
		t.Fatalf("got %+v", out)
	}
}

// TestDeadlineCoversHostCalls: time blocked in http-fetch spends from the
// call's budget, and the deadline ends the call while it waits.
func TestDeadlineCoversHostCalls(t *testing.T) {
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "fetcher")
	start := time.Now()
	var deadline time.Time
	var hasDeadline bool
	slow := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
		// What a dialer or an HTTP client bounds its own waits by.
		deadline, hasDeadline = ctx.Deadline()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second): // a context the deadline never ends
		}
		return nil, &FetchError{Kind: FetchTimeout}
	}
	out, err := sb.Execute(context.Background(), Call{Path: path, Limits: Limits{Timeout: 300 * time.Millisecond, Memory: 16 << 20}, Input: "https://example.com/", Fetch: slow})
	if err != nil {
		t.Fatal(err)
	}
	if out.Failure == nil || out.Failure.Kind != KindDeadline {
		t.Fatalf("got %+v, want deadline", out.Failure)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("took %v for a 300ms deadline", took)
	}
	if !hasDeadline || deadline.Before(start.Add(300*time.Millisecond)) || deadline.After(time.Now()) {
		t.Errorf("the fetch's context: deadline %v (set %t), want the call's (300ms after %v)", deadline, hasDeadline, start)
	}
}

func TestFetchResponseReachesTool(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	var got FetchRequest
	fetch := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
		got = req
		return &FetchResponse{Status: 203, Headers: []Header{{"content-type", "text/plain"}}, Body: []byte("pong")}, nil
	}
	out, err := sb.Execute(context.Background(), Call{Path: testkit.Component(t, "fetcher"), Limits: defaultLimits, Input: "CRED=API_TOKEN https://api.example.com/ping", Fetch: fetch})
	if err != nil || out.Failure != nil {
		t.Fatalf("got %+v, %v", out, err)
	}
	if out.Output != "203 pong" {
		t.Errorf("output %q, want %q", out.Output, "203 pong")
	}
	if got.URL != "https://api.example.com/ping" || !got.HasCredential || got.Credential != "API_TOKEN" || got.Method != "" {
		t.Errorf("request as the host saw it: %+v", got)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out, err := sb.Execute(context.Background(), Call{
		Path: testkit.Component(t, "echo"), Limits: defaultLimits, Input: `{"message":"s3cr3t"}`,
		Redact: func(s string) string { return strings.ReplaceAll(s, "s3cr3t", "[redacted]") },
	})
	if err != nil || out.Output != `{"message":"[redacted]"}` {
		t.Fatalf("got %+v, %v", out, err)
	}
}

func TestHotReload(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.CopyToTemp(t, testkit.Component(t, "echo"))
	if out := execute(t, sb, path, `{"message":"v1"}`, defaultLimits); out.Failure != nil {
		t.Fatal(out.Failure)
	}
	// Replace the file the way build tools do: write elsewhere, rename over.
	b, err := os.ReadFile(testkit.Component(t, "toolerr"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	out := execute(t, sb, path, `{"message":"v2"}`, defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindTool {
		t.Fatalf("after replacing the file: %+v, want the new tool's error", out)
	}
	// And in place, same size would not matter: a truncating rewrite.
	if err := os.WriteFile(path, []byte("not wasm any more"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := execute(t, sb, path, "{}", defaultLimits); out.Failure == nil || out.Failure.Kind != KindInvalid {
		t.Fatalf("after overwriting with junk: %+v", out)
	}
}

func TestDiskCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := testkit.Component(t, "echo")
	first := newSandbox(t, &Options{CacheDir: dir})
	li, err := first.Load(context.Background(), path, defaultLimits)
	if err != nil || li.Cached {
		t.Fatalf("first load: %+v, %v (want compiled)", li, err)
	}
	second := newSandbox(t, &Options{CacheDir: dir})
	li, err = second.Load(context.Background(), path, defaultLimits)
	if err != nil || !li.Cached {
		t.Fatalf("second load: %+v, %v (want from disk)", li, err)
	}
	if out := execute(t, second, path, `{"message":"x"}`, defaultLimits); out.Failure != nil {
		t.Fatal(out.Failure)
	}
}

// TestDiskCacheIgnoresDamage: a damaged cache file is recompiled, not run.
func TestDiskCacheIgnoresDamage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := testkit.Component(t, "echo")
	first := newSandbox(t, &Options{CacheDir: dir})
	if _, err := first.Load(context.Background(), path, defaultLimits); err != nil {
		t.Fatal(err)
	}
	cwasm, _ := filepath.Glob(filepath.Join(dir, "*", "*.cwasm"))
	if len(cwasm) != 1 {
		t.Fatalf("cache holds %v", cwasm)
	}
	if err := os.WriteFile(cwasm[0], []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := newSandbox(t, &Options{CacheDir: dir})
	li, err := second.Load(context.Background(), path, defaultLimits)
	if err != nil || li.Cached {
		t.Fatalf("load over a damaged cache: %+v, %v", li, err)
	}
}

func TestUntrustedCacheDirIsNotUsed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, &Options{CacheDir: dir})
	if sb.cache.dir != "" {
		t.Fatalf("a world-writable cache dir was accepted")
	}
	if out := execute(t, sb, testkit.Component(t, "echo"), `{"message":"x"}`, defaultLimits); out.Failure != nil {
		t.Fatal(out.Failure)
	}
}

// TestConcurrentCalls hammers one sandbox from many goroutines, mixing good
// and hostile tools, and hot reloads; run with -race.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	echo := testkit.Component(t, "echo")
	trap := testkit.Component(t, "trap")
	mem := testkit.Component(t, "memgrow")
	lim := Limits{Timeout: 2 * time.Second, Memory: 8 << 20}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				in := fmt.Sprintf(`{"message":"%d-%d"}`, g, i)
				out, err := sb.Execute(context.Background(), Call{Path: echo, Limits: lim, Input: in})
				if err != nil || out.Output != in {
					errs <- fmt.Errorf("echo %s: %+v %v", in, out, err)
					return
				}
				bad := trap
				want := KindTrap
				if i%5 == 0 {
					bad, want = mem, KindMemory
				}
				out, err = sb.Execute(context.Background(), Call{Path: bad, Limits: lim, Input: in})
				if err != nil || out.Failure == nil || out.Failure.Kind != want {
					errs <- fmt.Errorf("%s: %+v %v", filepath.Base(bad), out.Failure, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStdoutIsCaptured(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, testkit.Component(t, "js/hello"), `{"name":"Ada"}`, Limits{Timeout: 10 * time.Second, Memory: 128 << 20})
	if out.Failure != nil {
		t.Fatalf("got %+v", out.Failure)
	}
	var sources []string
	for _, l := range out.Logs {
		sources = append(sources, l.Source+":"+l.Message)
	}
	joined := strings.Join(sources, "\n")
	if !strings.Contains(joined, "stdout:") || !strings.Contains(joined, "log:") {
		t.Errorf("logs %q lack a stdout line and a log line", joined)
	}
	if !strings.Contains(out.Output, "Ada") {
		t.Errorf("output %q", out.Output)
	}
}

// TestJSToolError: a JS tool that throws an Error reports it as its own
// error (kind tool), message intact.
func TestJSToolError(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	out := execute(t, sb, testkit.Component(t, "js/hello"), `{"name":"Ada","fail":"asked to fail"}`, Limits{Timeout: 10 * time.Second, Memory: 128 << 20})
	if out.Failure == nil || out.Failure.Kind != KindTool || out.Failure.Message != "asked to fail" {
		t.Fatalf("got %+v", out)
	}
}

// TestToolVersionIsPinned: a Tool runs the version it was opened at, and
// once that version is freed after the file changed, says so instead of
// running something else.
func TestToolVersionIsPinned(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.CopyToTemp(t, testkit.Component(t, "echo"))
	tool, err := sb.Open(context.Background(), path, defaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(testkit.Component(t, "toolerr"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	// Before anyone looks at the new file, the handle still runs echo.
	out, err := tool.Execute(context.Background(), Call{Limits: defaultLimits, Input: `{"message":"old"}`})
	if err != nil || out.Output != `{"message":"old"}` {
		t.Fatalf("pinned version: %+v %v", out, err)
	}
	// A call by path loads the new version; the old one is freed.
	if out := execute(t, sb, path, "{}", defaultLimits); out.Failure == nil || out.Failure.Kind != KindTool {
		t.Fatalf("new version: %+v", out)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err = tool.Execute(context.Background(), Call{Limits: defaultLimits, Input: `{"message":"old"}`})
		if errors.Is(err, ErrStale) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(err, ErrStale) {
		t.Fatalf("after the old version was freed: %v, want ErrStale", err)
	}
}
