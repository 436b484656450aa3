package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
)

// TestStragglerDoesNotResync: a call that started under a configuration
// since replaced decides on the store as it is, and does not write that
// older configuration's system cards back over the newer one's.
func TestStragglerDoesNotResync(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "t.wasm")
	if err := os.WriteFile(tool, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(grants string) *config.Config {
		t.Helper()
		return testConfig(t, dir, "version = 1\n[tools.echo]\npath = \"t.wasm\"\n[agents.a]\ntools = [\"echo\"]\n"+grants)
	}
	old := load(`grants = ["tool:invoke echo --..."]` + "\n")
	h, err := New(old, &Options{Isolation: api.InProcess, CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	live := func(cfg *config.Config) int {
		t.Helper()
		st, err := h.state(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := st.Cards(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range cs {
			if c.Revoked.IsZero() {
				n++
			}
		}
		return n
	}
	if n := live(old); n != 1 {
		t.Fatalf("under the first configuration: %d live cards, want 1", n)
	}
	cur := load("")
	h.SetConfig(cur)
	if n := live(cur); n != 0 {
		t.Fatalf("after the grant was removed: %d live cards, want 0", n)
	}
	if n := live(old); n != 0 {
		t.Fatalf("a straggler of the old configuration put its system card back: %d live cards", n)
	}
}
