package mcpserver

import (
	"os"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestMain lets this test binary serve as maiden's own helper processes:
// the confinement probe's child (wrapped CLIs) and workers.
func TestMain(m *testing.M) {
	maiden.WorkerMain()
	os.Exit(m.Run())
}
