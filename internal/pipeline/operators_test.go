package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestAuthenticateOperator: an operator token names its operator and is
// never an agent's token (Authenticate refuses it); an agent's token never
// authenticates as an operator, even the token of an agent whose name an
// operator once had; a revoked token, the token of an operator agent.toml
// no longer declares, and any token of a configuration without
// [operators] are ErrBadOperatorToken.
func TestAuthenticateOperator(t *testing.T) {
	ctx := context.Background()
	write, h, st := operatorsHost(t)
	alice, aliceInfo, err := st.MintOperatorToken(ctx, "alice", admin.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := st.MintOperatorToken(ctx, "bob", admin.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	agentTok, _, err := st.MintToken(ctx, "research")
	if err != nil {
		t.Fatal(err)
	}

	if n, err := h.AuthenticateOperator(ctx, alice); err != nil || n != "alice" {
		t.Fatalf("alice's operator token: %q %v", n, err)
	}
	if a, err := h.Authenticate(ctx, alice); !errors.Is(err, ErrBadToken) || a != "" {
		t.Fatalf("an operator token authenticated as agent %q (%v)", a, err)
	}
	if n, err := h.AuthenticateOperator(ctx, agentTok); !errors.Is(err, ErrBadOperatorToken) || n != "" {
		t.Fatalf("an agent token authenticated as operator %q (%v)", n, err)
	}
	// Relabelled with the other kind's prefix: still nobody.
	if n, err := h.AuthenticateOperator(ctx, "mdo_"+strings.TrimPrefix(agentTok, "mdn_")); !errors.Is(err, ErrBadOperatorToken) {
		t.Fatalf("a relabelled agent token authenticated as operator %q (%v)", n, err)
	}
	if a, err := h.Authenticate(ctx, "mdn_"+strings.TrimPrefix(alice, "mdo_")); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a relabelled operator token authenticated as agent %q (%v)", a, err)
	}
	if a, err := h.Authenticate(ctx, agentTok); err != nil || a != "research" {
		t.Fatalf("the agent token itself: %q %v", a, err)
	}

	if err := st.RevokeOperatorToken(ctx, aliceInfo.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := h.AuthenticateOperator(ctx, alice); !errors.Is(err, ErrBadOperatorToken) {
		t.Errorf("a revoked operator token: %q %v", n, err)
	}
	if n, err := h.AuthenticateOperator(ctx, bob); err != nil || n != "bob" {
		t.Fatalf("bob's token: %q %v", n, err)
	}
	// bob is removed from agent.toml: his token authenticates nobody.
	h.SetConfig(write("\n[operators.alice]\n"))
	if n, err := h.AuthenticateOperator(ctx, bob); !errors.Is(err, ErrBadOperatorToken) {
		t.Errorf("the token of an operator no longer declared: %q %v", n, err)
	}
	h.SetConfig(write(""))
	if n, err := h.AuthenticateOperator(ctx, bob); !errors.Is(err, ErrBadOperatorToken) || !strings.Contains(err.Error(), "no [operators]") {
		t.Errorf("a token with no [operators]: %q %v", n, err)
	}
}

// operatorsHost is a host of agent research (tool echo) and operators
// alice and bob, on a state store of its own, with an admin State over the
// same store; write makes the configuration again with rest appended
// (operators declared, say), for SetConfig.
func operatorsHost(t *testing.T) (write func(rest string) *config.Config, h *Host, st *admin.State) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	write = func(rest string) *config.Config {
		t.Helper()
		return testConfig(t, dir, "version = 1\n\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\n\n[agents.research]\ntools = [\"echo\"]\n"+rest)
	}
	cfg := write("\n[operators.alice]\n\n[operators.bob]\n")
	state := filepath.Join(dir, "state.db")
	h, err := New(cfg, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	st, err = admin.Open(ctx, cfg, &admin.Options{State: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return write, h, st
}
