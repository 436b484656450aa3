package pipeline

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
