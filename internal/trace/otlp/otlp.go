// Package otlp builds the OpenTelemetry tracer provider maiden serve
// exports its spans with: OTLP over HTTP (protobuf) or gRPC, configured by
// the standard OTEL_* environment variables or agent.toml's [trace] (the
// environment wins), and nothing at all when neither asks for it. It is apart from internal/trace so that only the
// command links the SDK and the exporters (gRPC among them): an embedder
// passes its own provider in maiden.Options.TracerProvider.
//
//	tp, shutdown, err := otlp.New(ctx, otlp.Settings{Endpoint: t.Endpoint, Protocol: t.Protocol}, os.Getenv)
//	defer shutdown(context.Background())
//	h, err := maiden.New(cfg, &maiden.Options{TracerProvider: tp})
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// ErrRedirect is the error of an export the collector answered with a
// redirect: the exporter does not follow one (noRedirect).
var ErrRedirect = errors.New("the OTLP collector answered with a redirect, which maiden does not follow: set the endpoint to where it points")

// Enabled reports whether the environment asks for traces to be exported:
// an OTLP endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT), and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none says otherwise. Off by default: an unset
// endpoint exports nothing (the SDK's own default, localhost:4318, is not
// taken as a wish).
func Enabled(getenv func(string) string) bool {
	if disabled(getenv) {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// disabled: the SDK's kill switches, which turn export off whoever asked.
func disabled(getenv func(string) string) bool {
	return strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none")
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

// Settings are agent.toml's [trace] wishes (config.Trace): an OTLP
// endpoint URL, its protocol, and the hosts a call's traceparent may be
// sent to. The environment's variables take precedence over each.
type Settings struct {
	Endpoint, Protocol string
	PropagateTo        []string
}

// FromEnv is New with no settings: only the environment decides.
func FromEnv(ctx context.Context) (oteltrace.TracerProvider, func(context.Context) error, error) {
	return New(ctx, Settings{}, os.Getenv)
}

// New is the tracer provider the environment, else s, asks for, batching
// spans to an OTLP exporter, with service.name maiden unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say another, sampling
// every call whatever the client's traceparent says unless
// OTEL_TRACES_SAMPLER names a sampler, and never following a collector's
// redirect (ErrRedirect); shutdown flushes and stops it. An endpoint set in the environment
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) wins
// over s.Endpoint, and a protocol set there over s.Protocol; the exporter
// reads its headers, timeout, certificates and compression from the same
// variables either way. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// turn it off even when s asks for it. When nothing asks, the provider is
// nil (tracing off) and shutdown does nothing.
func New(ctx context.Context, s Settings, getenv func(string) string) (tp oteltrace.TracerProvider, shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if disabled(getenv) {
		return nil, none, nil
	}
	fromEnv := Enabled(getenv)
	if !fromEnv && s.Endpoint == "" {
		return nil, none, nil
	}
	proto, where := Protocol(getenv), "OTEL_EXPORTER_OTLP_PROTOCOL"
	if getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") == "" && getenv("OTEL_EXPORTER_OTLP_PROTOCOL") == "" && s.Protocol != "" {
		proto, where = s.Protocol, "agent.toml's trace.otlp_protocol"
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case "grpc":
		var opts []otlptracegrpc.Option
		if !fromEnv {
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case "http/protobuf":
		opts := []otlptracehttp.Option{otlptracehttp.WithProxy(noRedirect)}
		if !fromEnv {
			opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(s.Endpoint)))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, none, fmt.Errorf("%s %q: maiden exports traces over grpc or http/protobuf", where, proto)
	}
	if err != nil {
		return nil, none, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "maiden")), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, none, fmt.Errorf("OTLP trace exporter: resource: %w", err)
	}
	popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if getenv("OTEL_TRACES_SAMPLER") == "" {
		// The SDK's default sampler follows the parent's sampled flag,
		// and a call's parent is the client's traceparent: any agent
		// could then keep its calls out of the operator's traces by
		// sending flags 00. The client's trace context says which trace
		// a call joins, never whether maiden records it. An operator's
		// OTEL_TRACES_SAMPLER is the SDK's to apply, as written.
		popts = append(popts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample(),
			sdktrace.WithRemoteParentNotSampled(sdktrace.AlwaysSample()))))
	}
	p := sdktrace.NewTracerProvider(popts...)
	return p, p.Shutdown, nil
}

// noRedirect is the OTLP/HTTP exporter's proxy function: the
// environment's proxy, as the exporter's own default, for the exports it
// posts, and ErrRedirect for a request a redirect made (http.Client
// follows them, and sets Response only on those). A redirect would send
// the spans, which name hosts and tools, and the collector's credentials
// in OTEL_EXPORTER_OTLP_HEADERS (copied onto the next request whatever
// their name, unlike Authorization) wherever the collector points, plain
// http to another machine included: the endpoint checked
// (config.checkOTLPEndpoint) is the only place they go. It is the proxy
// function rather than an http.Client's CheckRedirect because
// WithHTTPClient would drop the certificates and timeout the exporter
// reads from OTEL_EXPORTER_OTLP_*, while a proxy function keeps them.
// gRPC has no redirects.
func noRedirect(r *http.Request) (*url.URL, error) {
	if r.Response != nil {
		return nil, fmt.Errorf("%w (%s to %s://%s)", ErrRedirect, r.Response.Status, r.URL.Scheme, r.URL.Host)
	}
	return http.ProxyFromEnvironment(r)
}

// tracesURL is the URL spans are posted to over OTLP/HTTP for endpoint,
// read as OTEL_EXPORTER_OTLP_ENDPOINT is: a base URL without a path gets
// the signal's path, /v1/traces; one with a path is used as written.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// PropagateTo is the list of host patterns http-fetch may carry the call's
// traceparent to: MAIDEN_TRACE_PROPAGATE (comma-separated, as http_allow
// writes hosts) when set, else file (agent.toml's trace.propagate_to);
// empty when neither: it identifies the caller.
func PropagateTo(getenv func(string) string, file []string) []string {
	var out []string
	for _, h := range strings.Split(getenv("MAIDEN_TRACE_PROPAGATE"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	if out == nil {
		out = append(out, file...)
	}
	return out
}
