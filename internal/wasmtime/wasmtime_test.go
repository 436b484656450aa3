package wasmtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/testkit"
)

const hostIface = "maiden:tool/host@0.1.0"

type fixture struct {
	engine *Engine
	linker *Linker
	logs   chan string
}

func newFixture(t testing.TB, cfg *Config) *fixture {
	t.Helper()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLinker(e)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{engine: e, linker: l, logs: make(chan string, 100)}
	if err := l.AddWASIP2(); err != nil {
		t.Fatal(err)
	}
	err = l.DefineInstance(hostIface, map[string]HostFunc{
		"log": func(c *Caller, p []Val) ([]Val, error) {
			select {
			case f.logs <- p[0].Case + ":" + p[1].Str:
			default:
			}
			return nil, nil
		},
		"http-fetch": func(c *Caller, p []Val) ([]Val, error) {
			return nil, errors.New("no network in this test")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		e.Close()
	})
	return f
}

func (f *fixture) component(t testing.TB, name string) *Component {
	t.Helper()
	b, err := os.ReadFile(testkit.Component(t, name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.engine.NewComponent(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// call instantiates c in a fresh store and calls one export.
func (f *fixture) call(t testing.TB, c *Component, opts *StoreOptions, export string, args ...Val) (Val, *Store, error) {
	t.Helper()
	if opts == nil {
		opts = &StoreOptions{MemoryLimit: 16 << 20}
	}
	s, err := NewStore(f.engine, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	inst, err := f.linker.Instantiate(s, c)
	if err != nil {
		return Val{}, s, err
	}
	fn, err := inst.Func(export)
	if err != nil {
		t.Fatal(err)
	}
	v, err := fn.Call(args...)
	return v, s, err
}

func TestCallAndHostFunction(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "logger")
	v, _, err := f.call(t, c, nil, "execute", String("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != KindResult || !v.OK || v.Payload.Str != "logged" {
		t.Fatalf("got %+v", v)
	}
	var got []string
	for len(f.logs) > 0 {
		got = append(got, <-f.logs)
	}
	if len(got) != 4 || !strings.HasPrefix(got[0], "debug:") || !strings.HasPrefix(got[3], "error:") {
		t.Errorf("logs %q", got)
	}
}

func TestImportsAndExports(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "logger")
	imps, err := c.Imports()
	if err != nil {
		t.Fatal(err)
	}
	if len(imps) != 1 || imps[0].Name != hostIface || imps[0].Kind != ItemInstance {
		t.Fatalf("imports %+v", imps)
	}
	var logType string
	for _, e := range imps[0].Exports {
		if e.Name == "log" {
			logType = e.Type
		}
	}
	if want := "func(level: enum { debug, info, warn, error }, message: string)"; logType != want {
		t.Errorf("log type %q, want %q", logType, want)
	}
	exps, err := c.Exports()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range exps {
		got[e.Name] = e.Type
	}
	want := map[string]string{
		"describe": "func() -> string",
		"schema":   "func() -> string",
		"execute":  "func(input: string) -> result<string, string>",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exports (-want +got):\n%s", diff)
	}
}

func TestDeadlineStopsLoop(t *testing.T) {
	f := newFixture(t, nil)
	f.loopUntilDeadline(t, f.component(t, "loop"), time.Second, "")
}

// loopUntilDeadline runs loop (the "loop" component) under a 100 ms
// deadline and checks that it stops at its deadline, in at most max; what
// says more in the message. It returns the call's store.
func (f *fixture) loopUntilDeadline(t *testing.T, loop *Component, max time.Duration, what string) *Store {
	t.Helper()
	start := time.Now()
	_, s, err := f.call(t, loop, &StoreOptions{MemoryLimit: 16 << 20, Deadline: time.Now().Add(100 * time.Millisecond)}, "execute", String("{}"))
	if err == nil {
		t.Fatal("loop returned")
	}
	if s.StopReason() != StopDeadline {
		t.Fatalf("stop reason %v, error %v", s.StopReason(), err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > max {
		t.Errorf("took %v for a 100ms deadline%s", took, what)
	}
	return s
}

func TestInterruptFromAnotherGoroutine(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "loop")
	s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inst, err := f.linker.Instantiate(s, c)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := inst.Func("execute")
	time.AfterFunc(50*time.Millisecond, s.Interrupt)
	if _, err := fn.Call(String("{}")); err == nil || s.StopReason() != StopInterrupt {
		t.Fatalf("err %v, reason %v", err, s.StopReason())
	}
	// A stopped instance refuses further calls; the store stays usable for
	// nothing else, and closing it is safe.
	if _, err := fn.Call(String("{}")); err == nil {
		t.Error("a trapped instance ran again")
	}
}

func TestStartFunctionUnderDeadline(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "startloop")
	_, s, err := f.call(t, c, &StoreOptions{MemoryLimit: 16 << 20, Deadline: time.Now().Add(50 * time.Millisecond)}, "execute", String("{}"))
	if err == nil || s.StopReason() != StopDeadline {
		t.Fatalf("err %v, reason %v", err, s.StopReason())
	}
}

func TestMemoryCeiling(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "memgrow")
	_, s, err := f.call(t, c, &StoreOptions{MemoryLimit: 4 << 20}, "execute", String("{}"))
	if err == nil {
		t.Fatal("memgrow succeeded")
	}
	if !s.MemoryDenied() {
		t.Fatal("the denial was not recorded")
	}
	if p := s.MemoryPeak(); p > 4<<20 || p < 3<<20 {
		t.Errorf("peak %d, want within a MiB under the 4 MiB ceiling", p)
	}
}

// TestMemoryCeilingAtInstantiation: a component whose initial memory is
// already over the ceiling fails to instantiate, with the denial recorded.
func TestMemoryCeilingAtInstantiation(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "echo")
	_, s, err := f.call(t, c, &StoreOptions{MemoryLimit: 1024}, "execute", String("{}"))
	if err == nil || !s.MemoryDenied() {
		t.Fatalf("err %v, denied %v", err, s.MemoryDenied())
	}
}

func TestNoEpochConfigCannotLoadEpochCode(t *testing.T) {
	f := newFixture(t, nil)
	ser, err := f.component(t, "echo").Serialize()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "echo.cwasm")
	if err := os.WriteFile(path, ser, 0o600); err != nil {
		t.Fatal(err)
	}
	same, err := f.engine.DeserializeComponentFile(path)
	if err != nil {
		t.Fatalf("same engine: %v", err)
	}
	same.Close()
	other, err := NewEngine(&Config{NoEpochInterruption: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.Fingerprint() == f.engine.Fingerprint() {
		t.Error("different configurations share a fingerprint")
	}
	if _, err := other.DeserializeComponentFile(path); err == nil || !strings.Contains(err.Error(), "epoch") {
		t.Fatalf("got %v, want a clear epoch-interruption mismatch", err)
	}
}

func TestHostFunctionErrorIsVisible(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "fetcher")
	_, _, err := f.call(t, c, nil, "execute", String("https://example.com/"))
	var werr *Error
	if !errors.As(err, &werr) || werr.Host == nil || !strings.Contains(werr.Host.Error(), "no network in this test") {
		t.Fatalf("got %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	e, err := NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"text":      []byte("hello"),
		"truncated": []byte("\x00asm\x0d\x00\x01\x00\x01"),
	} {
		if _, err := e.NewComponent(b); err == nil {
			t.Errorf("%s compiled", name)
		}
	}
}

func TestUseAfterClose(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "echo")
	c.Close()
	s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := f.linker.Instantiate(s, c); !errors.Is(err, ErrUseAfterClose) {
		t.Fatalf("got %v", err)
	}
	if _, err := NewStore(f.engine, nil); !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("store without a limit: %v", err)
	}
}

// TestConcurrentStores runs many stores on one engine, linker and
// component at once (run with -race).
func TestConcurrentStores(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "echo")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20})
				if err != nil {
					t.Error(err)
					return
				}
				inst, err := f.linker.Instantiate(s, c)
				if err == nil {
					var fn *Func
					if fn, err = inst.Func("execute"); err == nil {
						var v Val
						v, err = fn.Call(String(`{"message":"m"}`))
						if err == nil && v.Payload.Str != `{"message":"m"}` {
							t.Errorf("got %+v", v)
						}
					}
				}
				s.Close()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestRootCause(t *testing.T) {
	for in, want := range map[string]string{
		"error while executing at wasm backtrace:\n    0:    0x19a - <unknown>!<wasm function 8>\n\nCaused by:\n    wasm trap: wasm `unreachable` instruction executed": "wasm trap: wasm `unreachable` instruction executed",
		"failed to parse WebAssembly module\n\nCaused by:\n    0: a\n    1: unexpected end-of-file (at offset 0x8)":                                                     "unexpected end-of-file (at offset 0x8)",
		"plain message": "plain message",
		"":              "unknown wasmtime error",
	} {
		if got := rootCause(in); got != want {
			t.Errorf("rootCause(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOutputHandlerPanic: the guest's WASI stdout and stderr reach
// StoreOptions.Output, and a panic there, which wasmtime's frames beneath
// it cannot unwind through, fails the call naming the panic rather than
// the process; the next store works.
func TestOutputHandlerPanic(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "stdout")
	// wasmtime calls Output from a thread of its own: hence the lock.
	var mu sync.Mutex
	got := map[int]string{}
	calls := 0
	record := func(fd int, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		got[fd] += string(p)
		calls++
	}
	check := func(what string) {
		t.Helper()
		v, _, err := f.call(t, c, &StoreOptions{MemoryLimit: 16 << 20, Output: record}, "execute", String("{}"))
		if err != nil || v.Kind != KindResult || !v.OK || v.Payload.Str != "written" {
			t.Fatalf("%s: got %+v, %v", what, v, err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := map[int]string{1: "hello, stdout\n", 2: "hello, stderr\n"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: output by fd (-want +got):\n%s", what, diff)
		}
		clear(got)
	}
	check("before the panic")

	panicky := func(fd int, p []byte) {
		mu.Lock()
		calls++
		mu.Unlock()
		panic("output boom")
	}
	calls = 0
	v, _, err := f.call(t, c, &StoreOptions{MemoryLimit: 16 << 20, Output: panicky}, "execute", String("{}"))
	var werr *Error
	if !errors.As(err, &werr) || !strings.Contains(err.Error(), "output handler panicked: output boom") ||
		werr.Host == nil || !strings.Contains(werr.Host.Error(), "output boom") {
		t.Fatalf("panicking Output: got %+v, %v; want an error naming the panic", v, err)
	}
	mu.Lock()
	if calls != 1 {
		t.Errorf("Output called %d times; want 1 (the failed write stops the guest)", calls)
	}
	mu.Unlock()

	check("after the panic")
}
