package maiden_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestMain lets this test binary serve as a worker process for the hosts
// that use worker isolation, the default (it re-executes itself); not when
// TestDefaultIsolationWithoutWorkerMain runs it as a program that forgot to.
func TestMain(m *testing.M) {
	if os.Getenv(envNoWorkerMain) == "" {
		maiden.WorkerMain()
	}
	os.Exit(m.Run())
}

func newHostWith(t testing.TB, cfgBody string, opts maiden.Options, tools ...string) *maiden.Host {
	t.Helper()
	cfg := writeConfig(t, cfgBody, tools...)
	if opts.CacheDir == "" {
		opts.CacheDir = testkit.CompileCache(t)
	}
	h, err := maiden.New(cfg, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

var isolations = []struct {
	name string
	iso  maiden.Isolation
}{{"process", maiden.InProcess}, {"workers", maiden.Workers}}

// TestWorkersStopAToolSleepingInWASI is the hardening issue's first
// finding through the public API: a Go tool's time.Sleep(30 s) under
// timeout_ms = 1000 ends as a deadline in worker isolation.
func TestWorkersStopAToolSleepingInWASI(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.sleeper]
path = %q
timeout_ms = 1000
`, maiden.Options{Isolation: maiden.Workers}, "go/sleeper")
	ctx := context.Background()
	if _, err := h.Tools(ctx); err != nil { // compile and describe first
		t.Fatal(err)
	}
	start := time.Now()
	res, err := h.Call(ctx, maiden.Call{Tool: "sleeper", Input: `{"ms":30000}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error.Kind != maiden.KindDeadline {
		t.Fatalf("result %+v, want a deadline", res)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	if !errors.Is(res.Error, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", res.Error)
	}
}

// TestCloseWithCallsInFlight: Close stops admission, interrupts running
// calls (loops and WASI sleeps), waits for them and frees; nothing is
// still running after it returns, in either isolation.
func TestCloseWithCallsInFlight(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			cfg := writeConfig(t, `version = 1
[tools.loop]
path = %q
timeout_ms = 60000
[tools.sleeper]
path = %q
timeout_ms = 60000
`, "loop", "go/sleeper")
			h, err := maiden.New(cfg, &maiden.Options{CacheDir: testkit.CompileCache(t), Isolation: iso.iso})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Tools(context.Background()); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			done := make(chan string, 8)
			for i := range 4 {
				tool, in := "loop", "{}"
				if i%2 == 1 {
					tool, in = "sleeper", `{"ms":60000}`
				}
				if tool == "sleeper" && iso.iso == maiden.InProcess {
					// In process a WASI sleep cannot be interrupted (the
					// documented weaker wall): only loops here.
					tool, in = "loop", "{}"
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := h.Call(context.Background(), maiden.Call{Tool: tool, Input: in})
					done <- fmt.Sprintf("%s: ok=%v err=%v kind=%v", tool, res.OK, err, res.Error)
				}()
			}
			time.Sleep(300 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			if err := h.Close(ctx); err != nil {
				t.Fatalf("close: %v", err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("close took %v", took)
			}
			finished := make(chan struct{})
			go func() { wg.Wait(); close(finished) }()
			select {
			case <-finished:
			case <-time.After(5 * time.Second):
				t.Fatal("calls still running after Close returned")
			}
			close(done)
			for d := range done {
				if strings.Contains(d, "ok=true") {
					t.Errorf("a call interrupted by Close succeeded: %s", d)
				}
			}
			if _, err := h.Call(context.Background(), maiden.Call{Tool: "loop", Input: "{}"}); !errors.Is(err, maiden.ErrClosed) {
				t.Errorf("call after Close: %v, want ErrClosed", err)
			}
			if err := h.Close(context.Background()); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// TestHammerCallReloadClose: many goroutines calling, replacing the
// configuration and closing at once, under -race.
func TestHammerCallReloadClose(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			body := `version = 1
[tools.echo]
path = %q
[tools.loop]
path = %q
timeout_ms = 50
`
			cfg := writeConfig(t, body, "echo", "loop")
			h, err := maiden.New(cfg, &maiden.Options{CacheDir: testkit.CompileCache(t), Isolation: iso.iso, MaxConcurrent: 4})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						tool := "echo"
						if (i+n)%3 == 0 {
							tool = "loop"
						}
						_, err := h.Call(context.Background(), maiden.Call{Tool: tool, Input: `{"message":"x"}`})
						if errors.Is(err, maiden.ErrClosed) {
							return
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					h.SetConfig(writeConfig(t, body, "echo", "loop"))
					_, _ = h.Tools(context.Background())
					time.Sleep(5 * time.Millisecond)
				}
			}()
			time.Sleep(700 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := h.Close(ctx); err != nil {
				t.Errorf("close: %v", err)
			}
			close(stop)
			wg.Wait()
		})
	}
}

// TestDescribeTimeoutIsNotRemembered: a describe() cut short by the
// caller's context is not cached as the tool's failure.
func TestDescribeTimeoutIsNotRemembered(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`, maiden.Options{Isolation: iso.iso}, "echo")
			// A fresh copy, so nothing about this version is known yet.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := h.Tools(ctx); err == nil {
				t.Log("Tools with a cancelled context returned no error (already cached)")
			}
			res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
			if err != nil || !res.OK {
				t.Fatalf("call after a cancelled describe: %+v, %v", res, err)
			}
		})
	}
}

// TestInputOverCapRefusedBeforeParsing: an input over MaxInputBytes is
// kind input, naming the key, in both isolations.
func TestInputOverCapRefusedBeforeParsing(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`, maiden.Options{Isolation: maiden.InProcess, MaxInputBytes: 1024}, "echo")
	big := `{"message":"` + strings.Repeat("a", 2000) + `"}`
	res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: big})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error.Kind != maiden.KindInput || !strings.Contains(res.Error.Message, "max_input_bytes") {
		t.Fatalf("result %+v, want kind input naming max_input_bytes", res)
	}
}

// TestOutputSchemaIsRead: a maiden:tool@0.2.0 Go tool's output-schema()
// (derived by the SDK from its output type) reaches ToolInfo; a 0.1.0 tool
// has none. Both isolations.
func TestOutputSchemaIsRead(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			h := newHostWith(t, `version = 1
[tools.goecho]
path = %q
[tools.watecho]
path = %q
`, maiden.Options{Isolation: iso.iso}, "go/echo", "echo")
			infos, err := h.Tools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, ti := range infos {
				if ti.Error != nil {
					t.Fatalf("%s: %v", ti.Name, ti.Error)
				}
				got[ti.Name] = ti.OutputSchema
			}
			if !strings.Contains(got["goecho"], `"message"`) {
				t.Errorf("go tool's output schema = %q, want one naming message", got["goecho"])
			}
			if got["watecho"] != "" {
				t.Errorf("0.1.0 tool's output schema = %q, want none", got["watecho"])
			}
		})
	}
}

// TestOutputIsHeldToItsSchema: a tool that declares an output schema and
// breaks it fails as kind tool, with the problem listed, in both
// isolations; one that keeps it passes.
func TestOutputIsHeldToItsSchema(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			h := newHostWith(t, `version = 1
[tools.out]
path = %q
`, maiden.Options{Isolation: iso.iso}, "outschema")
			ctx := context.Background()
			res, err := h.Call(ctx, maiden.Call{Tool: "out", Input: `{"n":1}`})
			if err != nil || !res.OK {
				t.Fatalf("kept promise: %+v, %v", res, err)
			}
			res, err = h.Call(ctx, maiden.Call{Tool: "out", Input: `{"n":"one"}`})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Error.Kind != maiden.KindTool || !strings.Contains(res.Error.Message, "output does not match the tool's output schema") || !strings.Contains(res.Error.Message, "/n") {
				t.Fatalf("broken promise: %+v", res)
			}
			if res.Output != "" {
				t.Errorf("the output that broke the schema was passed on: %q", res.Output)
			}
		})
	}
}
