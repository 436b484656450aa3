package cardtools

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// TestMayUse: who sees which tool is a card:VERB grant on a card the agent
// holds. (The operations themselves run through admin acting as the agent:
// admin's TestCardBuiltinsAsAgent.)
func TestMayUse(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.EnsureAgent(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"card:derive *", "card:revoke *", "tool:invoke weather --..."} {
		g, err := grant.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Grant(ctx, "parent", cards.Spec{LowerPos: cards.Any(g)}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := st.Wallet(ctx, "parent", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for verb, want := range map[string]bool{"derive": true, "revoke": true, "inspect": false, "transfer": false} {
		if got := MayUse(w, verb); got != want {
			t.Errorf("MayUse(%s) = %v, want %v", verb, got, want)
		}
	}
}
