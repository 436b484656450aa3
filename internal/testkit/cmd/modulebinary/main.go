// Command modulebinary builds a program of another module into the testkit
// cache, exactly as testkit.ModuleBinary would (the same file, the same lock,
// the same go build flags), and prints its path. make test's first step,
// scripts/deps, runs it in the background for the tracing test's collector,
// so that its build (minutes of CPU on a cold build cache) overlaps
// apt-get's downloads instead of the tests; a test that needs the binary
// meanwhile waits on the lock, and one run without it builds it itself.
//
//	go run ./internal/testkit/cmd/modulebinary ./internal/trace/otlp/testdata/otelcol github.com/maiden-run/maiden/internal/trace/otlp/testdata/otelcol
//
// Run it from the repository (the cache is per checkout); MAIDEN_TESTKIT_DIR
// moves the cache as it does for the tests.
package main

import (
	"fmt"
	"os"

	"github.com/maiden-run/maiden/internal/testkit"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: modulebinary DIR PKG   (DIR: the module's directory under the repository, such as ./internal/trace/otlp/testdata/otelcol)")
		os.Exit(2)
	}
	path, err := testkit.BuildModuleBinary(os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "modulebinary:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
