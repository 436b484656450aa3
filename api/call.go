package api

import (
	"encoding/json"
	"time"
)

// Call is one request to run a tool (maiden.Call, Host.Call's argument).
type Call struct {
	// Agent is who is calling: an [agents.NAME] of agent.toml. With no
	// [agents] declared it must be "" or maiden.DefaultAgent; with agents declared
	// it is required. A tool not bound to the agent is maiden.ErrUnknownTool.
	Agent string
	// Tool is the tool's name in agent.toml.
	Tool string
	// Input is the JSON text passed to the tool's execute function.
	Input string
	// OnLog, if set, sees each of the tool's log lines as it is written, on
	// the tool's thread; it must not block. Lines are redacted as the
	// call's redact middleware says before OnLog sees them. A call that a
	// middleware component watches (its when held) is the exception: its
	// lines are held until the component has judged the result and its
	// logs, then OnLog sees those it let through, in order, on Call's own
	// goroutine, before Call returns (none if it rejected the call).
	OnLog func(LogEntry)
	// OnProgress, if set, sees the tool's own progress reports (an
	// imported MCP server's notifications/progress for this call), each
	// value above the last, at most one per ProgressInterval (the newest
	// wins), the message redacted like the logs and capped; all before
	// Call returns. It must not block. See Progress. A call that a
	// middleware component watches reports no progress (a report could
	// carry what the component would withhold).
	OnProgress func(Progress)
	// Session names the caller's session ("" for none: the default
	// session of Agent and Credential); middleware conditions and
	// approvals see it.
	Session string
	// Credential names the credential the caller authenticated with
	// beyond its agent ("token:" and an agent token's ID over HTTP;
	// "stdio" for mcpserver's stdio front end; "" for none), never a
	// secret. A session the session_open built-in
	// opens is bound to it (SessionInfo.Credential), so that a front end
	// can refuse its handle to any other credential of the same agent;
	// and a call naming no Session runs in this credential's own default
	// session ("default-AGENT/" and the credential; the agent's,
	// "default-AGENT", without one), so that a boundary widened there is
	// not another credential's. It must then be visible ASCII (a session
	// ID's characters).
	Credential string
	// ApprovalWait is how long the call waits for a human when a rule asks
	// for approval: 0 means maiden.Options.ApprovalWait; < 0 means not at all
	// (the result is kind pending at once, with the request's ID).
	ApprovalWait time.Duration
	// OnApproval, if set, is called once when the call starts waiting for
	// a human, after the request is stored (front ends show the request
	// or point the user at the inbox page). It must not block.
	OnApproval func(ApprovalRequest)
	// TraceParent and TraceState are the caller's W3C trace context (the
	// traceparent and tracestate of an MCP request's _meta or HTTP
	// headers): the call's spans join that trace, and its audit records
	// name the trace ID, whether or not spans are exported. "" starts a
	// new trace when tracing is on.
	TraceParent string
	TraceState  string
}

// Result is the outcome of a call the tool ran (or tried to run).
type Result struct {
	Tool string `json:"tool"`
	OK   bool   `json:"ok"`
	// Output is the tool's output; set when OK.
	Output string `json:"output,omitempty"`
	// Error says why the call failed; set when not OK.
	Error *ToolError `json:"error,omitempty"`
	// Logs are the tool's log lines, in order, within the per-call limit.
	Logs []LogEntry `json:"logs"`
	// Duration is the call's wall time.
	Duration time.Duration `json:"-"`
	// Unconfined is set when a wrapped CLI ran without Landlock (its
	// [clis.NAME] says unconfined = true on a kernel that has none).
	Unconfined bool `json:"unconfined,omitempty"`
}

// MarshalJSON adds duration_ms, the envelope field the CLI documents.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	logs := r.Logs
	if logs == nil {
		logs = []LogEntry{}
	}
	p := plain(r)
	p.Logs = logs
	return json.Marshal(struct {
		plain
		DurationMS float64 `json:"duration_ms"`
	}{p, float64(r.Duration.Microseconds()) / 1000})
}
