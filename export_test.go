package maiden

// HeldMaterial reports whether session id holds resolved web_fetch secret
// material (for the tests of its stripping).
func (h *Host) HeldMaterial(id string) bool {
	return h.material.Held(id)
}

// NormalPriorityInTrouble runs a tool in trouble's calls at normal CPU
// priority until the test ends (see lowPriorityInTrouble). Not for parallel
// tests.
func NormalPriorityInTrouble(t interface{ Cleanup(func()) }) {
	lowPriorityInTrouble = false
	t.Cleanup(func() { lowPriorityInTrouble = true })
}
