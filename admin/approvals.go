package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the human side of approvals: listing the calls that wait
// for a decision, and deciding them. The waiting side (the approve
// middleware that asks and the call that waits) is the root package's.
// Deciding is for operators only: maiden's command line (which holds the
// store) and the inbox page (an operator token); no agent token reaches
// this package.

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

// Answer is a human's answer to an approval request.
type Answer struct {
	Approve bool
	// Always (approving only) also installs a card in the agent's wallet
	// that pre-approves calls matching Grant, so they do not ask again.
	Always bool
	// Grant is the always-card's grant, edited by the human; "" means the
	// request's AlwaysGrant. It must be an approve:always grant of the
	// same tool that covers the approved call.
	Grant string
	// By names who decided ("operator:alice", "cli:root"); recorded in the
	// audit trail. "" means "operator".
	By string
	// Reason is the human's reason, shown to the agent on a denial.
	Reason string
}

// Pending lists the requests that wait for a decision at now, oldest
// first: calls an approve rule holds, and sessions' requests to widen
// their sandbox boundary.
func (s *State) Pending(ctx context.Context, now time.Time) ([]api.ApprovalRequest, error) {
	list, err := s.st.PendingApprovals(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make([]api.ApprovalRequest, len(list))
	for i, a := range list {
		out[i] = adminlink.Approval(a, s.cfg)
	}
	reqs, err := s.st.PendingBoundaryRequests(ctx, now)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		out = append(out, adminlink.BoundaryApproval(r))
	}
	slices.SortStableFunc(out, func(a, b api.ApprovalRequest) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Approval returns one request, in any state; an unknown ID is
// ErrUnknownApproval.
func (s *State) Approval(ctx context.Context, id string) (api.ApprovalRequest, error) {
	r, _, err := s.lookup(ctx, id)
	return r, err
}

// lookup is Approval with the binding the request holds for (the tool's
// code and policy as the human was shown them).
func (s *State) lookup(ctx context.Context, id string) (api.ApprovalRequest, store.Binding, error) {
	if adminlink.IsBoundaryHandle(id) {
		r, err := s.st.BoundaryRequest(ctx, id)
		if errors.Is(err, store.ErrUnknownBoundaryRequest) {
			return api.ApprovalRequest{}, store.Binding{}, fmt.Errorf("%w %q", ErrUnknownApproval, id)
		}
		if err != nil {
			return api.ApprovalRequest{}, store.Binding{}, err
		}
		return adminlink.BoundaryApproval(r), store.Binding{}, nil
	}
	a, err := s.st.Approval(ctx, id)
	if errors.Is(err, store.ErrUnknownApproval) {
		return api.ApprovalRequest{}, store.Binding{}, fmt.Errorf("%w %q", ErrUnknownApproval, id)
	}
	if err != nil {
		return api.ApprovalRequest{}, store.Binding{}, err
	}
	return adminlink.Approval(a, s.cfg), a.Binding, nil
}

// Decide records a human's decision on request id (audited in the same
// transaction) and, for an always-approval, installs the card that
// pre-approves the same call. An unknown ID is ErrUnknownApproval; a
// request that is not pending is ErrApprovalDecided; always for a rule
// that forbids it, or an edited grant broader than the call, is
// ErrAlwaysRefused (and nothing is decided). A call waiting for it in
// another process sees the decision at its next poll of the store (a
// Host's own Decide also wakes its waiting calls at once).
func (s *State) Decide(ctx context.Context, id string, d Answer) (api.ApprovalRequest, error) {
	cur, binding, err := s.lookup(ctx, id)
	if err != nil {
		return api.ApprovalRequest{}, err
	}
	if cur.Kind == api.RequestBoundary {
		return s.decideBoundary(ctx, cur, d)
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
		// the approval does.
		spec = cards.Spec{LowerPos: cards.Any(g), Bound: binding.Key()}
	}
	by := d.By
	if by == "" {
		by = "operator"
	}
	a, err := s.st.Decide(ctx, id, d.Approve, by, d.Reason)
	switch {
	case errors.Is(err, store.ErrUnknownApproval):
		return cur, fmt.Errorf("%w %q", ErrUnknownApproval, id)
	case errors.Is(err, store.ErrApprovalState):
		return cur, fmt.Errorf("%w: %v", ErrApprovalDecided, err)
	case err != nil:
		return cur, err
	}
	out := adminlink.Approval(a, s.cfg)
	if !spec.Empty() {
		if _, err := s.st.Grant(ctx, a.Agent, spec); err != nil {
			return out, fmt.Errorf("approved once, but the always-card was not installed: %w", err)
		}
	}
	return out, nil
}

// decideBoundary settles a boundary request: an approval applies the
// expansion as the session's next revision (or ends in conflict), a denial
// keeps the human's reason for the waiting call.
func (s *State) decideBoundary(ctx context.Context, cur api.ApprovalRequest, d Answer) (api.ApprovalRequest, error) {
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
	r, _, err := s.st.SettleBoundaryRequest(ctx, cur.ID, dec, by)
	switch {
	case errors.Is(err, store.ErrUnknownBoundaryRequest):
		return cur, fmt.Errorf("%w %q", ErrUnknownApproval, cur.ID)
	case errors.Is(err, store.ErrApprovalState):
		return cur, fmt.Errorf("%w: %v", ErrApprovalDecided, err)
	case err != nil:
		return cur, err
	}
	return adminlink.BoundaryApproval(r), nil
}

// checkAlwaysGrant parses an always-card's grant and checks that it is an
// approve:always grant of the request's tool that matches the approved
// call itself (a human may widen the arguments with wildcards, which is
// what editing is for, but not name another tool).
func checkAlwaysGrant(text string, r api.ApprovalRequest) (grant.Grant, error) {
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
