// Package metrics is maiden's Prometheus instrumentation: a maiden.Observer
// that counts calls and http-fetch decisions and times calls, and the
// handler that serves them in the Prometheus text format. maiden serve -http
// serves it at /metrics; the root package knows only the Observer
// interface, so prometheus never becomes a dependency of an embedder.
//
//	m := metrics.New()
//	h, err := maiden.New(cfg, &maiden.Options{Observer: m})
//	...
//	http.Handle("/metrics", m.Handler())
//
// Each Metrics has its own registry (never the global default), holding
// maiden's metrics and the Go runtime and process collectors.
package metrics

import (
	"context"
	"errors"
	"net/http"

	"github.com/maiden-run/maiden"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names, as scraped.
const (
	CallsTotal     = "maiden_calls_total"
	CallDuration   = "maiden_call_duration_seconds"
	CallsActive    = "maiden_calls_active"
	CallsQueued    = "maiden_calls_queued"
	HTTPFetchTotal = "maiden_http_fetch_total"
)

// Labels and their values.
const (
	labelTool       = "tool"
	labelKind       = "kind"
	labelDecision   = "decision"
	labelRule       = "rule"
	decisionAllow   = "allow"
	decisionDeny    = "deny"
	kindOK          = "ok"
	kindOverloaded  = "overloaded"
	kindUnknownTool = "unknown-tool"
	kindUnknownAgt  = "unknown-agent"
	kindState       = "state"
	kindClosed      = "closed"
	kindCanceled    = "canceled"
	kindError       = "error"
)

// Buckets are the call-duration histogram's upper bounds, in seconds,
// 1-2.5-5 per decade: from 50 µs (a tiny tool's call in process takes
// ~20 µs) to 60 s. A call can run up to its tool's timeout (10 minutes at
// most); anything over 60 s is counted only in +Inf.
var Buckets = []float64{
	50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
	1, 2.5, 5, 10, 30, 60,
}

// Metrics is a maiden.Observer that records into its own Prometheus
// registry. It is safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	fetches  *prometheus.CounterVec
	active   prometheus.Gauge
	queued   prometheus.Gauge
}

var _ maiden.Observer = (*Metrics)(nil)

// New returns Metrics with a fresh registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: CallsTotal,
			Help: `Calls by tool and how they ended: kind "ok", a failure kind (tool, deadline, memory, trap, denied, invalid, config, input), or a call that could not be made (overloaded, unknown-tool, unknown-agent, state, closed, canceled, error). tool is empty when the name is not a configured tool.`,
		}, []string{labelTool, labelKind}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    CallDuration,
			Help:    "Wall time of calls by tool, waiting for a turn included.",
			Buckets: Buckets,
		}, []string{labelTool}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: HTTPFetchTotal,
			Help: `http-fetch requests by tool, decision (allow, deny) and rule: a denial's rule, or the outcome of an allowed request ("allowed" when a response came back; timeout, too-large, failed, ...), as in the audit log.`,
		}, []string{labelTool, labelDecision, labelRule}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: CallsActive,
			Help: "Calls holding one of the -max-concurrent turns (from policy checks to the tool's end).",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: CallsQueued,
			Help: "Calls waiting for a turn (at most -max-queued).",
		}),
	}
	m.reg.MustRegister(m.calls, m.duration, m.fetches, m.active, m.queued,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observer is m as a maiden.Observer, or nil if m is nil: a nil *Metrics
// in an interface would not be a nil Observer.
func (m *Metrics) Observer() maiden.Observer {
	if m == nil {
		return nil
	}
	return m
}

// Registry is the registry behind Handler, for an embedder that adds its
// own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format (or what the
// scraper negotiates). At most a few scrapes run at once; more are
// answered 503, so a client cannot pile up collections.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4})
}

// Admission implements maiden.Observer.
func (m *Metrics) Admission(ev maiden.AdmissionEvent) {
	if ev.Queued != 0 {
		m.queued.Add(float64(ev.Queued))
	}
	if ev.Running != 0 {
		m.active.Add(float64(ev.Running))
	}
}

// CallDone implements maiden.Observer.
func (m *Metrics) CallDone(ev maiden.CallEvent) {
	m.calls.WithLabelValues(ev.Tool, callKind(ev)).Inc()
	m.duration.WithLabelValues(ev.Tool).Observe(ev.Duration.Seconds())
}

// Fetch implements maiden.Observer.
func (m *Metrics) Fetch(ev maiden.FetchEvent) {
	decision := decisionAllow
	if !ev.Allowed {
		decision = decisionDeny
	}
	m.fetches.WithLabelValues(ev.Tool, decision, ev.Rule).Inc()
}

// callKind is the kind label of a finished call.
func callKind(ev maiden.CallEvent) string {
	switch {
	case ev.Err == nil && ev.OK:
		return kindOK
	case ev.Err == nil && ev.Kind != "":
		return string(ev.Kind)
	case errors.Is(ev.Err, maiden.ErrOverloaded):
		return kindOverloaded
	case errors.Is(ev.Err, maiden.ErrUnknownTool):
		return kindUnknownTool
	case errors.Is(ev.Err, maiden.ErrUnknownAgent):
		return kindUnknownAgt
	case errors.Is(ev.Err, maiden.ErrState):
		// The state store could not answer: calls of declared agents are
		// refused, which an operator alerts on.
		return kindState
	case errors.Is(ev.Err, maiden.ErrClosed):
		return kindClosed
	case errors.Is(ev.Err, context.Canceled), errors.Is(ev.Err, context.DeadlineExceeded):
		return kindCanceled
	}
	return kindError
}

// Health answers liveness probes: 200 "ok" while ctx lasts (the server is
// serving), 503 once ctx has ended (it is shutting down).
func Health(ctx context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if ctx.Err() != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("shutting down\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
}
