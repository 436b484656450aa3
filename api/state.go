package api

import (
	"encoding/json"
	"time"
)

// This file is the operators' vocabulary: what the state store holds, as the
// root package (Host.Pending, Host.Cards, Host.Session, Host.AuditTail), the
// public admin package and the front ends show it. Their JSON is what
// `maiden pending -json`, `cards show -json`, `sessions show -json` and
// `audit tail -json` print; it does not change with maiden's internals.

// ApprovalRequest is a call waiting for (or past) a human's decision, with
// everything the human needs to decide: what would run, as whom, what it
// may reach and spend, and which rule asked.
type ApprovalRequest struct {
	ID       string `json:"id"`
	Agent    string `json:"agent"`
	Session  string `json:"session"`
	Tool     string `json:"tool"`
	Rendered string `json:"rendered"` // the arguments in the canonical rendering cards match
	Digest   string `json:"digest"`   // SHA-256 (hex) of the exact input
	Rule     string `json:"rule"`     // the middleware that asked (e.g. "middleware[1] approve")
	Reason   string `json:"reason"`   // and why
	// Hosts and Secrets are what the call may reach and the credential
	// names it may spend, from the tool's policy as the agent's binding
	// narrows it, as it was when the call asked (empty: none).
	Hosts   []string `json:"hosts"`
	Secrets []string `json:"secrets"`
	// ToolDigest is the code identity of the tool the call would run
	// ("sha256:<hex>" of a WebAssembly component, "cli:<hex>" of a wrapped
	// CLI's program and command configuration, "mcp:<hex>" of an imported
	// tool's upstream and schema) and Policy its whole effective policy
	// (network, hosts, ports, secrets and where they may go, limits,
	// paths): the approval holds only for that tool under that policy.
	// Both are empty (Policy nil) for a request made before maiden
	// recorded them, which releases no call.
	ToolDigest string          `json:"tool_digest"`
	Policy     *ApprovalPolicy `json:"policy,omitempty"`
	Created    time.Time       `json:"created"`
	Expires    time.Time       `json:"expires"`
	// State is pending, approved, denied, expired, started, done or
	// interrupted.
	State          string    `json:"state"`
	DecidedBy      string    `json:"decided_by,omitempty"`
	Decided        time.Time `json:"decided,omitzero"`
	DecisionReason string    `json:"decision_reason,omitempty"`
	// AllowAlways reports whether the rule that asked lets a human approve
	// "always"; AlwaysGrant is the grant such an approval would install by
	// default (the approved call exactly, as a card grant).
	AllowAlways bool   `json:"allow_always"`
	AlwaysGrant string `json:"always_grant"`
	// Kind is RequestCall (a tool call an approve rule holds) or
	// RequestBoundary (a session asks to widen its sandbox boundary:
	// request_sandbox_boundary). A boundary request's ID is its handle,
	// Session the session it would widen, Rendered its expansion as JSON
	// (also in Expansion), Reason the agent's justification, and Revision
	// the boundary revision it was made against (then, once approved, the
	// one it produced).
	Kind      string          `json:"kind"`
	Expansion json.RawMessage `json:"expansion,omitempty"`
	Revision  int64           `json:"revision,omitempty"`
}

// Kinds of request in ApprovalRequest.Kind.
const (
	RequestCall     = "call"
	RequestBoundary = "boundary"
)

// ApprovalPolicy is the effective policy of a call as the human deciding
// it is shown it: what the tool may reach, spend and use. It is the tool's
// policy as the agent's binding narrows it, read from the configuration
// the call runs under.
type ApprovalPolicy struct {
	// Network is whether the tool may reach any host at all.
	Network bool     `json:"network"`
	Hosts   []string `json:"hosts"`
	// Ports are the destination ports allowed besides 443; CIDRs the
	// special-purpose address ranges opened; CAFiles extra trust anchors.
	Ports            []uint16 `json:"http_ports"`
	CIDRs            []string `json:"http_allow_cidrs"`
	CAFiles          []string `json:"http_ca_files"`
	MaxResponseBytes int64    `json:"http_max_response_bytes"`
	// Secrets are the credential names it may spend, SecretDestinations
	// where each may be sent, Reveal those whose value it may read back.
	Secrets            []string                             `json:"secrets"`
	SecretDestinations map[string]ApprovalSecretDestination `json:"secret_destinations,omitempty"`
	Reveal             []string                             `json:"reveal"`
	// Limits.
	TimeoutMS int64  `json:"timeout_ms"`
	MemoryMB  uint64 `json:"memory_mb"`
	// FS is a WebAssembly tool's filesystem policy ("", read, write).
	FS string `json:"fs,omitempty"`
	// A wrapped CLI's or a stdio MCP server's Landlock paths, whether it
	// runs unconfined, and the names of the environment it gets.
	ReadPaths      []string `json:"read_paths,omitempty"`
	WritePaths     []string `json:"write_paths,omitempty"`
	Unconfined     bool     `json:"unconfined,omitempty"`
	Env            []string `json:"env,omitempty"`
	MaxOutputBytes int64    `json:"max_output_bytes,omitempty"`
	// An imported tool's upstream (its URL, or its command line) and the
	// credential maiden sends it.
	Upstream   string `json:"upstream,omitempty"`
	Credential string `json:"credential,omitempty"`
}

// ApprovalSecretDestination is where one secret of an ApprovalPolicy may
// be sent ([secrets.NAME] of agent.toml): hosts, methods and path prefixes
// (empty: any).
type ApprovalSecretDestination struct {
	Hosts        []string `json:"hosts"`
	Methods      []string `json:"methods,omitempty"`
	PathPrefixes []string `json:"path_prefixes,omitempty"`
	// Kind and Settings: how the secret is attached (SecretDestination).
	Kind     string            `json:"kind,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
}

// AuditRecord is one record of the hash-chained audit trail. Body is a
// JSON value (nil means null); Prev and Hash chain it to the record before.
type AuditRecord struct {
	Seq   int64           `json:"seq"`
	At    time.Time       `json:"at"`
	Kind  string          `json:"kind"`
	Actor string          `json:"actor"`
	Agent string          `json:"agent"`
	Tool  string          `json:"tool"`
	Body  json.RawMessage `json:"body"`
	Prev  string          `json:"prev"`
	Hash  string          `json:"hash"`
}

// Card is a permission card in an agent's wallet (docs/cards.md): its four
// grant lists, lineage and state.
type Card struct {
	ID      string   `json:"id"`
	Holder  string   `json:"agent"`             // the agent whose wallet holds it
	Parents []string `json:"parents,omitempty"` // the cards it was derived from
	// LowerPos is what the card allows; LowerNeg exceptions inside this
	// same card; UpperPos, when not empty, a ceiling over the whole wallet;
	// UpperNeg what it forbids across the whole wallet.
	LowerPos []CardGrant `json:"lower_positive,omitempty"`
	LowerNeg []CardGrant `json:"lower_negative,omitempty"`
	UpperPos []CardGrant `json:"upper_positive,omitempty"`
	UpperNeg []CardGrant `json:"upper_negative,omitempty"`
	Expires  time.Time   `json:"expires,omitzero"` // zero: never
	// Bound ties an approve:always card to the tool and policy a human was
	// shown when approving.
	Bound string `json:"bound,omitempty"`
	// Budgets are the card's budgets (docs/cards.md, "Budgets"), in the
	// order calls, wall_ms, bytes_out, cost: each with what the card has
	// spent (its own calls and its descendants') and what is left.
	Budgets []CardBudget `json:"budgets,omitempty"`
	System  bool         `json:"system,omitempty"` // from the operator's configuration
	Manager string       `json:"manager"`          // "operator", "system" or the deriving agent
	Created time.Time    `json:"created"`
	Revoked time.Time    `json:"revoked,omitzero"` // zero while it counts
}

// ExpiredAt reports whether c has expired at time t.
func (c Card) ExpiredAt(t time.Time) bool { return !c.Expires.IsZero() && !t.Before(c.Expires) }

// CardBudget is one budget of a card: its key (calls, wall_ms, bytes_out or
// cost), its limit, what the card has spent and what is left (never below
// 0: bytes are charged after a call and may go over, and wall time by a
// call's teardown past its reservation).
type CardBudget struct {
	Key   string `json:"key"`
	Limit int64  `json:"limit"`
	Spent int64  `json:"spent"`
	Left  int64  `json:"left"`
}

// CardGrant is one grant of a card ("class:verb resource", in its
// canonical form) and its recipient: the agent that may use it ("" or "*"
// for whichever agent holds the card).
type CardGrant struct {
	Grant     string `json:"grant"`
	Recipient string `json:"recipient,omitempty"`
}

// String is the grant, with its recipient when it names one.
func (g CardGrant) String() string {
	if g.Recipient == "" || g.Recipient == "*" {
		return g.Grant
	}
	return g.Grant + " (for " + g.Recipient + ")"
}

// SessionInfo is a session as operators see it (maiden sessions): its
// agent, times and current boundary, and (from a lookup of one session)
// every revision of the boundary and every boundary request.
type SessionInfo struct {
	ID       string    `json:"id"`
	Agent    string    `json:"agent"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used,omitzero"` // to within a minute (Host.TouchSession)
	Ended    time.Time `json:"ended,omitzero"`
	Boundary Boundary  `json:"boundary"`
	// Credential is the credential the session is bound to besides its
	// agent (Call.Credential of the session_open call that opened it;
	// "" for none). Not a secret: a token's ID.
	Credential string            `json:"credential,omitempty"`
	Revisions  []SessionRevision `json:"revisions,omitempty"`
	Requests   []BoundaryRequest `json:"requests,omitempty"`
}

// Boundary is a session's ExecutionBoundary (docs/boundaries.md): who
// governs it (Kind: managed, bypass or external), its revision, the
// filesystem profile (restricted, workspace-write or unrestricted) and its
// entries, deny roots and protected names, and whether network is enabled.
type Boundary struct {
	Kind       string          `json:"kind"`
	Revision   int64           `json:"revision"`
	Filesystem string          `json:"filesystem"`
	Workspace  string          `json:"workspace,omitempty"` // workspace-write only
	Entries    []BoundaryEntry `json:"entries"`
	Deny       []string        `json:"deny"`
	Protected  []string        `json:"protected"`
	Network    bool            `json:"network"`
}

// Values of Boundary.Kind and Boundary.Filesystem.
const (
	BoundaryManaged  = "managed"  // maiden enforces it and a human can widen it
	BoundaryBypass   = "bypass"   // no boundary: every access passes
	BoundaryExternal = "external" // someone else's: maiden can neither check nor widen it

	FSRestricted     = "restricted"      // only the entries
	FSWorkspaceWrite = "workspace-write" // read everywhere, write in the workspace and /tmp, plus the entries
	FSUnrestricted   = "unrestricted"    // read and write everywhere
)

// BoundaryEntry is one filesystem entry of a boundary: Access read or
// write (write covers read), Match exact or subtree.
type BoundaryEntry struct {
	Path   string `json:"path"`
	Access string `json:"access"`
	Match  string `json:"match"`
}

// SessionRevision is one revision of a session's boundary, with when and
// why it was made ("initial", "approved request ID (bnd_...) by
// operator:ann", "reset by cli:root").
type SessionRevision struct {
	Session  string    `json:"session"`
	Revision int64     `json:"revision"`
	Boundary Boundary  `json:"boundary"`
	At       time.Time `json:"at"`
	Why      string    `json:"why"`
}

// BoundaryRequest is a stored request to widen a session's boundary.
// Handle is global (what maiden approve and maiden deny take); Request.ID
// is the client's ID, unique within the session.
type BoundaryRequest struct {
	Handle    string                `json:"handle"`
	Session   string                `json:"session"`
	Agent     string                `json:"agent"`
	Request   BoundaryRequestDetail `json:"request"`
	Created   time.Time             `json:"created"`
	Expires   time.Time             `json:"expires"`
	Decided   time.Time             `json:"decided,omitzero"`
	DecidedBy string                `json:"decided_by,omitempty"`
}

// BoundaryRequestDetail is what a session asked for and how it ended:
// Status pending, approved, denied or conflict; Expansion the canonical
// JSON of the expansion ({"filesystem":{"entries":[...]},"network":{...}});
// Reason the outcome's reason once settled; Revision, once approved, the
// revision that holds the expansion.
type BoundaryRequestDetail struct {
	ID            string          `json:"id"`
	Status        string          `json:"status"`
	BaseRevision  int64           `json:"baseRevision"`
	BaseKind      string          `json:"baseKind"`
	Expansion     json.RawMessage `json:"expansion"`
	Justification string          `json:"justification"`
	Reason        string          `json:"reason,omitempty"`
	Revision      int64           `json:"revision,omitempty"`
}
