//go:build !wasip1

package maiden_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

// These tests build testdata/sdktool, a Go tool using this package, the way
// `maiden build` does (toolbuild.Build: go build for wasip1, then the
// preview1 reactor adapter), and run it in the real sandbox. They need Go
// and Node.js >= 20 with npm; a missing toolchain fails them.

// buildTool returns testdata/NAME built as toolbuild.Build builds it, from
// testkit's cache of built tools ("sdk/NAME"), keyed by everything that
// decides its bytes (its sources and the SDK's, the build's code, Go,
// GOFLAGS), so it is built once per change instead of once per run
// (several Go builds' worth of CPU in make test), and never served stale.
func buildTool(t testing.TB, name string) string {
	t.Helper()
	p, err := toolbuild.DetectProject(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if p.Lang != toolbuild.LangGo {
		t.Fatalf("testdata/%s detected as %s, want go", name, p.Lang)
	}
	return testkit.Component(t, "sdk/"+name)
}

// TestMain closes the sandbox the tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	if sb, err := sharedSandbox(); err == nil {
		sb.Close()
	}
	os.Exit(code)
}

type sandboxRun struct {
	sb   *sandbox.Sandbox
	path string
}

// sharedSandbox is the sandbox every test runs its tools in. Its compiled
// code is kept on disk in testkit's compile cache, shared by every test
// binary and run: the tools these tests run are built from testkit's cache
// or by a build that makes the same bytes from the same sources, so a run
// after the first compiles none of them again (11 of 12 compiles, some 20
// CPU-seconds a run, were repeats of the previous run's when the code was
// kept in memory only). Nothing here tests the compile cache itself.
var sharedSandbox = sync.OnceValues(func() (*sandbox.Sandbox, error) {
	dir, err := testkit.CompileCacheDir()
	if err != nil {
		return nil, err
	}
	return sandbox.New(&sandbox.Options{CacheDir: dir})
})

func newRun(t *testing.T) sandboxRun {
	t.Helper()
	path := buildTool(t, "sdktool")
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}
	return sandboxRun{sb, path}
}

var limits = sandbox.Limits{Timeout: 10 * time.Second, Memory: 64 << 20}

func (r sandboxRun) call(t *testing.T, input string, fetch sandbox.FetchFunc) sandbox.Outcome {
	t.Helper()
	out, err := r.sb.Execute(context.Background(), sandbox.Call{Path: r.path, Limits: limits, Input: input, Fetch: fetch})
	if err != nil {
		t.Fatalf("Execute(%.60s): %v", input, err)
	}
	return out
}

func op(fields map[string]any) string {
	b, _ := json.Marshal(fields)
	return string(b)
}

func wantOK(t *testing.T, out sandbox.Outcome, want string) {
	t.Helper()
	if out.Failure != nil {
		t.Fatalf("failed: %v; logs: %v", out.Failure, out.Logs)
	}
	if out.Output != want {
		t.Errorf("output %.200q, want %.200q", out.Output, want)
	}
}

func TestLoadDescribesTool(t *testing.T) {
	r := newRun(t)
	info, err := r.sb.Load(context.Background(), r.path, limits)
	if err != nil {
		t.Fatal(err)
	}
	if info.Description != "Exercises the maiden Go SDK." {
		t.Errorf("description %q", info.Description)
	}
	var schema struct {
		Type       string
		Properties map[string]struct{ Type string }
		Required   []string
	}
	if err := json.Unmarshal([]byte(info.Schema), &schema); err != nil {
		t.Fatalf("schema %q: %v", info.Schema, err)
	}
	if schema.Type != "object" || schema.Properties["op"].Type != "string" || schema.Properties["mb"].Type != "integer" {
		t.Errorf("schema %s", info.Schema)
	}
	if diff := cmp.Diff([]string{"op"}, schema.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
}

// TestNoRegister: a tool that links the SDK but never calls Register cannot
// be loaded, and its log says what to do.
func TestNoRegister(t *testing.T) {
	r := newRun(t)
	path := buildTool(t, "noregister")
	_, err := r.sb.Load(context.Background(), path, limits)
	if err == nil || !strings.Contains(err.Error(), "describe() failed") || !strings.Contains(err.Error(), "trap") {
		t.Errorf("Load: %v, want describe to trap", err)
	}
	out, err := r.sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: limits, Input: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for _, l := range out.Logs {
		log.WriteString(l.Message + "\n")
	}
	if out.Failure == nil || out.Failure.Kind != sandbox.KindTrap || !strings.Contains(log.String(), "call maiden.Register(yourTool) from an init function") {
		t.Errorf("execute: %v; log:\n%s", out.Failure, log.String())
	}
}

// TestFuncKeysExactlyInSandbox: testdata/tools/go/echo (a Func reading
// "message") built as maiden build builds it refuses a lone "MESSAGE",
// which encoding/json alone would have read as "message" although the
// host's schema, cards and conditions never saw that key.
func TestFuncKeysExactlyInSandbox(t *testing.T) {
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatal(err)
	}
	r := sandboxRun{sb, testkit.Component(t, "go/echo")}
	wantOK(t, r.call(t, `{"message":"hi"}`, nil), `{"message":"hi"}`)
	out := r.call(t, `{"MESSAGE":"hi"}`, nil)
	if want := `invalid input: key "MESSAGE" is not the field "message"`; out.Failure == nil || out.Failure.Kind != sandbox.KindTool ||
		!strings.HasPrefix(out.Failure.Message, want) || out.Output != "" {
		t.Errorf("MESSAGE: %+v, want a tool error starting %q", out, want)
	}
}

func TestExecuteGetsInput(t *testing.T) {
	r := newRun(t)
	wantOK(t, r.call(t, op(map[string]any{"op": "echo", "msg": "héllo, wörld ✓"}), nil), "héllo, wörld ✓")
	wantOK(t, r.call(t, op(map[string]any{"op": "echo", "msg": ""}), nil), "")
}

// TestInitRunsBeforeExecute: the start function wit-component adds runs
// Go's _initialize, so package-level initializers and init functions have
// run before the first export.
func TestInitRunsBeforeExecute(t *testing.T) {
	r := newRun(t)
	wantOK(t, r.call(t, `{"op":"init"}`, nil), "init ran vvv")
}

// TestLargeInput goes past the 256 KiB arena, so cabi_realloc takes the
// input from Go's heap (with the collector off).
func TestLargeInput(t *testing.T) {
	r := newRun(t)
	for _, n := range []int{100, 300 << 10, 5 << 20} {
		in := op(map[string]any{"op": "len", "pad": strings.Repeat("x", n)})
		wantOK(t, r.call(t, in, nil), fmt.Sprint(len(in)))
	}
}

func TestLogs(t *testing.T) {
	r := newRun(t)
	out := r.call(t, `{"op":"log"}`, nil)
	wantOK(t, out, "logged")
	type line struct{ Level, Source, Message string }
	var got []line
	for _, l := range out.Logs {
		got = append(got, line{string(l.Level), string(l.Source), l.Message})
	}
	want := []line{
		{"debug", "log", "debug line"},
		{"info", "log", "info line"},
		{"warn", "log", "warn 3"},
		{"error", "log", "error line"},
		{"info", "stdout", "stdout line"},
		{"warn", "stderr", "stderr line"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}

func TestToolErrorIsToolKind(t *testing.T) {
	r := newRun(t)
	out := r.call(t, `{"op":"error","msg":"no"}`, nil)
	if out.Failure == nil || out.Failure.Kind != sandbox.KindTool || out.Failure.Message != "the tool refused: no" {
		t.Errorf("failure %v, want tool error %q", out.Failure, "the tool refused: no")
	}
	out = r.call(t, `{"op":"badutf8"}`, nil)
	if out.Failure == nil || out.Failure.Kind != sandbox.KindTool || !strings.Contains(out.Failure.Message, "not valid UTF-8") {
		t.Errorf("invalid UTF-8 output: failure %v, want a tool error", out.Failure)
	}
}

func TestPanicIsTrap(t *testing.T) {
	r := newRun(t)
	out := r.call(t, `{"op":"panic","msg":"bad day"}`, nil)
	if out.Failure == nil || out.Failure.Kind != sandbox.KindTrap {
		t.Fatalf("failure %v, want a trap", out.Failure)
	}
	var stderr strings.Builder
	for _, l := range out.Logs {
		stderr.WriteString(l.Message + "\n")
	}
	if !strings.Contains(stderr.String(), "panic: boom: bad day") {
		t.Errorf("the panic message is not in the log:\n%s", stderr.String())
	}
	// The sandbox is unharmed.
	wantOK(t, r.call(t, `{"op":"echo","msg":"after"}`, nil), "after")
}

// TestCollectorRuns allocates far more than the memory ceiling in total:
// the collector must be on while the tool's code runs.
func TestCollectorRuns(t *testing.T) {
	r := newRun(t)
	wantOK(t, r.call(t, `{"op":"alloc","mb":256}`, nil), "16")
}

func TestFetchDeniedByDefault(t *testing.T) {
	r := newRun(t)
	out := r.call(t, `{"op":"fetch","url":"https://example.com/"}`, nil)
	_, denial := sandbox.NoNetwork(context.Background(), sandbox.FetchRequest{})
	if want := "denied|" + denial.Message + "|denied=true"; out.Failure == nil || out.Failure.Message != want {
		t.Errorf("failure %v, want tool error %q", out.Failure, want)
	}
}

func TestFetch(t *testing.T) {
	r := newRun(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), (2<<20)/16) // 2 MiB: past the arena
	var manyHeaders []sandbox.Header
	for i := range 300 {
		manyHeaders = append(manyHeaders, sandbox.Header{Name: fmt.Sprintf("X-H%d", i), Value: strings.Repeat("v", 100)})
	}
	for _, tt := range []struct {
		name, input string
		resp        *sandbox.FetchResponse
		ferr        *sandbox.FetchError
		wantReq     sandbox.FetchRequest
		want        string // output, or "ERR " + tool error
	}{
		{
			name:    "get",
			input:   op(map[string]any{"op": "fetch", "url": "https://api.example.test/v1?q=1"}),
			resp:    &sandbox.FetchResponse{Status: 200, Headers: []sandbox.Header{{Name: "Content-Type", Value: "text/plain"}, {Name: "X-Two", Value: "2"}}, Body: []byte("hello")},
			wantReq: sandbox.FetchRequest{URL: "https://api.example.test/v1?q=1"},
			want:    "200|Content-Type=text/plain,X-Two=2|5|hello",
		},
		{
			name:    "post with credential and headers",
			input:   op(map[string]any{"op": "fetch", "method": "POST", "url": "https://api.example.test/", "credential": "API_TOKEN", "headers": map[string]string{"Content-Type": "application/json"}, "body": `{"a":1}`}),
			resp:    &sandbox.FetchResponse{Status: 201},
			wantReq: sandbox.FetchRequest{Method: "POST", URL: "https://api.example.test/", Headers: []sandbox.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"a":1}`), Credential: "API_TOKEN", HasCredential: true},
			want:    "201||0|",
		},
		{
			name:    "redirect is a response",
			input:   op(map[string]any{"op": "fetch", "url": "https://a.test/"}),
			resp:    &sandbox.FetchResponse{Status: 302, Headers: []sandbox.Header{{Name: "Location", Value: "https://b.test/"}}},
			wantReq: sandbox.FetchRequest{URL: "https://a.test/"},
			want:    "302|Location=https://b.test/|0|",
		},
		{
			name:    "2 MiB body",
			input:   op(map[string]any{"op": "fetch", "url": "https://a.test/big"}),
			resp:    &sandbox.FetchResponse{Status: 200, Body: big},
			wantReq: sandbox.FetchRequest{URL: "https://a.test/big"},
			want:    fmt.Sprintf("200||%d|%s", len(big), big[:32]),
		},
		{
			name:    "two fetches reuse the arena",
			input:   op(map[string]any{"op": "fetch", "url": "https://a.test/big", "n": 2}),
			resp:    &sandbox.FetchResponse{Status: 200, Body: big},
			wantReq: sandbox.FetchRequest{URL: "https://a.test/big"},
			want:    fmt.Sprintf("200||%[1]d|%[2]s\n200||%[1]d|%[2]s", len(big), big[:32]),
		},
		{
			// The collector is busy when the fetches start: the host's
			// cabi_realloc calls must still not reach an import.
			name:    "fetches amid garbage",
			input:   op(map[string]any{"op": "fetch", "url": "https://a.test/big", "mb": 40, "n": 4}),
			resp:    &sandbox.FetchResponse{Status: 200, Body: big},
			wantReq: sandbox.FetchRequest{URL: "https://a.test/big"},
			want:    strings.Repeat(fmt.Sprintf("200||%d|%s\n", len(big), big[:32]), 3) + fmt.Sprintf("200||%d|%s", len(big), big[:32]),
		},
		{
			name:    "many headers",
			input:   op(map[string]any{"op": "fetch", "url": "https://a.test/h"}),
			resp:    &sandbox.FetchResponse{Status: 200, Headers: manyHeaders},
			wantReq: sandbox.FetchRequest{URL: "https://a.test/h"},
			want:    "200|" + headerList(manyHeaders) + "|0|",
		},
		{name: "denied", input: `{"op":"fetch","url":"https://x.test/"}`, ferr: &sandbox.FetchError{Kind: sandbox.FetchDenied, Message: "host x.test is not in http_allow"},
			wantReq: sandbox.FetchRequest{URL: "https://x.test/"}, want: "ERR denied|host x.test is not in http_allow|denied=true"},
		{name: "timeout", input: `{"op":"fetch","url":"https://x.test/"}`, ferr: &sandbox.FetchError{Kind: sandbox.FetchTimeout},
			wantReq: sandbox.FetchRequest{URL: "https://x.test/"}, want: "ERR timeout||denied=false"},
		{name: "too large", input: `{"op":"fetch","url":"https://x.test/"}`, ferr: &sandbox.FetchError{Kind: sandbox.FetchTooLarge},
			wantReq: sandbox.FetchRequest{URL: "https://x.test/"}, want: "ERR too-large||denied=false"},
		{name: "failed", input: `{"op":"fetch","url":"https://x.test/"}`, ferr: &sandbox.FetchError{Kind: sandbox.FetchFailed, Message: "connection refused"},
			wantReq: sandbox.FetchRequest{URL: "https://x.test/"}, want: "ERR failed|connection refused|denied=false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []sandbox.FetchRequest
			fetch := func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
				got = append(got, req)
				return tt.resp, tt.ferr
			}
			out := r.call(t, tt.input, fetch)
			if msg, ok := strings.CutPrefix(tt.want, "ERR "); ok {
				if out.Failure == nil || out.Failure.Kind != sandbox.KindTool || out.Failure.Message != msg {
					t.Errorf("failure %v, want tool error %q", out.Failure, msg)
				}
			} else {
				wantOK(t, out, tt.want)
			}
			if len(got) == 0 {
				t.Fatal("the host saw no request")
			}
			if diff := cmp.Diff(tt.wantReq, got[0]); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func headerList(hs []sandbox.Header) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.Name+"="+h.Value)
	}
	return strings.Join(s, ",")
}
