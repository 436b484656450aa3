package compare

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestSmoke runs every configuration of the benchmark once and checks its
// output (setup makes one checked call; the operation then runs once more,
// except on the slow CPU workload). It times nothing: CI runs it so that
// ./run keeps working.
func TestSmoke(t *testing.T) {
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			for _, r := range rows {
				if !r.on(w) {
					continue
				}
				t.Run(r.name, func(t *testing.T) {
					rn := r.setup(t, w, 1)
					if rn.done != nil {
						defer rn.done()
					}
					if w.name != "cpu" {
						if err := rn.ops[0](); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// TestSameGuestCode checks that the Extism plugin runs the same scan and
// the same loop as maiden's WAT fixtures (which wazero runs as they are).
func TestSameGuestCode(t *testing.T) {
	root := testkit.RepoRoot(t)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	extismWAT := read("bench/compare/wasm/extism.wat")
	scan := regexp.MustCompile(`(?s);; BEGIN scan\n.*;; END scan\n`)
	if got, want := scan.FindString(extismWAT), scan.FindString(read("testdata/tools/jsonfield.wat")); got != want || want == "" {
		t.Errorf("wasm/extism.wat's scan block differs from testdata/tools/jsonfield.wat's; copy it verbatim")
	}
	loop := regexp.MustCompile(`(?s)\(local\.set \$i \(i64\.const 100000000\)\).*?\(br_if \$burn [^\n]*\n`)
	strip := func(s string) string { // the loop without comment lines
		var out []string
		for line := range strings.Lines(s) {
			if !strings.HasPrefix(strings.TrimSpace(line), ";;") {
				out = append(out, line)
			}
		}
		return strings.Join(out, "")
	}
	if got, want := strip(loop.FindString(extismWAT)), strip(loop.FindString(read("testdata/tools/cpuloop.wat"))); got != want || want == "" {
		t.Errorf("wasm/extism.wat's cpuloop differs from testdata/tools/cpuloop.wat's:\n%s\nwant\n%s", got, want)
	}
}

func TestJSONInput(t *testing.T) {
	in := JSONInput()
	if n := len(in); n < 9_800 || n > 10_400 {
		t.Errorf("JSONInput is %d bytes, want about 10 KB", n)
	}
	if in != JSONInput() {
		t.Error("JSONInput is not deterministic")
	}
	var v struct {
		Target string `json:"target"`
		Meta   struct {
			Target string `json:"target"`
		} `json:"meta"`
	}
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	if want, _ := strconv.Unquote(JSONTarget); v.Target != want || v.Meta.Target != "decoy" {
		t.Errorf("target %q, meta.target %q", v.Target, v.Meta.Target)
	}
}

// TestCPUOutput checks CPUOutput against the loop run in Go.
func TestCPUOutput(t *testing.T) {
	x := uint64(1)
	for i := uint64(100_000_000); i > 0; i-- {
		x = x*6364136223846793005 + i
	}
	if got := strconv.FormatUint(x, 10); got != CPUOutput {
		t.Errorf("the loop computes %s, CPUOutput is %s", got, CPUOutput)
	}
}
