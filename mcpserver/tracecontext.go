package mcpserver

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// W3C trace context of a tools/call (SEP-414): the traceparent and
// tracestate keys of the request's _meta, else the HTTP request's headers
// of the same names. maiden.Call carries them; the Host's spans join that
// trace (when tracing is on) and the call's audit records name its ID.
const (
	MetaTraceParent = "traceparent"
	MetaTraceState  = "tracestate"
)

// Bounds on what is kept of a client's trace context: a version-00
// traceparent is 55 characters, and W3C caps tracestate at 32 members
// (512 characters is the size vendors are told to keep). Anything longer
// is dropped, not cut: a cut value would name another trace.
const (
	maxTraceParent = 128
	maxTraceState  = 512
)

// callTrace is the trace context a tools/call carries ("" for none).
func callTrace(req *mcp.CallToolRequest) (traceparent, tracestate string) {
	meta := req.Params.GetMeta()
	parent, _ := meta[MetaTraceParent].(string)
	state, _ := meta[MetaTraceState].(string)
	if parent == "" && req.Extra != nil && req.Extra.Header != nil {
		parent, state = req.Extra.Header.Get("Traceparent"), req.Extra.Header.Get("Tracestate")
	}
	if parent == "" || len(parent) > maxTraceParent {
		return "", ""
	}
	if len(state) > maxTraceState {
		state = ""
	}
	return parent, state
}
