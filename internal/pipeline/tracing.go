package pipeline

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/trace"
)

// A call's OpenTelemetry spans (internal/trace makes them; docs/observability.md
// lists them). With tracing off (Options.TracerProvider nil) none of this runs:
// pipeline() wraps nothing, and each other site is behind a nil check.
//
// The call's span (maiden.call) is a child of the client's span when the
// call carries a traceparent (Call.TraceParent), else a trace's root. Its
// children are the traced stages, each from its entry to the moment it
// hands the call to the next stage (so they are siblings, in order, not
// nested), each middleware layer, a human's wait, the run, and each
// http-fetch. Spans carry names: the tool, agent, kind, verdicts, the
// host, method, status and size of a fetch; never an input, an output, a
// header, a path or a secret.

// tracerOf is the tracer Options ask for: nil (off) without a
// TracerProvider; an error if TracerProvider is not an OpenTelemetry one
// or a propagation host pattern is not a host pattern.
func tracerOf(o Options) (*trace.Tracer, error) {
	if o.TracerProvider == nil {
		return nil, nil
	}
	tp, ok := o.TracerProvider.(oteltrace.TracerProvider)
	if !ok {
		return nil, fmt.Errorf("Options.TracerProvider is a %T, not a go.opentelemetry.io/otel/trace.TracerProvider", o.TracerProvider)
	}
	return trace.New(tp, &trace.Options{PropagateTo: o.TracePropagateTo})
}

// startCall starts the call's span under the client's trace context.
func (h *Host) startCall(ctx context.Context, inv *invocation) context.Context {
	ctx = trace.Remote(ctx, inv.call.TraceParent, inv.call.TraceState)
	ctx, inv.span = h.tracer.Start(ctx, "maiden.call",
		attribute.String("maiden.tool", inv.call.Tool), attribute.String("maiden.agent", inv.call.Agent))
	if inv.call.Session != "" {
		inv.span.SetAttributes(attribute.String("maiden.session", inv.call.Session))
	}
	return ctx
}

// endCall sets the call's outcome on its span and ends it.
func endCall(inv *invocation, err error) {
	sp := inv.span
	if inv.backend != nil {
		sp.SetAttributes(attribute.String("maiden.tool.kind", toolKind(inv.backend)))
	}
	switch {
	case err != nil:
		sp.SetStatus(codes.Error, "host error")
		sp.SetAttributes(attribute.String("maiden.outcome", "error"))
	case inv.res.OK:
		sp.SetAttributes(attribute.String("maiden.outcome", "ok"), attribute.Int("maiden.output.bytes", len(inv.res.Output)))
	case inv.res.Error != nil:
		// The kind, never the message: a tool's message may quote its input.
		sp.SetStatus(codes.Error, string(inv.res.Error.Kind))
		sp.SetAttributes(attribute.String("maiden.outcome", string(inv.res.Error.Kind)))
	}
	sp.End()
}

// traceID is the trace the call's audit records name: its span's when
// traced, else the client's traceparent's ("" when neither).
func (inv *invocation) traceID() string {
	if inv.span != nil {
		if sc := inv.span.SpanContext(); sc.IsValid() {
			return sc.TraceID().String()
		}
	}
	if inv.call.TraceParent == "" {
		return ""
	}
	return trace.TraceID(inv.call.TraceParent)
}

// stageSpan is a traced stage's span and its parent, which the next stage
// runs under again (so stages are siblings).
type stageSpan struct {
	span, parent oteltrace.Span
}

type stageSpanKey struct{}

// traced wraps stage s in a span named name, from the stage's entry to the
// moment it calls the next stage, or to its return if it never does (it
// ended the call).
func traced(name string, s stage) stage {
	return func(next handler) handler {
		handoff := func(ctx context.Context, inv *invocation) error {
			if m, _ := ctx.Value(stageSpanKey{}).(*stageSpan); m != nil {
				m.span.End()
				ctx = context.WithValue(oteltrace.ContextWithSpan(ctx, m.parent), stageSpanKey{}, nil)
			}
			return next(ctx, inv)
		}
		inner := s(handoff)
		return func(ctx context.Context, inv *invocation) error {
			parent := oteltrace.SpanFromContext(ctx)
			sctx, sp := inv.tr.Start(ctx, name)
			err := inner(context.WithValue(sctx, stageSpanKey{}, &stageSpan{span: sp, parent: parent}), inv)
			sp.End() // a no-op when the stage handed over (ended there)
			return err
		}
	}
}

// tracedRun wraps the run (the tool's backend running the call: a worker,
// a wrapped CLI, an upstream, a built-in) in the span maiden.run, the
// parent of the call's http-fetch spans.
func tracedRun(run handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		ctx, sp := inv.tr.Start(ctx, "maiden.run", attribute.String("maiden.tool.kind", toolKind(inv.backend)))
		defer sp.End()
		err := run(ctx, inv)
		if inv.res.Error != nil {
			sp.SetStatus(codes.Error, string(inv.res.Error.Kind))
		}
		return err
	}
}

// layerSpan starts the span of one middleware layer's step (phase before
// or after); end records the verdict it added to the trail, if any.
func (inv *invocation) layerSpan(ctx context.Context, phase string, m config.Middleware) (context.Context, func()) {
	ctx, sp := inv.tr.Start(ctx, "maiden.middleware.layer",
		attribute.String("maiden.middleware.rule", m.Rule), attribute.String("maiden.middleware.use", m.Use), attribute.String("maiden.middleware.phase", phase))
	n := len(inv.trail)
	return ctx, func() {
		if len(inv.trail) > n {
			v := inv.trail[len(inv.trail)-1]
			sp.SetAttributes(attribute.String("maiden.middleware.verdict", v.Verdict))
		}
		sp.End()
	}
}

// humanWaitSpan starts the span of a wait for a human's decision.
func (inv *invocation) humanWaitSpan(ctx context.Context, id string) (context.Context, oteltrace.Span) {
	return inv.tr.Start(ctx, "maiden.human_wait", attribute.String("maiden.request.id", id))
}

// traceFetch gives each http-fetch of the call a span (method, host, the
// status and the size of the body, or the refusal's kind; never the path,
// a header or a value) under the run's span, parent; and, to a host the
// operator listed (trace.Options.PropagateTo), the traceparent and
// tracestate of that span, replacing any the tool set.
func (inv *invocation) traceFetch(parent context.Context, fetch sandbox.FetchFunc) sandbox.FetchFunc {
	if inv.tr == nil {
		return fetch
	}
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		host := ""
		if u, err := url.Parse(req.URL); err == nil {
			host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		}
		method := req.Method
		if method == "" {
			method = "GET" // http-fetch's default
		}
		// The host and the method are the tool's text: kept from the
		// values revealed to the call, as the fetch's audit record is
		// (redactFetchBody), so a tool that writes a revealed key as its
		// URL's host or as its method leaves no copy of it with the
		// collector either.
		shown, shownMethod := host, method
		if red := inv.secrets.Redactor(nil); red != nil {
			shown, shownMethod = red(host), red(method)
		}
		ctx = oteltrace.ContextWithSpan(ctx, oteltrace.SpanFromContext(parent))
		ctx, sp := inv.tr.Start(ctx, "maiden.http_fetch", attribute.String("http.request.method", shownMethod), attribute.String("server.address", shown))
		defer sp.End()
		if inv.tr.Propagates(host) {
			req.Headers = withTraceContext(ctx, req.Headers)
			sp.SetAttributes(attribute.Bool("maiden.trace.propagated", true))
		}
		resp, ferr := fetch(ctx, req)
		switch {
		case ferr != nil:
			sp.SetStatus(codes.Error, string(ferr.Kind))
			sp.SetAttributes(attribute.String("maiden.fetch.error", string(ferr.Kind)))
		default:
			sp.SetAttributes(attribute.Int("http.response.status_code", resp.Status), attribute.Int("http.response.body.size", len(resp.Body)))
		}
		return resp, ferr
	}
}

// withTraceContext is hs without a traceparent or tracestate the tool set,
// with ctx's span's instead.
func withTraceContext(ctx context.Context, hs []sandbox.Header) []sandbox.Header {
	out := make([]sandbox.Header, 0, len(hs)+2)
	for _, h := range hs {
		if n := strings.ToLower(h.Name); n != "traceparent" && n != "tracestate" {
			out = append(out, h)
		}
	}
	carrier := map[string][]string{}
	trace.Inject(ctx, carrier)
	for name, vs := range carrier {
		for _, v := range vs {
			out = append(out, sandbox.Header{Name: strings.ToLower(name), Value: v})
		}
	}
	return out
}

// egressSpan starts, under ctx's span, the span of one request a host
// built-in (web_fetch) sends through the egress gate: maiden.http_fetch
// with the method, the host and maiden.fetch.via; end sets the status and
// the body's size, or the refusal's kind (never the path, a header or a
// value). A no-op when the call is not traced.
func (inv *invocation) egressSpan(ctx context.Context, via, method, host string) (context.Context, func(status, size int, errKind string)) {
	if inv.tr == nil {
		return ctx, func(int, int, string) {}
	}
	ctx, sp := inv.tr.Start(ctx, "maiden.http_fetch", attribute.String("http.request.method", method),
		attribute.String("server.address", host), attribute.String("maiden.fetch.via", via))
	return ctx, func(status, size int, errKind string) {
		if errKind != "" {
			sp.SetStatus(codes.Error, errKind)
			sp.SetAttributes(attribute.String("maiden.fetch.error", errKind))
		} else {
			sp.SetAttributes(attribute.Int("http.response.status_code", status), attribute.Int("http.response.body.size", size))
		}
		sp.End()
	}
}

// connectSpan starts, under ctx's span, the span of one CONNECT a wrapped
// CLI sends to maiden's egress proxy (maiden.connect); end sets the host,
// port and the gate's rule, an error status when it refused. A no-op when
// the call is not traced.
func (inv *invocation) connectSpan(ctx context.Context) func(host string, port int, allowed bool, rule string) {
	if inv.tr == nil {
		return func(string, int, bool, string) {}
	}
	_, sp := inv.tr.Start(ctx, "maiden.connect")
	return func(host string, port int, allowed bool, rule string) {
		sp.SetAttributes(attribute.String("server.address", host), attribute.Int("server.port", port), attribute.String("maiden.egress.rule", rule))
		if !allowed {
			sp.SetStatus(codes.Error, "denied")
		}
		sp.End()
	}
}

// upstreamSpan starts, under ctx's span, the span of a call an imported
// tool sends to its upstream MCP server (maiden.mcp_upstream: the import's
// name and the upstream's tool name); end sets the failure's kind, if
// any. A no-op when the call is not traced.
func (inv *invocation) upstreamSpan(ctx context.Context, imp, tool string) (context.Context, func(failure string)) {
	if inv.tr == nil {
		return ctx, func(string) {}
	}
	ctx, sp := inv.tr.Start(ctx, "maiden.mcp_upstream", attribute.String("maiden.mcp.import", imp), attribute.String("maiden.mcp.tool", tool))
	return ctx, func(failure string) {
		if failure != "" {
			sp.SetStatus(codes.Error, failure)
		}
		sp.End()
	}
}
