// Package inbox is the operators' web page, served under /ui by maiden
// serve -http: the approval requests waiting for a human (approve, always
// allow, deny), the recent audit trail with its verify status, and the
// cards of each agent (revoke). A request's own page also says what
// approving it would newly allow (a Backend that is a NewlyBackend): an
// always-card's grant, or a boundary expansion, against what the agent's
// cards or the session's boundary allow today, and the recorded calls it
// would have let through; an edited always-grant can be previewed.
//
// What an agent wrote (a call's arguments, a boundary request's
// justification, audit records, grants) is shown escaped as the CLI shows
// it (internal/safetext), a call's arguments one row each (args.go).
//
// It knows nothing of maiden's host: everything it shows and does goes
// through a Backend (mcpserver adapts *maiden.Host to it), so the
// page is tested with a fake and in a real browser against the real stack.
//
// Only operators get in: the login form takes an operator token (maiden
// operators token NAME) and the backend decides whether it is one (an
// agent's token never is). A login opens a server-side session named by a
// random cookie (HttpOnly, SameSite=Strict, Path=/ui, Secure over TLS);
// the token is re-checked at every request, so revoking it ends its
// sessions at once. Every form carries the session's CSRF token, compared
// in constant time; a POST without it, with a wrong one, or marked
// Sec-Fetch-Site cross-site or same-site is refused with 403. The Origin
// check is the one /mcp has, applied where the handler is mounted.
//
//	h := inbox.New(backend, &inbox.Options{Logger: log})
//	mux.Handle(inbox.Path, h)
//	mux.Handle(inbox.Path+"/", h)
package inbox

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// Path is where the inbox is served; every page is under it.
const Path = "/ui"

// ApprovalPath is the page of one approval request: what an MCP URL
// elicitation opens. Prefix it with the server's base URL.
func ApprovalPath(id string) string { return Path + "/approvals/" + id }

// Errors a Backend returns (wrapped, with what was wrong), so the page can
// answer with the right status and words; test with errors.Is.
var (
	// ErrBadToken: the token is not a live operator token (an agent's
	// token included).
	ErrBadToken = errors.New("not an operator token")
	// ErrNotFound: no approval request or card has that ID.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request was already decided, expired or consumed,
	// or the card is already revoked.
	ErrConflict = errors.New("conflict")
	// ErrRefused: the decision is not allowed (always for a rule that
	// forbids it, an edited grant broader than the call, a card the
	// operator may not revoke). The message says why and is shown.
	ErrRefused = errors.New("refused")
	// ErrAuditBroken: the audit chain does not verify; the message names
	// the first bad record.
	ErrAuditBroken = errors.New("audit trail does not verify")
)

// Backend is what the inbox needs of maiden. Every method may be called
// concurrently. An error that wraps none of the errors above is shown as
// "unavailable" (its text goes to the log only: it may name files).
type Backend interface {
	// AuthenticateOperator returns the operator a token belongs to, or
	// ErrBadToken.
	AuthenticateOperator(ctx context.Context, token string) (name string, err error)
	// Pending lists the requests waiting for a decision, oldest first.
	Pending(ctx context.Context) ([]Approval, error)
	// Approval returns one request, in any state (ErrNotFound).
	Approval(ctx context.Context, id string) (Approval, error)
	// Decide records a decision; it returns the request as decided.
	Decide(ctx context.Context, id string, d Answer) (Approval, error)
	// RecentAudit returns up to limit of the newest audit records, newest
	// first, each body cut to a few KiB if it is longer (saying so).
	RecentAudit(ctx context.Context, limit int) ([]AuditRecord, error)
	// VerifyAudit checks the chain (the records added since its last
	// check, and every record at times): what it found, or an error
	// wrapping ErrAuditBroken that names the first bad record.
	VerifyAudit(ctx context.Context) (AuditCheck, error)
	// Agents lists the declared agents by name.
	Agents(ctx context.Context) ([]string, error)
	// Cards lists an agent's cards, revoked ones included, oldest first.
	Cards(ctx context.Context, agent string) ([]Card, error)
	// RevokeCard revokes a card and its descendants for by
	// ("operator:NAME"), returning how many cards it revoked.
	RevokeCard(ctx context.Context, id, by string) (revoked int, err error)
}

// AuditCheck is what a check of the audit chain found intact.
type AuditCheck struct {
	Records int64 // the records in the chain
	// Whole is when every record was last checked: zero when this check
	// did. Otherwise this check read the Read records added since the last
	// one, and that the last one's last record is still as it was.
	Whole time.Time
	Read  int64
}

// Approval is an approval request as the page shows it (maiden's
// ApprovalRequest).
type Approval struct {
	ID       string
	Agent    string
	Session  string
	Tool     string
	Rendered string // the arguments in the canonical rendering cards match
	Digest   string
	Rule     string // the middleware rule that asked
	Reason   string // and why
	Hosts    []string
	Secrets  []string
	// ToolDigest is the code identity of the tool the call would run and
	// Limits its limits as the human is asked about them: the approval
	// holds only for that tool under that policy ("" if not recorded).
	ToolDigest string
	Limits     string
	Created    time.Time
	Expires    time.Time
	// State is pending, approved, denied, expired, started, done or
	// interrupted.
	State          string
	DecidedBy      string
	Decided        time.Time
	DecisionReason string
	// AllowAlways: the rule lets a human approve "always"; AlwaysGrant is
	// the grant that installs by default (editable on the page).
	AllowAlways bool
	AlwaysGrant string
	// Kind is "call" (or ""): a tool call an approve rule holds; or
	// "boundary": a session asks to widen its sandbox boundary
	// (request_sandbox_boundary). A boundary request's ID is its handle
	// (bnd_...), Session the session it would widen, Reason the agent's
	// justification (its own words: shown as text, never trusted),
	// RequestID the agent's ID for it, Entries and Network what it asks
	// for, and Revision the boundary revision it was made against (once
	// approved, the one it produced). State is pending, approved, denied
	// or conflict (an approval the boundary could not take: an explicit
	// deny, a protected name), with DecisionReason saying why. There is no
	// "always" for it, and no input digest.
	Kind      string
	RequestID string
	Entries   []BoundaryEntry
	Network   bool
	Revision  int64
}

// NewlyBackend is a Backend that can also say what approving a request
// would newly allow; the approval's own page then shows it above the
// decision (a Backend without it shows the page without it).
type NewlyBackend interface {
	// Newly says what approving request id would newly allow: for a call
	// that may be approved always, the always-card of grant ("" for the
	// request's own AlwaysGrant) against the agent's wallet; for a
	// boundary request, its expansion against the session's boundary. A
	// grant the request cannot be approved always with is ErrRefused.
	Newly(ctx context.Context, id, grant string) (Newly, error)
}

// Newly is what approving a request would newly allow (maiden's
// NewlyPossible).
type Newly struct {
	// Window is how far back the recorded calls were looked at.
	Window time.Duration
	// Beyond says in words what each grant (or boundary entry) allows
	// beyond today; Redundant: nothing is new.
	Beyond    []string
	Redundant bool
	// Calls counts the recorded calls of the window, refused or asked,
	// that it would have let through; Examples are the first of them.
	Calls    int
	Examples []NewlyCall
	// NotReplayable counts the recorded calls that could not be replayed
	// (neither counted in Calls nor taken as refused) and Why says why.
	NotReplayable    int
	NotReplayableWhy string
}

// NewlyCall is one recorded call a grant would have let through.
type NewlyCall struct {
	Seq    int64
	At     time.Time
	Target string // what was asked, in the grant language
	Asked  bool   // a human was asked (else it was refused)
}

// KindBoundary is Approval.Kind of a sandbox boundary request.
const KindBoundary = "boundary"

// BoundaryEntry is one filesystem entry a boundary request asks for.
type BoundaryEntry struct {
	Path   string
	Access string // read or write
	Scope  string // exact or subtree
}

// Answer is an operator's answer (maiden's Answer).
type Answer struct {
	Approve bool
	Always  bool
	Grant   string // the edited always-grant; "" = the request's AlwaysGrant
	By      string // "operator:NAME"
	Reason  string
}

// AuditRecord is one record of the audit trail.
type AuditRecord struct {
	Seq   int64
	At    time.Time
	Kind  string
	Actor string
	Agent string
	Tool  string
	Body  string // the record's JSON body (a large one cut, saying so: RecentAudit's)
	Hash  string
}

// Card is a card in an agent's wallet, its grants as text.
type Card struct {
	ID      string
	Agent   string
	Allows  []string // lower-positive grants
	Except  []string // lower-negative
	Ceiling []string // upper-positive
	Forbids []string // upper-negative
	Parents []string
	System  bool
	Manager string
	Created time.Time
	Expires time.Time // zero: never
	Revoked time.Time // zero: not revoked
}

// Options configure the inbox; nil means all defaults.
type Options struct {
	// Logger receives refusals and backend failures (never a token or a
	// session ID); nil discards.
	Logger *slog.Logger
	// SessionTTL is how long a login lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessions bounds the sessions held at once (expired ones are
	// dropped first); 0 means DefaultMaxSessions.
	MaxSessions int
	// AuditLimit is how many audit records the audit page shows; 0 means
	// 100.
	AuditLimit int
	// LoginBurst failed logins a source address (an IPv4 address, an IPv6
	// /64) may make at once, then one more each LoginEvery; past that its
	// logins are answered 429 with Retry-After, the right token included
	// (no oracle). 0 means DefaultLoginBurst and DefaultLoginEvery.
	LoginBurst int
	LoginEvery time.Duration
	// GlobalLoginBurst and GlobalLoginEvery are the same bound for all
	// sources together (a guesser with many addresses); a source that
	// logged in successfully within a day passes it (its own bound still
	// holds). 0 means DefaultGlobalLoginBurst and DefaultGlobalLoginEvery.
	GlobalLoginBurst int
	GlobalLoginEvery time.Duration
}

// Defaults of Options. A source may fail 10 logins at once and then 10 a
// minute; all sources together 100 at once and then 10 a second. An
// operator token is 256 random bits, so the bound is not what keeps it
// from being guessed; it keeps a guesser from using the inbox (and the
// store behind it) as a free oracle at line rate.
const (
	DefaultSessionTTL       = 12 * time.Hour
	DefaultMaxSessions      = 1000
	DefaultLoginBurst       = 10
	DefaultLoginEvery       = 6 * time.Second
	DefaultGlobalLoginBurst = 100
	DefaultGlobalLoginEvery = 100 * time.Millisecond
)

// New returns the inbox's handler. Mount it at Path and Path+"/" behind
// the server's Origin check.
func New(b Backend, o *Options) http.Handler {
	return build(b, o, time.Now)
}

// build is New with the login limiter's clock.
func build(b Backend, o *Options, now func() time.Time) http.Handler {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.AuditLimit <= 0 {
		opts.AuditLimit = 100
	}
	if opts.LoginBurst <= 0 || opts.LoginEvery <= 0 {
		opts.LoginBurst, opts.LoginEvery = DefaultLoginBurst, DefaultLoginEvery
	}
	if opts.GlobalLoginBurst <= 0 || opts.GlobalLoginEvery <= 0 {
		opts.GlobalLoginBurst, opts.GlobalLoginEvery = DefaultGlobalLoginBurst, DefaultGlobalLoginEvery
	}
	in := &inbox{b: b, opts: opts, log: opts.Logger, sessions: newSessions(opts.SessionTTL, opts.MaxSessions),
		limits: newLoginLimiter(rate{opts.LoginBurst, opts.LoginEvery}, rate{opts.GlobalLoginBurst, opts.GlobalLoginEvery}, now)}
	return in.routes()
}
