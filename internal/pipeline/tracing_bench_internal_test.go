package pipeline

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkCallTracing is the cost of a call's spans on the tiny WAT
// tool's in-process call by a declared agent (audited): "off" has no
// tracer (Options.TracerProvider nil, the default), "on" records every span with
// the SDK into an exporter that drops them (the cost of making the spans,
// not of sending them). Whether "off" costs anything is measured against
// main with BenchmarkAuditedCall, which both have (docs/observability.md).
func BenchmarkCallTracing(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[agents.bench]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --message=*\"]\n", testkit.Component(b, "echo"))
			o := &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(b)}
			if mode == "on" {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
				defer tp.Shutdown(context.Background())
				o.TracerProvider = tp
			}
			h, _ := testHost(b, dir, body, o)
			defer h.Close(context.Background())
			ctx := context.Background()
			call := Call{Agent: "bench", Tool: "echo", Input: `{"message":"hi"}`, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			for range 50 {
				if res, err := h.Call(ctx, call); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if res, err := h.Call(ctx, call); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
		})
	}
}
