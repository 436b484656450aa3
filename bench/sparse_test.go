package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
)

// BenchmarkCallSparse calls the echo tool one call at a time with a gap
// between calls in which the caller is busy with work of its own (it
// spins): what an MCP client's round trip leaves between two calls of a
// server. In process the gap costs nothing; a worker sleeps through it
// once its spin window has passed, and the next call pays for waking it.
// Only the calls are timed (p50, p99; ns/op includes the gaps).
func BenchmarkCallSparse(b *testing.B) {
	for _, tl := range tools {
		b.Run(tl.name, func(b *testing.B) {
			for _, iso := range ordered([]struct {
				name string
				iso  maiden.Isolation
			}{{"maiden", maiden.InProcess}, {"maiden-workers", maiden.Workers}}) {
				b.Run(iso.name, func(b *testing.B) {
					for _, gap := range []time.Duration{0, 300 * time.Microsecond, 3 * time.Millisecond} {
						b.Run(fmt.Sprintf("gap%s", gap), func(b *testing.B) {
							h := host(b, tl.fixture, iso.iso)
							ctx := context.Background()
							durs := make([]time.Duration, 0, b.N)
							procs := sampleProcs()
							b.ResetTimer()
							start := time.Now()
							for range b.N {
								for t := time.Now(); time.Since(t) < gap; {
								}
								t0 := time.Now()
								res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: input})
								if err != nil {
									b.Fatal(err)
								}
								durs = append(durs, time.Since(t0))
								if err := checkOutput(res.OK, res.Output, res.Error, input); err != nil {
									b.Fatal(err)
								}
							}
							wall := time.Since(start)
							b.StopTimer()
							reportProcs(b, procs, len(durs))
							report(b, durs, wall)
						})
					}
				})
			}
		})
	}
}
