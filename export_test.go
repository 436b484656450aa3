package maiden

import (
	"context"

	"github.com/maiden-run/maiden/internal/pipeline"
	"github.com/maiden-run/maiden/internal/store"
)

// HeldMaterial reports whether session id holds resolved web_fetch secret
// material (for the tests of its stripping).
func (h *Host) HeldMaterial(id string) bool { return h.p.HeldMaterial(id) }

// NormalPriorityInTrouble runs a tool in trouble's calls at normal CPU
// priority until the test ends (see pipeline's lowPriorityInTrouble). Not
// for parallel tests.
func NormalPriorityInTrouble(t interface{ Cleanup(func()) }) {
	pipeline.SetLowPriorityInTrouble(false)
	t.Cleanup(func() { pipeline.SetLowPriorityInTrouble(true) })
}

// HoldAuditJournal bounds the backlog of the audit journal of the state
// store h opens (before its first call) and holds its ingestion until a
// Flush (pipeline.Host.HoldAuditJournal).
func (h *Host) HoldAuditJournal(backlog int64) { h.p.HoldAuditJournal(backlog) }

// AuditJournal is the audit journal of h's state store.
func (h *Host) AuditJournal(ctx context.Context) (*store.Journal, error) {
	return h.p.AuditJournal(ctx)
}
