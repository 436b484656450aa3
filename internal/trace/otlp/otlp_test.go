package otlp

import (
	"context"
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
