package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The client's trace context, as an MCP client would send it.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientParent  = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// traceWorld is a TLS server on loopback answering as api.example.com
// (listed for trace propagation) and other.example.com (not listed),
// which records the traceparent each request carried, and a Host over the
// JS fetcher with a validate layer, the TOKEN secret and spans recorded in
// memory.
type traceWorld struct {
	spans *tracetest.InMemoryExporter
	h     *maiden.Host
	port  string
	mu    sync.Mutex
	got   map[string][]string // host → traceparent headers received
}

func newTraceWorld(t *testing.T, traced bool) *traceWorld {
	if !traced {
		return newTraceWorldWith(t, nil, nil)
	}
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return newTraceWorldWith(t, tp, spans)
}

// newTraceWorldWith is the world with the Host's spans made by tp (nil:
// tracing off); spans is where tp records them, if in memory.
func newTraceWorldWith(t *testing.T, tp oteltrace.TracerProvider, spans *tracetest.InMemoryExporter) *traceWorld {
	w := &traceWorld{got: map[string][]string{}, spans: spans}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.got[r.Host] = append(w.got[r.Host], r.Header.Get("Traceparent"))
		w.mu.Unlock()
		fmt.Fprintf(rw, "hello")
	}), "api.example.com", "other.example.com")
	u, _ := url.Parse(srv.URL)
	w.port = u.Port()
	opts := maiden.Options{
		Isolation:        maiden.InProcess,
		Resolver:         testkit.Loopback("api.example.com", "other.example.com"),
		LookupSecret:     func(name string) (string, bool) { return tokenValue, name == "TOKEN" },
		TracePropagateTo: []string{"api.example.com"},
	}
	if tp != nil {
		opts.TracerProvider = tp
	}
	net := fmt.Sprintf(`"network:connect api.example.com:%[1]s", "network:connect other.example.com:%[1]s"`, w.port)
	w.h = newHostWith(t, `version = 1
[tools.fetcher]
path = %[1]q
http_allow = ["api.example.com", "other.example.com"]
http_ports = [`+w.port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
secrets = ["TOKEN"]

[[middleware]]
use = "validate"
check = 'args.url != ""'
message = "a URL is needed"

[agents.user]
tools = ["fetcher"]
grants = ["tool:invoke fetcher --...", `+net+`, "secret:use TOKEN"]
`, opts, "js/fetcher")
	return w
}

func (w *traceWorld) call(t *testing.T, host, traceparent string) maiden.Result {
	t.Helper()
	in := fmt.Sprintf(`{"url": "https://%s:%s/v1/x?q=%s", "credential": "TOKEN"}`, host, w.port, "query-value")
	res, err := w.h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "fetcher", Input: in, TraceParent: traceparent, TraceState: "vendor=abc"})
	if err != nil || !res.OK {
		t.Fatalf("call: %+v, %v", res, err)
	}
	return res
}

func (w *traceWorld) received(host string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got[host]...)
}

// TestCallSpansJoinTheClientsTrace: a call carrying the client's
// traceparent has its spans in that trace, maiden.call a child of the
// client's span, with children for admission, the decision, the middleware
// layer, the run and the http-fetch (host, status, size); no span carries
// the secret, the query or the input; the audit records name the trace; the
// listed destination receives a traceparent of the same trace, the other
// destination none.
func TestCallSpansJoinTheClientsTrace(t *testing.T) {
	t.Parallel()
	w := newTraceWorld(t, true)
	res := w.call(t, "api.example.com", clientParent)
	w.call(t, "other.example.com", clientParent)

	spans := w.spans.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	var all strings.Builder
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		if got := s.SpanContext.TraceID().String(); got != clientTraceID {
			t.Errorf("span %s in trace %s, want the client's %s", s.Name, got, clientTraceID)
		}
		b, _ := json.Marshal(s.Attributes)
		fmt.Fprintf(&all, "%s %s %s\n", s.Name, s.Status.Description, b)
	}
	for _, name := range []string{"maiden.call", "maiden.admission", "maiden.policy", "maiden.input", "maiden.decision", "maiden.session", "maiden.load", "maiden.middleware", "maiden.middleware.layer", "maiden.audit", "maiden.run", "maiden.http_fetch"} {
		if len(byName[name]) != 2 && name != "maiden.middleware.layer" {
			t.Errorf("%d spans %s, want one per call; spans:\n%s", len(byName[name]), name, all.String())
		}
	}
	for _, c := range byName["maiden.call"] {
		if c.Parent.SpanID().String() != clientSpanID || !c.Parent.IsRemote() {
			t.Errorf("maiden.call's parent is %s (remote %v), want the client's span %s", c.Parent.SpanID(), c.Parent.IsRemote(), clientSpanID)
		}
		if got := c.SpanContext.TraceState().Get("vendor"); got != "abc" {
			t.Errorf("tracestate vendor=%q, want the client's abc", got)
		}
		if a := attrs(c); a["maiden.tool"] != "fetcher" || a["maiden.agent"] != "user" || a["maiden.outcome"] != "ok" || a["maiden.tool.kind"] != "wasm" {
			t.Errorf("maiden.call attributes %v", a)
		}
	}
	fetch := byName["maiden.http_fetch"]
	if len(fetch) == 2 {
		a := attrs(fetch[0])
		if a["server.address"] != "api.example.com" || a["http.response.status_code"] != "200" || a["http.response.body.size"] != "5" || a["http.request.method"] != "GET" || a["maiden.trace.propagated"] != "true" {
			t.Errorf("http_fetch attributes %v", a)
		}
		if a := attrs(fetch[1]); a["server.address"] != "other.example.com" || a["maiden.trace.propagated"] != "" {
			t.Errorf("second http_fetch attributes %v", a)
		}
		run := byName["maiden.run"][0]
		if fetch[0].Parent.SpanID() != run.SpanContext.SpanID() {
			t.Errorf("http_fetch's parent %s, want maiden.run %s", fetch[0].Parent.SpanID(), run.SpanContext.SpanID())
		}
		// The listed destination got the fetch span's own context.
		want := "00-" + clientTraceID + "-" + fetch[0].SpanContext.SpanID().String() + "-01"
		if got := w.received("api.example.com:" + w.port); len(got) != 1 || got[0] != want {
			t.Errorf("api.example.com received traceparent %q, want %q", got, want)
		}
	}
	if got := w.received("other.example.com:" + w.port); len(got) != 1 || got[0] != "" {
		t.Errorf("other.example.com (not listed) received traceparent %q, want none", got)
	}
	// The layer's step before the run and after it, per call.
	if l := byName["maiden.middleware.layer"]; len(l) != 4 {
		t.Errorf("%d middleware layer spans, want 4", len(l))
	} else {
		if a := attrs(l[0]); a["maiden.middleware.use"] != "validate" || a["maiden.middleware.verdict"] != "pass" || a["maiden.middleware.rule"] != "middleware[1]" {
			t.Errorf("middleware layer attributes %v", a)
		}
	}
	for _, secret := range []string{tokenValue, "query-value", "/v1/x", res.Output} {
		if strings.Contains(all.String(), secret) {
			t.Errorf("a span carries %q:\n%s", secret, all.String())
		}
	}

	for _, kind := range []string{"call-admitted", "call-succeeded"} {
		recs := auditOf(t, w.h, kind)
		if len(recs) != 2 {
			t.Fatalf("%d %s records, want 2", len(recs), kind)
		}
		if recs[0]["trace_id"] != clientTraceID {
			t.Errorf("%s record's trace_id %v, want %s", kind, recs[0]["trace_id"], clientTraceID)
		}
	}
	ok := auditOf(t, w.h, "call-succeeded")[0]
	if ok["tool_kind"] != "wasm" || ok["output_bytes"] != float64(len(res.Output)) {
		t.Errorf("call-succeeded record %v, want tool_kind wasm and output_bytes %d", ok, len(res.Output))
	}
}

// TestUntracedCallRecordsTheClientsTrace: with tracing off, a call still
// names its client's trace in its audit records, propagates nothing, and a
// malformed traceparent names none.
func TestUntracedCallRecordsTheClientsTrace(t *testing.T) {
	t.Parallel()
	w := newTraceWorld(t, false)
	w.call(t, "api.example.com", clientParent)
	w.call(t, "api.example.com", "00-"+clientTraceID+"-"+clientSpanID) // no flags: malformed
	recs := auditOf(t, w.h, "call-succeeded")
	if len(recs) != 2 || recs[0]["trace_id"] != clientTraceID || recs[1]["trace_id"] != nil {
		t.Errorf("call-succeeded records %v, want the client's trace ID, then none", recs)
	}
	if got := w.received("api.example.com:" + w.port); len(got) != 2 || got[0] != "" || got[1] != "" {
		t.Errorf("with tracing off the destination received traceparent %q", got)
	}
}

func attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// TestHumanWaitSpan: a call that waits for a human's approval has a
// maiden.human_wait span naming the request and that it was decided,
// inside the call's trace.
func TestHumanWaitSpan(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[[middleware]]
use = "approve"
reason = "a human decides"
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond, TracerProvider: tp}, "echo")
	ctx := context.Background()
	var id string
	res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"hi"}`, TraceParent: clientParent, ApprovalWait: 20 * time.Second,
		OnApproval: func(r maiden.ApprovalRequest) {
			id = r.ID
			go h.Decide(ctx, r.ID, maiden.Answer{Approve: true})
		}})
	if err != nil || !res.OK {
		t.Fatalf("call: %+v %v", res, err)
	}
	var wait []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "maiden.human_wait" {
			wait = append(wait, s)
		}
	}
	if len(wait) != 1 {
		t.Fatalf("%d human_wait spans, want 1", len(wait))
	}
	if a := attrs(wait[0]); a["maiden.request.id"] != id || a["maiden.human_wait.decided"] != "true" || wait[0].SpanContext.TraceID().String() != clientTraceID {
		t.Errorf("human_wait span %v in trace %s (request %s)", a, wait[0].SpanContext.TraceID(), id)
	}
}

// TestTracerProviderMustBeOpenTelemetrys: Options.TracerProvider is typed
// any (api imports only the standard library); anything but an
// OpenTelemetry TracerProvider is refused by New, never ignored.
func TestTracerProviderMustBeOpenTelemetrys(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n", "echo")
	if _, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, TracerProvider: "otel"}); err == nil || !strings.Contains(err.Error(), "TracerProvider is a string") {
		t.Errorf("a string as TracerProvider: %v", err)
	}
}
