package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestAuthenticate: a token names its agent; a revoked token, a token of
// an agent agent.toml no longer declares, and any token of a configuration
// without [agents] are all ErrBadToken.
func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(agents string) *config.Config {
		t.Helper()
		return testConfig(t, dir, "version = 1\n\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\n"+agents)
	}
	both := write("\n[agents.alice]\ntools = [\"echo\"]\n\n[agents.bob]\ntools = [\"echo\"]\n")
	state := filepath.Join(dir, "state.db")
	h, err := New(both, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: state})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if _, err := h.Authenticate(ctx, "mdn_not-a-token"); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a made-up token: %v", err)
	}
	st, err := store.Open(ctx, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	aliceTok, aliceInfo, err := st.MintToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bobTok, _, err := st.MintToken(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := h.Authenticate(ctx, aliceTok); err != nil || a != "alice" {
		t.Fatalf("alice's token: %q %v", a, err)
	}
	if a, err := h.Authenticate(ctx, bobTok); err != nil || a != "bob" {
		t.Fatalf("bob's token: %q %v", a, err)
	}
	if err := st.RevokeToken(ctx, aliceInfo.ID); err != nil {
		t.Fatal(err)
	}
	if a, err := h.Authenticate(ctx, aliceTok); !errors.Is(err, ErrBadToken) {
		t.Errorf("a revoked token: %q %v", a, err)
	}
	// bob is removed from agent.toml: his token authenticates nobody.
	h.SetConfig(write("\n[agents.alice]\ntools = [\"echo\"]\n"))
	if a, err := h.Authenticate(ctx, bobTok); !errors.Is(err, ErrBadToken) {
		t.Errorf("the token of an agent no longer declared: %q %v", a, err)
	}
	h.SetConfig(write(""))
	if a, err := h.Authenticate(ctx, bobTok); !errors.Is(err, ErrBadToken) {
		t.Errorf("a token with no [agents]: %q %v", a, err)
	}
}
