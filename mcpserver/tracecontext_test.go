package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTraceContextReachesTheCall: a tools/call's W3C trace context, from
// its _meta (SEP-414) or else the HTTP request's traceparent header, is
// the call's: its audit record names the trace ID (tracing off here, so
// nothing but the parsing is under test). _meta wins over the header; an
// over-long traceparent names no trace.
func TestTraceContextReachesTheCall(t *testing.T) {
	t.Parallel()
	const (
		metaTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
		headerTrace = "0af7651916cd43dd8448eb211c80319c"
	)
	parent := func(id string) string { return "00-" + id + "-00f067aa0ba902b7-01" }
	e := newAgentsEnv(t, agentsTOML)
	e.grant("alice", "tool:invoke echo --...")
	tok, _ := e.token("alice")
	srv := e.httpServer(HTTPOptions{})
	hc := &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + tok}, "Traceparent": {parent(headerTrace)}}}}
	cs, err := e.httpClient(srv.URL, hc)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	for i, meta := range []mcp.Meta{
		{MetaTraceParent: parent(metaTrace), MetaTraceState: "vendor=1"},
		nil, // the header's
		{MetaTraceParent: "00-" + strings.Repeat("a", 200) + "-00f067aa0ba902b7-01"},
	} {
		p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "m" + string(rune('0'+i))}}
		if meta != nil {
			p.Meta = meta
		}
		if r, err := cs.CallTool(ctx, p); err != nil || r.IsError {
			t.Fatalf("call %d: %v %s", i, err, text(r))
		}
	}
	recs, err := e.host.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Kind != "call-admitted" {
			continue
		}
		var b struct {
			TraceID string `json:"trace_id"`
		}
		json.Unmarshal(r.Body, &b)
		got = append(got, b.TraceID)
	}
	if want := []string{metaTrace, headerTrace, ""}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the calls' records name traces %q, want %q", got, want)
	}
}
