package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/mwproto"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

func mwEvent(t testing.TB, phase mwproto.Phase, input string) string {
	t.Helper()
	s, err := mwproto.Event{Phase: phase, Tool: "weather", Agent: "alice", Rendered: "--city=x", Input: json.RawMessage(input), Output: "out"}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMiddlewareInWorker: a middleware component opens in a worker with its
// world, and its calls run handle with the event. Its compiled code is kept
// in testkit's compile cache: js/city is a 12 MB component, some 12
// CPU-seconds to compile, the same bytes every run; compiling in a fresh
// worker is what the tests with a pool of no cache (newPool(t, nil)) check.
func TestMiddlewareInWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{CacheDir: testkit.CompileCache(t)})
	for _, name := range []string{"city", "js/city"} {
		tl, err := p.Open(context.Background(), testkit.Middleware(t, name), lim)
		if err != nil {
			t.Fatal(err)
		}
		if tl.World != sandbox.WorldMiddleware || tl.Description != "Refuses Atlantis and capitalises Paris." || tl.Schema != "" || tl.OutputSchema != "" {
			t.Fatalf("%s: info %+v", name, tl.Info)
		}
		for _, tc := range []struct {
			phase mwproto.Phase
			input string
			want  mwproto.Kind
			field string
		}{
			{mwproto.Before, `{"city":"Atlantis"}`, mwproto.Reject, "Atlantis is not a city the weather service knows"},
			{mwproto.Before, `{"city":"paris"}`, mwproto.Rewrite, `{"city":"Paris"}`},
			{mwproto.Before, `{"city":"Oslo"}`, mwproto.Pass, ""},
			{mwproto.After, `{"city":"Atlantis"}`, mwproto.Pass, ""},
			{mwproto.Failed, `{"city":"Atlantis"}`, mwproto.Pass, ""},
		} {
			out, err := tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: mwEvent(t, tc.phase, tc.input)})
			if err != nil || out.Failure != nil {
				t.Fatalf("%s %s: %+v, %v", name, tc.input, out.Failure, err)
			}
			v, err := mwproto.ParseVerdict(tc.phase, out.Output)
			if err != nil {
				t.Fatalf("%s %s: %v", name, tc.input, err)
			}
			if got := v.Message + string(v.Input); v.Kind != tc.want || got != tc.field {
				t.Errorf("%s %s: verdict %+v, want %s %s", name, tc.input, v, tc.want, tc.field)
			}
		}
	}
	echo, err := p.Open(context.Background(), testkit.Component(t, "echo"), lim)
	if err != nil || echo.World != sandbox.WorldTool {
		t.Fatalf("echo: %+v, %v", echo, err)
	}
}

// TestMiddlewareHostileInWorker: the worker's limits hold for middleware as
// for tools, a middleware with http-fetch never loads, and the pool serves
// afterwards.
func TestMiddlewareHostileInWorker(t *testing.T) {
	p := newPool(t, nil)
	tight := sandbox.Limits{Timeout: 300 * time.Millisecond, Memory: 8 << 20}
	ev := mwEvent(t, mwproto.Before, `{"city":"Paris"}`)
	pass, err := p.Open(context.Background(), testkit.Middleware(t, "pass"), tight)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, message string
		kind          sandbox.Kind
	}{
		{"trap", "unreachable", sandbox.KindTrap},
		{"loop", "did not finish within its", sandbox.KindDeadline},
		{"memhog", "memory ceiling of 8 MiB", sandbox.KindMemory},
	} {
		tl, err := p.Open(context.Background(), testkit.Middleware(t, tc.name), tight)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		start := time.Now()
		out, err := tl.Execute(context.Background(), sandbox.Call{Limits: tight, Input: ev})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if out.Failure == nil || out.Failure.Kind != tc.kind || !strings.Contains(out.Failure.Message, tc.message) {
			t.Errorf("%s: %+v, want %s containing %q", tc.name, out.Failure, tc.kind, tc.message)
		}
		if took := time.Since(start); took > tight.Timeout+testkit.Slack(t, 2*time.Second) {
			t.Errorf("%s: took %v", tc.name, took)
		}
		if out, err := pass.Execute(context.Background(), sandbox.Call{Limits: tight, Input: ev}); err != nil || out.Output != `{"verdict":"pass"}` {
			t.Fatalf("after %s: %+v, %v", tc.name, out, err)
		}
	}
	_, err = p.Open(context.Background(), testkit.Middleware(t, "fetcher"), tight)
	if !errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), "middleware has no network") {
		t.Fatalf("fetcher: %v, want invalid: middleware has no network", err)
	}
}
