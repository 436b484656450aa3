package maiden

import (
	"context"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/pipeline"
)

// The embedding API's names for what the call path (internal/pipeline)
// decides and reports, and the Host's methods, each delegating to it.

// Errors returned by Host. Tool failures are not among them: those are
// Results with OK false (see ErrorKind).
var (
	// ErrClosed is returned by calls on a closed Host.
	ErrClosed = api.ErrClosed
	// ErrNoConfig is returned by New without a configuration.
	ErrNoConfig = pipeline.ErrNoConfig
	// ErrUnknownTool is returned for a tool name agent.toml does not define.
	ErrUnknownTool = pipeline.ErrUnknownTool
	// ErrOverloaded is returned when MaxConcurrent calls are running and
	// MaxQueued are already waiting.
	ErrOverloaded = pipeline.ErrOverloaded
	// ErrState is returned when a call needs the state store (its agent's
	// cards) and the store cannot answer: the call is refused, never run
	// without its authorization.
	ErrState = pipeline.ErrState
	// ErrUnknownAgent is returned for a call whose agent the configuration
	// does not declare (or, with no [agents], for any agent but
	// DefaultAgent).
	ErrUnknownAgent = pipeline.ErrUnknownAgent
	// ErrNoCommands is returned by CommandHelp for a tool that takes JSON
	// input rather than commands.
	ErrNoCommands = pipeline.ErrNoCommands
	// ErrBadToken is returned by Authenticate for a bearer token that is
	// malformed, unknown, revoked, or whose agent agent.toml no longer
	// declares (one error for all: a caller learns nothing from which).
	ErrBadToken = pipeline.ErrBadToken
	// ErrBadOperatorToken is returned by AuthenticateOperator for a token
	// that is malformed, unknown, revoked, an agent's, or whose operator
	// agent.toml no longer declares (one error for all: a caller learns
	// nothing from which).
	ErrBadOperatorToken = pipeline.ErrBadOperatorToken
	// ErrBadMetricsToken is returned by AuthenticateMetrics for a token that
	// is neither a live operator token nor a live metrics token of an
	// operator agent.toml declares: an agent's token included, always.
	ErrBadMetricsToken = pipeline.ErrBadMetricsToken
	// ErrUnknownSession: no session of that ID in the store (package
	// admin's).
	ErrUnknownSession = admin.ErrUnknownSession
	// ErrUnknownApproval: no approval request of that ID (package admin's).
	ErrUnknownApproval = admin.ErrUnknownApproval
	// ErrApprovalDecided: the request was decided already (package admin's).
	ErrApprovalDecided = admin.ErrApprovalDecided
	// ErrAlwaysRefused: "always" cannot be granted for this request
	// (package admin's).
	ErrAlwaysRefused = admin.ErrAlwaysRefused
)

// DefaultAgent is the agent of every call when agent.toml declares no
// [agents]: bound to every tool, allowed everything.
const DefaultAgent = pipeline.DefaultAgent

// Crash back-off: a tool whose calls cost their worker process CrashLimit
// times in a row has its calls refused at once, as kind unavailable, for
// CrashCoolDown; the first call after the cool-down runs again (one death
// more starts another cool-down, twice as long, up to five minutes). The
// record is of one version of the tool (its component's digest).
const (
	CrashLimit    = pipeline.CrashLimit
	CrashCoolDown = pipeline.CrashCoolDown
)

// Rules of the card checks at http-fetch time, as audit events and the
// Observer name them.
const (
	// RuleNetworkCard: no card of the calling agent allows network:connect
	// to the request's host and port.
	RuleNetworkCard = pipeline.RuleNetworkCard
	// RuleSecretCard: no card of the calling agent allows secret:use of the
	// credential the request attaches.
	RuleSecretCard = pipeline.RuleSecretCard
	// RuleSecretHandle: a request's credential looked like a secret handle
	// but is none of the call's (another call's, or made up).
	RuleSecretHandle = pipeline.RuleSecretHandle
)

const (
	// SecretHandlePrefix starts every secret handle a tool receives.
	SecretHandlePrefix = pipeline.SecretHandlePrefix
	// SecretMarkerPrefix starts the marker that stands for {"$secret":
	// "NAME"} in what decides about a call: its rendering for cards,
	// middleware, approvals and the audit trail.
	SecretMarkerPrefix = pipeline.SecretMarkerPrefix
)

// Audit kinds the call path writes.
const (
	// AuditCallFailed is the audit kind of a call that failed after its
	// call-admitted record (a deadline, a trap, a refused fetch, an output
	// a layer withheld).
	AuditCallFailed = pipeline.AuditCallFailed
	// AuditSecretReveal is the audit kind of a reveal (allowed or refused):
	// the agent, session, tool, secret name, time and outcome; never the
	// value.
	AuditSecretReveal = pipeline.AuditSecretReveal
)

const (
	// ProgressInterval is the least time between two reports a caller
	// sees of one call: a tool that reports faster is coalesced (the
	// newest report waits for the interval; the ones it replaces are
	// dropped), so a tool cannot flood its caller.
	ProgressInterval = pipeline.ProgressInterval
	// MaxProgressMessage caps a report's message (after redaction).
	MaxProgressMessage = pipeline.MaxProgressMessage
)

// DefaultBoundaryRequestExpiry is how long a boundary request waits for a
// decision before it counts as denied.
const DefaultBoundaryRequestExpiry = pipeline.DefaultBoundaryRequestExpiry

// PinsFileName is the pin file's name next to agent.toml.
const PinsFileName = pipeline.PinsFileName

// Kinds of request in ApprovalRequest.Kind.
const (
	RequestCall     = api.RequestCall
	RequestBoundary = api.RequestBoundary
)

// Resolver looks up host names for http-fetch (api.Resolver).
// *net.Resolver satisfies it.
type Resolver = api.Resolver

// Observer watches calls on their way through the pipeline: admission, how
// each call ended, every http-fetch decision (api.Observer, which says what
// each event holds and how it must behave). Set it in Options.Observer; nil
// costs one nil check at each point.
type Observer = api.Observer

// AdmissionEvent is a change in admission (api.AdmissionEvent).
type AdmissionEvent = api.AdmissionEvent

// CallEvent is how one call ended (api.CallEvent).
type CallEvent = api.CallEvent

// FetchEvent is the decision on one http-fetch request (api.FetchEvent).
type FetchEvent = api.FetchEvent

// Progress is one report of a running tool's progress (api.Progress;
// the relay's rules: internal/progress).
type Progress = api.Progress

// ToolInfo describes one configured tool (api.ToolInfo).
type ToolInfo = api.ToolInfo

// Provenance is an oci:// tool's component digest, signer and schema hash
// (api.Provenance).
type Provenance = api.Provenance

// Policy is a tool's whole effective policy (api.Policy).
type Policy = api.Policy

// SecretDestination is where a secret may be attached (api.SecretDestination).
type SecretDestination = api.SecretDestination

// Hints are a tool's MCP behaviour hints (api.Hints).
type Hints = api.Hints

// LoadReport is what Check found for one tool (api.LoadReport).
type LoadReport = api.LoadReport

// ToolReach is what a tool grant reaches of one tool (api.ToolReach).
type ToolReach = api.ToolReach

// AuditRecord is one record of the audit trail (api.AuditRecord).
type AuditRecord = api.AuditRecord

// ApprovalRequest is a call waiting for (or past) a human's decision
// (api.ApprovalRequest): what Options.OnApproval gets and the inbox shows.
type ApprovalRequest = api.ApprovalRequest

// ApprovalPolicy is the effective policy of a call as the human deciding
// it is shown it (api.ApprovalPolicy).
type ApprovalPolicy = api.ApprovalPolicy

// Answer is a human's answer to an approval request (admin.Answer).
type Answer = admin.Answer

// SessionInfo is a session as operators see it (api.SessionInfo).
type SessionInfo = api.SessionInfo

// DefaultSession is the ID of agent's default session: the one its calls
// run in when they name none and carry no Call.Credential (a call with
// one runs in that credential's own default session).
func DefaultSession(agent string) string { return pipeline.DefaultSession(agent) }

// NewSessionID makes a fresh session ID for OpenSession.
func NewSessionID() string { return pipeline.NewSessionID() }

// InputTooLarge is the one message for an input of n bytes over limit, in
// every front end.
func InputTooLarge(n, limit int64) string { return pipeline.InputTooLarge(n, limit) }

// MaxInputBytes is the largest call input this host accepts now:
// Options.MaxInputBytes if set, else max_input_bytes of the configuration in
// force. Call refuses a larger input before parsing it; a front end that
// reads messages (MCP over stdio or HTTP) bounds them by it plus its own
// envelope, so the one limit applies however the call arrives.
func (h *Host) MaxInputBytes() int64 { return h.p.MaxInputBytes() }

// ToolsFor is Tools as agent sees them: only the tools bound to it, each
// with its policy and hints as the binding narrows them. With no [agents]
// in the configuration, agent must be "" or DefaultAgent and sees every
// tool. Built-in tools are not listed here.
func (h *Host) ToolsFor(ctx context.Context, agent string) ([]ToolInfo, error) {
	return h.p.ToolsFor(ctx, agent)
}

// BuiltinsFor returns the built-in tools agent sees: those bound to it in
// agent.toml whose card:VERB grant (card:inspect for cards_list,
// card:derive, card:transfer, card:revoke) one of its live cards allows on
// a card it holds. The answer follows the store: a grant or revocation
// changes it at the next call. A configuration without [agents] has none.
func (h *Host) BuiltinsFor(ctx context.Context, agent string) ([]ToolInfo, error) {
	return h.p.BuiltinsFor(ctx, agent)
}

// CallBuiltin runs the built-in tool call.Tool for call.Agent. A built-in
// the agent does not see (not bound, or no card allows its verb) is
// ErrUnknownTool, as for any tool that does not exist for it. A refused
// operation is a Result of kind denied whose message names the store's
// rule (not-allowed, lower-bound-too-broad, card-expired, system-card,
// ...); malformed input (a grant that does not parse: where and what was
// expected) is kind input. A store that cannot answer is ErrState.
//
// A built-in's call is a call like any tool's (Call): the same pipeline,
// its backend (builtinBackend) deciding what differs. CallBuiltin only
// refuses a name that is not a built-in here (a [tools] entry of the same
// name shadows it).
func (h *Host) CallBuiltin(ctx context.Context, call Call) (Result, error) {
	return h.p.CallBuiltin(ctx, call)
}

// GrantReach reports, for the tool grant text (`tool:invoke greet
// --message=hi`), what it reaches of each tool bound to agent whose name it
// matches (none: the agent has no such tool now). A text that is not a grant
// is an error naming the column.
func (h *Host) GrantReach(ctx context.Context, agent string, text string) ([]ToolReach, error) {
	return h.p.GrantReach(ctx, agent, text)
}

// OnToolsChanged registers f, called when an imported server's tool list
// changes (front ends tell their clients: notifications/tools/list_changed).
func (h *Host) OnToolsChanged(f func()) {
	h.p.OnToolsChanged(f)
}

// AuthenticateOperator returns the operator (an [operators.NAME] of
// agent.toml) a bearer token minted by `maiden operators token NAME`
// belongs to. Operator tokens are another principal kind than agent
// tokens, in the store as here: an agent's token is never an operator's
// (so no agent can decide an approval request, its own included), and
// Authenticate never accepts an operator's. It asks the state store every
// time, so a revocation by any process holds from the next request. A
// configuration without [operators] has no operator tokens: every token is
// ErrBadOperatorToken. A store that cannot answer is ErrState.
func (h *Host) AuthenticateOperator(ctx context.Context, token string) (name string, err error) {
	return h.p.AuthenticateOperator(ctx, token)
}

// AuthenticateMetrics returns the operator a bearer token presented at
// /metrics belongs to: an operator's own token, or a scraper's metrics
// token (maiden operators token -role metrics NAME), whose operator
// agent.toml declares. An agent's token never reads /metrics: the metrics
// name every tool of every agent. A store that cannot answer is ErrState.
func (h *Host) AuthenticateMetrics(ctx context.Context, token string) (name string, err error) {
	return h.p.AuthenticateMetrics(ctx, token)
}

// MCPPinsPath is the file the accepted definitions of imported tools are
// kept in ("" when they are kept in memory only).
func (h *Host) MCPPinsPath() string {
	return h.p.MCPPinsPath()
}

// OpenSession opens a new session of agent, starting at the boundary
// agent.toml gives it, and returns its ID (the session_open built-in; an
// embedder's own sessions).
func (h *Host) OpenSession(ctx context.Context, agent string) (string, error) {
	return h.p.OpenSession(ctx, agent)
}

// Authenticate returns the agent a bearer token (from maiden agents token)
// belongs to. It asks the state store every time, so a token revoked by any
// process stops working at the next request. A configuration without
// [agents] has no agent tokens: every token is ErrBadToken. A store that
// cannot answer is ErrState.
func (h *Host) Authenticate(ctx context.Context, token string) (agent string, err error) {
	return h.p.Authenticate(ctx, token)
}

// TokenCredential is the credential of an agent token Authenticate
// accepted, as Call.Credential names it: "token:" and the token's ID (what
// maiden agents tokens lists; never its secret). "" for a string that is
// not an agent token.
func TokenCredential(token string) string { return pipeline.TokenCredential(token) }

// Tools loads every configured tool (compiling it if needed) and returns
// what each says about itself, in name order. A tool that cannot be loaded
// is listed with its Error set. The error is ctx's when ctx ended,
// ErrClosed after Close, or a failure of maiden itself (a worker process
// that cannot be started), never a tool's.
func (h *Host) Tools(ctx context.Context) ([]ToolInfo, error) {
	return h.p.Tools(ctx)
}

// Check loads every tool and reports each one's fate, in name order. The
// error return is only for ctx.
func (h *Host) Check(ctx context.Context) ([]LoadReport, error) {
	return h.p.Check(ctx)
}

// CommandHelp is the help text of a command of a tool that describes
// itself as a command tree — a wrapped CLI ([clis.NAME]) or a WebAssembly
// tool whose schema() is a command description — at path (command names
// or aliases; none: the tool itself). It is what `maiden help TOOL
// [COMMAND...]` prints. A tool whose command description is unusable is
// an error naming the problem; a tool that takes JSON input is
// ErrNoCommands; an unknown tool ErrUnknownTool.
func (h *Host) CommandHelp(ctx context.Context, tool string, path ...string) (string, error) {
	return h.p.CommandHelp(ctx, tool, path...)
}

// ImportedDefinition is what an imported tool shows agents
// (api.ImportedDefinition).
type ImportedDefinition = api.ImportedDefinition

// ImportReview is one tool of an import as an operator reviews it before
// accepting (api.ImportReview).
type ImportReview = api.ImportReview

// ReviewImport starts import name (an [mcp.NAME] of agent.toml) if need be
// and returns each of its tools as the upstream offers it now, against what
// was accepted. An upstream that is not up is an error.
func (h *Host) ReviewImport(ctx context.Context, name string) ([]ImportReview, error) {
	return h.p.ReviewImport(ctx, name)
}

// AcceptImport pins the definitions of reviews (from ReviewImport): what
// the operator was shown is what is accepted, even if the upstream has
// changed since.
func (h *Host) AcceptImport(reviews []ImportReview) error {
	return h.p.AcceptImport(reviews)
}
