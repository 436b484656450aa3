package maiden_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/internal/testkit"
)

// Tests of the forty-ninth mutation pass (docs/security-tests.md) on the
// embedding API's delegation.

// TestMutation49RootOperatorAuthentication: through maiden.Host, an
// operator's token signs in as its operator, and a scraper's metrics token
// of the same operator reads /metrics (AuthenticateMetrics) but never signs
// in (AuthenticateOperator: the inbox, deciding approvals).
func TestMutation49RootOperatorAuthentication(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	cfg := writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n[agents.research]\ntools = [\"echo\"]\n[operators.alice]\n", "echo")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), StatePath: state})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	st, err := admin.Open(ctx, cfg, &admin.Options{State: state})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	human, _, err := st.MintOperatorToken(ctx, "alice", admin.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	scrape, _, err := st.MintOperatorToken(ctx, "alice", admin.RoleMetrics)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.AuthenticateOperator(ctx, human); err != nil || n != "alice" {
		t.Errorf("AuthenticateOperator(alice's operator token) = %q, %v; want alice", n, err)
	}
	if n, err := h.AuthenticateMetrics(ctx, scrape); err != nil || n != "alice" {
		t.Errorf("AuthenticateMetrics(alice's metrics token) = %q, %v; want alice", n, err)
	}
	if n, err := h.AuthenticateOperator(ctx, scrape); !errors.Is(err, maiden.ErrBadOperatorToken) || n != "" {
		t.Errorf("AuthenticateOperator(alice's metrics token) = %q, %v; want ErrBadOperatorToken", n, err)
	}
}
