package mcpserver

import (
	"os"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestMain lets this test binary serve as maiden's own helper processes:
// the confinement probe's child (wrapped CLIs) and workers.
//
// The tests call t.Parallel: they spend their time waiting (on a maiden
// serve process, Node.js clients, the Inspector, a browser, the conformance
// suite, a tool's deadline, a human's approval), and each has its own host,
// server (listening on port 0), state store, configuration and temporary
// directories. They share the maiden binary (testkit.Binary), the npm
// installs (npmDir, under a lock) and the compiled-code cache
// (testkit.CompileCache, safe for concurrent writers). The few that measure
// the process's CPU time or hold a call to bounds of a second run first,
// one at a time.
func TestMain(m *testing.M) {
	maiden.WorkerMain()
	os.Exit(m.Run())
}
