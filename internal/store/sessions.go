package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
)

// Sessions and their boundaries (issue 14, K1-K3; ../shared/BOUNDARIES.md).
// A session belongs to one agent for its whole life and runs inside an
// ExecutionBoundary (internal/boundary); every change of the boundary is a
// new revision, kept. A boundary request asks to widen a session's
// boundary; a human (or the host) settles it once, and an approval becomes
// the session's next revision in the same transaction. The rules are
// internal/boundary's (Create, Settle, HostRestarted); this file persists
// their values and audits every transition in the transaction that makes
// it.

// Errors of sessions and boundary requests. A request that is not pending
// when it is settled is ErrApprovalState, as an approval decided twice.
var (
	// ErrUnknownSession: no session of that ID.
	ErrUnknownSession = errors.New("unknown session")
	// ErrSessionEnded: the session has ended; it takes no requests and is
	// never reopened.
	ErrSessionEnded = errors.New("session has ended")
	// ErrUnknownBoundaryRequest: no boundary request of that handle.
	ErrUnknownBoundaryRequest = errors.New("unknown boundary request")
	// ErrTooManySessions: the agent already holds as many sessions as
	// OpenSessionWithin's bound allows; no new one is opened.
	ErrTooManySessions = errors.New("too many live sessions")
)

// DefaultMaxSessions is how many sessions one agent may hold for the
// session_open built-in, and OpenSessionWithin's bound when it is given
// none: a session counts while it has not ended and was opened or used
// (TouchSession) within SessionCountedFor. Every session is a row, with
// its revisions, that nothing deletes (an ended one stays, so that it is
// never reopened and maiden sessions still shows it), and session_open
// makes one per call: without a bound an agent calling it in a loop filled
// the operator's disk and slowed every listing of sessions. 1,000 is the
// bound the HTTP front end puts on one agent's open 2025-11-25 sessions
// (mcpserver.DefaultMaxSessionsPerAgent), far above what a client opens
// for its conversations or tasks in a day, and holds what one agent can
// add with session_open to about a thousand sessions (a megabyte or so)
// a day.
const DefaultMaxSessions = 1000

// SessionCountedFor is how long a live session counts against its
// agent's bound after it was opened or last used as the store records
// (TouchSession: the HTTP front end records a 2026-07-28 handle's use at
// most once a minute). Nothing else ends a handle a client forgets (the
// front end ends an idle one only when a request names it), so a bound on
// every live session would lock a long-lived agent out after its
// thousandth conversation; one unused for a day no longer holds a place
// (it is not ended: it is still the session it was if named again).
const SessionCountedFor = 24 * time.Hour

// Audit record kinds of sessions.
const (
	AuditSessionOpened     = "session-opened"
	AuditSessionReset      = "session-reset"
	AuditSessionEnded      = "session-ended"
	AuditBoundaryRequested = "boundary-requested"
	AuditBoundarySettled   = "boundary-settled"
)

// Denial reasons the store gives on its own (boundary.Settle's reasons
// otherwise).
const (
	// BoundaryReasonExpired: nobody decided before the request's expiry.
	BoundaryReasonExpired = "expired"
	// BoundaryReasonSessionEnded: the session ended while it was pending.
	BoundaryReasonSessionEnded = "session_ended"
)

// DefaultBoundaryRequestExpiry is how long a boundary request waits for a
// decision when the caller names no expiry.
const DefaultBoundaryRequestExpiry = 24 * time.Hour

// Who settles what the store settles on its own.
const (
	byHost   = "host"   // host restarts, ended sessions
	byExpiry = "expiry" // requests nobody decided in time
)

// touchEvery is how stale a session's last use must be before TouchSession
// writes: a call per request would otherwise be a commit per call.
const touchEvery = time.Minute

// Session is a session as the store holds it: its agent, its times and its
// current boundary (Boundary.Revision is the current revision).
type Session struct {
	ID       string            `json:"id"`
	Agent    string            `json:"agent"`
	Created  time.Time         `json:"created"`
	LastUsed time.Time         `json:"last_used"` // to within a minute (TouchSession)
	Ended    time.Time         `json:"ended,omitzero"`
	Boundary boundary.Boundary `json:"boundary"`
	// Credential is what the session is bound to besides its agent
	// (BindSession): "token:" and an agent token's ID for a handle
	// session_open gave over HTTP, "stdio" for one it gave over stdio; ""
	// for none (a default session, one opened by an embedder, or for a
	// 2025-11-25 MCP session or a stdio process). Never a secret.
	Credential string `json:"credential,omitempty"`
}

// Live reports whether the session has not ended.
func (s Session) Live() bool { return s.Ended.IsZero() }

// SessionRevision is one revision of a session's boundary: every one is
// kept, with when and why it was made ("initial", "approved request ID
// (bnd_...) by operator:ann", "reset by cli:root").
type SessionRevision struct {
	Session  string            `json:"session"`
	Revision int64             `json:"revision"`
	Boundary boundary.Boundary `json:"boundary"`
	At       time.Time         `json:"at"`
	Why      string            `json:"why"`
}

// BoundaryRequest is a stored request to widen a session's boundary.
// Handle is global (what maiden approve and maiden deny take); Request.ID is
// the client's ID, unique within the session.
type BoundaryRequest struct {
	Handle    string           `json:"handle"`
	Session   string           `json:"session"`
	Agent     string           `json:"agent"`
	Request   boundary.Request `json:"request"`
	Created   time.Time        `json:"created"`
	Expires   time.Time        `json:"expires"`
	Decided   time.Time        `json:"decided,omitzero"`
	DecidedBy string           `json:"decided_by,omitempty"`
}

// sessionsMigration is migration 5: sessions, every revision of their
// boundaries (canonical JSON), and boundary requests. runner names the
// process that made a request (DenyPendingBoundaryRequests).
const sessionsMigration = `
CREATE TABLE sessions (
	id         TEXT PRIMARY KEY,
	agent      TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	used_at    BIGINT NOT NULL,
	ended_at   BIGINT,
	revision   BIGINT NOT NULL
);
CREATE INDEX sessions_agent ON sessions(agent);
CREATE TABLE session_revisions (
	session    TEXT NOT NULL REFERENCES sessions(id),
	revision   BIGINT NOT NULL,
	boundary   TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	why        TEXT NOT NULL,
	PRIMARY KEY (session, revision)
);
CREATE TABLE boundary_requests (
	id            TEXT PRIMARY KEY,
	session       TEXT NOT NULL REFERENCES sessions(id),
	agent         TEXT NOT NULL,
	client_id     TEXT NOT NULL,
	status        TEXT NOT NULL,
	base_revision BIGINT NOT NULL,
	base_kind     TEXT NOT NULL,
	expansion     TEXT NOT NULL,
	justification TEXT NOT NULL,
	reason        TEXT NOT NULL,
	revision      BIGINT NOT NULL,
	created_at    BIGINT NOT NULL,
	expires_at    BIGINT NOT NULL,
	decided_at    BIGINT,
	decided_by    TEXT NOT NULL,
	runner        TEXT NOT NULL,
	UNIQUE (session, client_id)
);
CREATE INDEX boundary_requests_status ON boundary_requests(status);
`

// checkSessionID: a caller-given session ID (an MCP session ID: visible
// ASCII only, per the MCP specification) of 1 to 128 characters.
func checkSessionID(id string) error {
	if id == "" || len(id) > maxName {
		return fmt.Errorf("%w: session ID of %d bytes: want 1..%d", ErrBadInput, len(id), maxName)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: session ID %q: byte %d is 0x%02x; want visible ASCII (0x21-0x7e) only", ErrBadInput, id, i, c)
		}
	}
	return nil
}

// errUnchanged rolls a write back when it found nothing to change, so
// that a no-op commits nothing (and leaves Generation alone).
var errUnchanged = errors.New("unchanged")

func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func nullTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return unixTime(v.Int64)
}

// --- sessions ----------------------------------------------------------------

const sessionColumns = `s.id, s.agent, s.created_at, s.used_at, s.ended_at, s.revision, r.boundary, s.credential`

const sessionFrom = ` FROM sessions s JOIN session_revisions r ON r.session = s.id AND r.revision = s.revision `

func scanSession(row scanner) (Session, error) {
	var ss Session
	var created, used, rev int64
	var ended sql.NullInt64
	var raw string
	if err := row.Scan(&ss.ID, &ss.Agent, &created, &used, &ended, &rev, &raw, &ss.Credential); err != nil {
		return ss, err
	}
	ss.Created, ss.LastUsed, ss.Ended = unixTime(created), unixTime(used), nullTime(ended)
	b, err := storedBoundary(ss.ID, rev, raw)
	ss.Boundary = b
	return ss, err
}

// storedBoundary parses a stored revision, which must carry its own number.
func storedBoundary(session string, rev int64, raw string) (boundary.Boundary, error) {
	b, err := boundary.Parse([]byte(raw))
	if err != nil {
		return b, fmt.Errorf("session %s revision %d: stored boundary does not parse: %w", session, rev, err)
	}
	if b.Revision != rev {
		return b, fmt.Errorf("session %s revision %d: stored boundary says revision %d", session, rev, b.Revision)
	}
	return b, nil
}

func loadSession(ctx context.Context, q querier, id string) (Session, error) {
	ss, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+sessionFrom+`WHERE s.id = ?`, id))
	if isNoRows(err) {
		return ss, fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	return ss, err
}

// insertRevision stores b as revision b.Revision of session id.
func insertRevision(ctx context.Context, tx *sql.Tx, id string, b boundary.Boundary, at time.Time, why string) error {
	raw, err := b.Canonical()
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO session_revisions (session, revision, boundary, created_at, why) VALUES (?, ?, ?, ?, ?)`,
		id, b.Revision, string(raw), at.UnixNano(), why)
	return err
}

// setRevision makes revision next the current one of session id, which must
// still be at revision cur.
func setRevision(ctx context.Context, tx *sql.Tx, id string, cur, next int64) error {
	res, err := tx.ExecContext(ctx, `UPDATE sessions SET revision = ? WHERE id = ? AND revision = ? AND ended_at IS NULL`, next, id, cur)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err == nil {
			err = fmt.Errorf("session %s is no longer at revision %d, or has ended", id, cur)
		}
		return err
	}
	return nil
}

// OpenSession opens session id for agent with boundary initial as its
// first revision (why "initial"; its revision number kept as given,
// normally 0), and returns it with created true. An empty id makes a new
// one ("ses_" + 32 hex digits); a caller-given id (an MCP session ID) must
// be 1 to 128 visible ASCII characters. Opening is idempotent: a live
// session of the same agent comes back as it is (created false; initial is
// ignored: the stored boundary is the session's; one read, no write lock).
// A session of another agent is ErrNotAllowed (a session ID never moves
// between agents); an ended session is ErrSessionEnded. The opening is
// audited (session-opened, with the boundary) in its transaction.
func (s *SQLite) OpenSession(ctx context.Context, id, agent string, initial boundary.Boundary) (Session, bool, error) {
	return s.openSession(ctx, id, agent, "", initial, 0)
}

// OpenSessionWithin is OpenSession for a session an agent asks for (the
// session_open built-in), bounded: a session it would create is refused
// with ErrTooManySessions, nothing stored, while agent holds max sessions
// (DefaultMaxSessions when max is 0) that have not ended and were opened
// or used within SessionCountedFor. They are counted in the transaction
// that would create it, so concurrent opens, from any process sharing the
// store, cannot pass the bound together. A session it creates is bound to
// credential (not empty: as BindSession) in that transaction, so that
// no one can learn the ID before it is bound, and the binding is part of
// the creation: on PostgreSQL it waits for no other instance (a change of
// an existing session's binding waits for every instance's feed:
// writeSessions). A live session of agent that exists already is
// returned as OpenSession returns it, whatever the count, once
// BindSession(credential) succeeds on it.
func (s *SQLite) OpenSessionWithin(ctx context.Context, id, agent, credential string, initial boundary.Boundary, max int) (Session, bool, error) {
	if max <= 0 {
		max = DefaultMaxSessions
	}
	ss, created, err := s.openSession(ctx, id, agent, credential, initial, max)
	if err != nil || created || credential == "" || ss.Credential == credential {
		return ss, created, err
	}
	if err := s.BindSession(ctx, ss.ID, credential); err != nil {
		return Session{}, false, fmt.Errorf("open session %s of agent %q: %w", ss.ID, agent, err)
	}
	ss.Credential = credential
	return ss, false, nil
}

// openSession is OpenSession, with a new session refused while agent
// holds max counted sessions (none refused when max is 0) and bound to
// credential ("" for none) when it creates one.
func (s *SQLite) openSession(ctx context.Context, id, agent, credential string, initial boundary.Boundary, max int) (Session, bool, error) {
	if err := checkName("agent name", agent); err != nil {
		return Session{}, false, fmt.Errorf("open session %q: %w", id, err)
	}
	if id == "" {
		id = "ses_" + randomHex(16)
	} else if err := checkSessionID(id); err != nil {
		return Session{}, false, fmt.Errorf("open session: %w", err)
	}
	raw, err := initial.Canonical()
	if err != nil {
		return Session{}, false, fmt.Errorf("open session %s of agent %q: %w: initial %v", id, agent, ErrBadInput, err)
	}
	// A session that exists is answered by a read, without the write lock
	// (a call of a known session opens it again); only a new one writes.
	if cur, err := loadSession(ctx, s.db, id); err == nil && cur.Agent == agent && cur.Live() {
		return cur, false, nil
	}
	var out Session
	created := false
	err = s.writeSessionNew(ctx, func(tx *sql.Tx) error {
		cur, err := loadSession(ctx, tx, id)
		switch {
		case err == nil && cur.Agent != agent:
			return fmt.Errorf("%w: it is a session of another agent", ErrNotAllowed)
		case err == nil && !cur.Live():
			return fmt.Errorf("%w (at %s)", ErrSessionEnded, cur.Ended.Format(time.RFC3339))
		case err == nil:
			out = cur
			return errUnchanged
		case !errors.Is(err, ErrUnknownSession):
			return err
		}
		now := unixTime(s.now().UnixNano())
		if max > 0 {
			var held int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions WHERE agent = ? AND ended_at IS NULL AND used_at > ?`,
				agent, now.Add(-SessionCountedFor).UnixNano()).Scan(&held); err != nil {
				return err
			}
			if held >= max {
				return fmt.Errorf("%w: agent %q holds %d live sessions opened or used in the last %g hours, the most one agent may", ErrTooManySessions, agent, held, SessionCountedFor.Hours())
			}
		}
		b := initial.Normalize()
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, agent, created_at, used_at, ended_at, revision, credential) VALUES (?, ?, ?, ?, NULL, ?, ?)`,
			id, agent, now.UnixNano(), now.UnixNano(), b.Revision, credential); err != nil {
			return err
		}
		if err := insertRevision(ctx, tx, id, b, now, "initial"); err != nil {
			return err
		}
		if _, err := s.appendAudit(ctx, tx, AuditRecord{Kind: AuditSessionOpened, Actor: AgentActor(agent).String(), Agent: agent,
			Body: auditBody(map[string]any{"session": id, "revision": b.Revision, "boundary": json.RawMessage(raw)})}); err != nil {
			return err
		}
		out, created = Session{ID: id, Agent: agent, Credential: credential, Created: now, LastUsed: now, Boundary: b}, true
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return Session{}, false, fmt.Errorf("open session %s of agent %q: %w", id, agent, err)
	}
	return out, created, nil
}

// Session returns one session with its current boundary.
func (s *SQLite) Session(ctx context.Context, id string) (Session, error) {
	ss, err := loadSession(ctx, s.db, id)
	if err != nil {
		return Session{}, fmt.Errorf("session: %w", err)
	}
	return ss, nil
}

// Sessions lists agent's sessions ("" for every agent's), ended ones
// included, oldest first.
func (s *SQLite) Sessions(ctx context.Context, agent string) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+sessionFrom+`WHERE s.agent = ? OR ? = '' ORDER BY s.created_at, s.id`, agent, agent)
	if err != nil {
		return nil, fmt.Errorf("sessions of %q: %w", agent, err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		ss, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("sessions of %q: %w", agent, err)
		}
		out = append(out, ss)
	}
	return out, rows.Err()
}

// Revisions lists every revision of session id's boundary, oldest first.
func (s *SQLite) Revisions(ctx context.Context, id string) ([]SessionRevision, error) {
	if _, err := loadSession(ctx, s.db, id); err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT revision, boundary, created_at, why FROM session_revisions WHERE session = ? ORDER BY revision`, id)
	if err != nil {
		return nil, fmt.Errorf("revisions of session %s: %w", id, err)
	}
	defer rows.Close()
	var out []SessionRevision
	for rows.Next() {
		r := SessionRevision{Session: id}
		var raw string
		var at int64
		if err := rows.Scan(&r.Revision, &raw, &at, &r.Why); err != nil {
			return nil, fmt.Errorf("revisions of session %s: %w", id, err)
		}
		if r.Boundary, err = storedBoundary(id, r.Revision, raw); err != nil {
			return nil, err
		}
		r.At = unixTime(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// BindSession binds live session id to credential (not empty; a token's
// ID, never its secret), once: binding it again to the same credential
// changes nothing, to another is ErrNotAllowed (a session never moves
// between credentials). An ended session is ErrSessionEnded.
func (s *SQLite) BindSession(ctx context.Context, id, credential string) error {
	if credential == "" {
		return fmt.Errorf("bind session %s: %w: an empty credential", id, ErrBadInput)
	}
	err := s.writeSessions(ctx, func(tx *sql.Tx) error {
		cur, err := loadSession(ctx, tx, id)
		switch {
		case err != nil:
			return err
		case !cur.Live():
			return fmt.Errorf("%w %q", ErrSessionEnded, id)
		case cur.Credential == credential:
			return errUnchanged
		case cur.Credential != "":
			return fmt.Errorf("%w: it is bound to another credential", ErrNotAllowed)
		}
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET credential = ? WHERE id = ? AND credential = ''`, credential, id)
		return err
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return fmt.Errorf("bind session %s: %w", id, err)
	}
	return nil
}

// TouchSession records that session id was used now (to within a minute:
// it writes only when the stored time is older, so that calling it on
// every call costs a read). An unknown session is ErrUnknownSession, an
// ended one ErrSessionEnded: the caller may use it as its liveness check.
// It changes no boundary and does not advance the counters table (as
// audit and approval writes).
func (s *SQLite) TouchSession(ctx context.Context, id string) error {
	ss, err := loadSession(ctx, s.db, id)
	if err == nil && !ss.Live() {
		err = fmt.Errorf("%w %q", ErrSessionEnded, id)
	}
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	now := s.now()
	if now.Sub(ss.LastUsed) < touchEvery {
		return nil
	}
	err = s.writeKeep(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE sessions SET used_at = ? WHERE id = ? AND used_at < ?`, now.UnixNano(), id, now.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("touch session %s: %w", id, err)
	}
	return nil
}

// ResetSession makes b session id's next revision (current + 1, whatever
// b.Revision says), by whom (an operator; why "reset by BY"), audited
// (session-reset). Pending requests stay pending and are assessed against
// the new boundary when settled (a changed kind makes them conflict with
// boundary_kind_changed). An ended session is ErrSessionEnded.
func (s *SQLite) ResetSession(ctx context.Context, id string, b boundary.Boundary, by string) (Session, error) {
	if err := checkName("reset by", by); err != nil {
		return Session{}, fmt.Errorf("reset session %s: %w", id, err)
	}
	var out Session
	err := s.writeSessions(ctx, func(tx *sql.Tx) error {
		cur, err := loadSession(ctx, tx, id)
		if err != nil {
			return err
		}
		if !cur.Live() {
			return fmt.Errorf("%w %q", ErrSessionEnded, id)
		}
		next := b.Normalize()
		next.Revision = cur.Boundary.Revision + 1
		raw, err := next.Canonical()
		if err != nil {
			return fmt.Errorf("%w: boundary: %v", ErrBadInput, err)
		}
		now := unixTime(s.now().UnixNano())
		if err := insertRevision(ctx, tx, id, next, now, "reset by "+by); err != nil {
			return err
		}
		if err := setRevision(ctx, tx, id, cur.Boundary.Revision, next.Revision); err != nil {
			return err
		}
		if _, err := s.appendAudit(ctx, tx, AuditRecord{Kind: AuditSessionReset, Actor: by, Agent: cur.Agent,
			Body: auditBody(map[string]any{"session": id, "previous_revision": cur.Boundary.Revision, "revision": next.Revision, "boundary": json.RawMessage(raw)})}); err != nil {
			return err
		}
		cur.Boundary = next
		out = cur
		return nil
	})
	if err != nil {
		return Session{}, fmt.Errorf("reset session %s: %w", id, err)
	}
	return out, nil
}

// EndSession ends session id: it takes no further requests and cannot be
// reopened; its pending requests are denied with session_ended. All in one
// transaction, audited (session-ended, and a boundary-settled record per
// denied request). Ending an ended session changes nothing and is not an
// error.
func (s *SQLite) EndSession(ctx context.Context, id string) error {
	_, err := s.EndSessionAs(ctx, id, "")
	return err
}

// EndSessionAs is EndSession by whoever by names (an operator: "cli:USER";
// "" for the host, as EndSession), recorded as the session-ended record's
// actor. ended is false when the session had ended already (nothing
// changed).
func (s *SQLite) EndSessionAs(ctx context.Context, id, by string) (ended bool, err error) {
	if by == "" {
		by = byHost
	}
	err = s.writeSessions(ctx, func(tx *sql.Tx) error {
		cur, err := loadSession(ctx, tx, id)
		if err != nil {
			return err
		}
		if !cur.Live() {
			return errUnchanged
		}
		now := s.now()
		pending, err := queryBoundaryRequests(ctx, tx, `WHERE r.session = ? AND r.status = ? ORDER BY r.created_at, r.id`, id, string(boundary.Pending))
		if err != nil {
			return err
		}
		for _, r := range pending {
			if _, err := s.hostSettleTx(ctx, tx, r, cur.Boundary, BoundaryReasonSessionEnded, byHost, now); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL`, now.UnixNano(), id); err != nil {
			return err
		}
		_, err = s.appendAudit(ctx, tx, AuditRecord{Kind: AuditSessionEnded, Actor: by, Agent: cur.Agent,
			Body: auditBody(map[string]any{"session": id, "revision": cur.Boundary.Revision, "denied_requests": len(pending)})})
		return err
	})
	if errors.Is(err, errUnchanged) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("end session %s: %w", id, err)
	}
	return true, nil
}

// --- boundary requests -------------------------------------------------------

const requestColumns = `r.id, r.session, r.agent, r.client_id, r.status, r.base_revision, r.base_kind, r.expansion, r.justification,
	r.reason, r.revision, r.created_at, r.expires_at, r.decided_at, r.decided_by`

func scanBoundaryRequest(row scanner) (BoundaryRequest, error) {
	var b BoundaryRequest
	var status, kind, expansion string
	var created, expires int64
	var decided sql.NullInt64
	err := row.Scan(&b.Handle, &b.Session, &b.Agent, &b.Request.ID, &status, &b.Request.BaseRevision, &kind, &expansion,
		&b.Request.Justification, &b.Request.Reason, &b.Request.Revision, &created, &expires, &decided, &b.DecidedBy)
	if err != nil {
		return b, err
	}
	b.Request.Status, b.Request.BaseKind = boundary.Status(status), boundary.Kind(kind)
	if err := json.Unmarshal([]byte(expansion), &b.Request.Expansion); err != nil {
		return b, fmt.Errorf("boundary request %s: stored expansion does not validate: %w", b.Handle, err)
	}
	b.Created, b.Expires, b.Decided = unixTime(created), unixTime(expires), nullTime(decided)
	return b, nil
}

func loadBoundaryRequest(ctx context.Context, q querier, where string, args ...any) (BoundaryRequest, error) {
	return scanBoundaryRequest(q.QueryRowContext(ctx, `SELECT `+requestColumns+` FROM boundary_requests r `+where, args...))
}

func queryBoundaryRequests(ctx context.Context, q querier, where string, args ...any) ([]BoundaryRequest, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+requestColumns+` FROM boundary_requests r `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []BoundaryRequest
	for rows.Next() {
		b, err := scanBoundaryRequest(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func requestByHandle(ctx context.Context, q querier, handle string) (BoundaryRequest, error) {
	b, err := loadBoundaryRequest(ctx, q, `WHERE r.id = ?`, handle)
	if isNoRows(err) {
		return b, fmt.Errorf("%w %q", ErrUnknownBoundaryRequest, handle)
	}
	return b, err
}

// RequestBoundary asks to widen session's boundary by expansion (its JSON,
// as the model sent it), with a justification, until expires (zero: 24 h
// from now). clientID is the client's request ID: the same ID in the same
// session is the same request, whatever else is sent, and comes back as
// stored with created false (a pending one past its expiry is denied with
// reason expired first). Otherwise boundary.Create decides: a refusal (a
// malformed ID, expansion or justification, a session whose boundary is not
// managed) is its *boundary.ValidationError, returned unwrapped, and
// nothing is stored. A new request gets a global handle ("bnd_" + 20 hex
// digits), is pending, and is audited (boundary-requested) in its
// transaction; one that can only conflict (boundary.Assess: explicit_deny,
// payload_too_large) is settled conflict by the host in the same
// transaction (boundary-settled), never pending. An unknown session is ErrUnknownSession, an ended one
// ErrSessionEnded. A new request that would be pending while the session's
// agent has maxPending boundary requests pending and not expired
// (DefaultMaxPending when 0) is ErrTooManyPending, and nothing is stored.
func (s *SQLite) RequestBoundary(ctx context.Context, session, clientID string, expansion []byte, justification string, expires time.Time, maxPending int) (BoundaryRequest, bool, error) {
	now := unixTime(s.now().UnixNano())
	if expires.IsZero() {
		expires = now.Add(DefaultBoundaryRequestExpiry)
	}
	if !expires.After(now) {
		return BoundaryRequest{}, false, fmt.Errorf("boundary request %q of session %s: %w: it would expire at %s, which is not in the future",
			clientID, session, ErrBadInput, expires.UTC().Format(time.RFC3339))
	}
	var out BoundaryRequest
	created := false
	var refusal error
	err := s.writeSessions(ctx, func(tx *sql.Tx) error {
		ss, err := loadSession(ctx, tx, session)
		if err != nil {
			return err
		}
		prior, err := loadBoundaryRequest(ctx, tx, `WHERE r.session = ? AND r.client_id = ?`, session, clientID)
		switch {
		case err == nil:
			if prior.Request.Status == boundary.Pending && !prior.Expires.After(now) {
				out, err = s.hostSettleTx(ctx, tx, prior, ss.Boundary, BoundaryReasonExpired, byExpiry, now)
				return err
			}
			out = prior
			return errUnchanged
		case !isNoRows(err):
			return err
		}
		if !ss.Live() {
			return fmt.Errorf("%w (at %s)", ErrSessionEnded, ss.Ended.Format(time.RFC3339))
		}
		r, ok, err := boundary.Create(nil, clientID, ss.Boundary, expansion, justification)
		if err != nil {
			refusal = err
			return err
		}
		if !ok {
			return fmt.Errorf("boundary.Create made no request")
		}
		x, err := json.Marshal(r.Expansion)
		if err != nil {
			return err
		}
		conflict := boundary.Assess(ss.Boundary, r.Expansion).Status == boundary.Conflict
		if !conflict {
			// A request that would wait for a human counts against the
			// agent's bound (maxPending, as approvals do).
			var waiting int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM boundary_requests WHERE agent = ? AND status = ? AND expires_at > ?`,
				ss.Agent, string(boundary.Pending), now.UnixNano()).Scan(&waiting); err != nil {
				return err
			}
			if waiting >= pendingBound(maxPending) {
				return fmt.Errorf("%w: %d boundary requests of agent %q are pending, the most one agent may have", ErrTooManyPending, waiting, ss.Agent)
			}
		}
		b := BoundaryRequest{Handle: "bnd_" + randomHex(10), Session: session, Agent: ss.Agent, Request: r,
			Created: now, Expires: unixTime(expires.UnixNano())}
		if _, err := tx.ExecContext(ctx, `INSERT INTO boundary_requests (id, session, agent, client_id, status, base_revision, base_kind, expansion,
			justification, reason, revision, created_at, expires_at, decided_at, decided_by, runner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, '', ?)`,
			b.Handle, session, ss.Agent, r.ID, string(r.Status), r.BaseRevision, string(r.BaseKind), string(x),
			r.Justification, r.Reason, r.Revision, now.UnixNano(), b.Expires.UnixNano(), s.runner); err != nil {
			return err
		}
		if _, err := s.appendAudit(ctx, tx, AuditRecord{Kind: AuditBoundaryRequested, Actor: AgentActor(ss.Agent).String(), Agent: ss.Agent,
			Body: auditBody(map[string]any{"session": session, "request": b.Handle, "id": r.ID, "base_revision": r.BaseRevision,
				"expansion": json.RawMessage(x), "justification": r.Justification, "expires": b.Expires.Format(time.RFC3339)})}); err != nil {
			return err
		}
		if conflict {
			// No approval could apply it (an entry under an explicit deny
			// root, a write under a protected name: neither ever changes,
			// and a boundary only grows): it is answered at once, with the
			// conflict an approval would get, and never put in front of a
			// human.
			settled, _, _ := boundary.Settle(r, ss.Boundary, boundary.Allow())
			b.Request, b.Decided, b.DecidedBy = settled, now, byHost
			if err := s.storeSettled(ctx, tx, ss.Boundary, b, nil, byHost, now); err != nil {
				return err
			}
		}
		out, created = b, true
		return nil
	})
	switch {
	case refusal != nil:
		return BoundaryRequest{}, false, refusal
	case err != nil && !errors.Is(err, errUnchanged):
		return BoundaryRequest{}, false, fmt.Errorf("boundary request %q of session %s: %w", clientID, session, err)
	}
	return out, created, nil
}

// BoundaryRequest returns one request by its handle.
func (s *SQLite) BoundaryRequest(ctx context.Context, handle string) (BoundaryRequest, error) {
	b, err := requestByHandle(ctx, s.db, handle)
	if err != nil {
		return BoundaryRequest{}, fmt.Errorf("boundary request: %w", err)
	}
	return b, nil
}

// BoundaryRequestsOf lists session's requests, oldest first.
func (s *SQLite) BoundaryRequestsOf(ctx context.Context, session string) ([]BoundaryRequest, error) {
	if _, err := loadSession(ctx, s.db, session); err != nil {
		return nil, fmt.Errorf("boundary requests: %w", err)
	}
	out, err := queryBoundaryRequests(ctx, s.db, `WHERE r.session = ? ORDER BY r.created_at, r.id`, session)
	if err != nil {
		return nil, fmt.Errorf("boundary requests of session %s: %w", session, err)
	}
	return out, nil
}

// PendingBoundaryRequests lists every session's requests still waiting for
// a decision at now, oldest first.
func (s *SQLite) PendingBoundaryRequests(ctx context.Context, now time.Time) ([]BoundaryRequest, error) {
	out, err := queryBoundaryRequests(ctx, s.db, `WHERE r.status = ? AND r.expires_at > ? ORDER BY r.created_at, r.id`, string(boundary.Pending), now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("pending boundary requests: %w", err)
	}
	return out, nil
}

// storeSettled writes settled request r (status pending in the table, so
// that a request is settled once whatever the callers) and, if next is not
// nil, next as the session's new current revision; and the audit record.
func (s *SQLite) storeSettled(ctx context.Context, tx *sql.Tx, before boundary.Boundary, r BoundaryRequest, next *boundary.Boundary, by string, now time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE boundary_requests SET status = ?, reason = ?, revision = ?, decided_at = ?, decided_by = ? WHERE id = ? AND status = ?`,
		string(r.Request.Status), r.Request.Reason, r.Request.Revision, now.UnixNano(), by, r.Handle, string(boundary.Pending))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err == nil {
			err = fmt.Errorf("%w: it was settled meanwhile", ErrApprovalState)
		}
		return err
	}
	body := map[string]any{"session": r.Session, "request": r.Handle, "id": r.Request.ID, "status": r.Request.Status,
		"reason": r.Request.Reason, "base_revision": r.Request.BaseRevision, "current_revision": before.Revision}
	if next != nil {
		why := fmt.Sprintf("approved request %s (%s) by %s", r.Request.ID, r.Handle, by)
		if err := insertRevision(ctx, tx, r.Session, *next, now, why); err != nil {
			return err
		}
		if err := setRevision(ctx, tx, r.Session, before.Revision, next.Revision); err != nil {
			return err
		}
		body["revision"] = next.Revision
	}
	_, err = s.appendAudit(ctx, tx, AuditRecord{Kind: AuditBoundarySettled, Actor: by, Agent: r.Agent, Body: auditBody(body)})
	return err
}

// hostSettleTx denies pending request r with reason, by the host, inside
// tx; r comes back settled.
func (s *SQLite) hostSettleTx(ctx context.Context, tx *sql.Tx, r BoundaryRequest, current boundary.Boundary, reason, by string, now time.Time) (BoundaryRequest, error) {
	settled, _, changed := boundary.Settle(r.Request, current, boundary.Deny(reason))
	if !changed {
		return r, nil
	}
	r.Request = settled
	r.Decided, r.DecidedBy = unixTime(now.UnixNano()), by
	return r, s.storeSettled(ctx, tx, current, r, nil, by, now)
}

// SettleBoundaryRequest decides request handle once, by whom (an operator
// such as "cli:root" or "operator:ann"; never "agent:..." which is
// ErrNotAllowed), in one transaction: the request and the session's
// current boundary are read, boundary.Settle decides (a denial keeps
// d.Reason; an approval is assessed against the current boundary: conflict,
// already_applied, or applied), and the settled request and, when applied,
// the session's new revision are stored and audited (boundary-settled)
// together. It returns the request and the session as they are after.
//
// A request that is not pending is ErrApprovalState, nothing changed, and
// comes back with its session as stored. A pending request past its expiry
// is denied with reason expired (committed) and is ErrApprovalState too. An
// unknown handle is ErrUnknownBoundaryRequest.
func (s *SQLite) SettleBoundaryRequest(ctx context.Context, handle string, d boundary.Answer, by string) (BoundaryRequest, Session, error) {
	if err := checkName("settled by", by); err != nil {
		return BoundaryRequest{}, Session{}, fmt.Errorf("settle boundary request %s: %w", handle, err)
	}
	if strings.HasPrefix(by, "agent:") {
		return BoundaryRequest{}, Session{}, fmt.Errorf("settle boundary request %s: %w: %s is an agent; only an operator decides", handle, ErrNotAllowed, by)
	}
	var out BoundaryRequest
	var sess Session
	var stateErr error
	err := s.writeSessions(ctx, func(tx *sql.Tx) error {
		r, err := requestByHandle(ctx, tx, handle)
		if err != nil {
			return err
		}
		ss, err := loadSession(ctx, tx, r.Session)
		if err != nil {
			return err
		}
		out, sess = r, ss
		now := unixTime(s.now().UnixNano())
		switch {
		case r.Request.Status != boundary.Pending:
			stateErr = fmt.Errorf("%w: it is %s (%s) since %s", ErrApprovalState, r.Request.Status, r.Request.Reason, r.Decided.Format(time.RFC3339))
			return stateErr
		case !r.Expires.After(now):
			out, err = s.hostSettleTx(ctx, tx, r, ss.Boundary, BoundaryReasonExpired, byExpiry, now)
			stateErr = fmt.Errorf("%w: it expired at %s", ErrApprovalState, r.Expires.Format(time.RFC3339))
			return err
		case !ss.Live():
			// EndSession denies pending requests; this is a guard only.
			out, err = s.hostSettleTx(ctx, tx, r, ss.Boundary, BoundaryReasonSessionEnded, byHost, now)
			stateErr = fmt.Errorf("%w: its session ended at %s", ErrApprovalState, ss.Ended.Format(time.RFC3339))
			return err
		}
		settled, next, changed := boundary.Settle(r.Request, ss.Boundary, d)
		if !changed {
			return fmt.Errorf("%w: boundary.Settle left a pending request unchanged", ErrApprovalState)
		}
		r.Request, r.Decided, r.DecidedBy = settled, now, by
		if err := s.storeSettled(ctx, tx, ss.Boundary, r, next, by, now); err != nil {
			return err
		}
		if next != nil {
			ss.Boundary = *next
		}
		out, sess = r, ss
		return nil
	})
	switch {
	case stateErr != nil && (err == nil || errors.Is(err, stateErr)):
		return out, sess, fmt.Errorf("settle boundary request %s: %w", handle, stateErr)
	case err != nil:
		return BoundaryRequest{}, Session{}, fmt.Errorf("settle boundary request %s: %w", handle, err)
	}
	return out, sess, nil
}

// DenyPendingBoundaryRequests denies, with reason (host_restarted on start),
// the pending requests made by processes that are gone: those of this host
// whose PID no longer exists, as MarkInterruptedOnStartup judges approved
// calls. A request of a live process (another maiden sharing the store) is
// left pending, and so is one made on another host (its own maiden denies
// it when it restarts) or where liveness cannot be told (not Unix). One
// transaction; each denial audited (boundary-settled, by host). It returns
// how many it denied.
func (s *SQLite) DenyPendingBoundaryRequests(ctx context.Context, reason string) (int, error) {
	host, _ := os.Hostname()
	n := 0
	err := s.writeSessions(ctx, func(tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, `SELECT id, runner FROM boundary_requests WHERE status = ? ORDER BY created_at, id`, string(boundary.Pending))
		if err != nil {
			return err
		}
		var gone []string
		for rows.Next() {
			var id, runner string
			if err := rows.Scan(&id, &runner); err != nil {
				rows.Close()
				return err
			}
			if runnerGone(host, runner) {
				gone = append(gone, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(gone) == 0 {
			return errUnchanged
		}
		now := s.now()
		for _, id := range gone {
			r, err := requestByHandle(ctx, tx, id)
			if err != nil {
				return err
			}
			ss, err := loadSession(ctx, tx, r.Session)
			if err != nil {
				return err
			}
			if _, err := s.hostSettleTx(ctx, tx, r, ss.Boundary, reason, byHost, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return 0, fmt.Errorf("deny pending boundary requests (%s): %w", reason, err)
	}
	return n, nil
}

// ExpireBoundaryRequests denies with reason expired the pending requests
// whose expiry is at or before now (one transaction, each audited), and
// returns how many.
func (s *SQLite) ExpireBoundaryRequests(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.writeSessions(ctx, func(tx *sql.Tx) error {
		n = 0
		due, err := queryBoundaryRequests(ctx, tx, `WHERE r.status = ? AND r.expires_at <= ? ORDER BY r.created_at, r.id`, string(boundary.Pending), now.UnixNano())
		if err != nil {
			return err
		}
		if len(due) == 0 {
			return errUnchanged
		}
		for _, r := range due {
			ss, err := loadSession(ctx, tx, r.Session)
			if err != nil {
				return err
			}
			if _, err := s.hostSettleTx(ctx, tx, r, ss.Boundary, BoundaryReasonExpired, byExpiry, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return 0, fmt.Errorf("expire boundary requests: %w", err)
	}
	return n, nil
}
