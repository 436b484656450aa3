package pipeline

import (
	"context"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/callaudit"
)

// The operators' methods are the root's (package admin over State); these
// are the same steps for this package's tests.

// decideRequest is maiden.Host.Decide: admin's decision, then the waiters woken.
func decideRequest(ctx context.Context, h *Host, id string, a admin.Answer) (ApprovalRequest, error) {
	st, cfg, err := h.State(ctx)
	if err != nil {
		return ApprovalRequest{}, err
	}
	r, err := adminlink.Over(st, cfg).(*admin.State).Decide(ctx, id, a)
	if err == nil {
		h.Wake(id)
	}
	return r, err
}

// auditTail is maiden.Host.AuditTail: the journal flushed, then admin's.
func auditTail(ctx context.Context, h *Host) ([]AuditRecord, error) {
	st, cfg, err := h.State(ctx)
	if err != nil {
		return nil, err
	}
	if err := callaudit.Flush(ctx, st); err != nil {
		return nil, err
	}
	return adminlink.Over(st, cfg).(*admin.State).AuditTail(ctx, 0, 0)
}
