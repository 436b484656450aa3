package multiinstance

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/pgtest"
	"github.com/maiden-run/maiden/internal/store"
)

// The benchmarks use the Go MCP SDK as the client (the load generator must
// cost less than the servers it measures); the behaviour tests use the
// TypeScript one.

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func connectGo(tb testing.TB, in *instance, token string) *mcp.ClientSession {
	tb.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "maiden-multi-bench", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: in.url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}, nil)
	if err != nil {
		tb.Fatalf("connect to %s: %v", in.name, err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

func echo(ctx context.Context, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
}

// benchClients is how many sessions call at once, spread over the
// instances round robin: the same offered load for every configuration.
const benchClients = 12

// BenchmarkCallsPerSecond: calls of the tiny tool (echo, with an audited
// agent and its card) per second through 1, 2 and 3 `maiden serve -http`
// instances on one PostgreSQL database, and through one instance on a
// SQLite file (the baseline), in one run, with benchClients sessions
// calling at once. With MAIDEN_PGTEST_DURABLE=1 PostgreSQL commits to disk
// as SQLite's synchronous=FULL does; otherwise it runs with fsync off.
// Besides calls/s it reports the CPU per call summed over every process
// and its parts (cpu_test.go), and context switches per call; with
// MAIDEN_BENCH_ISOLATION=process the instances run their tools in process
// instead of in workers.
//
//	MAIDEN_PGTEST_DURABLE=1 go test -run '^$' -bench CallsPerSecond -benchtime 3000x ./internal/multiinstance
func BenchmarkCallsPerSecond(b *testing.B) {
	for _, tc := range []struct {
		name      string
		postgres  bool
		instances int
	}{{"sqlite-1", false, 1}, {"postgres-1", true, 1}, {"postgres-2", true, 2}, {"postgres-3", true, 3}} {
		b.Run(tc.name, func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "state.db")
			if tc.postgres {
				db = pgtest.URL(b)
			}
			e := newEnv(b, db)
			e.maiden(b, "cards", "grant", "-agent", "alice", "tool:invoke echo --...")
			var ins []*instance
			var extra []string
			if iso := os.Getenv("MAIDEN_BENCH_ISOLATION"); iso != "" {
				extra = append(extra, "-isolation", iso)
			}
			for i := range tc.instances {
				ins = append(ins, e.serve(b, fmt.Sprint("I", i), extra...))
			}
			var sessions []*mcp.ClientSession
			for i := range benchClients {
				sessions = append(sessions, connectGo(b, ins[i%len(ins)], e.token))
			}
			measureCalls(b, ins, sessions)
			for _, in := range ins {
				in.stop(b)
			}
		})
	}
}

// measureCalls makes b.N calls of echo over sessions (benchClients of
// them, spread over the instances ins), benchClients at once, and reports
// calls/s and the CPU per call of every process (cpu_test.go).
func measureCalls(b *testing.B, ins []*instance, sessions []*mcp.ClientSession) {
	ctx := context.Background()
	for _, cs := range sessions { // warm: each instance's store, wallet and tool
		if r, err := echo(ctx, cs); err != nil || r.IsError {
			b.Fatalf("warm-up call: %v %+v", err, r)
		}
	}
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	var pids []int
	for _, in := range ins {
		pids = append(pids, in.cmd.Process.Pid)
	}
	b.ResetTimer()
	before := takeCPU()
	start := time.Now()
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if r, err := echo(ctx, cs); err != nil || r.IsError {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	cpu := before.to(takeCPU(), pids)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d calls failed", n, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
	// CPU per call (µs), summed over the instances, the database
	// and the client, and each part (see cpu_test.go).
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	var inst time.Duration
	for _, d := range cpu.instances {
		inst += d
	}
	b.ReportMetric(per(inst+cpu.postgres+cpu.client), "cpu-us/call")
	b.ReportMetric(per(cpu.own), "maiden-us/call")
	b.ReportMetric(per(inst-cpu.own), "workers-us/call")
	b.ReportMetric(per(cpu.postgres), "pg-us/call")
	b.ReportMetric(per(cpu.client), "client-us/call")
	b.ReportMetric(float64(cpu.cs)/float64(b.N), "switches/call")
}

// BenchmarkNativeFloor is BenchmarkCallsPerSecond's load and accounting
// over 1 and 3 processes that are not maiden: each a native Go MCP server
// (the same SDK's streamable HTTP handler, stateless as maiden serves this
// client, an echo tool that returns its input; this test binary run again
// as a server), with no sandbox, no store, no audit and no worker. It
// shows what spreading the same calls over three Go processes instead of
// one costs on this machine with nothing of maiden's in them, the part of
// BenchmarkCallsPerSecond's 3-against-1 ratio that maiden cannot remove.
// Its maiden-us/call column is the native servers' CPU.
//
//	go test -run '^$' -bench NativeFloor -benchtime 3000x ./internal/multiinstance
func BenchmarkNativeFloor(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprint("native-", n), func(b *testing.B) {
			var ins []*instance
			for i := range n {
				ins = append(ins, startNative(b, fmt.Sprint("N", i)))
			}
			var sessions []*mcp.ClientSession
			for i := range benchClients {
				sessions = append(sessions, connectGo(b, ins[i%len(ins)], "unused"))
			}
			measureCalls(b, ins, sessions)
			for _, in := range ins {
				in.stop(b)
			}
		})
	}
}

// BenchmarkRevocationPropagation: how long after a card's revocation is
// committed (by another process on the same database: this benchmark's own
// store) the other instances refuse the agent's calls. Two instances are
// called in a loop, one session each; per revocation, the latency is from
// Revoke's return to the first denied result on each instance (so it
// includes the rest of a call already running then). Reports p50, p99 and
// the maximum over every (revocation, instance) pair, and stale-calls: calls
// that began after the commit and were still allowed (an error unless 0).
//
//	go test -run '^$' -bench RevocationPropagation -benchtime 50x ./internal/multiinstance
func BenchmarkRevocationPropagation(b *testing.B) {
	db := pgtest.URL(b)
	e := newEnv(b, db)
	ctx := context.Background()
	st, err := store.Open(ctx, db, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	g, err := grant.Parse("tool:invoke echo --...")
	if err != nil {
		b.Fatal(err)
	}
	ins := []*instance{e.serve(b, "B"), e.serve(b, "C")}
	type poller struct {
		cs      *mcp.ClientSession
		allowed atomic.Bool
		denied  chan time.Time // each first denial after an allowed streak
	}
	var ps []*poller
	// committed is when the current round's revocation was committed (Unix
	// ns; 0 while its card is live); stale counts the calls that started
	// after it and were still allowed (the "next call" promise says none).
	var committed, stale atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, in := range ins {
		p := &poller{cs: connectGo(b, in, e.token), denied: make(chan time.Time, 1)}
		ps = append(ps, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now().UnixNano()
				r, err := echo(ctx, p.cs)
				if err != nil {
					continue
				}
				if c := committed.Load(); !r.IsError && c != 0 && began > c {
					stale.Add(1)
				}
				text := ""
				if len(r.Content) > 0 {
					if tc, ok := r.Content[0].(*mcp.TextContent); ok {
						text = tc.Text
					}
				}
				switch {
				case !r.IsError:
					p.allowed.Store(true)
				case strings.HasPrefix(text, "denied:") && p.allowed.Swap(false):
					p.denied <- time.Now()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		committed.Store(0)
		card, err := st.Grant(ctx, "alice", cards.Spec{LowerPos: cards.Any(g)})
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for _, p := range ps { // both instances allow again
			for !p.allowed.Load() {
				if time.Now().After(deadline) {
					b.Fatal("the new card was not seen within 30 s")
				}
				time.Sleep(time.Millisecond)
			}
		}
		if _, err := st.Revoke(ctx, store.Operator(), card.ID); err != nil {
			b.Fatal(err)
		}
		done := time.Now()
		committed.Store(done.UnixNano())
		for _, p := range ps {
			select {
			case at := <-p.denied:
				lat = append(lat, max(0, at.Sub(done)))
			case <-time.After(30 * time.Second):
				b.Fatal("a revocation was not seen within 30 s")
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
	b.ReportMetric(float64(stale.Load()), "stale-calls")
	if n := stale.Load(); n > 0 {
		b.Errorf("%d calls that started after a revocation was committed were allowed", n)
	}
}
