package pipeline

import (
	"context"
	"errors"

	"github.com/maiden-run/maiden/internal/store"
)

// Hooks for the root package's tests, which drive a whole Host from
// outside and cannot reach this package's fields (export_test.go there).

// HeldMaterial reports whether session id holds resolved web_fetch secret
// material (for the tests of its stripping).
func (h *Host) HeldMaterial(id string) bool { return h.material.Held(id) }

// SetLowPriorityInTrouble says whether a tool in trouble's calls run at low
// CPU priority (true by default; see lowPriorityInTrouble). Tests only, and
// not parallel ones.
func SetLowPriorityInTrouble(on bool) { lowPriorityInTrouble = on }

// Options is what New was given (with its defaults filled in), for the
// root's test that every maiden.Options field reaches this package.
func (h *Host) Options() Options { return h.opts }

// HoldAuditJournal makes the state store h opens (call it before h's first
// call) bound its audit journal's backlog to backlog bytes and ingest
// only on a Flush: a test fills the backlog (AuditJournal) and watches
// what is refused.
func (h *Host) HoldAuditJournal(backlog int64) {
	h.stateHolder.mu.Lock()
	h.stateHolder.journalHeld = backlog
	h.stateHolder.mu.Unlock()
}

// AuditJournal is the audit journal of the state store of h's
// configuration, opened as a call opens it.
func (h *Host) AuditJournal(ctx context.Context) (*store.Journal, error) {
	st, err := h.state(ctx, h.Config())
	if err != nil {
		return nil, err
	}
	if j, ok := st.(interface{ Journal() *store.Journal }); ok && j.Journal() != nil {
		return j.Journal(), nil
	}
	return nil, errors.New("the state store has no audit journal")
}

// revocationWatched is how many running calls the revocation watch holds
// (tests).
func (h *Host) revocationWatched() int {
	h.revocation.mu.Lock()
	defer h.revocation.mu.Unlock()
	return len(h.revocation.calls)
}

// revocationHeld is how many running calls the revocation watch holds for
// a reload that removes their agent: every call of a declared agent past
// its admission record (tests).
func (h *Host) revocationHeld() int {
	h.revocation.mu.Lock()
	defer h.revocation.mu.Unlock()
	return len(h.revocation.all)
}
