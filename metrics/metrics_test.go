package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs url as a Prometheus server would and parses the text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("GET %s: Content-Type %q, want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v", url, err)
	}
	return fams
}

// sample finds the metric of family name whose labels are exactly labels
// ("k=v" pairs).
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	want := map[string]string{}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		want[k] = v
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, or -1 if the series is absent.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	m := sample(fams, name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

// fetchWorld is a real TLS server on loopback and a host whose fetcher tool
// may reach it (and fetcher-noca, the same tool without the server's CA).
type fetchWorld struct {
	h       *maiden.Host
	m       *metrics.Metrics
	scrape  string // the /metrics URL
	base    string // the TLS server's URL, as the tools name it
	entered chan struct{}
	release chan struct{}
}

func newFetchWorld(t *testing.T, opts maiden.Options) *fetchWorld {
	t.Helper()
	w := &fetchWorld{entered: make(chan struct{}, 16), release: make(chan struct{})}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			w.entered <- struct{}{}
			select {
			case <-w.release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(rw, "hello")
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	w.base = "https://api.example.com:" + u.Port()
	fetcher := testkit.Component(t, "js/fetcher")
	toml := fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[tools.toolerr]
path = %q
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
timeout_ms = 20000
[tools.fetcher-noca]
path = %q
http_allow = ["api.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
`, testkit.Component(t, "echo"), testkit.Component(t, "toolerr"), fetcher, u.Port(), ca, fetcher, u.Port())
	path := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	w.m = metrics.New()
	opts.Observer = w.m
	opts.CacheDir = testkit.CompileCache(t)
	opts.Resolver = testkit.Loopback("api.example.com")
	w.h, err = maiden.New(cfg, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.h.Close(context.Background()) })
	ms := httptest.NewServer(w.m.Handler())
	t.Cleanup(ms.Close)
	w.scrape = ms.URL + "/metrics"
	// Compile every tool now, so that the calls below are timed alone.
	if _, err := w.h.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

func fetchInput(u string) string {
	b, _ := json.Marshal(map[string]string{"url": u})
	return string(b)
}

// TestMetricsAfterRealCalls: after real calls of real tools (a success, a
// tool's failure, an allowed and a refused http-fetch against a TLS server
// on loopback, a fetch the policy allowed that failed, an unknown tool),
// /metrics, scraped over HTTP and parsed as the text format, counts each
// call under its tool and the kind Host.Call returned, each fetch under its
// decision and rule, times every call, and carries the Go and process
// collectors.
func TestMetricsAfterRealCalls(t *testing.T) {
	w := newFetchWorld(t, maiden.Options{Isolation: maiden.InProcess})
	calls := []struct{ tool, input string }{
		{"echo", `{"message":"hi"}`},
		{"echo", `{"message":"again"}`},
		{"toolerr", `{}`},
		{"fetcher", fetchInput(w.base + "/ok")},
		{"fetcher", fetchInput("https://evil.example/")},      // not in http_allow
		{"fetcher", fetchInput("https://api.example.com:1/")}, // not in http_ports
		{"fetcher-noca", fetchInput(w.base + "/ok")},          // allowed, but the CA is unknown
		{"echo", `not json`},
	}
	want := map[[2]string]float64{} // (tool, kind) → calls, from the results
	perTool := map[string]uint64{}
	for _, c := range calls {
		res, err := w.h.Call(context.Background(), maiden.Call{Tool: c.tool, Input: c.input})
		if err != nil {
			t.Fatalf("%s %s: %v", c.tool, c.input, err)
		}
		kind := "ok"
		if !res.OK {
			kind = string(res.Error.Kind)
		}
		want[[2]string{c.tool, kind}]++
		perTool[c.tool]++
	}
	if _, err := w.h.Call(context.Background(), maiden.Call{Tool: "nosuch", Input: `{}`}); !errors.Is(err, maiden.ErrUnknownTool) {
		t.Fatalf("unknown tool: %v", err)
	}
	want[[2]string{"", "unknown-tool"}]++
	perTool[""]++
	// The calls above must have produced the outcomes this test is about.
	for _, k := range [][2]string{{"echo", "ok"}, {"toolerr", "tool"}, {"fetcher", "ok"}, {"echo", "input"}} {
		if want[k] == 0 {
			t.Fatalf("no call ended as %v: %v", k, want)
		}
	}

	fams := scrape(t, w.scrape)
	for k, n := range want {
		if got := value(fams, metrics.CallsTotal, "tool="+k[0], "kind="+k[1]); got != n {
			t.Errorf("%s{tool=%q,kind=%q} = %v, want %v", metrics.CallsTotal, k[0], k[1], got, n)
		}
	}
	if n := len(fams[metrics.CallsTotal].GetMetric()); n != len(want) {
		t.Errorf("%s has %d series, want %d (%v)", metrics.CallsTotal, n, len(want), want)
	}
	for tool, n := range perTool {
		m := sample(fams, metrics.CallDuration, "tool="+tool)
		if m == nil || m.Histogram == nil {
			t.Errorf("no %s for tool %q", metrics.CallDuration, tool)
			continue
		}
		hist := m.Histogram
		if hist.GetSampleCount() != n || hist.GetSampleSum() <= 0 {
			t.Errorf("%s{tool=%q}: count %d, sum %v; want count %d, sum > 0", metrics.CallDuration, tool, hist.GetSampleCount(), hist.GetSampleSum(), n)
		}
		// The text format lists +Inf as a bucket of its own.
		if b := hist.GetBucket(); len(b) != len(metrics.Buckets)+1 || b[0].GetUpperBound() != 50e-6 || b[len(b)-2].GetUpperBound() != 60 || b[len(b)-1].GetCumulativeCount() != n {
			t.Errorf("%s{tool=%q}: buckets %v, want 50µs..60s", metrics.CallDuration, tool, b)
		}
	}
	for _, f := range []struct {
		tool, decision, rule string
	}{
		{"fetcher", "allow", "allowed"},
		{"fetcher", "deny", "allowlist"},
		{"fetcher", "deny", "port"},
		{"fetcher-noca", "allow", "failed"},
	} {
		if got := value(fams, metrics.HTTPFetchTotal, "tool="+f.tool, "decision="+f.decision, "rule="+f.rule); got != 1 {
			t.Errorf("%s{tool=%q,decision=%q,rule=%q} = %v, want 1", metrics.HTTPFetchTotal, f.tool, f.decision, f.rule, got)
		}
	}
	if n := len(fams[metrics.HTTPFetchTotal].GetMetric()); n != 4 {
		t.Errorf("%s has %d series, want 4", metrics.HTTPFetchTotal, n)
	}
	for _, g := range []string{metrics.CallsActive, metrics.CallsQueued} {
		if got := value(fams, g); got != 0 {
			t.Errorf("%s = %v after every call ended, want 0", g, got)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s: the Go and process collectors are missing", name)
		}
	}
}

// TestMetricsAdmissionGauges: with one turn and room for one waiting call,
// /metrics shows the call that holds the turn (blocked in a real fetch) as
// active, a second as queued, a third refused as overloaded; a waiting
// call whose caller gives up leaves the queue as canceled; the histogram
// holds the blocked call's real duration; and both gauges return to zero.
func TestMetricsAdmissionGauges(t *testing.T) {
	w := newFetchWorld(t, maiden.Options{Isolation: maiden.InProcess, MaxConcurrent: 1, MaxQueued: 1})
	gauges := func() (active, queued float64) {
		fams := scrape(t, w.scrape)
		return value(fams, metrics.CallsActive), value(fams, metrics.CallsQueued)
	}
	waitFor := func(what string, active, queued float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			a, q := gauges()
			if a == active && q == queued {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: active %v, queued %v; want %v, %v", what, a, q, active, queued)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	call := func(ctx context.Context, tool, input string) chan error {
		done := make(chan error, 1)
		go func() {
			res, err := w.h.Call(ctx, maiden.Call{Tool: tool, Input: input})
			if err == nil && !res.OK {
				err = res.Error
			}
			done <- err
		}()
		return done
	}

	blocked := call(context.Background(), "fetcher", fetchInput(w.base+"/block"))
	<-w.entered
	held := time.Now()
	waitFor("a call blocked in a fetch", 1, 0)

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := call(ctx, "echo", `{"message":"waits"}`)
	waitFor("a second call", 1, 1)
	if _, err := w.h.Call(context.Background(), maiden.Call{Tool: "echo", Input: `{"message":"refused"}`}); !errors.Is(err, maiden.ErrOverloaded) {
		t.Fatalf("third call: %v, want ErrOverloaded", err)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting call whose context ended: %v", err)
	}
	waitFor("the waiting call gave up", 1, 0)

	waited := call(context.Background(), "echo", `{"message":"waits its turn"}`)
	waitFor("another call waits", 1, 1)
	time.Sleep(20 * time.Millisecond)
	close(w.release)
	heldFor := time.Since(held)
	for name, done := range map[string]chan error{"blocked": blocked, "waited": waited} {
		if err := <-done; err != nil {
			t.Fatalf("%s call: %v", name, err)
		}
	}
	waitFor("every call ended", 0, 0)

	fams := scrape(t, w.scrape)
	for _, c := range []struct {
		tool, kind string
		n          float64
	}{
		{"fetcher", "ok", 1},
		{"echo", "overloaded", 1},
		{"echo", "canceled", 1},
		{"echo", "ok", 1},
	} {
		if got := value(fams, metrics.CallsTotal, "tool="+c.tool, "kind="+c.kind); got != c.n {
			t.Errorf("%s{tool=%q,kind=%q} = %v, want %v", metrics.CallsTotal, c.tool, c.kind, got, c.n)
		}
	}
	if m := sample(fams, metrics.CallDuration, "tool=fetcher"); m == nil || m.Histogram.GetSampleSum() < heldFor.Seconds() || m.Histogram.GetSampleSum() > heldFor.Seconds()+20 {
		t.Errorf("%s{tool=fetcher}: %v; the call was held for %v", metrics.CallDuration, m, heldFor)
	}
}

// TestHealth: 200 while the server's context lasts, 503 once it has ended.
func TestHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(metrics.Health(ctx))
	defer srv.Close()
	get := func() (int, string) {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK || body != "ok\n" {
		t.Errorf("serving: %d %q, want 200 ok", code, body)
	}
	cancel()
	if code, body := get(); code != http.StatusServiceUnavailable || body != "shutting down\n" {
		t.Errorf("shutting down: %d %q, want 503", code, body)
	}
}

// TestRegistryIsPrivate: two Metrics do not share series, and neither
// touches the global default registry.
func TestRegistryIsPrivate(t *testing.T) {
	a, b := metrics.New(), metrics.New()
	a.CallDone(maiden.CallEvent{Tool: "echo", OK: true, Duration: time.Millisecond})
	count := func(m *metrics.Metrics) int {
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == metrics.CallsTotal {
				return len(f.GetMetric())
			}
		}
		return 0
	}
	if count(a) != 1 || count(b) != 0 {
		t.Errorf("series: a %d, b %d; want 1, 0", count(a), count(b))
	}
	global, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range global {
		if strings.HasPrefix(f.GetName(), "maiden_") {
			t.Errorf("%s is in the global default registry", f.GetName())
		}
	}
}
