package wasmscan_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmscan/scantest"
)

// FuzzScan: Scan must survive any bytes, fail only with its own errors, and
// stay linear: every count it multiplies comes from bytes that exist. Seeds
// cover each decoder path (nesting, aliases, imports, exports, every core
// section); run it with
//
//	go test ./internal/wasmscan -run '^$' -fuzz FuzzScan -fuzztime 60s
func FuzzScan(f *testing.F) {
	spec := scantest.ModuleSpec{Globals: 3, Functions: 2, Table: 4, Tables: 1, Memories: 1, DataBytes: 5, ElemEntries: 2}
	f.Add(scantest.Component(scantest.Module(spec), 3))
	f.Add(scantest.Nest(scantest.Nest(scantest.Component(scantest.Module(spec), 2), 2), 2))
	for _, tc := range indexSpaceCases() {
		f.Add(tc)
	}
	// Real components, when the repository's tests have built them. The
	// cache keeps a build per version of the build driver, mostly the same
	// bytes under another name: each distinct component is one seed, so
	// that the seeds (and a run's count of tests) do not grow with the
	// cache's history.
	if dir, err := os.UserCacheDir(); err == nil {
		files, _ := filepath.Glob(filepath.Join(dir, "maiden", "testkit", "*.wasm"))
		seen := map[string]bool{}
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 && !seen[string(b)] {
				seen[string(b)] = true
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
			case <-time.After(30 * time.Second): // microseconds normally; generous for a loaded machine
				panic(fmt.Sprintf("Scan hangs on % x", b))
			}
		}()
		defer close(done)
		st, err := wasmscan.Scan(b)
		if err != nil {
			if !errors.Is(err, wasmscan.ErrMalformed) && !errors.Is(err, wasmscan.ErrUnbounded) {
				t.Fatalf("Scan failed with an error of no known kind: %v", err)
			}
			return
		}
		// Each module found occupies bytes of the input.
		size := 0
		for _, m := range st.Modules {
			size += m.Size
		}
		if size > len(b) {
			t.Fatalf("%d bytes of modules in a %d-byte input", size, len(b))
		}
		_ = wasmscan.DefaultLimits.Check(st.Totals)
	})
}

// indexSpaceCases are the hand-encoded components of TestIndexSpaces.
func indexSpaceCases() [][]byte {
	return [][]byte{
		comp(sec(1, smallMod), sec(1, bigMod), sec(10, []byte{1, 0x00, 1, 'm', 0x00, 0x11, 0}), coreInst(2, 3)),
		comp(sec(1, smallMod), sec(1, bigMod), sec(11, []byte{1, 0x00, 1, 'e', 0x00, 0x11, 0, 0x00}), coreInst(2, 4)),
		comp(sec(1, bigMod), sec(4, comp(sec(6, []byte{1, 0x00, 0x11, 0x02, 1, 0}), coreInst(0, 2))), sec(5, []byte{3, 0x00, 0, 0, 0x00, 0, 0, 0x00, 0, 0})),
		comp(sec(1, smallMod), sec(6, []byte{1, 0x00, 0x11, 0x00, 0, 1, 'x'}), coreInst(1, 1)),
		comp(sec(10, []byte{1, 0x02, 1, 'c', 1, 0x01, 1, 'v', 0x04, 0}), sec(11, []byte{1, 0x01, 1, 'd', 0x04, 0, 0x01, 0x04, 0})),
	}
}
