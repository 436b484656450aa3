package mcpserver

import (
	"os"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestMain lets this test binary serve as maiden's own helper processes:
// the confinement probe's child (wrapped CLIs) and workers.
//
// The tests that drive a maiden serve process with Node.js clients, the
// Inspector, a browser or the conformance suite call t.Parallel: they spend
// their time waiting on those processes, and each has its own server
// (listening on port 0), configuration and temporary directories. They share
// the maiden binary (testkit.Binary), the npm installs (npmDir, under a
// lock) and the compiled-code cache (testkit.CompileCache, safe for
// concurrent writers). The other tests run first, one at a time, as before.
func TestMain(m *testing.M) {
	maiden.WorkerMain()
	os.Exit(m.Run())
}
