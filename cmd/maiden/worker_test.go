package main

import (
	"os"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestMain lets this test binary serve as maiden's worker process: the CLI
// runs tools in workers by default, re-executing itself, as the real maiden
// binary does (main calls maiden.WorkerMain first).
func TestMain(m *testing.M) {
	maiden.WorkerMain()
	os.Exit(m.Run())
}
