package otlp

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/internal/trace"
)

// TestEnabledOnlyWhenAsked: off unless an OTLP endpoint is set; the SDK's
// own kill switches turn it off again; the protocol defaults to
// http/protobuf and a per-signal variable wins.
func TestEnabledOnlyWhenAsked(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		env  func(string) string
		want bool
	}{
		{env(), false},
		{env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), false},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), true},
		{env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), true},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SDK_DISABLED", "TRUE"), false},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER", "none"), false},
	} {
		if got := Enabled(c.env); got != c.want {
			t.Errorf("Enabled = %v, want %v", got, c.want)
		}
	}
	if p := Protocol(env()); p != "http/protobuf" {
		t.Errorf("default protocol %q", p)
	}
	if p := Protocol(env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")); p != "grpc" {
		t.Errorf("per-signal protocol %q", p)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tp, stop, err := FromEnv(context.Background()); tp != nil || err != nil || stop(context.Background()) != nil {
		t.Errorf("FromEnv with nothing set: %v, %v", tp, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, _, err := FromEnv(context.Background()); err == nil {
		t.Error("http/json accepted")
	}
}

// TestNewFromSettings: agent.toml's endpoint exports spans over OTLP/HTTP
// to /v1/traces of a base URL; an endpoint in the environment wins over
// it; the SDK's kill switch turns both off. The receivers are loopback
// HTTP servers that count what the exporter posts.
func TestNewFromSettings(t *testing.T) {
	receiver := func() (*httptest.Server, *atomic.Int64) {
		n := &atomic.Int64{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
				n.Add(1)
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		t.Cleanup(srv.Close)
		return srv, n
	}
	file, fileGot := receiver()
	env, envGot := receiver()
	export := func(s Settings, getenv func(string) string) bool {
		t.Helper()
		tp, stop, err := New(context.Background(), s, getenv)
		if err != nil {
			t.Fatal(err)
		}
		if tp == nil {
			return false
		}
		_, sp := tp.Tracer("test").Start(context.Background(), "maiden.call")
		sp.End()
		if err := stop(context.Background()); err != nil { // flushes
			t.Fatal(err)
		}
		return true
	}
	none := func(string) string { return "" }

	if !export(Settings{Endpoint: file.URL, Protocol: "http/protobuf"}, none) || fileGot.Load() != 1 {
		t.Fatalf("agent.toml's endpoint: %d exports received", fileGot.Load())
	}
	// The environment wins (the exporter reads the variable itself).
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", env.URL)
	if !export(Settings{Endpoint: file.URL}, os.Getenv) || envGot.Load() != 1 || fileGot.Load() != 1 {
		t.Fatalf("environment over file: env %d, file %d exports", envGot.Load(), fileGot.Load())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if export(Settings{Endpoint: file.URL}, os.Getenv) {
		t.Fatal("OTEL_SDK_DISABLED=true did not turn agent.toml's export off")
	}
	if _, _, err := New(context.Background(), Settings{Endpoint: file.URL, Protocol: "http/json"}, none); err == nil || !strings.Contains(err.Error(), "trace.otlp_protocol") {
		t.Fatalf("a bad protocol from agent.toml: %v", err)
	}

	if got := PropagateTo(none, []string{"api.example.com"}); !slices.Equal(got, []string{"api.example.com"}) {
		t.Errorf("PropagateTo from the file: %v", got)
	}
	if got := PropagateTo(func(k string) string {
		return map[string]string{"MAIDEN_TRACE_PROPAGATE": "a.example.com, b.example.com"}[k]
	}, []string{"api.example.com"}); !slices.Equal(got, []string{"a.example.com", "b.example.com"}) {
		t.Errorf("PropagateTo, environment over file: %v", got)
	}
}

// TestExportFollowsNoRedirect: a collector that answers an export with a
// redirect (to plain http on another port here) gets the export refused
// with ErrRedirect, and the place it points to receives nothing: not the
// spans, and not the collector's credentials (OTEL_EXPORTER_OTLP_HEADERS,
// which net/http copies onto a redirect whatever their name). The
// collector is a real TLS server on loopback whose certificate the
// exporter trusts through OTEL_EXPORTER_OTLP_CERTIFICATE, so the
// environment's TLS settings are shown to still apply; each way of
// configuring the endpoint (agent.toml's, the environment's) and each kind
// of redirect (a 307 re-posts the body, a 302 only the headers) is tried.
func TestExportFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int64
	var leaked atomic.Value
	away := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		leaked.Store(r.Header.Get("X-Collector-Key"))
	}))
	t.Cleanup(away.Close)
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusFound} {
		for _, fromEnv := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/env=%v", code, fromEnv), func(t *testing.T) {
				var reached atomic.Int64
				collector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					reached.Add(1)
					http.Redirect(w, r, away.URL+"/v1/traces", code)
				}))
				t.Cleanup(collector.Close)
				ca := filepath.Join(t.TempDir(), "collector.pem")
				pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: collector.Certificate().Raw})
				if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
					t.Fatal(err)
				}
				t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
				t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=s3cret")
				t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
				s := Settings{Endpoint: collector.URL}
				if fromEnv {
					t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
					s = Settings{}
				} else {
					t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
				}
				tp, stop, err := New(context.Background(), s, os.Getenv)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = stop(context.Background()) })
				_, sp := tp.Tracer("test").Start(context.Background(), "maiden.call")
				sp.End()
				// ForceFlush returns once the export has been answered.
				err = tp.(interface{ ForceFlush(context.Context) error }).ForceFlush(context.Background())
				if reached.Load() == 0 {
					t.Fatalf("the collector was never reached (flush: %v)", err)
				}
				if n := elsewhere.Load(); n != 0 {
					t.Fatalf("the exporter followed the collector's %d redirect: %d request(s) reached %s, X-Collector-Key %q", code, n, away.URL, leaked.Load())
				}
				if !errors.Is(err, ErrRedirect) {
					t.Fatalf("flush after a %d: %v, want ErrRedirect", code, err)
				}
			})
		}
	}
}

// TestClientCannotUnsampleTheCall: the agent's traceparent decides which
// trace maiden's spans join, not whether they exist: a client whose
// traceparent says "not sampled" (flags 00) still has its call's span
// recorded and exported, since otherwise any agent could keep its calls
// out of the operator's traces. An operator's own OTEL_TRACES_SAMPLER is
// left to the SDK.
func TestClientCannotUnsampleTheCall(t *testing.T) {
	var got atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			got.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	tp, stop, err := New(context.Background(), Settings{Endpoint: collector.URL}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop(context.Background()) })
	ctx := trace.Remote(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")
	_, sp := tp.Tracer(trace.Scope).Start(ctx, "maiden.call")
	recording, sampled := sp.IsRecording(), sp.SpanContext().IsSampled()
	sp.End()
	if err := tp.(interface{ ForceFlush(context.Context) error }).ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !recording || !sampled || got.Load() != 1 {
		t.Fatalf("a client's traceparent with flags 00: span recording %v, sampled %v, %d exports reached the collector; want the call's span exported", recording, sampled, got.Load())
	}
}
