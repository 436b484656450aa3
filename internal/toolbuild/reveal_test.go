package toolbuild

import (
	"testing"
)

// TestRevealContractChoice: a source or module that imports
// maiden:tool/host@0.3.0 (for reveal) is built against 0.3.0; one that
// does not keeps the contract it had.
func TestRevealContractChoice(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, src, want string }{
		{"0.3.0 WAT import", `(import "maiden:tool/host@0.3.0" "reveal" (func (param i32 i32 i32)))`, "0.3.0"},
		{"0.3.0 JS import", `import { reveal } from "maiden:tool/host@0.3.0";`, "0.3.0"},
		{"0.2.0 JS import", `import { log } from "maiden:tool/host@0.2.0";`, "0.2.0"},
	} {
		if got := contractForText([]byte(tt.src)).Version; got != tt.want {
			t.Errorf("%s: contract %s, want %s", tt.name, got, tt.want)
		}
	}

	// A core module: an import section (and an export section exporting
	// output-schema, as the Go SDK does on 0.2.0 and 0.3.0).
	type imp struct {
		mod, name string
		desc      []byte
	}
	mod := func(imps []imp, exports ...string) []byte {
		b := []byte("\x00asm\x01\x00\x00\x00")
		sec := []byte{byte(len(imps))}
		for _, i := range imps {
			sec = append(sec, byte(len(i.mod)))
			sec = append(sec, i.mod...)
			sec = append(sec, byte(len(i.name)))
			sec = append(sec, i.name...)
			sec = append(sec, i.desc...)
		}
		b = append(append(append(b, 2), leb(len(sec))...), sec...)
		sec = []byte{byte(len(exports))}
		for _, n := range exports {
			sec = append(sec, byte(len(n)))
			sec = append(sec, n...)
			sec = append(sec, 0, 0)
		}
		return append(append(b, 7, byte(len(sec))), sec...)
	}
	fn := []byte{0, 0}
	mem := []byte{2, 1, 1, 2}      // memory, limits with a max
	table := []byte{1, 0x70, 0, 1} // funcref table, min only
	global := []byte{3, 0x7f, 0}   // i32, immutable
	for _, tt := range []struct {
		name string
		core []byte
		want string
	}{
		{"reveal import after other kinds", mod([]imp{
			{"env", "memory", mem}, {"env", "table", table}, {"env", "g", global},
			{"wasi_snapshot_preview1", "fd_write", fn},
			{"maiden:tool/host@0.3.0", "log", fn}, {"maiden:tool/host@0.3.0", "reveal", fn},
		}, "describe", "output-schema"), "0.3.0"},
		{"0.2.0 imports", mod([]imp{{"maiden:tool/host@0.2.0", "log", fn}}, "describe", "output-schema"), "0.2.0"},
		{"0.1.0", mod([]imp{{"maiden:tool/host@0.1.0", "log", fn}}, "describe"), "0.1.0"},
		{"0.3.0 named only in data", append(mod(nil, "describe", "output-schema"), []byte("maiden:tool/host@0.3.0")...), "0.2.0"},
	} {
		if got := contractForCore(tt.core).Version; got != tt.want {
			t.Errorf("%s: contract %s, want %s", tt.name, got, tt.want)
		}
	}
	if _, err := wasmImportModules(mod([]imp{{"m", "x", []byte{9}}})); err == nil {
		t.Error("an unknown import kind is accepted")
	}
	if _, err := wasmImportModules([]byte("\x00asm\x01\x00\x00\x00\x02\x05\x01\x10ab")); err == nil {
		t.Error("a truncated import section is accepted")
	}
}

// leb is n in unsigned LEB128.
func leb(n int) []byte {
	var out []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

// TestRevealGoDetection: a Go package that calls maiden.Reveal is built
// with RevealTag (maiden:tool@0.3.0); one that does not is not.
func TestRevealGoDetection(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"calls Reveal", map[string]string{"main.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nfunc f(h string) { maiden.Reveal(h) }\nfunc main() {}\n"}, true},
		{"renamed", map[string]string{"main.go": "package main\nimport m \"github.com/maiden-run/maiden/sdk/go\"\nfunc f(h string) { m.Reveal(h) }\n"}, true},
		{"only Fetch", map[string]string{"main.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nfunc f() { maiden.Fetch(maiden.Request{}) }\n"}, false},
		{"only in a test", map[string]string{"main.go": "package main\n", "main_test.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nfunc f(h string) { maiden.Reveal(h) }\n"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			got, err := goCallsSDK(dir, "Reveal")
			if err != nil || got != tt.want {
				t.Errorf("goCallsSDK(Reveal) = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
