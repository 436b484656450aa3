package pipeline

import (
	"os"
	"testing"

	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/pgtest"
	"github.com/maiden-run/maiden/internal/worker"
)

// TestMain makes this test binary serve as a worker process (and as the
// confinement probe's child), as maiden.WorkerMain does for an embedder:
// the tests that run tools in workers start this binary again.
func TestMain(m *testing.M) {
	confine.Main()
	worker.Main()
	os.Exit(pgtest.Run(m))
}
