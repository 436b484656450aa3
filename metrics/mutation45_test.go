package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// heldCollector holds every collection until released, saying when one
// has begun.
type heldCollector struct {
	desc    *prometheus.Desc
	entered chan struct{}
	release chan struct{}
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	c.entered <- struct{}{}
	<-c.release
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// TestMutation45ScrapesInFlightBounded: with four scrapes held in their
// collection, a fifth is answered 503 at once and never starts a
// collection, so a client cannot pile up collections.
func TestMutation45ScrapesInFlightBounded(t *testing.T) {
	m := metrics.New()
	c := &heldCollector{
		desc:    prometheus.NewDesc("mutation45_held", "held until released", nil, nil),
		entered: make(chan struct{}, 16),
		release: make(chan struct{}),
	}
	m.Registry().MustRegister(c)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	type answer struct {
		code int
		err  error
	}
	get := func() chan answer {
		ch := make(chan answer, 1)
		go func() {
			resp, err := http.Get(srv.URL)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			resp.Body.Close()
			ch <- answer{code: resp.StatusCode}
		}()
		return ch
	}
	var held []chan answer
	for range 4 {
		held = append(held, get())
		<-c.entered
	}
	fifth := get()
	select {
	case a := <-fifth:
		if a.err != nil || a.code != http.StatusServiceUnavailable {
			t.Errorf("a fifth scrape while four are in flight: %d, %v; want 503", a.code, a.err)
		}
	case <-c.entered:
		t.Errorf("a fifth scrape while four are in flight started a collection; want 503 without one")
		held = append(held, fifth)
	}
	close(c.release)
	for i, ch := range held {
		if a := <-ch; a.err != nil || a.code != http.StatusOK {
			t.Errorf("held scrape %d: %d, %v; want 200", i, a.code, a.err)
		}
	}
}

// TestMutation45NilObserver: a nil *Metrics is a nil Observer, so a host
// without metrics never calls into it (a typed nil would panic at the
// first call's end).
func TestMutation45NilObserver(t *testing.T) {
	var m *metrics.Metrics
	if o := m.Observer(); o != nil {
		t.Errorf("(*Metrics)(nil).Observer() = %#v; want a nil maiden.Observer", o)
	}
	var _ maiden.Observer = metrics.New().Observer()
}

// TestMutation45KindOfRefusedCall: a call that could not be made is
// labelled by its error, never by a result kind set beside it.
func TestMutation45KindOfRefusedCall(t *testing.T) {
	m := metrics.New()
	m.CallDone(maiden.CallEvent{Tool: "echo", Err: maiden.ErrOverloaded, Kind: maiden.KindTool})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range fams {
		if f.GetName() != metrics.CallsTotal {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "kind" {
					kinds = append(kinds, l.GetValue())
				}
			}
		}
	}
	if len(kinds) != 1 || kinds[0] != "overloaded" {
		t.Errorf("a call refused with ErrOverloaded beside kind tool: kinds %q; want [overloaded]", kinds)
	}
}
