package maiden

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/store"
)

// The operators' work a Host serves (the inbox page, an embedder's own
// front end): package admin's, the same code as maiden's command line, run
// over the Host's own store (the connection and audit journal its calls
// use). The call path (internal/pipeline) imports no admin; the root does.
// Deciding is for operators only: the command line (which holds the store)
// and the inbox page (an operator token); no agent token reaches these
// methods.

// admin is the operators' API over the Host's store, opened and synced
// with the configuration in force first.
func (h *Host) admin(ctx context.Context) (*admin.State, error) {
	st, cfg, err := h.p.State(ctx)
	if err != nil {
		return nil, err
	}
	return adminlink.Over(st, cfg).(*admin.State), nil
}

// OpenState opens the state store now, as the first call that needs it
// would: its schema is created (or migrated) and the configuration's agents
// and system cards are written to it. maiden serve calls it as it starts,
// so that a store shared by several instances (PostgreSQL) has its schema
// before any call, and a store that cannot be opened is reported at once.
// The error is ErrState with the cause.
func (h *Host) OpenState(ctx context.Context) error {
	_, err := h.admin(ctx)
	return err
}

// Pending lists the approval requests waiting for a decision.
func (h *Host) Pending(ctx context.Context) ([]ApprovalRequest, error) {
	s, err := h.admin(ctx)
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
	s, err := h.admin(ctx)
	if err != nil {
		return ApprovalRequest{}, err
	}
	return s.Approval(ctx, id)
}

// Decide records an operator's decision (admin.State.Decide) and wakes the
// calls of this process that wait for it at once; calls waiting in other
// processes see it at their next poll.
func (h *Host) Decide(ctx context.Context, id string, d Answer) (ApprovalRequest, error) {
	s, err := h.admin(ctx)
	if err != nil {
		return ApprovalRequest{}, err
	}
	r, err := s.Decide(ctx, id, d)
	if err == nil {
		h.p.Wake(id)
	}
	return r, err
}

// Cards lists agent's cards ("" for every agent), revoked ones included,
// for the operators' inbox page.
func (h *Host) Cards(ctx context.Context, agent string) ([]api.Card, error) {
	s, err := h.admin(ctx)
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
	s, err := h.admin(ctx)
	if err != nil {
		return 0, err
	}
	n, err := s.Revoke(ctx, id)
	if err == nil {
		h.p.Logger().Info("card revoked", "card", id, "by", by, "revoked", n)
	}
	return n, err
}

// EndSession ends session id: its boundary stops applying (a later call
// naming it is refused), the secret material it held is dropped, and the
// calls waiting on its boundary requests are woken.
func (h *Host) EndSession(ctx context.Context, id string) error {
	err := h.p.EndSession(ctx, id)
	if errors.Is(err, store.ErrUnknownSession) {
		return fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	return err
}

// TouchSession records that session id was used now, to within a minute
// (the store writes only when its time is older): what a front end that
// expires idle sessions reads back as SessionInfo.LastUsed, in every
// instance sharing the store.
func (h *Host) TouchSession(ctx context.Context, id string) error {
	err := h.p.TouchSession(ctx, id)
	if errors.Is(err, store.ErrUnknownSession) {
		return fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	return err
}

// ResetSession replaces session id's boundary by b as the operator (by
// names who): a new revision, audited. A boundary without network, or no
// longer managed, is a downgrade: the session's secret material is dropped
// at once.
func (h *Host) ResetSession(ctx context.Context, id string, b api.Boundary, by string) (SessionInfo, error) {
	s, err := h.admin(ctx)
	if err != nil {
		return SessionInfo{}, err
	}
	si, err := s.ResetSession(ctx, id, b, by)
	if err != nil {
		return SessionInfo{}, err
	}
	if !si.Boundary.Network || si.Boundary.Kind != api.BoundaryManaged {
		h.p.DropMaterial(id)
	}
	return si, nil
}

// Session returns one session with its revisions and boundary requests.
func (h *Host) Session(ctx context.Context, id string) (SessionInfo, error) {
	s, err := h.admin(ctx)
	if err != nil {
		return SessionInfo{}, err
	}
	return s.Session(ctx, id)
}

// Sessions lists agent's sessions ("" for all).
func (h *Host) Sessions(ctx context.Context, agent string) ([]SessionInfo, error) {
	s, err := h.admin(ctx)
	if err != nil {
		return nil, err
	}
	return s.Sessions(ctx, agent)
}

// AuditTail returns up to limit records after sequence number after
// (limit <= 0: all), oldest first.
func (h *Host) AuditTail(ctx context.Context, after int64, limit int) ([]AuditRecord, error) {
	s, err := h.flushedAdmin(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := s.AuditTail(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return recs, nil
}

// AuditPage is AuditTail bounded by size as well: at most limit records
// (limit > 0) after after, and none more once their bodies reach
// maxBytes, though always one when there is one (admin.State.AuditPage).
func (h *Host) AuditPage(ctx context.Context, after int64, limit int, maxBytes int64) ([]AuditRecord, error) {
	s, err := h.flushedAdmin(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := s.AuditPage(ctx, after, limit, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return recs, nil
}

// VerifyAudit checks the trail's hash chain: the number of records and the
// head hash, or an error naming the first bad record (edited, deleted,
// inserted or reordered).
func (h *Host) VerifyAudit(ctx context.Context) (n int64, head string, err error) {
	s, err := h.flushedAdmin(ctx)
	if err != nil {
		return 0, "", err
	}
	return s.VerifyAudit(ctx)
}

// VerifyAuditFrom is VerifyAudit from a mark an earlier check returned
// (admin.State.VerifyAuditFrom).
func (h *Host) VerifyAuditFrom(ctx context.Context, from admin.AuditMark, whole bool) (admin.AuditMark, error) {
	s, err := h.flushedAdmin(ctx)
	if err != nil {
		return admin.AuditMark{}, err
	}
	return s.VerifyAuditFrom(ctx, from, whole)
}

// flushedAdmin is admin over the Host's store once the records its calls
// journaled are in the trail.
func (h *Host) flushedAdmin(ctx context.Context) (*admin.State, error) {
	st, cfg, err := h.p.State(ctx)
	if err != nil {
		return nil, err
	}
	if err := callaudit.Flush(ctx, st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	return adminlink.Over(st, cfg).(*admin.State), nil
}

// ApprovalNewlyPossible says what approving request id would newly allow
// (admin.State.ApprovalNewlyPossible): for a call that may be approved
// always, its always-card (grant, "" for the request's own) against the
// agent's wallet; for a boundary request, its expansion against the
// session's boundary; and the recorded calls since since, refused or
// asked, it would have let through. The inbox page shows it beside the
// request.
func (h *Host) ApprovalNewlyPossible(ctx context.Context, id, grant string, since time.Time) (api.NewlyPossible, error) {
	s, err := h.flushedAdmin(ctx)
	if err != nil {
		return api.NewlyPossible{}, err
	}
	return s.ApprovalNewlyPossible(ctx, id, grant, since)
}
