package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
)

// rawStdio is a client that speaks raw bytes to RunStdio over pipes, so a
// test can send what no SDK client would and see every frame that comes
// back.
type rawStdio struct {
	t      *testing.T
	in     *io.PipeWriter
	frames chan map[string]any
	done   chan error // RunStdio's result
}

func (e *env) rawStdio() *rawStdio {
	e.t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &rawStdio{t: e.t, in: inW, frames: make(chan map[string]any, 100), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { c.done <- e.server.RunStdio(ctx, inR, outW); outW.Close() }()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsable": sc.Text()}
			}
			c.frames <- m
		}
		close(c.frames)
	}()
	e.t.Cleanup(func() { inW.Close(); cancel() })
	return c
}

func (c *rawStdio) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("writing to the server: %v (did the session end?)", err)
	}
}

// next returns the next frame; the bound is generous, since it only catches
// a server that stopped answering.
func (c *rawStdio) next() map[string]any {
	c.t.Helper()
	select {
	case m, ok := <-c.frames:
		if !ok {
			c.t.Fatalf("the server closed its output (RunStdio returned %v)", <-c.done)
		}
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatal("no frame from the server in 30s")
		return nil
	}
}

// initialize does the MCP handshake.
func (c *rawStdio) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := c.next(); m["id"] != "init" || m["result"] == nil {
		c.t.Fatalf("initialize answered %v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// ping checks the session still answers, skipping notifications.
func (c *rawStdio) ping(id int) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
	for {
		m := c.next()
		if m["method"] != nil {
			continue
		}
		if m["id"] != float64(id) || m["result"] == nil {
			c.t.Fatalf("ping %d answered %v", id, m)
		}
		return
	}
}

func errCode(m map[string]any) (float64, string) {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return code, msg
}

// TestStdioMalformedLines: each hostile line gets a JSON-RPC error (or is
// ignored, for blank lines) and the session goes on. Before, the first such
// line ended `maiden serve`.
func TestStdioMalformedLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	c := e.rawStdio()
	// Garbage before the handshake must not end the session either.
	c.send("hello?")
	if code, _ := errCode(c.next()); code != -32700 {
		t.Fatalf("garbage before initialize: code %v, want -32700", code)
	}
	c.initialize()
	tests := []struct {
		name, line string
		code       float64
		id         any // nil: null
	}{
		{"not json", "this is not json", -32700, nil},
		{"truncated object", `{"jsonrpc":"2.0","id":1,"method":"ping"`, -32700, nil},
		{"binary", "\x00\xff\xfe{{", -32700, nil},
		{"two values on a line", `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, -32700, nil},
		{"empty object", `{}`, -32600, nil},
		{"a string", `"ping"`, -32600, nil},
		{"null", `null`, -32600, nil},
		{"a number", `42`, -32600, nil},
		{"wrong version", `{"jsonrpc":"1.0","id":7,"method":"ping"}`, -32600, float64(7)},
		{"no version", `{"id":"x","method":"ping"}`, -32600, "x"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{"method not a string", `{"jsonrpc":"2.0","id":8,"method":5}`, -32600, float64(8)},
		{"empty batch", `[]`, -32600, nil},
		{"batch", `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, nil},
		{"unknown method", `{"jsonrpc":"2.0","id":10,"method":"no/such"}`, -32601, float64(10)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			c.send(tt.line)
			m := c.next()
			if code, _ := errCode(m); code != tt.code || m["id"] != tt.id || m["jsonrpc"] != "2.0" {
				t.Errorf("%q answered %v; want code %v, id %v", tt.line, m, tt.code, tt.id)
			}
			c.ping(100 + i)
		})
	}
	c.t = t
	// Blank lines are not messages: no reply, nothing breaks.
	c.send("")
	c.send("   \r")
	c.ping(1000)
	if r := callRaw(c, 1001, "echo", `{"message":"still here"}`); r["isError"] == true {
		t.Errorf("call after the hostile lines: %v", r)
	}
}

// callRaw sends tools/call and returns its result (failing on a JSON-RPC
// error), skipping notifications.
func callRaw(c *rawStdio, id int, tool, args string) map[string]any {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	for {
		m := c.next()
		if m["method"] != nil {
			continue
		}
		if m["id"] != float64(id) {
			c.t.Fatalf("tools/call %d answered %v", id, m)
		}
		r, ok := m["result"].(map[string]any)
		if !ok {
			c.t.Fatalf("tools/call %d: error %v", id, m["error"])
		}
		return r
	}
}

// setMaxInput rewrites the env's agent.toml with max_input_bytes and makes
// it the host's configuration.
func (e *env) setMaxInput(n int) {
	e.t.Helper()
	data, err := os.ReadFile(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	src := strings.Replace(string(data), "version = 1\n", fmt.Sprintf("version = 1\nmax_input_bytes = %d\n", n), 1)
	if err := os.WriteFile(e.cfg, []byte(src), 0o644); err != nil {
		e.t.Fatal(err)
	}
	cfg, err := config.Load(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.host.SetConfig(cfg)
}

// TestStdioInputCap: arguments over max_input_bytes are refused as kind
// input before anything parses them; a message beyond the cap plus the
// envelope allowance is refused by the transport (with its id, wherever the
// client put it) without being buffered, and the session goes on.
func TestStdioInputCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	e.setMaxInput(1024)
	c := e.rawStdio()
	c.initialize()

	fits := fmt.Sprintf(`{"message":%q}`, strings.Repeat("a", 1000))
	if r := callRaw(c, 1, "echo", fits); r["isError"] == true {
		t.Fatalf("arguments under the cap: %v", r)
	}
	over := fmt.Sprintf(`{"message":%q}`, strings.Repeat("a", 2000)) // over the cap, within the envelope allowance
	r := callRaw(c, 2, "echo", over)
	content, _ := r["content"].([]any)
	first, _ := content[0].(map[string]any)
	text, _ := first["text"].(string)
	meta, _ := r["_meta"].(map[string]any)
	if r["isError"] != true || !strings.HasPrefix(text, "input: ") || !strings.Contains(text, "2014 bytes") ||
		!strings.Contains(text, "max_input_bytes") || meta[MetaErrorKind] != "input" {
		t.Errorf("arguments over the cap: %v", r)
	}

	huge := strings.Repeat("b", 300<<10)
	lines := []struct {
		name, line string
		id         any
	}{
		{"id first (Go SDK order)", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + huge + `"}}}`, float64(3)},
		{"id last (TypeScript SDK order)", `{"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + huge + `"}},"jsonrpc":"2.0","id":"req-4"}`, "req-4"},
		{"no id anywhere", `{"method":"tools/call","params":{"x":"` + huge + `"},"jsonrpc":"2.0"}`, nil},
		{"not even JSON", huge + huge, nil},
	}
	for i, tt := range lines {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			c.send(tt.line)
			m := c.next()
			code, msg := errCode(m)
			if code != -32600 || m["id"] != tt.id || !strings.Contains(msg, fmt.Sprintf("%d bytes", len(tt.line))) ||
				!strings.Contains(msg, "max_input_bytes") {
				t.Errorf("oversized line answered %v; want -32600 with id %v naming the size and max_input_bytes", m, tt.id)
			}
			c.ping(10 + i)
		})
	}
}

// TestReadLineBounded: a line far over the limit is read through without
// being kept; what comes back is its head and tail only, and the next line
// is intact.
func TestReadLineBounded(t *testing.T) {
	t.Parallel()
	const limit = 1000
	tests := []struct {
		name, input string
		first       int // length of the first line
		over        bool
	}{
		{"exactly the limit", strings.Repeat("x", limit) + "\nnext\n", limit, false},
		{"one over", strings.Repeat("x", limit+1) + "\nnext\n", limit + 1, true},
		{"10 MiB", strings.Repeat("x", 10<<20) + "\nnext\n", 10 << 20, true},
		{"10 MiB, CRLF", strings.Repeat("x", 10<<20) + "\r\nnext\n", 10<<20 + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.input), 64)
			line, over, err := readLine(br, limit)
			if err != nil {
				t.Fatal(err)
			}
			if tt.over {
				if over != int64(tt.first) || len(line) > headKeep+tailKeep+1 {
					t.Errorf("over = %d (want %d), kept %d bytes (want at most %d)", over, tt.first, len(line), headKeep+tailKeep+1)
				}
			} else if over != 0 || len(line) != tt.first {
				t.Errorf("over = %d, line %d bytes; want 0, %d", over, len(line), tt.first)
			}
			if next, _, err := readLine(br, limit); string(next) != "next" || err != nil {
				t.Errorf("the next line is %q, %v", next, err)
			}
		})
	}
}

// TestStdioCancelledGetsNoResponse: a request the client cancels gets no
// response at all (MCP spec), where the SDK sent an error with code 0, which
// is not a JSON-RPC code.
func TestStdioCancelledGetsNoResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"loop", "loop", "timeout_ms = 60000"}, {"echo", "echo", ""}}, &maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 2})
	c := e.rawStdio()
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"loop","arguments":{}}}`)
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 1 })
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"test"}}`)
	waitFor(t, 30*time.Second, func() bool { return e.host.Active() == 0 })
	// The response (if any) is written right after Host.Call returns; a call
	// and a ping behind it flush the pipe past it.
	r := callRaw(c, 6, "echo", `{"message":"after"}`)
	if r["isError"] == true {
		t.Errorf("call after the cancelled one: %v", r)
	}
	c.ping(7)
	// Anything else still queued (nothing, if all is well) would show here.
	c.ping(8)
	// A cancellation for a request that is not running is ignored, and does
	// not stop a later request with that id from being answered.
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)
	c.ping(9)
}

// TestStdioLogsPrecedeResult: a call's log lines reach the client as
// notifications/message, every one of them before the call's result on the
// same stream, call after call (the forwarder starts at the first line and
// is waited for before the result goes out). A call that logs nothing gets
// its result alone.
func TestStdioLogsPrecedeResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"logger", "logger", ""}, {"echo", "echo", ""}}, nil)
	c := e.rawStdio()
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"debug"}}`)
	if m := c.next(); m["id"] != "lvl" || m["result"] == nil {
		t.Fatalf("logging/setLevel answered %v", m)
	}
	for i := range 3 {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"logger","arguments":{}}}`, i))
		var levels []string
		for {
			m := c.next()
			if m["method"] == "notifications/message" {
				p, _ := m["params"].(map[string]any)
				levels = append(levels, fmt.Sprint(p["level"]))
				continue
			}
			if m["id"] != float64(i) || m["result"] == nil {
				t.Fatalf("call %d: got %v", i, m)
			}
			break
		}
		if got := strings.Join(levels, ","); got != "debug,info,warning,error" {
			t.Fatalf("call %d: log notifications before the result at levels %q, want debug,info,warning,error", i, got)
		}
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"e%d","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`, i))
		if m := c.next(); m["id"] != fmt.Sprintf("e%d", i) || m["result"] == nil {
			t.Fatalf("echo %d: got %v, want its result and no log notification", i, m)
		}
	}
}
