package maiden_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestEgressSpansBeyondHTTPFetch: the roads out that are not a tool's
// http-fetch have their spans too, under the run's span of the client's
// trace: each CONNECT a wrapped CLI sends to the egress proxy
// (maiden.connect: host, port, the gate's rule, an error status when
// refused), each web_fetch request (maiden.http_fetch, via web_fetch, with
// its traceparent sent to a listed host), and an imported tool's call to
// its upstream MCP server (maiden.mcp_upstream: the import and the tool).
func TestEgressSpansBeyondHTTPFetch(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	parents := map[string][]string{} // host -> traceparents received
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents[r.Host] = append(parents[r.Host], r.Header.Get("Traceparent"))
		mu.Unlock()
		fmt.Fprint(w, "hello")
	}), "api.example.com", "evil.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()

	up := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "add", Description: "adds two integers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(hs.Close)

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`+curlCLI(ca, port, "api.example.com")+`[mcp.calc]
accept_new_tools = true
url = "`+hs.URL+`"

[agents.a]
grants = ["tool:invoke curl --... -- ...", "tool:invoke web_fetch --...", "tool:invoke calc.add --...", "network:connect api.example.com"]
[agents.a.boundary]
network = true
[agents.a.tools.curl]
[agents.a.tools.calc]
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
`, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com", "evil.example.com"),
		TracerProvider: tp, TracePropagateTo: []string{"api.example.com"}}, "echo")
	ctx := context.Background()
	call := func(tool, in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: tool, Input: in, Session: "s1", TraceParent: clientParent})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	curl := func(host string) string {
		return `{"cacert":"` + ca + `","silent":true,"url":"https://` + host + `:` + port + `/"}`
	}
	if res := call("curl", curl("api.example.com")); !res.OK {
		t.Fatalf("curl to a listed host: %+v", res.Error)
	}
	if res := call("curl", curl("evil.example.com")); res.OK || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("curl to a host off the list: %+v", res)
	}
	if res := call("web_fetch", `{"url":"https://api.example.com:`+port+`/"}`); !res.OK {
		t.Fatalf("web_fetch: %+v", res.Error)
	}
	if res := call("calc.add", `{"a":1,"b":2}`); !res.OK {
		t.Fatalf("calc.add: %+v", res.Error)
	}

	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byID[s.SpanContext.SpanID().String()] = s
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, a := range s.Attributes {
			m[string(a.Key)] = a.Value.String()
		}
		return m
	}
	var got []string
	for _, s := range spans.GetSpans() {
		switch s.Name {
		case "maiden.connect", "maiden.mcp_upstream":
		case "maiden.http_fetch":
			if attrs(s)["maiden.fetch.via"] != "web_fetch" {
				continue
			}
		default:
			continue
		}
		if s.SpanContext.TraceID().String() != clientTraceID {
			t.Errorf("%s is in trace %s, not the client's", s.Name, s.SpanContext.TraceID())
		}
		if p, ok := byID[s.Parent.SpanID().String()]; !ok || p.Name != "maiden.run" {
			t.Errorf("%s's parent is %q, want maiden.run", s.Name, p.Name)
		}
		a := attrs(s)
		line := s.Name + " " + s.Status.Code.String()
		for _, k := range []string{"server.address", "server.port", "maiden.egress.rule", "http.request.method", "http.response.status_code", "maiden.mcp.import", "maiden.mcp.tool"} {
			if v, ok := a[k]; ok {
				line += " " + k + "=" + v
			}
		}
		got = append(got, line)
	}
	sort.Strings(got)
	want := []string{
		"maiden.connect Error server.address=evil.example.com server.port=" + port + " maiden.egress.rule=allowlist",
		"maiden.connect Unset server.address=api.example.com server.port=" + port + " maiden.egress.rule=allowed",
		"maiden.http_fetch Unset server.address=api.example.com http.request.method=GET http.response.status_code=200",
		"maiden.mcp_upstream Unset maiden.mcp.import=calc maiden.mcp.tool=add",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// web_fetch carried the call's trace to the listed host; curl's
	// request went through a tunnel maiden cannot see into.
	mu.Lock()
	defer mu.Unlock()
	var withTrace int
	for _, p := range parents["api.example.com:"+port] {
		if strings.Contains(p, clientTraceID) {
			withTrace++
		}
	}
	if withTrace != 1 {
		t.Errorf("traceparents at api.example.com: %q, want one of the client's trace (web_fetch's)", parents["api.example.com:"+port])
	}
}

// TestRevealedValueNotInSpans: a tool that may reveal a key and then puts
// it in the host of an http-fetch's URL (https://VALUE) leaves no copy of
// it in the spans the collector receives, as it leaves none in the trail
// (TestRevealedValueNotInFetchRecords): the fetch span's server.address
// is kept from the values revealed to the call, like the fetch record's
// host. The spans go to whatever collector the operator exports to, which
// is not where a secret's value may be kept either.
func TestRevealedValueNotInSpans(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHostWith(t, `version = 1
[tools.secretuser]
path = %q
http_allow = ["api.example.com"]
secrets = ["SIGNING_KEY"]
reveal = ["SIGNING_KEY"]

[agents.user]
tools = ["secretuser"]
grants = ["tool:invoke secretuser --...", "network:connect api.example.com", "secret:reveal SIGNING_KEY"]
`, maiden.Options{Isolation: maiden.InProcess, TracerProvider: tp, Resolver: testkit.Loopback("api.example.com"),
		LookupSecret: func(name string) (string, bool) { return signingValue, name == "SIGNING_KEY" }}, "go/secretuser")
	// "https:/" + "/" + the value: the value is the URL's host.
	res, err := h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "secretuser",
		Input: `{"token": {"$secret": "SIGNING_KEY"}, "mode": "revealfetch", "url": "https:/"}`})
	if err != nil {
		t.Fatal(err)
	}
	// The tool gives up when its second request is refused: the failure
	// names the refusal.
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("reveal, fetch, give up: %+v, want denied", res)
	}
	fetches := 0
	for _, s := range spans.GetSpans() {
		if s.Name == "maiden.http_fetch" {
			fetches++
		}
		for _, a := range s.Attributes {
			if v := a.Value.String(); strings.Contains(strings.ToLower(v), strings.ToLower(signingValue)) {
				t.Errorf("span %s carries the revealed value: %s=%q", s.Name, a.Key, v)
			}
		}
		if strings.Contains(strings.ToLower(s.Status.Description), strings.ToLower(signingValue)) {
			t.Errorf("span %s's status carries the revealed value: %q", s.Name, s.Status.Description)
		}
	}
	if fetches != 2 {
		t.Fatalf("%d maiden.http_fetch spans, want the tool's 2 fetches", fetches)
	}
}
