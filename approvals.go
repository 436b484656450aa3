package maiden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the human side of approvals: listing the calls that wait
// for a decision, and deciding them. The waiting side (the approve
// middleware that asks and the call that waits) is in middleware_approve.go.
// Deciding is for operators only: maiden's command line (which holds the
// store file) and the inbox page (an operator token); no agent token can
// reach these functions.

// Errors of deciding an approval request; test with errors.Is.
var (
	// ErrUnknownApproval: no approval request has that ID.
	ErrUnknownApproval = errors.New("unknown approval request")
	// ErrApprovalDecided: the request was already decided (or expired, or
	// consumed); the message says which.
	ErrApprovalDecided = errors.New("approval request already decided")
	// ErrAlwaysRefused: "always" was asked for a request whose rule may
	// never be auto-approved (allow_always = false in agent.toml), or the
	// edited grant does not stay within the approved call.
	ErrAlwaysRefused = errors.New("always-allow refused")
)

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
	// Kind is "call" (a tool call an approve rule holds) or "boundary" (a
	// session asks to widen its sandbox boundary: request_sandbox_boundary).
	// A boundary request's ID is its handle, Session the session it would
	// widen, Rendered its expansion as JSON (also in Expansion), Reason
	// the agent's justification, and Revision the boundary revision it
	// was made against (then, once approved, the one it produced).
	Kind      string          `json:"kind"`
	Expansion json.RawMessage `json:"expansion,omitempty"`
	Revision  int64           `json:"revision,omitempty"`

	binding store.Binding // as stored: an always-card carries it (boundKey)
}

// Kinds of request in ApprovalRequest.Kind.
const (
	RequestCall     = "call"
	RequestBoundary = "boundary"
)

// boundaryApprovalView is a boundary request as the humans who decide see
// it, beside the calls waiting for approval.
func boundaryApprovalView(r store.BoundaryRequest) ApprovalRequest {
	x, _ := json.Marshal(r.Request.Expansion)
	state := string(r.Request.Status)
	reason := ""
	if r.Request.Status != boundary.Pending {
		reason = r.Request.Reason
	}
	rev := r.Request.BaseRevision
	if r.Request.Status == boundary.Approved {
		rev = r.Request.Revision
	}
	return ApprovalRequest{
		ID: r.Handle, Kind: RequestBoundary, Agent: r.Agent, Session: r.Session, Tool: "request_sandbox_boundary",
		Rendered: string(x), Expansion: x, Revision: rev, Rule: "request " + r.Request.ID, Reason: r.Request.Justification,
		Hosts: []string{}, Secrets: []string{}, Created: r.Created, Expires: r.Expires, State: state,
		DecidedBy: r.DecidedBy, Decided: r.Decided, DecisionReason: reason,
	}
}

// isBoundaryHandle tells a boundary request's handle from an approval's ID.
// (The store makes handles "bnd_" + hex; approvals' IDs never start so.)
func isBoundaryHandle(id string) bool { return strings.HasPrefix(id, "bnd_") }

// Decision is a human's answer to an approval request.
type Decision struct {
	Approve bool
	// Always (approving only) also installs a card in the agent's wallet
	// that pre-approves calls matching Grant, so they do not ask again.
	Always bool
	// Grant is the always-card's grant, edited by the human; "" means the
	// request's AlwaysGrant. It must be an approve:always grant of the
	// same tool, covered by... nothing broader than the agent's wallet
	// allows for tool:invoke (checked when the call runs).
	Grant string
	// By names who decided ("operator:alice", "cli:root"); recorded in the
	// audit trail.
	By string
	// Reason is the human's reason, shown to the agent on a denial.
	Reason string
}

// approvalRequest builds the human view of stored request a under cfg.
func approvalRequest(a store.Approval, cfg *config.Config) ApprovalRequest {
	r := ApprovalRequest{
		ID: a.ID, Agent: a.Agent, Session: a.Session, Tool: a.Tool, Rendered: a.Rendered, Digest: a.Digest,
		Rule: a.Middleware, Reason: a.Reason, Created: a.Created, Expires: a.Expires, State: a.State,
		DecidedBy: a.DecidedBy, Decided: a.Decided, DecisionReason: a.DecisionReason,
		Hosts: []string{}, Secrets: []string{}, Kind: RequestCall, ToolDigest: a.ToolDigest, binding: a.Binding,
	}
	// The human sees the policy the call asked under, as stored with the
	// request (which is what an approval is bound to), not agent.toml as it
	// is now.
	var p ApprovalPolicy
	if a.Policy != "" && json.Unmarshal([]byte(a.Policy), &p) == nil {
		r.Policy = &p
		r.Hosts = append(r.Hosts, p.Hosts...)
		r.Secrets = append(r.Secrets, p.Secrets...)
	}
	if rule, ok := cfg.MiddlewareRule(a.Middleware); ok {
		r.AllowAlways = rule.AllowAlways
	}
	r.AlwaysGrant = alwaysGrant(a.Tool, a.Rendered)
	return r
}

// alwaysGrant is the approve:always grant for exactly one call.
func alwaysGrant(tool, rendered string) string {
	g := "approve:always " + tool
	if rendered != "" {
		g += " " + rendered
	}
	return g
}

// PendingApprovals lists the requests of st that wait for a decision at
// now, oldest first, as cfg describes them. maiden's command line calls it
// on the store it opened; the inbox page through Host.Pending.
func PendingApprovals(ctx context.Context, st store.Store, cfg *config.Config, now time.Time) ([]ApprovalRequest, error) {
	list, err := st.PendingApprovals(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make([]ApprovalRequest, len(list))
	for i, a := range list {
		out[i] = approvalRequest(a, cfg)
	}
	reqs, err := st.PendingBoundaryRequests(ctx, now)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		out = append(out, boundaryApprovalView(r))
	}
	slices.SortStableFunc(out, func(a, b ApprovalRequest) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// LookupApproval returns one request of st, in any state.
func LookupApproval(ctx context.Context, st store.Store, cfg *config.Config, id string) (ApprovalRequest, error) {
	if isBoundaryHandle(id) {
		r, err := st.BoundaryRequest(ctx, id)
		if errors.Is(err, store.ErrUnknownBoundaryRequest) {
			return ApprovalRequest{}, fmt.Errorf("%w %q", ErrUnknownApproval, id)
		}
		if err != nil {
			return ApprovalRequest{}, err
		}
		return boundaryApprovalView(r), nil
	}
	a, err := st.Approval(ctx, id)
	if errors.Is(err, store.ErrUnknownApproval) {
		return ApprovalRequest{}, fmt.Errorf("%w %q", ErrUnknownApproval, id)
	}
	if err != nil {
		return ApprovalRequest{}, err
	}
	return approvalRequest(a, cfg), nil
}

// DecideApproval records a human's decision on request id in st (audited
// in the same transaction) and, for an always-approval, installs the card
// that pre-approves the same call. An unknown ID is ErrUnknownApproval; a
// request that is not pending is ErrApprovalDecided; always for a rule that
// forbids it, or an edited grant broader than the call, is
// ErrAlwaysRefused (and nothing is decided).
func DecideApproval(ctx context.Context, st store.Store, cfg *config.Config, id string, d Decision) (ApprovalRequest, error) {
	cur, err := LookupApproval(ctx, st, cfg, id)
	if err != nil {
		return ApprovalRequest{}, err
	}
	if cur.Kind == RequestBoundary {
		return decideBoundary(ctx, st, cur, d)
	}
	if cur.State != store.ApprovalPending {
		return cur, fmt.Errorf("%w: request %s is %s", ErrApprovalDecided, id, cur.State)
	}
	var spec cards.Spec
	if d.Approve && d.Always {
		if !cur.AllowAlways {
			return cur, fmt.Errorf("%w: the rule that asked (%s) may never be auto-approved; approve this call once instead", ErrAlwaysRefused, cur.Rule)
		}
		text := strings.TrimSpace(d.Grant)
		if text == "" {
			text = cur.AlwaysGrant
		}
		g, err := checkAlwaysGrant(text, cur)
		if err != nil {
			return cur, err
		}
		// The card holds for the tool and policy the human was shown, as
		// the approval does (alwaysWallet).
		spec = cards.Spec{LowerPos: cards.Any(g), Bound: boundKey(cur.binding)}
	}
	by := d.By
	if by == "" {
		by = "operator"
	}
	a, err := st.Decide(ctx, id, d.Approve, by, d.Reason)
	switch {
	case errors.Is(err, store.ErrUnknownApproval):
		return cur, fmt.Errorf("%w %q", ErrUnknownApproval, id)
	case errors.Is(err, store.ErrApprovalState):
		return cur, fmt.Errorf("%w: %v", ErrApprovalDecided, err)
	case err != nil:
		return cur, err
	}
	out := approvalRequest(a, cfg)
	if !spec.Empty() {
		if _, err := st.Grant(ctx, a.Agent, spec); err != nil {
			return out, fmt.Errorf("approved once, but the always-card was not installed: %w", err)
		}
	}
	return out, nil
}

// decideBoundary settles a boundary request: an approval applies the
// expansion as the session's next revision (or ends in conflict), a denial
// keeps the human's reason for the waiting call.
func decideBoundary(ctx context.Context, st store.Store, cur ApprovalRequest, d Decision) (ApprovalRequest, error) {
	if d.Always {
		return cur, fmt.Errorf("%w: a boundary request widens one session once; there is no always for it", ErrAlwaysRefused)
	}
	if cur.State != string(boundary.Pending) {
		return cur, fmt.Errorf("%w: boundary request %s is %s", ErrApprovalDecided, cur.ID, cur.State)
	}
	by := d.By
	if by == "" {
		by = "operator"
	}
	dec := boundary.Allow()
	if !d.Approve {
		dec = boundary.Deny(d.Reason)
	}
	r, _, err := st.SettleBoundaryRequest(ctx, cur.ID, dec, by)
	switch {
	case errors.Is(err, store.ErrUnknownBoundaryRequest):
		return cur, fmt.Errorf("%w %q", ErrUnknownApproval, cur.ID)
	case errors.Is(err, store.ErrApprovalState):
		return cur, fmt.Errorf("%w: %v", ErrApprovalDecided, err)
	case err != nil:
		return cur, err
	}
	return boundaryApprovalView(r), nil
}

// checkAlwaysGrant parses an always-card's grant and checks that it is an
// approve:always grant of the request's tool that matches the approved
// call itself (a human may widen the arguments with wildcards, which is
// what editing is for, but not name another tool).
func checkAlwaysGrant(text string, r ApprovalRequest) (grant.Grant, error) {
	g, err := grant.Parse(text)
	if err != nil {
		return grant.Grant{}, fmt.Errorf("%w: %v", ErrAlwaysRefused, err)
	}
	if g.Class != grant.Approve {
		return grant.Grant{}, fmt.Errorf("%w: %q is not an approve:always grant", ErrAlwaysRefused, text)
	}
	exact, err := grant.Parse(r.AlwaysGrant)
	if err != nil {
		return grant.Grant{}, fmt.Errorf("%w: the request's rendering: %v", ErrAlwaysRefused, err)
	}
	if !g.Covers(exact) {
		return grant.Grant{}, fmt.Errorf("%w: %q does not cover the call being approved (%s)", ErrAlwaysRefused, text, r.AlwaysGrant)
	}
	if name, ok := g.LiteralName(); !ok || name != r.Tool {
		return grant.Grant{}, fmt.Errorf("%w: %q must name the tool %s exactly", ErrAlwaysRefused, text, r.Tool)
	}
	return g, nil
}

// Pending lists the approval requests waiting for a decision.
func (h *Host) Pending(ctx context.Context) ([]ApprovalRequest, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	list, err := PendingApprovals(ctx, st, cfg, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return list, nil
}

// Approval returns one approval request, in any state.
func (h *Host) Approval(ctx context.Context, id string) (ApprovalRequest, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return ApprovalRequest{}, err
	}
	return LookupApproval(ctx, st, cfg, id)
}

// Decide records an operator's decision (see DecideApproval) and wakes the
// calls of this process that wait for it at once; calls waiting in other
// processes see it at their next poll.
func (h *Host) Decide(ctx context.Context, id string, d Decision) (ApprovalRequest, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return ApprovalRequest{}, err
	}
	r, err := DecideApproval(ctx, st, cfg, id, d)
	if err == nil {
		h.waiters.wake(id)
	}
	return r, err
}

// Cards lists agent's cards ("" for every agent), revoked ones included,
// for the operators' inbox page.
func (h *Host) Cards(ctx context.Context, agent string) ([]cards.Card, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	list, err := st.Cards(ctx, agent)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return list, nil
}

// RevokeCard revokes card id and its descendants as the operator (by
// names who, for the log); it returns how many cards it revoked. The next
// call of every agent sees it.
func (h *Host) RevokeCard(ctx context.Context, id, by string) (int, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	if err != nil {
		return 0, err
	}
	n, err := st.Revoke(ctx, store.Operator(), id)
	if err == nil {
		h.log.Info("card revoked", "card", id, "by", by, "revoked", n)
	}
	return n, err
}
