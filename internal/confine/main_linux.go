package confine

import "os"

// wireSpec is Run's plan for one run, as the parent prepares it.
type wireSpec struct {
	Path      string
	Argv      []string
	Env       []string
	ReadOnly  []string
	Writable  []string
	ProxyPort int
	Limits    Limits
	// Landlock is the ABI to confine with; 0 means none (Unconfined).
	Landlock int
	// SystemReadOnly are opened following links; ReadOnly and Writable
	// are not.
	SystemReadOnly []string
}

// Main must be called first thing in main by a program that uses Probe:
// the probe's confined child is this program again, and Main runs its
// checks and exits. In any other process it returns at once. (Run itself
// needs no trampoline: see spawn_linux.c.)
func Main() {
	switch os.Getenv(probeMarker) {
	case "":
	case probeLeave:
		probeLeaveGroup() // never returns
	default:
		probeChild() // never returns
	}
}
