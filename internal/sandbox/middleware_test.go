package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/mwproto"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// event is the JSON of a middleware event for tests.
func event(t testing.TB, phase mwproto.Phase, input, output string) string {
	t.Helper()
	s, err := mwproto.Event{Phase: phase, Tool: "weather", Agent: "alice", Session: "s1",
		Rendered: "--city=x", Input: json.RawMessage(input), Output: output,
		Error: mwproto.Failure{Kind: "tool", Message: "no weather in " + input},
		Logs:  []LogEntry{{Level: LevelInfo, Source: SourceLog, Message: "asked " + input}}}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMiddlewareWorld: Open tells the two worlds apart, and a middleware
// says only what it has (describe; no schema).
func TestMiddlewareWorld(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	for _, tc := range []struct {
		path, world, desc string
	}{
		{testkit.Middleware(t, "pass"), WorldMiddleware, "Passes every call"},
		{testkit.Middleware(t, "city"), WorldMiddleware, "Refuses Atlantis and capitalises Paris."},
		{testkit.Middleware(t, "js/city"), WorldMiddleware, "Refuses Atlantis and capitalises Paris."},
		{testkit.Component(t, "echo"), WorldTool, "Echoes"},
	} {
		tool, err := sb.Open(context.Background(), tc.path, defaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if tool.World != tc.world || !strings.Contains(tool.Description, tc.desc) {
			t.Errorf("%s: world %q, description %q; want %q, %q", tc.path, tool.World, tool.Description, tc.world, tc.desc)
		}
		if tc.world == WorldMiddleware && (tool.Schema != "" || tool.OutputSchema != "") {
			t.Errorf("%s: a middleware has schemas %q, %q", tc.path, tool.Schema, tool.OutputSchema)
		}
	}
}

// TestMiddlewareHandle runs the Go and the JS city middleware on each kind
// of event; their verdicts must parse as the host will parse them.
func TestMiddlewareHandle(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	for _, name := range []string{"city", "js/city"} {
		t.Run(name, func(t *testing.T) {
			tool, err := sb.Open(context.Background(), testkit.Middleware(t, name), defaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				phase         mwproto.Phase
				input, output string
				want          mwproto.Verdict
			}{
				{mwproto.Before, `{"city":"Atlantis","days":3}`, "", mwproto.Verdict{Kind: mwproto.Reject, Message: "Atlantis is not a city the weather service knows"}},
				{mwproto.Before, `{"city":"paris","days":3}`, "", mwproto.Verdict{Kind: mwproto.Rewrite, Input: json.RawMessage(`{"city":"Paris","days":3}`)}},
				{mwproto.Before, `{"city":"London"}`, "", mwproto.Verdict{Kind: mwproto.Pass}},
				{mwproto.Before, `{}`, "", mwproto.Verdict{Kind: mwproto.Pass}},
				{mwproto.After, `{"city":"Atlantis"}`, "sunny in atlantis", mwproto.Verdict{Kind: mwproto.Pass}},
				// A failure passes too (the failed phase, with its error
				// and logs: the event's keys it does not read).
				{mwproto.Failed, `{"city":"Atlantis"}`, "", mwproto.Verdict{Kind: mwproto.Pass}},
			} {
				out, err := tool.Execute(context.Background(), Call{Limits: defaultLimits, Input: event(t, tc.phase, tc.input, tc.output)})
				if err != nil || out.Failure != nil {
					t.Fatalf("%s %s: %+v, %v", tc.phase, tc.input, out.Failure, err)
				}
				v, err := mwproto.ParseVerdict(tc.phase, out.Output)
				if err != nil {
					t.Fatalf("%s %s: verdict %s: %v", tc.phase, tc.input, out.Output, err)
				}
				if v.Kind != tc.want.Kind || v.Message != tc.want.Message || string(v.Input) != string(tc.want.Input) || v.Output != tc.want.Output {
					t.Errorf("%s %s: verdict %+v, want %+v", tc.phase, tc.input, v, tc.want)
				}
				if tc.phase == mwproto.Before && !logged(out.Logs, "alice called weather with --city=x") {
					t.Errorf("%s %s: logs %+v lack the middleware's line", tc.phase, tc.input, out.Logs)
				}
			}
			// An event the middleware cannot read, or one it refuses, is
			// handle's err: kind tool.
			for _, bad := range []string{`not json`, `{"version":1,"phase":"during","input":{}}`} {
				out, err := tool.Execute(context.Background(), Call{Limits: defaultLimits, Input: bad})
				if err != nil || out.Failure == nil || out.Failure.Kind != KindTool || out.Output != "" {
					t.Errorf("%q: %+v, %v; want a failure of kind tool", bad, out, err)
				}
			}
		})
	}
}

func logged(logs []LogEntry, text string) bool {
	for _, l := range logs {
		if strings.Contains(l.Message, text) {
			return true
		}
	}
	return false
}

// TestMiddlewareHostile: a middleware that traps, loops or allocates past
// its ceiling ends in the kind a tool would, within its own limits, and
// one that imports http-fetch never loads. The sandbox serves afterwards.
func TestMiddlewareHostile(t *testing.T) {
	sb := newSandbox(t, nil)
	tight := Limits{Timeout: 300 * time.Millisecond, Memory: 8 << 20}
	// What Open gives describe(): the hostile part is the call, and a
	// loaded full run (load ~15) took a describe() past 300 ms.
	load := Limits{Timeout: 30 * time.Second, Memory: tight.Memory}
	ev := event(t, mwproto.Before, `{"city":"Paris"}`, "")
	for _, tc := range []struct {
		name, message string
		kind          Kind
	}{
		{"trap", "unreachable", KindTrap},
		{"loop", "did not finish within its 300ms timeout", KindDeadline},
		{"memhog", "memory ceiling of 8 MiB", KindMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := sb.Open(context.Background(), testkit.Middleware(t, tc.name), load)
			if err != nil {
				t.Fatal(err)
			}
			if tool.World != WorldMiddleware {
				t.Fatalf("world %q", tool.World)
			}
			start := time.Now()
			out, err := tool.Execute(context.Background(), Call{Limits: tight, Input: ev})
			if err != nil {
				t.Fatal(err)
			}
			if out.Failure == nil || out.Failure.Kind != tc.kind || !strings.Contains(out.Failure.Message, tc.message) || out.Output != "" {
				t.Fatalf("got %+v, want %s containing %q", out, tc.kind, tc.message)
			}
			if took := time.Since(start); took > tight.Timeout+2*time.Second {
				t.Errorf("took %v; the deadline is %v", took, tight.Timeout)
			}
			if out.MemoryPeak > tight.Memory {
				t.Errorf("memory peak %d over the ceiling %d", out.MemoryPeak, tight.Memory)
			}
			pass, err := sb.Open(context.Background(), testkit.Middleware(t, "pass"), load)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := pass.Execute(context.Background(), Call{Limits: tight, Input: ev}); err != nil || out.Output != `{"verdict":"pass"}` {
				t.Fatalf("after %s the pass middleware got %+v, %v", tc.name, out, err)
			}
		})
	}
	t.Run("fetcher", func(t *testing.T) {
		path := testkit.Middleware(t, "fetcher")
		_, err := sb.Open(context.Background(), path, tight)
		if !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), "middleware has no network") ||
			!strings.Contains(err.Error(), `imports "maiden:tool/host@0.2.0"`) {
			t.Fatalf("Open = %v, want an invalid component that names the http-fetch import", err)
		}
		out, err := sb.Execute(context.Background(), Call{Path: path, Limits: tight, Input: ev})
		if err != nil || out.Failure == nil || out.Failure.Kind != KindInvalid || !strings.Contains(out.Failure.Message, "middleware has no network") {
			t.Fatalf("Execute = %+v, %v", out, err)
		}
		// Compiling it for a worker refuses it the same way.
		wasm, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Compile(wasm); !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), "middleware has no network") {
			t.Fatalf("Compile = %v", err)
		}
	})
}

// TestMiddlewareCompiledRun: the worker's path (Compile, Deserialize, Run)
// knows the world, answers a middleware's schema without running it, and
// never runs one world's entry point on the other.
func TestMiddlewareCompiledRun(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	load := func(path string) *Compiled {
		t.Helper()
		wasm, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		code, err := sb.Compile(wasm)
		if err != nil {
			t.Fatal(err)
		}
		c, err := sb.Deserialize(code)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	mw, tool := load(testkit.Middleware(t, "pass")), load(testkit.Component(t, "echo"))
	if mw.World() != WorldMiddleware || tool.World() != WorldTool {
		t.Fatalf("worlds %q, %q", mw.World(), tool.World())
	}
	run := func(c *Compiled, export, input string) Outcome {
		t.Helper()
		out, err := sb.Run(context.Background(), c, export, Call{Limits: defaultLimits, Input: input})
		if err != nil {
			t.Fatalf("Run(%s): %v", export, err)
		}
		return out
	}
	for _, export := range []string{"schema", "output-schema"} {
		if out := run(mw, export, ""); out.Output != "" || out.Failure != nil || out.MemoryPeak != 0 {
			t.Errorf("%s of a middleware: %+v (want \"\" without running)", export, out)
		}
	}
	if out := run(mw, "handle", "{}"); out.Output != `{"verdict":"pass"}` || !logged(out.Logs, "middleware saw the call") {
		t.Errorf("handle: %+v", out)
	}
	if out := run(mw, "describe", ""); !strings.Contains(out.Output, "Passes every call") {
		t.Errorf("describe: %+v", out)
	}
	for _, wrong := range []struct {
		c      *Compiled
		export string
	}{{mw, "execute"}, {tool, "handle"}} {
		out := run(wrong.c, wrong.export, "{}")
		if out.Failure == nil || out.Failure.Kind != KindInvalid || out.MemoryPeak != 0 {
			t.Errorf("%s of a %s component: %+v, want invalid without running", wrong.export, wrong.c.World(), out)
		}
	}
}

// TestMiddlewareWorldOf: the world read from the bytes (what a worker's
// parent and maiden build use) is the world Open finds.
func TestMiddlewareWorldOf(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	for _, path := range []string{testkit.Middleware(t, "pass"), testkit.Middleware(t, "city"), testkit.Middleware(t, "js/city"),
		testkit.Middleware(t, "trap"), testkit.Component(t, "echo"), testkit.Component(t, "go/echo"), testkit.Component(t, "js/echo"), testkit.Component(t, "noexecute")} {
		wasm, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		world, err := WorldOf(wasm)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		tool, err := sb.Open(context.Background(), path, defaultLimits)
		if err != nil {
			if world != WorldTool || !strings.Contains(err.Error(), `missing export "execute"`) {
				t.Errorf("%s: WorldOf says %s, Open fails: %v", path, world, err)
			}
			continue
		}
		if tool.World != world {
			t.Errorf("%s: WorldOf says %s, Open %s", path, world, tool.World)
		}
	}
	if _, err := WorldOf([]byte("not wasm")); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("WorldOf(garbage) = %v", err)
	}
}

// TestMiddlewareContract: a middleware may import its log and the empty
// WASI interfaces, nothing that reaches the network (the tool host's
// http-fetch, wasi:http, wasi:sockets) or anything else; its exports are
// held to the middleware world.
func TestMiddlewareContract(t *testing.T) {
	t.Parallel()
	describe := wasmtime.Item{Name: "describe", Kind: wasmtime.ItemFunc, Type: "func() -> string", Result: "string"}
	handle := wasmtime.Item{Name: "handle", Kind: wasmtime.ItemFunc, Type: "func(event: string) -> result<string, string>", Params: []string{"string"}, Result: "result<string, string>"}
	good := []wasmtime.Item{describe, handle}
	for _, tt := range []struct {
		name    string
		imports []string
		exports []wasmtime.Item
		bad     string // "" means accepted
	}{
		{"log and WASI", []string{wit.Middleware.HostInterface, "wasi:cli/environment@0.2.6", "wasi:io/streams@0.2.6", "wasi:clocks/monotonic-clock@0.2.0"}, good, ""},
		{"nothing", nil, good, ""},
		{"the tool host 0.2.0", []string{wit.V020.HostInterface}, good, `middleware has no network: it imports "maiden:tool/host@0.2.0", the tool host interface, whose http-fetch reaches the network`},
		{"the tool host 0.1.0", []string{wit.V010.HostInterface}, good, `middleware has no network: it imports "maiden:tool/host@0.1.0"`},
		{"wasi:http", []string{"wasi:http/outgoing-handler@0.2.6"}, good, `middleware has no network: it imports "wasi:http/outgoing-handler@0.2.6", which maiden does not provide to middleware`},
		{"wasi:sockets", []string{"wasi:sockets/tcp@0.2.6"}, good, `middleware has no network: it imports "wasi:sockets/tcp@0.2.6"`},
		{"WASI 0.3", []string{"wasi:cli/environment@0.3.0"}, good, `imports "wasi:cli/environment@0.3.0"`},
		{"a later middleware host", []string{"maiden:middleware/host@0.2.0"}, good, `imports "maiden:middleware/host@0.2.0"`},
		{"no describe", nil, []wasmtime.Item{handle}, `missing export "describe"`},
		{"handle mistyped", nil, []wasmtime.Item{describe, {Name: "handle", Kind: wasmtime.ItemFunc, Type: "func(event: string) -> string", Params: []string{"string"}, Result: "string"}},
			`export "handle" has type func(event: string) -> string, want handle: func(string) -> result<string, string> (a middleware must target world middleware of maiden:middleware@0.1.0)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if worldOf(tt.exports) != WorldMiddleware {
				t.Fatalf("exports %v are not a middleware's", tt.exports)
			}
			var imps []wasmtime.Item
			for _, n := range tt.imports {
				imps = append(imps, wasmtime.Item{Name: n, Kind: wasmtime.ItemInstance})
			}
			err := checkMiddlewareImports(imps)
			if err == nil {
				err = checkMiddlewareExports(tt.exports)
			}
			switch {
			case tt.bad == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad) || !errors.Is(err, ErrInvalidTool)):
				t.Errorf("err = %v, want ErrInvalidTool containing %q", err, tt.bad)
			}
		})
	}
	// A function imported at the top level is not an interface.
	if err := checkMiddlewareImports([]wasmtime.Item{{Name: wit.Middleware.HostInterface, Kind: wasmtime.ItemFunc}}); err == nil || !strings.Contains(err.Error(), "expected an interface") {
		t.Errorf("a func import: %v", err)
	}
	// Exporting execute as well makes a component a tool, held to the tool
	// world (where a middleware's host is not an import it may have).
	if worldOf([]wasmtime.Item{describe, handle, {Name: "execute", Kind: wasmtime.ItemFunc}}) != WorldTool {
		t.Error("a component exporting execute and handle is not a tool")
	}
	if err := checkImports([]wasmtime.Item{{Name: wit.Middleware.HostInterface, Kind: wasmtime.ItemInstance}}); err == nil {
		t.Error("a tool may import the middleware host")
	}
}
