package maiden_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestJSEngineFeatures checks docs/writing-tools.md's list of what the
// bundled JavaScript engine lacks against the engine itself: a feature
// that appears or disappears with a toolchain update fails this test until
// the documentation says so.
func TestJSEngineFeatures(t *testing.T) {
	t.Parallel()
	documented := []string{
		"Intl",
		"Intl.DateTimeFormat",
		"RegExp \\p{...} (Unicode property escapes)",
		"String.prototype.normalize",
		"WebAssembly",
	}
	h := newHostWith(t, "version = 1\n[tools.probe]\npath = %q\nmemory_mb = 128\n", maiden.Options{Isolation: maiden.InProcess}, "js/probe")
	res, err := h.Call(context.Background(), maiden.Call{Tool: "probe", Input: "{}"})
	if err != nil || !res.OK {
		t.Fatalf("%+v %v", res, err)
	}
	var got map[string]bool
	if err := json.Unmarshal([]byte(res.Output), &got); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for name, ok := range got {
		if !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if strings.Join(missing, "|") != strings.Join(documented, "|") {
		t.Errorf("the engine lacks %q; docs/writing-tools.md says %q", missing, documented)
	}
}
