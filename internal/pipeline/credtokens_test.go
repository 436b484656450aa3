package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/pgtest"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestTokenShareOnlyOnPostgres: the gate's token store is the host's state
// store when that is PostgreSQL (the row is kept and read back); with a
// SQLite path it shares nothing and does not open, or create, the file.
func TestTokenShareOnlyOnPostgres(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, "version = 1\n")
	ctx := context.Background()
	for _, tc := range []struct {
		name, state string
		shared      bool
	}{
		{"sqlite", filepath.Join(dir, "state.db"), false},
		{"postgres", pgtest.URL(t), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(cfg, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: tc.state})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(ctx)
			ts := h.tokenShare()
			err = ts.LeaseToken(ctx, "k", func([]byte) ([]byte, error) { return []byte("sealed"), nil })
			if !tc.shared {
				if !errors.Is(err, egress.ErrNotShared) {
					t.Fatalf("got %v, want ErrNotShared", err)
				}
				if _, err := os.Stat(tc.state); !os.IsNotExist(err) {
					t.Fatalf("the SQLite store was opened for it: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if err := ts.LeaseToken(ctx, "k", func(b []byte) ([]byte, error) { got = string(b); return nil, nil }); err != nil || got != "sealed" {
				t.Fatalf("read back %q, %v", got, err)
			}
		})
	}
}
