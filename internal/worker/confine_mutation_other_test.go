//go:build !amd64

package worker

// legacyDenied: none beyond x86_64 (see confine_mutation_amd64_test.go).
var legacyDenied []struct {
	name string
	nr   uintptr
	args []uintptr
}

// forkCalls: none beyond x86_64.
var forkCalls []struct {
	name string
	nr   uintptr
}

// archArgProbes: none beyond x86_64.
var archArgProbes []probeCall
