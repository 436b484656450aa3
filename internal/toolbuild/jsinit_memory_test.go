package toolbuild

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestJSInitMemoryIsCapped: componentize-js runs a JavaScript tool's
// top-level code under wizer while it builds it; a top level that
// allocates without bound fails at the driver's cap (INIT_DATA_MIB in
// build.mjs, 1 GiB), saying so, instead of taking wasm32's 4 GiB of the
// building machine (3.8 GB resident and a minute of CPU, measured, before
// the engine gave up). The largest resident set of any process this test
// binary waited for (wizer's is counted through node, which waited for
// it) stays well under 4 GiB.
func TestJSInitMemoryIsCapped(t *testing.T) {
	t.Parallel()
	tc := toolchain(t)
	// 64 MiB at a time, each touched (fill), without end.
	src := "const hog = [];\nfor (let i = 0; i < 100000; i++) { const a = new Uint8Array(64 << 20); a.fill(i & 255 | 1); hog.push(a); }\n" +
		"export function describe() { return 'hog'; }\nexport function schema() { return '{}'; }\nexport function execute(input) { return input; }\n"
	_, err := tc.ComponentFromJS(ctxFor(t), []byte(src))
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "out of memory") || !strings.Contains(err.Error(), "capped at 1024 MiB") {
		t.Fatalf("building a tool whose top level allocates without bound: %v; want a build error saying it ran out of memory at the 1024 MiB cap", err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatal(err)
	}
	// Maxrss is in KiB. The cap is on wizer's data; its code, stacks and
	// the engine's own pages come on top, and node's build of any other
	// test of this package is ~0.5-0.7 GB.
	if limit := int64(1536 << 10); ru.Maxrss > limit {
		t.Fatalf("a child of this test binary held %d MiB resident; want at most %d MiB (the init's memory capped at 1024 MiB)", ru.Maxrss>>10, limit>>10)
	}
	t.Logf("%v", err)
}
