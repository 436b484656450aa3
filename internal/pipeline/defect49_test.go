package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestRevealedValueAsMethodRedacted (pass 49's defect): a tool that reveals
// a key and sends it as its request's HTTP method (a token of up to 32
// bytes the gate lets through) leaves no copy of the value in the call's
// fetch record, in the http_fetch span or in the gate's log line, as one
// that puts it in the URL's host or path does not (redactFetchBody,
// traceFetch, the gate's Request.Redact): the method is the tool's text as
// they are. testdata/tools/js/revealplace.js is the tool.
func TestRevealedValueAsMethodRedacted(t *testing.T) {
	const value = "sk-VALUE-49c0ffee"
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprint(rw, "hello")
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	var oplog testkit.SyncBuffer
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	dir := t.TempDir()
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.rp]
path = %[1]q
http_allow = ["api.example.com"]
http_ports = [%[2]s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%[3]q]
secrets = ["KEY"]
reveal = ["KEY"]
[agents.a]
tools = ["rp"]
grants = ["tool:invoke rp --...", "network:connect api.example.com:%[2]s", "secret:reveal KEY"]
`, testkit.Component(t, "js/revealplace"), u.Port(), ca), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t),
		Resolver: testkit.Loopback("api.example.com"), StatePath: filepath.Join(dir, "state.db"), TracerProvider: tp,
		Logger:       slog.New(slog.NewTextHandler(&oplog, nil)),
		LookupSecret: func(name string) (string, bool) { return value, name == "KEY" }})
	ctx := context.Background()
	defer h.Close(ctx)
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "rp", Input: `{"key": {"$secret": "KEY"}, "url": "https://api.example.com:` + u.Port() + `/", "method": "{v}"}`})
	if err != nil || !res.OK {
		t.Fatalf("call: %+v, %v", res, err)
	}
	for _, s := range spans.GetSpans() {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), value) {
				t.Errorf("span %s carries the revealed value: %s=%q", s.Name, kv.Key, kv.Value.String())
			}
		}
	}
	recs, err := auditTail(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	fetches := 0
	for _, r := range recs {
		if r.Kind == "fetch" {
			fetches++
		}
		if strings.Contains(string(r.Body), value) {
			t.Errorf("the %s record carries the revealed value: %s", r.Kind, r.Body)
		}
	}
	if fetches != 1 {
		t.Errorf("%d fetch records, want 1: %v", fetches, recs)
	}
	logged := oplog.String()
	if !strings.Contains(logged, "method=[REDACTED:KEY]") || strings.Contains(logged, value) {
		t.Errorf("the operator's log of the call:\n%s\nwant the method redacted (method=[REDACTED:KEY]), no copy of the value", logged)
	}
}
