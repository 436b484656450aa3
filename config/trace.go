package config

import (
	"net/netip"
	"net/url"
	"strings"
)

// Trace is agent.toml's [trace] table: where maiden serve exports the
// OpenTelemetry spans of each call, and to which hosts http-fetch may
// carry the call's traceparent. The OTEL_EXPORTER_OTLP_* and
// MAIDEN_TRACE_PROPAGATE environment variables, when set, take precedence
// (as environment over file elsewhere in deployments); OTEL_SDK_DISABLED
// and OTEL_TRACES_EXPORTER=none turn export off either way
// (internal/trace/otlp). The zero Trace exports nothing.
type Trace struct {
	// Endpoint is the OTLP endpoint URL (otlp_endpoint): https, or http
	// to a loopback collector only, as a span names hosts and tools.
	Endpoint string
	// Protocol is "http/protobuf" (the default) or "grpc" (otlp_protocol).
	Protocol string
	// PropagateTo are normalised host patterns (propagate_to, written as
	// http_allow entries): off by default, since a traceparent identifies
	// the caller to the destination.
	PropagateTo []string
	// Line is the [trace] table's line (0: absent).
	Line int
}

// Trace returns the [trace] table (a copy).
func (c *Config) Trace() Trace {
	t := c.trace
	t.PropagateTo = append([]string(nil), t.PropagateTo...)
	return t
}

var traceKeys = []string{"otlp_endpoint", "otlp_protocol", "propagate_to"}

// The OTLP protocols maiden's exporter speaks.
const (
	TraceProtocolHTTP = "http/protobuf"
	TraceProtocolGRPC = "grpc"
)

func (c *checker) traceTable(n *tnode) {
	if n.kind != tableNode {
		c.errorf(n.line, "trace", "must be a table ([trace]), got %s", describe(n))
		return
	}
	t := Trace{Protocol: TraceProtocolHTTP, Line: n.line}
	for _, k := range n.order {
		v := n.keys[k]
		key := formatKey([]string{"trace", k})
		switch k {
		case "otlp_endpoint":
			if s, line, ok := c.str(v, key); ok {
				if msg := checkOTLPEndpoint(s); msg != "" {
					c.errorf(line, key, "%s %s", quoteShort(s), msg)
					continue
				}
				t.Endpoint = s
			}
		case "otlp_protocol":
			if s, line, ok := c.str(v, key); ok {
				if s != TraceProtocolHTTP && s != TraceProtocolGRPC {
					c.errorf(line, key, "%s is not an OTLP protocol maiden exports with: use %q or %q", quoteShort(s), TraceProtocolHTTP, TraceProtocolGRPC)
					continue
				}
				t.Protocol = s
			}
		case "propagate_to":
			t.PropagateTo = []string{}
			c.strElems(v, key, func(_ int, ekey string, e *tvalue) {
				p, err := NormalizeHostPattern(e.text)
				if err != nil {
					c.errorf(e.line, ekey, "%v", err)
					return
				}
				t.PropagateTo = append(t.PropagateTo, p)
			})
		default:
			c.unknownKey(v, []string{"trace", k}, traceKeys)
		}
	}
	c.trace = t
}

// checkOTLPEndpoint says what is wrong with an otlp_endpoint ("" if
// nothing): a URL with a scheme and a host, https, or http to a loopback
// address or localhost only (spans name the hosts a call reached and the
// tools it ran; they do not cross a network in the clear).
func checkOTLPEndpoint(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return `is not an endpoint URL: write it as "https://collector.example.com:4318" (or http://127.0.0.1:4318 for a collector on this machine)`
	}
	if u.User != nil {
		return "holds user info: give the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS, never in agent.toml"
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return "is plain http to another machine: use https, or http only to a collector on loopback (127.0.0.1, ::1, localhost)"
	}
	return ""
}

func loopbackHost(h string) bool {
	if strings.EqualFold(strings.TrimSuffix(h, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}
