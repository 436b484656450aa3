package confine

// The trampoline itself is C (tramp_linux.c): a constructor that runs
// before the Go runtime, so starting it costs no Go initialisation, and
// that confines its only thread before executing the target.

/*
#cgo CFLAGS: -O2 -Wall
*/
import "C"

import (
	"os"
)

// Run starts the current binary with envMarker set (last in the
// environment; "L" = apply the Landlock ruleset on fd 3, "N" = none), the
// config on fd 4 and a status pipe on fd 5, which the trampoline makes
// close-on-exec: EOF without a message means the target was executed.
const (
	envMarker = "MAIDEN_CONFINE_TRAMPOLINE"
)

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
}

// Main must be called first thing in main by a program that uses Run or
// Probe. The trampoline never reaches it (the C constructor executes the
// target or exits first); Main serves the probe's confined child, and
// returns at once in any other process.
func Main() {
	if os.Getenv(envMarker) != "" {
		// The constructor cannot have returned into Go with the marker
		// set; refuse to go on rather than run unconfined.
		os.Exit(127)
	}
	switch os.Getenv(probeMarker) {
	case "":
	case probeLeave:
		probeLeaveGroup() // never returns
	default:
		probeChild() // never returns
	}
}
