package pipeline

import "testing"

// TestOnlyWebAssemblyGetsPreopens: a wrapped CLI never gets WASI preopens
// (its paths are Landlock's), nor does an imported tool or a built-in:
// the session stage (sessions.hold: session.Gate.Hold) gives them only to a kind whose backend takes them.
func TestOnlyWebAssemblyGetsPreopens(t *testing.T) {
	for _, c := range []struct {
		name string
		b    backend
		want bool
	}{
		{"WebAssembly", &wasmBackend{}, true},
		{"a wrapped CLI never", &cliBackend{}, false},
		{"an imported tool never", &importBackend{}, false},
		{"a built-in never", &builtinBackend{}, false},
	} {
		if got := c.b.preopens(); got != c.want {
			t.Errorf("%s: preopens() = %v, want %v", c.name, got, c.want)
		}
	}
}
