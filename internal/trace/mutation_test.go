package trace

import (
	"context"
	"strings"
	"testing"

	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestTraceIDAgreesWithTheSpans: the trace an audit record names from the
// client's traceparent (TraceID, tracing off) is the trace the call's
// spans join (Remote, tracing on), for every well-formed and malformed
// traceparent: one reading of the W3C header, not two.
func TestTraceIDAgreesWithTheSpans(t *testing.T) {
	const id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cases := map[string]string{
		"00-" + id + "-" + parent + "-01":                      id,
		"00-" + id + "-" + parent + "-00":                      id,
		"00-" + id + "-" + parent + "-03":                      id, // sampled and random
		" 00-" + id + "-" + parent + "-01\t":                   id, // space around, as a header may carry it
		"01-" + id + "-" + parent + "-01":                      id,
		"01-" + id + "-" + parent + "-09-future":               id,
		"fe-" + id + "-" + parent + "-01":                      id,
		"ff-" + id + "-" + parent + "-01":                      "",
		"0-" + id + "-" + parent + "-01":                       "",
		"000-" + id + "-" + parent + "-01":                     "",
		"0g-" + id + "-" + parent + "-01":                      "",
		"00-" + id[:31] + "-" + parent + "-01":                 "",
		"00-" + id + "0-" + parent + "-01":                     "",
		"00-" + strings.ToUpper(id) + "-" + parent + "-01":     "",
		"00-" + id[:31] + "g-" + parent + "-01":                "",
		"00-" + strings.Repeat("0", 32) + "-" + parent + "-01": "",
		"00-" + id + "-" + parent[:15] + "-01":                 "",
		"00-" + id + "-" + parent + "0-01":                     "",
		"00-" + id + "-" + strings.Repeat("0", 16) + "-01":     "", // the invalid all-zero parent
		"00-" + id + "-00f067aa0ba902bz-01":                    "",
		"00-" + id + "-00F067AA0BA902B7-01":                    "",
		"00-" + id + "-" + parent + "-1":                       "",
		"00-" + id + "-" + parent + "-001":                     "",
		"00-" + id + "-" + parent + "-0z":                      "",
		"00-" + id + "-" + parent + "-04":                      "", // version 00 has no such flag
		"00-" + id + "-" + parent:                              "",
		"00_" + id + "-" + parent + "-01":                      "",
		"":                                                     "",
	}
	for tp, want := range cases {
		sc := oteltrace.SpanContextFromContext(Remote(context.Background(), tp, ""))
		joined := ""
		if sc.IsValid() {
			joined = sc.TraceID().String()
		}
		if got := TraceID(tp); got != want || joined != want {
			t.Errorf("traceparent %q: TraceID %q, the spans join %q; want %q for both", tp, got, joined, want)
		}
	}
	if got := SpanTraceID(context.Background()); got != "" {
		t.Errorf("SpanTraceID of a context with no span = %q, want none", got)
	}
}

// TestRemoteKeepsTracestate: the client's tracestate rides with its
// traceparent into the call's spans.
func TestRemoteKeepsTracestate(t *testing.T) {
	sc := oteltrace.SpanContextFromContext(Remote(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=abc,other=1"))
	if got := sc.TraceState().String(); got != "vendor=abc,other=1" {
		t.Fatalf("tracestate %q, want the client's", got)
	}
}

// TestNewChecksWhereTraceparentGoes: a Tracer over a real provider refuses
// a propagation host that is not a host pattern, and matches the ones it
// keeps in their canonical form.
func TestNewChecksWhereTraceparentGoes(t *testing.T) {
	tp := noop.NewTracerProvider()
	if _, err := New(tp, &Options{PropagateTo: []string{"https://api.example.com/x"}}); err == nil || !strings.Contains(err.Error(), "trace propagation host") {
		t.Fatalf("New with a URL as a host: %v; want refused", err)
	}
	tr, err := New(tp, &Options{PropagateTo: []string{"API.Example.COM."}})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Propagates("api.example.com") || tr.Propagates("example.com") {
		t.Fatalf("a Tracer propagating to API.Example.COM.: to api.example.com %v, to example.com %v; want true, false", tr.Propagates("api.example.com"), tr.Propagates("example.com"))
	}
}
