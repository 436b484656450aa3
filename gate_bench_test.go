package maiden_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 13's budgets measured through the whole Host path (admission,
// exposure, parse, cards, middleware chain, audit records, run), not only
// the package underneath: each benchmark interleaves the baseline and
// maiden's path call by call, so that load from elsewhere falls on both
// alike, and reports the medians and their ratio.
//
//	go test -run '^$' -bench 'HostPath' -benchtime 200x .

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkHostPathWrappedCLI: a wrapped /bin/true through Host.Call
// (confined: Landlock, seccomp, rlimits, a process group) against a bare
// os/exec of it. Budget: 1.5×.
func BenchmarkHostPathWrappedCLI(b *testing.B) {
	h := newHostWith(b, `version = 1
[tools.echo]
path = %q
[clis.true]
path = "/bin/true"
command = '{"maiden_command": 1, "name": "true"}'
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	if res, err := h.Call(ctx, maiden.Call{Tool: "true", Input: `{}`}); err != nil || !res.OK {
		b.Fatalf("warm-up: %+v %v", res, err)
	}
	var bare, host []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := h.Call(ctx, maiden.Call{Tool: "true", Input: `{}`})
		if err != nil || !res.OK {
			b.Fatal(res, err)
		}
		bare, host = append(bare, t1.Sub(t0)), append(host, time.Since(t1))
	}
	mb, mh := medianOf(bare), medianOf(host)
	b.ReportMetric(float64(mb.Microseconds()), "exec-p50-us")
	b.ReportMetric(float64(mh.Microseconds()), "host-p50-us")
	b.ReportMetric(float64(mh)/float64(mb), "ratio-p50")
}

// BenchmarkHostPathImported: an imported MCP tool (streamable HTTP, a
// credential attached) through Host.Call against calling the same upstream
// directly with the Go SDK client. Budget: 1.3×.
func BenchmarkHostPathImported(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds two integers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	b.Cleanup(hs.Close)
	h := newHostWith(b, `version = 1
[tools.echo]
path = %q
[mcp.calc]
accept_new_tools = true
url = "`+hs.URL+`"
credential = "CALC_TOKEN"
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) { return "s3cret", name == "CALC_TOKEN" }}, "echo")
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)
	direct, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL,
		HTTPClient: &http.Client{Transport: bearerRT{"s3cret"}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { direct.Close() })
	args := map[string]any{"a": 2, "b": 3}
	if res, err := h.Call(ctx, maiden.Call{Tool: "calc.add", Input: `{"a":2,"b":3}`}); err != nil || !res.OK {
		b.Fatalf("warm-up: %+v %v", res, err)
	}
	var d, m []time.Duration
	for b.Loop() {
		t0 := time.Now()
		r, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: args})
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
		t1 := time.Now()
		res, err := h.Call(ctx, maiden.Call{Tool: "calc.add", Input: `{"a":2,"b":3}`})
		if err != nil || !res.OK {
			b.Fatal(res, err)
		}
		d, m = append(d, t1.Sub(t0)), append(m, time.Since(t1))
	}
	md, mm := medianOf(d), medianOf(m)
	b.ReportMetric(float64(md.Microseconds()), "direct-p50-us")
	b.ReportMetric(float64(mm.Microseconds()), "host-p50-us")
	b.ReportMetric(float64(mm)/float64(md), "ratio-p50")
}

type bearerRT struct{ tok string }

func (t bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.tok)
	return http.DefaultTransport.RoundTrip(r)
}
