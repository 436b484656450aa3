package maiden

import "github.com/maiden-run/maiden/internal/pipeline"

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
