package pipeline

import (
	"context"
	"log/slog"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the human side of approvals as a Host serves it to the
// inbox page: listing the calls that wait for a decision, and deciding
// them. The work itself is package admin's (the root package runs it over State), which maiden's command line
// uses on the store it opens: one implementation, whichever front end a
// human decides through. The waiting side (the approve middleware that
// asks and the call that waits) is in middleware_approve.go. Deciding is
// for operators only: the command line (which holds the store) and the
// inbox page (an operator token); no agent token reaches these methods.

// ApprovalRequest is a call waiting for (or past) a human's decision
// (api.ApprovalRequest): what Options.OnApproval gets and the inbox shows.
type ApprovalRequest = api.ApprovalRequest

// ApprovalPolicy is the effective policy of a call as the human deciding
// it is shown it (api.ApprovalPolicy).
type ApprovalPolicy = api.ApprovalPolicy

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

// State is the Host's own state store, opened and synced with the
// configuration in force first, and that configuration: what the root's
// operator methods run package admin over (the same code as maiden's
// command line, on the connection and audit journal the Host's calls use).
func (h *Host) State(ctx context.Context) (store.Store, *config.Config, error) {
	cfg := h.cfg.Load()
	st, err := h.state(ctx, cfg)
	return st, cfg, err
}

// Wake wakes the calls of this Host waiting for request id's decision at
// once (the root's Decide, after recording it); calls waiting in other
// processes see it at their next poll.
func (h *Host) Wake(id string) { h.waiters.Wake(id) }

// Logger is the Host's own diagnostics log (Options.Logger).
func (h *Host) Logger() *slog.Logger { return h.log }
