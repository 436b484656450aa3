package store

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
)

// Errors of the store; test with errors.Is. The card model's own errors
// (cards.ErrLowerBoundTooBroad, cards.ErrCardRevoked, ...) come back
// wrapped as they are.
var (
	// ErrUnknownAgent: no agent of that name is in the store.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrUnknownCard: no card of that ID is in the store.
	ErrUnknownCard = errors.New("unknown card")
	// ErrUnknownToken: no token of that ID is in the store.
	ErrUnknownToken = errors.New("unknown token")
	// ErrBadToken: the bearer token is malformed, unknown, wrong or revoked
	// (one error for all, so that a caller learns nothing from which).
	ErrBadToken = errors.New("invalid or revoked token")
	// ErrNotAllowed: the acting agent holds no card allowing the card
	// operation (card:derive, card:revoke, card:transfer on that card), or
	// does not hold the card it acts on.
	ErrNotAllowed = errors.New("not allowed")
	// ErrSchemaTooNew: the store file was migrated by a newer maiden.
	ErrSchemaTooNew = errors.New("state store schema is newer than this maiden")
	// ErrUnavailable: the store cannot be reached (a PostgreSQL server
	// down, restarting or unreachable); the message names where. Calls
	// needing the store are refused meanwhile and work again once it is
	// back.
	ErrUnavailable = errors.New("state store unavailable")
	// ErrPrivilege: the PostgreSQL role lacks a privilege the store needs;
	// the message names it (CREATE on the schema, or which privilege on
	// which table).
	ErrPrivilege = errors.New("state store privilege missing")
	// ErrLocked: opening the store needed its write lock (to create or
	// migrate its schema) and another process or connection held it for
	// longer than Options.BusyTimeout; the message says how long Open
	// waited. Opening again once the other writer is done succeeds.
	ErrLocked = errors.New("state store is locked by another writer")
	// ErrBadInput: an argument is malformed (an empty or overlong name, an
	// expiry in the past, ...).
	ErrBadInput = errors.New("bad input")
)

// Actor is who performs a card operation: the operator (the CLI, the
// configuration) or an agent, whose own wallet must then allow it. The zero
// Actor is neither and may do nothing.
type Actor struct {
	agent    string
	operator bool
}

// Operator is the operator: every card operation is allowed to it (the
// attenuation rules still hold).
func Operator() Actor { return Actor{operator: true} }

// AgentActor is agent name acting through its own wallet.
func AgentActor(name string) Actor { return Actor{agent: name} }

// String names the actor as the store records it.
func (a Actor) String() string {
	switch {
	case a.operator:
		return "operator"
	case a.agent != "":
		return "agent:" + a.agent
	}
	return "nobody"
}

// Agent is an identity calls are made as.
type Agent struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// TokenInfo describes a bearer token without its secret.
type TokenInfo struct {
	ID      string    `json:"id"`
	Agent   string    `json:"agent"`
	Created time.Time `json:"created"`
	Revoked time.Time `json:"revoked,omitzero"`
}

// Store is maiden's durable state: agents, token hashes, cards with their
// lineage, and revocations. Every method is one transaction: on any error
// nothing was written. Implementations are safe for concurrent use, and
// several processes may share one store.
//
// The audit trail (audit.go), rate limits and quotas (limits.go),
// durable approvals (approvals.go) and sessions with their boundary
// requests (sessions.go) are further methods.
type Store interface {
	// Close releases the store. Calls after Close fail.
	Close() error

	// EnsureAgent adds agent name if it is not there (agents come from
	// agent.toml; adding one twice is not an error).
	EnsureAgent(ctx context.Context, name string) error
	// Agents lists the agents by name.
	Agents(ctx context.Context) ([]Agent, error)

	// MintToken makes a bearer token for agent. The token is returned once;
	// the store keeps only a hash of its secret.
	MintToken(ctx context.Context, agent string) (token string, info TokenInfo, err error)
	// Authenticate returns the agent a token belongs to, or ErrBadToken.
	// The secret is compared in constant time.
	Authenticate(ctx context.Context, token string) (agent string, err error)
	// Tokens lists agent's tokens ("" for all agents).
	Tokens(ctx context.Context, agent string) ([]TokenInfo, error)
	// RevokeToken revokes a token by its ID (the part before the secret).
	RevokeToken(ctx context.Context, id string) error

	// Grant installs a new card (no parent) in agent's wallet, by the
	// operator. cards.CheckInstall must accept spec for agent.
	Grant(ctx context.Context, agent string, spec cards.Spec) (cards.Card, error)
	// SyncSystemCards makes agent's system cards exactly specs (the grants
	// under the agent in agent.toml): new ones are installed, ones no
	// longer declared are revoked with their descendants.
	SyncSystemCards(ctx context.Context, agent string, specs []cards.Spec) (added, revoked int, err error)
	// Derive makes a child of card parentID in agent to's wallet
	// (attenuation only: cards.CheckDerive). An agent actor must hold the
	// parent and a card allowing card:derive on it.
	Derive(ctx context.Context, actor Actor, parentID, to string, spec cards.Spec) (cards.Card, error)
	// Transfer moves card id to agent to's wallet. An agent actor must hold
	// it and a card allowing card:transfer on it; system cards stay put.
	Transfer(ctx context.Context, actor Actor, id, to string) error
	// Revoke revokes card id and all its descendants, and returns how many
	// cards it revoked. An agent actor must hold the card or an ancestor of
	// it and a card allowing card:revoke on it; system cards only the
	// operator revokes.
	Revoke(ctx context.Context, actor Actor, id string) (int, error)
	// Card returns one card, revoked or not.
	Card(ctx context.Context, id string) (cards.Card, error)
	// Cards lists agent's cards ("" for all), revoked ones included, in the
	// order they were made.
	Cards(ctx context.Context, agent string) ([]cards.Card, error)
	// Wallet pins agent's live cards at time at, in one read.
	Wallet(ctx context.Context, agent string, at time.Time) (*cards.Wallet, error)
	// Generation is a value that changes with every committed change (in
	// any process); compare it for equality only. A caller may keep a
	// pinned wallet while it is unchanged (and until the wallet's
	// NextExpiry).
	Generation(ctx context.Context) (int64, error)

	// AppendAudit appends one record to the hash-chained audit trail in
	// its own transaction (card and token operations append theirs inside
	// their own transaction). A nil error means the record is committed.
	AppendAudit(ctx context.Context, r AuditRecord) (AuditRecord, error)
	// Journal is the audit journal: Append writes a record with one
	// write(2) (durable against the process's death) and a background
	// ingester moves it into the chain; the call path's per-call records
	// go there. Flush waits until they are in.
	Journal() *Journal
	// AuditTail returns up to limit records after sequence number after
	// (limit <= 0: all). It sees records of the journal only once
	// ingested (Journal().Flush first where that matters).
	AuditTail(ctx context.Context, after int64, limit int) ([]AuditRecord, error)
	// AuditPage is AuditTail bounded by the bodies' bytes as well (at
	// least one record is returned when there is one): a page of a reader
	// of the whole trail.
	AuditPage(ctx context.Context, after int64, limit int, maxBytes int64) ([]AuditRecord, error)
	// VerifyAudit flushes this store's journal, then checks the chain:
	// the number of records and the head
	// hash, or an *AuditProblem (wrapping ErrAuditBroken) naming the first
	// bad record and why (edited, deleted, inserted, reordered).
	VerifyAudit(ctx context.Context) (n int64, head string, err error)
	// VerifyAuditFrom checks the records after a mark an earlier check
	// returned (the zero mark: all of them), and that the mark's record is
	// still as it was; with whole, every record. The new mark, or an
	// *AuditProblem ("rewritten" when the chain links but the mark's record
	// changed).
	VerifyAuditFrom(ctx context.Context, from AuditMark, whole bool) (AuditMark, error)
	// ExportAudit writes the trail as JSON lines and a final head line;
	// VerifyExport checks one without a store.
	ExportAudit(ctx context.Context, w io.Writer) (n int64, head string, err error)

	// Take takes cost tokens from a durable token bucket (rate limits).
	Take(ctx context.Context, key BucketKey, rate Rate, cost int64, now time.Time) (allowed bool, wait time.Time, err error)
	// Spend spends cost units of a fixed cost window (quotas).
	Spend(ctx context.Context, key QuotaKey, limit int64, window time.Duration, cost int64, now time.Time) (allowed bool, reset time.Time, err error)
	// ReserveBudget starts a call allowed by card id, costing cost units
	// and running at most maxWallMS, on the budgets of the card and its
	// ancestors (budgets.go): one transaction, a *cards.Exhausted when one
	// is short; the wall time it reserves is the most the call may run.
	ReserveBudget(ctx context.Context, id string, cost, maxWallMS int64) (BudgetSpend, error)
	// ChargeBudget settles a reserved call's wall time and bytes when it
	// ends.
	ChargeBudget(ctx context.Context, sp BudgetSpend, wallMS, bytesOut int64) error
	// SpendBudgetBytes spends a request's bytes of bytes_out before it is
	// sent, or refuses it (a *cards.Exhausted).
	SpendBudgetBytes(ctx context.Context, sp BudgetSpend, n int64) error

	// CreateApproval persists a pending approval request; one beyond the
	// agent's maxPending waiting (DefaultMaxPending when 0) is
	// ErrTooManyPending.
	CreateApproval(ctx context.Context, a Approval, maxPending int) (Approval, error)
	// Approval returns one request.
	Approval(ctx context.Context, id string) (Approval, error)
	// PendingApprovals lists the requests waiting for a decision.
	PendingApprovals(ctx context.Context, now time.Time) ([]Approval, error)
	// Decide approves or denies a pending request (audited in the same
	// transaction); unknown: ErrUnknownApproval; decided or expired:
	// ErrApprovalState.
	Decide(ctx context.Context, id string, approve bool, by, reason string) (Approval, error)
	// FindApproved finds an approved, unconsumed, unexpired request for
	// the same agent, tool and input digest.
	FindApproved(ctx context.Context, agent, tool, digest string, now time.Time) (Approval, bool, error)
	// LatestApproval finds the most recent request for the same call, in
	// any state: under the binding prefer if there is one.
	LatestApproval(ctx context.Context, agent, tool, digest, rule string, prefer Binding) (Approval, bool, error)
	// RecentDenial finds an unexpired denial of the same call.
	RecentDenial(ctx context.Context, agent, tool, digest string, now time.Time) (Approval, bool, error)
	// ConsumeAndStart consumes an approval exactly once and marks its call
	// started, in one transaction, if the call runs under the binding (tool
	// code and policy) the human approved.
	ConsumeAndStart(ctx context.Context, id string, b Binding) (Approval, error)
	// MarkDone records that a started call finished.
	MarkDone(ctx context.Context, id string) error
	// Unstart gives back an approval this process consumed for a call
	// that then never reached its run: approved again, unconsumed.
	Unstart(ctx context.Context, id string) error
	// MarkInterruptedOnStartup marks interrupted the calls started by a
	// process that is gone.
	MarkInterruptedOnStartup(ctx context.Context) (int, error)
	// Expire marks expired the requests whose time is up.
	Expire(ctx context.Context, now time.Time) (int, error)

	// MintOperatorToken makes a bearer token for operator name (added to
	// the store if missing); returned once, only its hash is kept.
	// Operator tokens are another principal kind than agent tokens
	// (operators.go): Authenticate never accepts one, nor
	// AuthenticateOperator an agent's.
	MintOperatorToken(ctx context.Context, name string) (token string, info OperatorTokenInfo, err error)
	// MintOperatorTokenRole is MintOperatorToken with a role: RoleOperator,
	// or RoleMetrics (a scraper's token: /metrics only).
	MintOperatorTokenRole(ctx context.Context, name, role string) (token string, info OperatorTokenInfo, err error)
	// AuthenticateOperator returns the operator a token of role
	// RoleOperator belongs to, or ErrBadToken (a metrics token included).
	AuthenticateOperator(ctx context.Context, token string) (name string, err error)
	// AuthenticateOperatorRole returns the operator and the role of an
	// operator or metrics token, or ErrBadToken.
	AuthenticateOperatorRole(ctx context.Context, token string) (name, role string, err error)
	// Operators lists the operators the store holds.
	Operators(ctx context.Context) ([]OperatorInfo, error)
	// OperatorTokens lists operator name's tokens ("" for all).
	OperatorTokens(ctx context.Context, name string) ([]OperatorTokenInfo, error)
	// RevokeOperatorToken revokes an operator token by its ID.
	RevokeOperatorToken(ctx context.Context, id string) error

	// OpenSession opens session id ("" makes a new ID) for agent with
	// boundary initial as its first revision; idempotent on id (created
	// false, the stored session back). A session of another agent is
	// ErrNotAllowed, an ended one ErrSessionEnded. Audited.
	OpenSession(ctx context.Context, id, agent string, initial boundary.Boundary) (s Session, created bool, err error)
	// OpenSessionWithin is OpenSession refusing to create a session, with
	// ErrTooManySessions, while agent holds max (DefaultMaxSessions when
	// 0) live sessions opened or used within SessionCountedFor; a session
	// it creates is bound to credential (as BindSession; "" leaves it
	// unbound) in the same write.
	OpenSessionWithin(ctx context.Context, id, agent, credential string, initial boundary.Boundary, max int) (s Session, created bool, err error)
	// BindSession binds a live session to a credential (a token's ID),
	// once; another credential is ErrNotAllowed.
	BindSession(ctx context.Context, id, credential string) error
	// Session returns one session with its current boundary; unknown:
	// ErrUnknownSession.
	Session(ctx context.Context, id string) (Session, error)
	// Sessions lists agent's sessions ("" for all), ended ones included.
	Sessions(ctx context.Context, agent string) ([]Session, error)
	// Revisions lists every revision of a session's boundary, oldest
	// first.
	Revisions(ctx context.Context, id string) ([]SessionRevision, error)
	// TouchSession records a session's use (to within a minute); an ended
	// session is ErrSessionEnded.
	TouchSession(ctx context.Context, id string) error
	// ResetSession makes b the session's next revision, by an operator
	// (audited).
	ResetSession(ctx context.Context, id string, b boundary.Boundary, by string) (Session, error)
	// EndSession ends a session and denies its pending requests
	// (session_ended), audited; ending an ended session is not an error.
	EndSession(ctx context.Context, id string) error
	// EndSessionAs is EndSession by whoever by names ("" for the host),
	// the session-ended record's actor; ended is false when the session
	// had ended already.
	EndSessionAs(ctx context.Context, id, by string) (ended bool, err error)
	// RequestBoundary stores a pending request to widen session's
	// boundary, idempotent on the client's ID within the session; a
	// refused expansion, ID or justification is the
	// *boundary.ValidationError itself, nothing stored. Audited. A new
	// request that would wait while the agent has maxPending waiting
	// (DefaultMaxPending when 0) is ErrTooManyPending.
	RequestBoundary(ctx context.Context, session, clientID string, expansion []byte, justification string, expires time.Time, maxPending int) (r BoundaryRequest, created bool, err error)
	// BoundaryRequest returns one request by its handle ("bnd_...");
	// unknown: ErrUnknownBoundaryRequest.
	BoundaryRequest(ctx context.Context, handle string) (BoundaryRequest, error)
	// BoundaryRequestsOf lists a session's requests, oldest first.
	BoundaryRequestsOf(ctx context.Context, session string) ([]BoundaryRequest, error)
	// PendingBoundaryRequests lists the requests of every session waiting
	// for a decision at now.
	PendingBoundaryRequests(ctx context.Context, now time.Time) ([]BoundaryRequest, error)
	// SettleBoundaryRequest decides a pending request once, in one
	// transaction with the session's new revision when it applies
	// (audited); not pending: ErrApprovalState, nothing changed.
	SettleBoundaryRequest(ctx context.Context, handle string, d boundary.Answer, by string) (BoundaryRequest, Session, error)
	// DenyPendingBoundaryRequests denies with reason (host_restarted) the
	// pending requests of processes that are gone.
	DenyPendingBoundaryRequests(ctx context.Context, reason string) (int, error)
	// ExpireBoundaryRequests denies with reason expired the pending
	// requests whose time is up.
	ExpireBoundaryRequests(ctx context.Context, now time.Time) (int, error)
}
