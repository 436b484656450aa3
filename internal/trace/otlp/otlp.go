// Package otlp builds the OpenTelemetry tracer provider maiden serve
// exports its spans with: OTLP over HTTP (protobuf) or gRPC, configured by
// the standard OTEL_* environment variables, and nothing at all when they
// do not ask for it. It is apart from internal/trace so that only the
// command links the SDK and the exporters (gRPC among them): an embedder
// passes its own provider in maiden.Options.TracerProvider.
//
//	tp, shutdown, err := otlp.FromEnv(ctx)
//	defer shutdown(context.Background())
//	h, err := maiden.New(cfg, &maiden.Options{TracerProvider: tp})
package otlp

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the environment asks for traces to be exported:
// an OTLP endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT), and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none says otherwise. Off by default: an unset
// endpoint exports nothing (the SDK's own default, localhost:4318, is not
// taken as a wish).
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Protocol is the OTLP protocol the environment names:
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf (the specification's default).
func Protocol(getenv func(string) string) string {
	if p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	if p := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" {
		return p
	}
	return "http/protobuf"
}

// FromEnv is the tracer provider the environment asks for, batching spans
// to an OTLP exporter (which reads the endpoint, headers, timeout,
// certificates and compression from the same variables), with service.name
// maiden unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say another;
// shutdown flushes and stops it. When the environment asks for nothing,
// the provider is nil (tracing off) and shutdown does nothing.
func FromEnv(ctx context.Context) (tp oteltrace.TracerProvider, shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if !Enabled(os.Getenv) {
		return nil, none, nil
	}
	var exp sdktrace.SpanExporter
	switch p := Protocol(os.Getenv); p {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, none, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: maiden exports traces over grpc or http/protobuf", p)
	}
	if err != nil {
		return nil, none, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "maiden")), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, none, fmt.Errorf("OTLP trace exporter: resource: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}

// PropagateTo is the list of host patterns http-fetch may carry the call's
// traceparent to, from MAIDEN_TRACE_PROPAGATE (comma-separated, as
// http_allow writes hosts); empty when unset: it identifies the caller.
func PropagateTo(getenv func(string) string) []string {
	var out []string
	for _, h := range strings.Split(getenv("MAIDEN_TRACE_PROPAGATE"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}
