package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
)

// BenchmarkAuditedCall is the cost of the audit trail on the tiny WAT
// tool's in-process call by a declared agent (one card): "off" skips the
// audit records (a switch only this benchmark has), "on" writes them as
// every call does. The bound: on/off ≤ 1.15. Run the two rows
// alternately (-count 1 in a shell loop: -count N runs one row N times,
// then the other) and compare their ns/op, and their cpu-ns/op (the
// process's CPU per call, the ingester's included).
func BenchmarkAuditedCall(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[agents.bench]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --message=*\"]\n", testkit.Component(b, "echo"))
			h, _ := testHost(b, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(b)})
			defer h.Close(context.Background())
			h.noAudit = mode == "off"
			ctx := context.Background()
			call := Call{Agent: "bench", Tool: "echo", Input: `{"message":"hi"}`}
			for range 50 { // compile, open the store, warm the caches
				if res, err := h.Call(ctx, call); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
			pending := func() int64 { // records written, not yet ingested
				st, _, err := h.State(ctx)
				if err != nil {
					b.Fatal(err)
				}
				js := st.Journal().Stats()
				return js.Appended - js.Ingested
			}
			pending0 := pending()
			cpu0 := cpuclock.Now()
			for b.Loop() {
				if res, err := h.Call(ctx, call); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
			// The process's CPU per call, the ingester's included: on a
			// machine whose cores other processes share, what the audit
			// trail really costs.
			cpuclock.Report(b, cpu0)
			// The records the loop's calls wrote that the ingester had
			// not taken when it ended (Close ingests them, untimed): on a
			// busy machine the low-priority ingester lags, and cpu-ns/op
			// leaves that part of the ingestion out.
			if mode == "on" {
				b.ReportMetric(float64(pending()-pending0)/float64(b.N), "uningested-rec/op")
			}
		})
	}
}
