package main

import (
	"os"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/pgtest"
)

// TestMain lets this test binary serve as maiden's worker process: the CLI
// runs tools in workers by default, re-executing itself, as the real maiden
// binary does (main calls maiden.WorkerMain first).
func TestMain(m *testing.M) {
	maiden.WorkerMain()
	stop := startTemplateBuilds()
	// pgtest.Run stops the throwaway PostgreSQL cluster the state tests
	// start (if one did) after the tests.
	code := pgtest.Run(m)
	stop()
	os.Exit(code)
}
