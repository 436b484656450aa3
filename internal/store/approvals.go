package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Approval states. A request is pending until a human decides or it
// expires; an approved request is consumed exactly once, by the call it
// approved, which moves it to started and then done. A started call whose
// process died becomes interrupted (never run again by itself).
const (
	ApprovalPending     = "pending"
	ApprovalApproved    = "approved"
	ApprovalDenied      = "denied"
	ApprovalExpired     = "expired"
	ApprovalStarted     = "started"
	ApprovalDone        = "done"
	ApprovalInterrupted = "interrupted"
)

// Errors of approvals.
var (
	// ErrUnknownApproval: no approval request of that ID.
	ErrUnknownApproval = errors.New("unknown approval request")
	// ErrApprovalState: the request is not in the state the operation
	// needs (already decided, already consumed, expired, ...); the message
	// names the state it is in.
	ErrApprovalState = errors.New("approval request is not in that state")
	// ErrTooManyPending: the agent already has as many requests waiting
	// for a human as its bound allows; no new one is made.
	ErrTooManyPending = errors.New("too many approval requests waiting for a human")
)

// DefaultMaxPending is how many approval requests of one agent may wait
// for a human at once (pending and not expired) when the caller gives no
// bound (a maxPending of 0; the host passes the agent's max_pending,
// config.Config.MaxPending, whose default is the same). A human's
// attention is the scarce resource behind the inbox: an agent (or a
// prompt injected into it) that varies its input could otherwise fill the
// inbox without bound, burying the requests of every other agent.
// Identical calls share one request, so the bound counts distinct
// questions. An agent's boundary requests (RequestBoundary) are bounded
// alike, counted apart.
const DefaultMaxPending = 100

// pendingBound is a caller's bound on an agent's pending requests, or
// DefaultMaxPending when it gives none.
func pendingBound(n int) int {
	if n <= 0 {
		return DefaultMaxPending
	}
	return n
}

// Approval is a durable request for a human's decision on one call.
type Approval struct {
	ID         string `json:"id"`
	Agent      string `json:"agent"`
	Session    string `json:"session"`
	Tool       string `json:"tool"`
	Rendered   string `json:"rendered"`   // the arguments as shown to the human
	Digest     string `json:"digest"`     // SHA-256 (hex) of the exact input
	Middleware string `json:"middleware"` // the layer that asked
	Reason     string `json:"reason"`     // and why
	// AllowAlways is whether the rule that asked let a human approve
	// "always" (its allow_always) when it asked. The rule is named by its
	// position (middleware[N]), so after agent.toml's rules are reordered
	// the name can stand for another rule: "always" needs this and the
	// rule of that name now (adminlink.Approval). Requests from before
	// schema version 12 have false.
	AllowAlways bool `json:"allow_always"`
	// CardGeneration is the card revision in force when it was asked: the
	// caller asks again if it changed.
	CardGeneration int64 `json:"card_generation"`
	// Binding is what the human approved besides the call itself: the
	// tool's code identity and its effective policy. ConsumeAndStart
	// releases the call only under the same binding.
	Binding
	Created        time.Time `json:"created"`
	Expires        time.Time `json:"expires"`
	State          string    `json:"state"`
	DecidedBy      string    `json:"decided_by,omitempty"`
	Decided        time.Time `json:"decided,omitzero"`
	DecisionReason string    `json:"decision_reason,omitempty"`
	Runner         string    `json:"runner,omitempty"` // the process that started the call
	Started        time.Time `json:"started,omitzero"`
	Done           time.Time `json:"done,omitzero"`
}

// Binding is what an approval holds for besides the agent, the tool's name,
// the input and the cards: the tool as it was when the human was asked. A
// change to either (a new component, a wrapped CLI's command, an imported
// tool's upstream schema; hosts, secrets, limits) makes the approval
// release nothing.
type Binding struct {
	// ToolDigest is the tool's code identity: "sha256:<hex>" of a
	// WebAssembly component's file, "cli:<hex>" of a wrapped CLI's
	// program and command configuration, "mcp:<hex>" of an imported
	// tool's upstream and its input schema, "builtin:NAME" of a built-in.
	ToolDigest string `json:"tool_digest"`
	// Policy is the effective policy shown to the human (canonical JSON:
	// network, hosts, ports, secrets and where they may go, limits, paths).
	Policy string `json:"policy"`
}

// Key is the binding as an always-card minted from the request carries it
// (cards.Spec.Bound): the tool's identity and a digest of the policy. The
// approve layer counts such a card only for calls whose binding has the
// same key.
func (b Binding) Key() string {
	sum := sha256.Sum256([]byte(b.Policy))
	tool := b.ToolDigest
	if tool == "" {
		tool = "none"
	}
	return "tool=" + tool + " policy=sha256:" + hex.EncodeToString(sum[:])
}

const approvalColumns = `id, agent, session, tool, rendered, digest, middleware, reason, card_generation, created_at, expires_at,
	state, decided_by, decided_at, decision_reason, runner, started_at, done_at, tool_digest, policy, allow_always`

func scanApproval(row scanner) (Approval, error) {
	var a Approval
	var created, expires int64
	var decided, started, done sql.NullInt64
	var always int64
	err := row.Scan(&a.ID, &a.Agent, &a.Session, &a.Tool, &a.Rendered, &a.Digest, &a.Middleware, &a.Reason, &a.CardGeneration,
		&created, &expires, &a.State, &a.DecidedBy, &decided, &a.DecisionReason, &a.Runner, &started, &done, &a.ToolDigest, &a.Policy, &always)
	if err != nil {
		return a, err
	}
	a.AllowAlways = always == 1
	a.Created, a.Expires = time.Unix(0, created).UTC(), time.Unix(0, expires).UTC()
	nt := func(v sql.NullInt64) time.Time {
		if !v.Valid {
			return time.Time{}
		}
		return time.Unix(0, v.Int64).UTC()
	}
	a.Decided, a.Started, a.Done = nt(decided), nt(started), nt(done)
	return a, nil
}

func (s *DB) loadApproval(ctx context.Context, q querier, id string) (Approval, error) {
	a, err := scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ?`, id))
	if isNoRows(err) {
		return a, fmt.Errorf("%w %q", ErrUnknownApproval, id)
	}
	return a, err
}

func (s *DB) queryApprovals(ctx context.Context, where string, args ...any) ([]Approval, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+approvalColumns+` FROM approvals `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// CreateApproval persists a pending request before anything runs and
// returns it with its ID, Created and State set; if the same call (agent,
// tool, digest, rule, card revision and binding) is already pending, it
// returns that request instead and stores nothing. Expires must be later
// than now. An agent with maxPending requests pending and not expired
// (DefaultMaxPending when 0) gets ErrTooManyPending (the count and the
// check in the insert's transaction) and nothing is stored.
func (s *DB) CreateApproval(ctx context.Context, a Approval, maxPending int) (Approval, error) {
	for what, v := range map[string]string{"agent name": a.Agent, "tool name": a.Tool, "input digest": a.Digest, "middleware": a.Middleware} {
		if err := checkName(what, v); err != nil {
			return Approval{}, fmt.Errorf("create approval: %w", err)
		}
	}
	now := s.now()
	if !a.Expires.After(now) {
		return Approval{}, fmt.Errorf("create approval: %w: it would expire at %s, which is not in the future", ErrBadInput, a.Expires.UTC().Format(time.RFC3339))
	}
	a.ID = "apr_" + randomHex(10)
	a.Created = time.Unix(0, now.UnixNano()).UTC()
	a.Expires = time.Unix(0, a.Expires.UnixNano()).UTC()
	a.State = ApprovalPending
	a.DecidedBy, a.Decided, a.DecisionReason, a.Runner, a.Started, a.Done = "", time.Time{}, "", "", time.Time{}, time.Time{}
	err := s.writeKeep(ctx, func(tx *sql.Tx) error {
		// The same call already waiting for a human under the same rule,
		// card revision and binding: identical calls share one request
		// (concurrent ones each found none before they got here), so the
		// human is asked one question, whose approval runs the call once.
		same, err := scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals
			WHERE agent = ? AND tool = ? AND digest = ? AND middleware = ? AND card_generation = ? AND tool_digest = ? AND policy = ?
			AND state = ? AND expires_at > ? ORDER BY created_at, id LIMIT 1`,
			a.Agent, a.Tool, a.Digest, a.Middleware, a.CardGeneration, a.ToolDigest, a.Policy, ApprovalPending, now.UnixNano()))
		switch {
		case err == nil:
			a = same
			return nil
		case !isNoRows(err):
			return err
		}
		var waiting int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM approvals WHERE agent = ? AND state = ? AND expires_at > ?`,
			a.Agent, ApprovalPending, now.UnixNano()).Scan(&waiting); err != nil {
			return err
		}
		if waiting >= pendingBound(maxPending) {
			return fmt.Errorf("%w: %d of agent %q are pending, the most one agent may have", ErrTooManyPending, waiting, a.Agent)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO approvals (`+approvalColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', NULL, '', '', NULL, NULL, ?, ?, ?)`,
			a.ID, a.Agent, a.Session, a.Tool, a.Rendered, a.Digest, a.Middleware, a.Reason, a.CardGeneration,
			a.Created.UnixNano(), a.Expires.UnixNano(), a.State, a.ToolDigest, a.Policy, boolInt(a.AllowAlways))
		return err
	})
	if err != nil {
		return Approval{}, fmt.Errorf("create approval for agent %q, tool %q: %w", a.Agent, a.Tool, err)
	}
	return a, nil
}

// Approval returns one request.
func (s *DB) Approval(ctx context.Context, id string) (Approval, error) {
	return s.loadApproval(ctx, s.db, id)
}

// PendingApprovals lists the requests still waiting for a decision at now,
// oldest first.
func (s *DB) PendingApprovals(ctx context.Context, now time.Time) ([]Approval, error) {
	out, err := s.queryApprovals(ctx, `WHERE state = ? AND expires_at > ? ORDER BY created_at, id`, ApprovalPending, now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("pending approvals: %w", err)
	}
	return out, nil
}

// Decide approves or denies pending request id, by whom and why, and
// appends the approval or denial to the audit trail in the same
// transaction. An unknown ID is ErrUnknownApproval; a request already
// decided, or expired, is ErrApprovalState (an expired one is marked
// expired).
func (s *DB) Decide(ctx context.Context, id string, approve bool, by, reason string) (Approval, error) {
	if err := checkName("decided by", by); err != nil {
		return Approval{}, fmt.Errorf("decide %s: %w", id, err)
	}
	if strings.HasPrefix(by, "agent:") {
		return Approval{}, fmt.Errorf("decide approval %s: %w: %s is an agent; only an operator decides", id, ErrNotAllowed, by)
	}
	var out Approval
	expired := false
	err := s.writeKeep(ctx, func(tx *sql.Tx) error {
		a, err := s.loadApproval(ctx, tx, id)
		if err != nil {
			return err
		}
		now := s.now()
		if a.State == ApprovalPending && !a.Expires.After(now) {
			if _, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ? WHERE id = ? AND state = ?`, ApprovalExpired, id, ApprovalPending); err != nil {
				return err
			}
			// Commit the expiry, then refuse.
			out, a.State = a, ApprovalExpired
			expired = true
			return nil
		}
		if a.State != ApprovalPending {
			return fmt.Errorf("%w: it is %s", ErrApprovalState, a.State)
		}
		state, kind := ApprovalDenied, AuditDenial
		if approve {
			state, kind = ApprovalApproved, AuditApproval
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, decided_by = ?, decided_at = ?, decision_reason = ? WHERE id = ?`,
			state, by, now.UnixNano(), reason, id); err != nil {
			return err
		}
		if _, err := s.appendAudit(ctx, tx, AuditRecord{Kind: kind, Actor: by, Agent: a.Agent, Tool: a.Tool,
			Body: auditBody(map[string]any{"approval": id, "digest": a.Digest, "rendered": a.Rendered, "reason": reason, "asked_by": a.Middleware,
				"tool_digest": a.ToolDigest, "policy": a.Policy})}); err != nil {
			return err
		}
		a.State, a.DecidedBy, a.Decided, a.DecisionReason = state, by, time.Unix(0, now.UnixNano()).UTC(), reason
		out = a
		return nil
	})
	if err == nil && expired {
		err = fmt.Errorf("%w: it expired at %s", ErrApprovalState, out.Expires.Format(time.RFC3339))
	}
	if err != nil {
		return Approval{}, fmt.Errorf("decide approval %s: %w", id, err)
	}
	return out, nil
}

// FindApproved returns the approved, not yet consumed and unexpired
// request for agent's call of tool with input digest, if there is one
// (found false otherwise).
func (s *DB) FindApproved(ctx context.Context, agent, tool, digest string, now time.Time) (a Approval, found bool, err error) {
	as, err := s.queryApprovals(ctx, `WHERE agent = ? AND tool = ? AND digest = ? AND state = ? AND expires_at > ? ORDER BY created_at, id LIMIT 1`,
		agent, tool, digest, ApprovalApproved, now.UnixNano())
	if err != nil || len(as) == 0 {
		return Approval{}, false, err
	}
	return as[0], true, nil
}

// LatestApproval returns the most recent request that rule (a middleware
// layer) made for agent's call of tool with input digest under binding
// prefer, else under any binding, in any state (found false if there is
// none): a repeated call finds the request it is already waiting for, or
// learns that its approved run was interrupted. The same input can run
// under several bindings at once (a file built-in's relative path is
// another file in another session), so a request made for one does not
// hide another's. Each approve layer needs its own approval.
func (s *DB) LatestApproval(ctx context.Context, agent, tool, digest, rule string, prefer Binding) (a Approval, found bool, err error) {
	as, err := s.queryApprovals(ctx, `WHERE agent = ? AND tool = ? AND digest = ? AND middleware = ?
		ORDER BY CASE WHEN tool_digest = ? AND policy = ? THEN 0 ELSE 1 END, created_at DESC, id DESC LIMIT 1`,
		agent, tool, digest, rule, prefer.ToolDigest, prefer.Policy)
	if err != nil || len(as) == 0 {
		return Approval{}, false, err
	}
	return as[0], true, nil
}

// RecentDenial returns a denial of agent's call of tool with input digest
// whose request has not expired: a denial is remembered until then, so
// asking again does not ask the human again.
func (s *DB) RecentDenial(ctx context.Context, agent, tool, digest string, now time.Time) (a Approval, found bool, err error) {
	as, err := s.queryApprovals(ctx, `WHERE agent = ? AND tool = ? AND digest = ? AND state = ? AND expires_at > ? ORDER BY decided_at DESC, id LIMIT 1`,
		agent, tool, digest, ApprovalDenied, now.UnixNano())
	if err != nil || len(as) == 0 {
		return Approval{}, false, err
	}
	return as[0], true, nil
}

// runnerID names this process for the started calls it runs:
// "HOST/PID/NONCE". The nonce is random, and where the system says when
// the process started (Linux's /proc) it goes on with that: the boot and
// the start time (processMark), so that a PID another process has since
// taken is told apart from the runner (runnerGone). Every one made is kept
// in ownRunners.
func runnerID() string {
	host, _ := os.Hostname()
	nonce := randomHex(4)
	if m := processMark(os.Getpid()); m != "" {
		nonce += "-" + m
	}
	id := host + "/" + strconv.Itoa(os.Getpid()) + "/" + nonce
	ownRunners.Store(id, struct{}{})
	return id
}

// ownRunners are the runner IDs of this process's stores (runnerID): a
// runner of this host and this process's PID that is not among them was
// an earlier process that had the same PID, and is gone (runnerGone).
// A container's maiden is PID 1 after every restart, and its hostname is
// often stable: judged by the PID alone, the requests and started calls
// of the maiden before the restart would never count as interrupted
// (BOUNDARIES.md B16: pending boundary requests denied host_restarted).
var ownRunners sync.Map

// ConsumeAndStart consumes approved request id and marks its call started
// by this process, in one transaction, if the call is to run under the
// binding b the human approved (the same tool code and policy): of any
// number of concurrent callers (in any process) exactly one succeeds; the
// others get ErrApprovalState. An unknown ID is ErrUnknownApproval; an
// expired approval, or one approved under another binding (it stays
// approved, for the tool it was approved for), is ErrApprovalState.
func (s *DB) ConsumeAndStart(ctx context.Context, id string, b Binding) (Approval, error) {
	var out Approval
	err := s.writeKeep(ctx, func(tx *sql.Tx) error {
		now := s.now().UnixNano()
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, runner = ?, started_at = ? WHERE id = ? AND state = ? AND expires_at > ? AND tool_digest = ? AND policy = ?`,
			ApprovalStarted, s.runner, now, id, ApprovalApproved, now, b.ToolDigest, b.Policy)
		if err != nil {
			return err
		}
		a, err := s.loadApproval(ctx, tx, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return err
			}
			if a.State == ApprovalApproved && a.Expires.UnixNano() <= now {
				return fmt.Errorf("%w: it expired at %s", ErrApprovalState, a.Expires.Format(time.RFC3339))
			}
			if a.State == ApprovalApproved && a.ToolDigest != b.ToolDigest {
				return fmt.Errorf("%w: it was approved for another version of the tool (%s, not %s)", ErrApprovalState, orNone(a.ToolDigest), orNone(b.ToolDigest))
			}
			if a.State == ApprovalApproved {
				return fmt.Errorf("%w: it was approved under another policy of the tool", ErrApprovalState)
			}
			return fmt.Errorf("%w: it is %s, not approved", ErrApprovalState, a.State)
		}
		out = a
		return nil
	})
	if err != nil {
		return Approval{}, fmt.Errorf("start approved call %s: %w", id, err)
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}

// MarkDone records that started call id finished (whatever its result).
func (s *DB) MarkDone(ctx context.Context, id string) error {
	return s.leaveStarted(ctx, id, "mark approved call "+id+" done", "not started",
		`UPDATE approvals SET state = ?, done_at = ? WHERE id = ? AND state = ?`, ApprovalDone, s.now().UnixNano(), id, ApprovalStarted)
}

// Unstart gives back approval id, consumed by this store's process
// (ConsumeAndStart) for a call that was then refused before its tool ran
// (a budget exhausted, the audit record not written): it is approved and
// unconsumed again, so the repeated call uses it, as a call refused by a
// layer before the consumption would. Only a call this process started is
// given back; one started elsewhere, or already done, is ErrApprovalState.
func (s *DB) Unstart(ctx context.Context, id string) error {
	return s.leaveStarted(ctx, id, "give back approved call "+id, "not started by this process",
		`UPDATE approvals SET state = ?, runner = '', started_at = NULL WHERE id = ? AND state = ? AND runner = ?`,
		ApprovalApproved, id, ApprovalStarted, s.runner)
}

// leaveStarted moves started approval id out of that state with update,
// which changes its one row or none: none is ErrApprovalState naming the
// state (and runner) it is in instead, and why; op names the operation in
// the error.
func (s *DB) leaveStarted(ctx context.Context, id, op, why, update string, args ...any) error {
	err := s.writeKeep(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, update, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		a, err := s.loadApproval(ctx, tx, id)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: it is %s (runner %q), %s", ErrApprovalState, a.State, a.Runner, why)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// MarkInterruptedOnStartup marks interrupted the started calls whose
// process is gone, and returns how many: those started by a process of
// this host whose PID no longer exists. A call started by a live process
// (another maiden on the same store) is left alone; so is one started on
// another host (that host's maiden marks it when it restarts) and one
// whose PID was reused by an unrelated process since (marked by a later
// startup once that PID is free).
func (s *DB) MarkInterruptedOnStartup(ctx context.Context) (int, error) {
	host, _ := os.Hostname()
	n := 0
	err := s.writeKeep(ctx, func(tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, `SELECT id, runner FROM approvals WHERE state = ?`, ApprovalStarted)
		if err != nil {
			return err
		}
		var dead []string
		for rows.Next() {
			var id, runner string
			if err := rows.Scan(&id, &runner); err != nil {
				rows.Close()
				return err
			}
			if runnerGone(host, runner) {
				dead = append(dead, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range dead {
			res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, done_at = ? WHERE id = ? AND state = ?`,
				ApprovalInterrupted, s.now().UnixNano(), id, ApprovalStarted)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mark interrupted calls: %w", err)
	}
	return n, nil
}

// Expire marks expired the pending and approved-but-unconsumed requests
// whose time is up at now (expiry is a denial), and returns how many.
func (s *DB) Expire(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.writeKeep(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ? WHERE state IN (?, ?) AND expires_at <= ?`,
			ApprovalExpired, ApprovalPending, ApprovalApproved, now.UnixNano())
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		n = int(k)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expire approvals: %w", err)
	}
	return n, nil
}

// boolInt is b as the 0 or 1 a BIGINT column holds (portable between
// SQLite and PostgreSQL, which have no common boolean literal for both
// drivers' parameters).
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
