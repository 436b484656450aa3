package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressEnv is a host importing an in-process MCP server (the Go SDK over
// streamable HTTP on loopback) whose tools report their own progress, and
// maiden's MCP server over it with a 200 ms progress ticker:
//   - steps: progress 1, 2, 3 of 3 at once (before any tick), then returns;
//   - late: 550 ms of nothing (the ticker speaks), then 0, 1, 2 of 2;
//   - quiet: nothing until the client has seen two of the ticker's
//     notifications for a quiet call (at most 30 s), no progress of its
//     own: a loaded machine's late timer, coalescing ticks, made a tool
//     of a fixed 500 ms see one tick.
func progressEnv(t *testing.T, prog *progressByToken) *env {
	t.Helper()
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	type none struct{}
	type out struct {
		Done bool `json:"done"`
	}
	step := func(ctx context.Context, req *mcp.CallToolRequest, p, total float64, msg string) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: total, Message: msg})
		}
		time.Sleep(150 * time.Millisecond) // over maiden.ProgressInterval: no coalescing
	}
	mcp.AddTool(up, &mcp.Tool{Name: "steps"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, out, error) {
		for i := 1; i <= 3; i++ {
			step(ctx, req, float64(i), 3, fmt.Sprintf("step %d", i))
		}
		return nil, out{true}, nil
	})
	mcp.AddTool(up, &mcp.Tool{Name: "late"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, out, error) {
		time.Sleep(550 * time.Millisecond)
		for i := 0; i <= 2; i++ {
			step(ctx, req, float64(i), 2, fmt.Sprintf("late %d", i))
		}
		return nil, out{true}, nil
	})
	mcp.AddTool(up, &mcp.Tool{Name: "quiet"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, out, error) {
		prog.waitTicks(ctx, "quiet-", prog.ticks("quiet-")+2, 30*time.Second)
		return nil, out{true}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(hs.Close) // after the host's cleanup (LIFO)

	path := filepath.Join(t.TempDir(), "agent.toml")
	body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[mcp.up]\naccept_new_tools = true\nurl = %q\n", testkit.Component(t, "echo"), hs.URL)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	s := New(h, &Options{ProgressEvery: 200 * time.Millisecond})
	if _, err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cfg: path, host: h, server: s}
}

// progressByToken collects progress notifications per token.
type progressByToken struct {
	mu   sync.Mutex
	got  map[any][]mcp.ProgressNotificationParams
	more chan struct{} // closed (and replaced) at every notification
}

func (p *progressByToken) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.got == nil {
		p.got = map[any][]mcp.ProgressNotificationParams{}
	}
	p.got[r.Params.ProgressToken] = append(p.got[r.Params.ProgressToken], *r.Params)
	if p.more != nil {
		close(p.more)
	}
	p.more = make(chan struct{})
}

// ticks counts the ticker's notifications to tokens starting with prefix.
func (p *progressByToken) ticks(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for tok, got := range p.got {
		if s, ok := tok.(string); ok && strings.HasPrefix(s, prefix) {
			for _, g := range got {
				if ticked(g) {
					n++
				}
			}
		}
	}
	return n
}

// waitTicks waits until ticks(prefix) reaches n, ctx ends or d passes.
func (p *progressByToken) waitTicks(ctx context.Context, prefix string, n int, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if p.more == nil {
			p.more = make(chan struct{})
		}
		more := p.more
		p.mu.Unlock()
		if p.ticks(prefix) >= n {
			return
		}
		select {
		case <-more:
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		}
	}
}

func (p *progressByToken) of(tok string) []mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]mcp.ProgressNotificationParams{}, p.got[tok]...)
}

func ticked(n mcp.ProgressNotificationParams) bool {
	return strings.Contains(n.Message, " running for ")
}

// TestImportedProgressRelayed: an imported tool's own progress reaches the
// MCP client with the client's progress token, in both protocol eras,
// instead of the ticker's (which speaks only until the tool does, and for a
// tool that never reports); the values increase throughout.
func TestImportedProgressRelayed(t *testing.T) {
	t.Parallel()
	var prog progressByToken // the quiet tool waits on it (its tokens are per era)
	e := progressEnv(t, &prog)
	srv := e.httpServer(HTTPOptions{})
	for _, era := range []string{legacyProtocol, ModernProtocol} {
		t.Run(era, func(t *testing.T) {
			cs, err := e.httpClientEra(srv.URL, nil, era, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			callWith := func(tool, tok string) []mcp.ProgressNotificationParams {
				t.Helper()
				p := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}
				p.SetProgressToken(tok)
				r, err := cs.CallTool(context.Background(), p)
				if err != nil || r.IsError {
					t.Fatalf("%s: %v %+v", tool, err, r)
				}
				// Sent before the result; the client's handler may run a
				// moment later. Wait for the notifications to settle.
				var got []mcp.ProgressNotificationParams
				for range 20 {
					time.Sleep(25 * time.Millisecond)
					if n := prog.of(tok); len(n) == len(got) && len(n) > 0 {
						break
					} else {
						got = n
					}
				}
				got = prog.of(tok)
				for i := 1; i < len(got); i++ {
					if got[i].Progress <= got[i-1].Progress {
						t.Errorf("%s: progress %v after %v (%q after %q)", tool, got[i].Progress, got[i-1].Progress, got[i].Message, got[i-1].Message)
					}
				}
				return got
			}

			// relayed checks that got is ticks (none required), then the
			// tool's own reports and nothing else: messages want, values
			// and total shifted by the last tick's value (0 without one).
			relayed := func(tool string, got []mcp.ProgressNotificationParams, want []string, values []float64, total float64) {
				t.Helper()
				first := len(got)
				for i, n := range got {
					if !ticked(n) {
						first = i
						break
					}
				}
				base := 0.0
				if first > 0 {
					base = got[first-1].Progress
				}
				var have, wantDesc []string
				for _, n := range got[first:] {
					have = append(have, fmt.Sprintf("%v/%v %s", n.Progress, n.Total, n.Message))
				}
				for i, m := range want {
					wantDesc = append(wantDesc, fmt.Sprintf("%v/%v %s", base+values[i], base+total, m))
				}
				if strings.Join(have, ", ") != strings.Join(wantDesc, ", ") {
					t.Errorf("%s: after %d ticks, progress %q; want %q", tool, first, have, wantDesc)
				}
			}

			// The tool reports at once: its own values (the pipeline
			// usually takes less than the first tick's 200 ms).
			got := callWith("up.steps", "steps-"+era)
			relayed("up.steps", got, []string{"step 1", "step 2", "step 3"}, []float64{1, 2, 3}, 3)

			// The ticker first, then the tool, shifted past the ticker's
			// last value (late 0 is not above it: dropped); no tick once
			// the tool has spoken.
			got = callWith("up.late", "late-"+era)
			if len(got) == 0 || !ticked(got[0]) {
				t.Errorf("up.late: %+v; want ticks first", got)
			}
			relayed("up.late", got, []string{"late 1", "late 2"}, []float64{1, 2}, 2)

			// A tool that reports nothing: the ticker, as for any tool.
			if got := callWith("up.quiet", "quiet-"+era); len(got) < 2 || !ticked(got[0]) {
				t.Errorf("up.quiet: %+v; want the ticker's progress", got)
			}
		})
	}
}
