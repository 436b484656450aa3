package otlp

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestEnvironmentProtocolWinsOverTheFile: a protocol the environment sets
// is used whatever agent.toml's says (even one maiden would refuse).
func TestEnvironmentProtocolWinsOverTheFile(t *testing.T) {
	env := func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}[k] }
	tp, stop, err := New(context.Background(), Settings{Endpoint: "http://127.0.0.1:1", Protocol: "http/json"}, env)
	if err != nil || tp == nil {
		t.Fatalf("OTEL_EXPORTER_OTLP_PROTOCOL=grpc over agent.toml's http/json: %v, %v; want the gRPC exporter", tp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = stop(ctx)
}

// TestGRPCExportsToTheFilesEndpoint: agent.toml's endpoint with protocol
// grpc is where the gRPC exporter connects (a loopback listener that sees
// the connection), not the SDK's default.
func TestGRPCExportsToTheFilesEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
			close(accepted)
		}
	}()
	tp, stop, err := New(context.Background(), Settings{Endpoint: "http://" + ln.Addr().String(), Protocol: "grpc"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tp.Tracer("test").Start(context.Background(), "maiden.call")
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flushed := make(chan error, 1)
	go func() { flushed <- tp.(interface{ ForceFlush(context.Context) error }).ForceFlush(ctx) }()
	select {
	case <-accepted:
	case err := <-flushed:
		t.Fatalf("the export ended (%v) and never connected to agent.toml's endpoint %s", err, ln.Addr())
	}
	cancel()
	<-flushed
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = stop(sctx)
}

// TestTracesURL: a base URL, with or without its trailing '/', gets the
// signal's path; a URL with a path is used as written.
func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":          "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":         "http://127.0.0.1:4318/v1/traces",
		"https://collector.example/otlp": "https://collector.example/otlp",
	} {
		if got := tracesURL(in); got != want {
			t.Errorf("tracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}
