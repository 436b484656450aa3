package metrics_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/metrics"
)

// BenchmarkObserverCost measures what the Prometheus observer adds to the
// cheapest call there is: the tiny WAT echo tool, in process. Three hosts,
// two without an Observer and one with metrics.New(), are called in turn
// in the same loop (the order rotating), so drift on a shared machine hits
// all alike. It reports each one's time per call, the ratio with/without,
// and the ratio of the two hosts without: the noise floor the first ratio
// is to be read against.
//
//	go test ./metrics -run '^$' -bench ObserverCost -count 5
func BenchmarkObserverCost(b *testing.B) {
	path := filepath.Join(b.TempDir(), "agent.toml")
	toml := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n", testkit.Component(b, "echo"))
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	cache := testkit.CompileCache(b)
	host := func(obs maiden.Observer) *maiden.Host {
		h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: cache, Observer: obs})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close(context.Background()) })
		return h
	}
	// without, with metrics, without again (the control)
	hosts := [3]*maiden.Host{host(nil), host(metrics.New()), host(nil)}
	ctx := context.Background()
	call := func(h *maiden.Host) time.Duration {
		start := time.Now()
		res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: `{"message":"hello"}`})
		d := time.Since(start)
		if err != nil || !res.OK {
			b.Fatalf("echo: %+v, %v", res, err)
		}
		return d
	}
	for _, h := range hosts {
		call(h) // compile and warm outside the timing
	}
	var spent [3]time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range hosts {
			k := (i + j) % len(hosts)
			spent[k] += call(hosts[k])
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/call-without")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/call-metrics")
	b.ReportMetric(float64(spent[1])/float64(spent[0]+spent[2])*2, "ratio-metrics/without")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "ratio-control")
}

// BenchmarkObserverEvents measures the observer's own work for one call
// that finds a free turn: the two Admission events and CallDone (a counter
// and a histogram under the tool's labels). This is all a call pays for
// metrics when it makes no http-fetch.
func BenchmarkObserverEvents(b *testing.B) {
	m := metrics.New()
	ev := maiden.CallEvent{Tool: "echo", OK: true, Duration: 20 * time.Microsecond}
	for b.Loop() {
		m.Admission(maiden.AdmissionEvent{Running: +1})
		m.Admission(maiden.AdmissionEvent{Running: -1})
		m.CallDone(ev)
	}
}
