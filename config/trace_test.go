package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTraceTable: [trace] names where spans go and where a call's
// traceparent may be sent; every mistake is reported at its line and key,
// and plain http only reaches a collector on loopback.
func TestTraceTable(t *testing.T) {
	for _, tt := range []struct {
		name, toml string
		want       Trace
		wantErr    string
	}{
		{name: "absent", toml: "", want: Trace{}},
		{name: "https, grpc, two hosts", toml: "[trace]\notlp_endpoint = \"https://otel.example.com:4317\"\notlp_protocol = \"grpc\"\npropagate_to = [\"API.example.com\", \"*.svc.example.com\"]",
			want: Trace{Endpoint: "https://otel.example.com:4317", Protocol: TraceProtocolGRPC, PropagateTo: []string{"api.example.com", "*.svc.example.com"}, Line: 2}},
		{name: "http to loopback, default protocol", toml: "[trace]\notlp_endpoint = \"http://127.0.0.1:4318\"",
			want: Trace{Endpoint: "http://127.0.0.1:4318", Protocol: TraceProtocolHTTP, Line: 2}},
		{name: "http to localhost", toml: "[trace]\notlp_endpoint = \"http://localhost:4318/v1/traces\"",
			want: Trace{Endpoint: "http://localhost:4318/v1/traces", Protocol: TraceProtocolHTTP, Line: 2}},
		{name: "plain http to another machine", toml: "[trace]\notlp_endpoint = \"http://otel.example.com:4318\"",
			wantErr: `agent.toml:3: trace.otlp_endpoint: "http://otel.example.com:4318" is plain http to another machine: use https, or http only to a collector on loopback (127.0.0.1, ::1, localhost)`},
		{name: "user info", toml: "[trace]\notlp_endpoint = \"https://u:p@otel.example.com\"",
			wantErr: `agent.toml:3: trace.otlp_endpoint: "https://u:p@otel.example.com" holds user info: give the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS, never in agent.toml`},
		{name: "not a URL", toml: "[trace]\notlp_endpoint = \"otel.example.com:4317\"",
			wantErr: `agent.toml:3: trace.otlp_endpoint: "otel.example.com:4317" is not an endpoint URL: write it as "https://collector.example.com:4318" (or http://127.0.0.1:4318 for a collector on this machine)`},
		{name: "protocol", toml: "[trace]\notlp_protocol = \"http/json\"",
			wantErr: `agent.toml:3: trace.otlp_protocol: "http/json" is not an OTLP protocol maiden exports with: use "http/protobuf" or "grpc"`},
		{name: "host pattern", toml: "[trace]\npropagate_to = [\"https://api.example.com\"]",
			wantErr: `agent.toml:3: trace.propagate_to[0]: invalid host pattern "https://api.example.com"`},
		{name: "unknown key", toml: "[trace]\nendpoint = \"https://otel.example.com\"",
			wantErr: `agent.toml:3: trace.endpoint: unknown key; valid keys here: otlp_endpoint, otlp_protocol, propagate_to`},
		{name: "not a table", toml: "trace = \"on\"",
			wantErr: `agent.toml:2: trace: must be a table ([trace]), got string "on"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := "version = 1\n" + tt.toml + "\n[tools.w]\npath = \"w.wasm\"\n"
			cfg, err := parse("agent.toml", []byte(src), "/base", fakeFiles(t))
			if tt.wantErr != "" {
				if err == nil || len(err.Error()) < len(tt.wantErr) || err.Error()[:len(tt.wantErr)] != tt.wantErr {
					t.Fatalf("parse error:\n%v\nwant it to start with:\n%s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Trace()
			if len(got.PropagateTo) == 0 {
				got.PropagateTo = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Trace (-want +got):\n%s", diff)
			}
		})
	}
}
