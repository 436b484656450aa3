// Package trace is maiden's side of OpenTelemetry traces: a call's spans
// (one for the call, children for its stages, each middleware layer, a
// human's wait, the run, each http-fetch) made through the OpenTelemetry
// API, the W3C trace context a client sends (traceparent, tracestate)
// read into the call's parent, and traceparent written onto an http-fetch
// only for the destinations an operator lists.
//
// A nil *Tracer is tracing off: every method is then a nil check and
// nothing else, so a Host without tracing pays nothing (the pipeline's
// BenchmarkCallTracingOff measures it). The exporter (OTLP over HTTP or
// gRPC, from the standard OTEL_EXPORTER_OTLP_* variables) is built by
// internal/trace/otlp, which only the command links; this package imports
// the OpenTelemetry API alone, never its SDK.
//
//	tr := trace.New(provider, &trace.Options{PropagateTo: []string{"api.example.com"}})
//	ctx, span := tr.Start(trace.Remote(ctx, call.TraceParent, call.TraceState), "maiden.call")
//	defer span.End()
package trace

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/maiden-run/maiden/internal/hostpattern"
)

// Scope is the instrumentation scope of maiden's spans.
const Scope = "github.com/maiden-run/maiden"

// Tracer makes a Host's spans; nil is tracing off.
type Tracer struct {
	t oteltrace.Tracer
	// propagate are the host patterns an http-fetch may carry the call's
	// traceparent to (it identifies the caller: off unless listed).
	propagate []string
}

// Options are a Tracer's choices; nil means none.
type Options struct {
	// PropagateTo lists the host patterns (as in http_allow) whose
	// http-fetch requests get the call's traceparent and tracestate
	// headers; empty means none.
	PropagateTo []string
}

// New is a Tracer over tp (nil: tracing off, New returns nil).
func New(tp oteltrace.TracerProvider, o *Options) (*Tracer, error) {
	if tp == nil {
		return nil, nil
	}
	t := &Tracer{t: tp.Tracer(Scope)}
	if o != nil {
		for _, p := range o.PropagateTo {
			pat, why := hostpattern.Normalize(p)
			if why != "" {
				return nil, fmt.Errorf("trace propagation host %q: %s", p, why)
			}
			t.propagate = append(t.propagate, pat)
		}
	}
	return t, nil
}

// Start begins a span under ctx's.
func (t *Tracer) Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, oteltrace.Span) {
	return t.t.Start(ctx, name, oteltrace.WithAttributes(attrs...))
}

// w3c is the W3C Trace Context propagator (traceparent, tracestate).
var w3c = propagation.TraceContext{}

// Remote is ctx carrying the client's span, from its traceparent and
// tracestate, as the remote parent of the call's spans; ctx as it is when
// traceparent is absent or malformed (the call then starts a trace).
func Remote(ctx context.Context, traceparent, tracestate string) context.Context {
	// Space around the value (which an HTTP header loses, and _meta's
	// string may keep) is not part of it.
	traceparent = strings.TrimSpace(traceparent)
	if traceparent == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		c["tracestate"] = tracestate
	}
	return w3c.Extract(ctx, c)
}

// TraceID is the trace ID of a W3C traceparent, "" when it is not a valid
// one (malformed, or naming the invalid all-zero trace or parent). It needs
// no tracer: a call's audit record names its client's trace whether or not
// maiden exports spans. It is the propagator's reading, Remote's, so that
// the trace a record names is the one the call's spans join when traced.
func TraceID(traceparent string) string {
	return SpanTraceID(Remote(context.Background(), traceparent, ""))
}

// SpanTraceID is the trace ID of ctx's span, "" when it has none.
func SpanTraceID(ctx context.Context) string {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Propagates reports whether an http-fetch to host (normalised: the gate's
// form) may carry the call's trace context.
func (t *Tracer) Propagates(host string) bool {
	if t == nil {
		return false
	}
	for _, p := range t.propagate {
		if hostpattern.Match(p, host) {
			return true
		}
	}
	return false
}

// Inject writes ctx's span as traceparent (and tracestate) into h.
func Inject(ctx context.Context, h http.Header) {
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}
