package maiden

import (
	"context"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the human side of approvals as a Host serves it to the
// inbox page: listing the calls that wait for a decision, and deciding
// them. The work itself is package admin's, which maiden's command line
// uses on the store it opens: one implementation, whichever front end a
// human decides through. The waiting side (the approve middleware that
// asks and the call that waits) is in middleware_approve.go. Deciding is
// for operators only: the command line (which holds the store) and the
// inbox page (an operator token); no agent token reaches these methods.

// Errors of deciding an approval request (package admin's); test with
// errors.Is.
var (
	// ErrUnknownApproval: no approval request has that ID.
	ErrUnknownApproval = admin.ErrUnknownApproval
	// ErrApprovalDecided: the request was already decided (or expired, or
	// consumed); the message says which.
	ErrApprovalDecided = admin.ErrApprovalDecided
	// ErrAlwaysRefused: "always" was asked for a request whose rule may
	// never be auto-approved (allow_always = false in agent.toml), or the
	// edited grant does not stay within the approved call.
	ErrAlwaysRefused = admin.ErrAlwaysRefused
)

// ApprovalRequest is a call waiting for (or past) a human's decision
// (api.ApprovalRequest): what Options.OnApproval gets and the inbox shows.
type ApprovalRequest = api.ApprovalRequest

// ApprovalPolicy is the effective policy of a call as the human deciding
// it is shown it (api.ApprovalPolicy).
type ApprovalPolicy = api.ApprovalPolicy

// Answer is a human's answer to an approval request (admin.Answer).
type Answer = admin.Answer

// Kinds of request in ApprovalRequest.Kind.
const (
	RequestCall     = api.RequestCall
	RequestBoundary = api.RequestBoundary
)

// approvalRequest is the human view of stored request a under cfg.
func approvalRequest(a store.Approval, cfg *config.Config) ApprovalRequest {
	return adminlink.Approval(a, cfg)
}

// boundaryApprovalView is a boundary request as the humans who decide see
// it, beside the calls waiting for approval.
func boundaryApprovalView(r store.BoundaryRequest) ApprovalRequest {
	return adminlink.BoundaryApproval(r)
}

// admin is the operators' API over the Host's own store (opened and
// synced with cfg first): the same code as maiden's command line, on the
// connection and audit journal the Host's calls use.
func (h *Host) admin(ctx context.Context, cfg *config.Config) (*admin.State, error) {
	st, err := h.state(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return adminOver(st, cfg), nil
}

// adminOver is the operators' API over st, a store the Host holds.
func adminOver(st store.Store, cfg *config.Config) *admin.State {
	return adminlink.Over(st, cfg).(*admin.State)
}

// Pending lists the approval requests waiting for a decision.
func (h *Host) Pending(ctx context.Context) ([]ApprovalRequest, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return nil, err
	}
	list, err := s.Pending(ctx, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return list, nil
}

// Approval returns one approval request, in any state.
func (h *Host) Approval(ctx context.Context, id string) (ApprovalRequest, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return ApprovalRequest{}, err
	}
	return s.Approval(ctx, id)
}

// Decide records an operator's decision (admin.State.Decide) and wakes the
// calls of this process that wait for it at once; calls waiting in other
// processes see it at their next poll.
func (h *Host) Decide(ctx context.Context, id string, d Answer) (ApprovalRequest, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return ApprovalRequest{}, err
	}
	r, err := s.Decide(ctx, id, d)
	if err == nil {
		h.waiters.Wake(id)
	}
	return r, err
}

// Cards lists agent's cards ("" for every agent), revoked ones included,
// for the operators' inbox page.
func (h *Host) Cards(ctx context.Context, agent string) ([]api.Card, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return nil, err
	}
	list, err := s.Cards(ctx, agent)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return list, nil
}

// RevokeCard revokes card id and its descendants as the operator (by
// names who, for the log); it returns how many cards it revoked. The next
// call of every agent sees it.
func (h *Host) RevokeCard(ctx context.Context, id, by string) (int, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return 0, err
	}
	n, err := s.Revoke(ctx, id)
	if err == nil {
		h.log.Info("card revoked", "card", id, "by", by, "revoked", n)
	}
	return n, err
}
