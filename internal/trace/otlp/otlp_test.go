package otlp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
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
