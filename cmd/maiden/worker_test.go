package main

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/pgtest"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestMain lets this test binary serve as maiden's worker process (main
// calls maiden.WorkerMain first in the real binary): a process that starts
// it as a worker, such as the binary run as the CLI (MAIDEN_TEST_AS_CLI),
// gets one. The commands this package runs in process start the maiden
// binary itself as their worker instead (workerCommand), built from these
// sources without the race detector, as a user runs it: 150-odd workers a
// run, each the race test binary before, cost ~0.1 CPU-s more apiece and
// seconds of start-up on a loaded machine (a worker not started within
// 10 s failed a call).
func TestMain(m *testing.M) {
	maiden.WorkerMain()
	workerCommand = sync.OnceValue(func() []string {
		bin, err := testkit.BuildBinary("./cmd/maiden")
		if err != nil {
			fmt.Fprintf(os.Stderr, "cmd/maiden tests: building the maiden binary their workers run: %v\n", err)
			os.Exit(2)
		}
		return []string{bin}
	})
	// Built at once, beside the tests: a test whose first command starts
	// workers then waits for the build already under way, not for the
	// whole of it inside a bound of its own (a call waited for as a
	// pending approval once timed out behind it). Commands with tools in
	// process need no worker and do not wait for it (workerArgv).
	go workerCommand()
	stop := startTemplateBuilds()
	// pgtest.Run stops the throwaway PostgreSQL cluster the state tests
	// start (if one did) after the tests.
	code := pgtest.Run(m)
	stop()
	os.Exit(code)
}
