package wasmscan_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmscan"
)

// TestRealToolsPassLimits scans every tool the repository builds: the WAT
// fixtures, the componentize-js fixtures and the Go examples (standard Go
// through the preview1 adapter). Each must pass DefaultLimits with room to
// spare, and the table it logs (go test -v) is where the limits come from.
func TestRealToolsPassLimits(t *testing.T) {
	root := testkit.RepoRoot(t)
	var tools []string
	wats, _ := filepath.Glob(filepath.Join(root, "testdata", "tools", "*.wat"))
	for _, w := range wats {
		tools = append(tools, strings.TrimSuffix(filepath.Base(w), ".wat"))
	}
	jss, _ := filepath.Glob(filepath.Join(root, "testdata", "tools", "js", "*.js"))
	for _, j := range jss {
		tools = append(tools, "js/"+strings.TrimSuffix(filepath.Base(j), ".js"))
	}
	paths := map[string]string{}
	for _, name := range tools {
		paths[name] = testkit.Component(t, name)
	}
	// The Go examples, built as `maiden build` builds them (toolbuild's
	// Build, as testkit builds "examples/NAME"): from testkit's cache,
	// keyed by the example's and the SDK's sources, the toolchain and Go's
	// version, so a run builds them only when one of those changed instead
	// of twice more per run.
	for _, ex := range []string{"echo", "weather"} {
		name := "go/" + ex
		tools = append(tools, name)
		paths[name] = testkit.Component(t, "examples/"+ex)
	}

	t.Logf("%-16s %9s %5s %6s %7s %8s %7s %5s %9s %9s %6s %6s %9s", "tool", "bytes", "inst", "funcs", "globals", "tab.elem", "elems", "mems", "mem init", "data", "canon", "defs", "host est")
	for _, name := range tools {
		b, err := os.ReadFile(paths[name])
		if err != nil {
			t.Fatal(err)
		}
		if name == "notwasm" {
			if _, err := wasmscan.Scan(b); err == nil {
				t.Errorf("notwasm scanned without error")
			}
			continue
		}
		st, err := wasmscan.Scan(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		s := st.Totals
		t.Logf("%-16s %9d %5d %6d %7d %8d %7d %5d %9s %9s %6d %6d %9s", name, len(b), s.CoreInstances, s.Functions, s.Globals,
			s.TableElements, s.ElemEntries, s.Memories, kib(s.MemoryBytes), kib(s.DataBytes), s.CanonFunctions, s.Definitions, kib(s.HostBytes))
		if err := wasmscan.DefaultLimits.Check(s); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// Room to spare: a real tool uses under a tenth of each limit.
		l := wasmscan.DefaultLimits
		if s.HostBytes > l.HostBytes/10 || s.Globals > l.Globals/10 || s.Definitions > l.Definitions/10 || s.TableElements > l.TableElements/10 {
			t.Errorf("%s is within a factor of ten of the limits: %+v", name, s)
		}
	}
}

func kib(n uint64) string { return fmt.Sprintf("%.0fK", float64(n)/1024) }
