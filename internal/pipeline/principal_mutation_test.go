package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// tokensStore is a state store that answers Tokens only (with toks, or
// err); any other method panics (the embedded nil Store).
type tokensStore struct {
	store.Store
	toks []store.TokenInfo
	err  error
}

// authFailStore is a state store whose Authenticate cannot answer.
type authFailStore struct{ store.Store }

func (authFailStore) Authenticate(context.Context, string) (string, error) {
	return "", errors.New("disk on fire")
}

func (s tokensStore) Tokens(context.Context, string) ([]store.TokenInfo, error) { return s.toks, s.err }

// TestPrincipalRefusalDecisions: the recheck of a waiting call's caller
// (principalCheck.refusal), decision by decision: a reload to a
// configuration without [agents] removes every named agent; a token of the
// same ID listed for another agent is not the call's; a store that cannot
// list the tokens, or cannot be opened, is an error, never a pass.
func TestPrincipalRefusalDecisions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	echo := testkit.Component(t, "echo")
	named := testConfig(t, dir, "version = 1\n[tools.echo]\npath = \""+echo+"\"\n[agents.a]\ntools = [\"echo\"]\n")
	implicit := testConfig(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+echo+"\"\n")
	ctx := context.Background()
	check := func(cur *config.Config, st store.Store, stErr error) principalCheck {
		var p atomic.Pointer[config.Config]
		p.Store(cur)
		return principalCheck{cfg: &p, state: func(context.Context, *config.Config) (store.Store, error) { return st, stErr }}
	}
	inv := func(credential string) *invocation {
		return &invocation{cfg: named, agent: "a", call: Call{Agent: "a", Credential: credential}}
	}
	live := []store.TokenInfo{{ID: "0123456789abcdef", Agent: "a"}}

	// Reloaded without [agents]: agent a is gone, whatever its token.
	if why, err := check(implicit, tokensStore{toks: live}, nil).refusal(ctx, inv("token:0123456789abcdef")); err != nil || !strings.HasPrefix(why, `agent removed: agent "a" was removed from`) {
		t.Errorf("agent a after a reload without [agents]: %q %v; want agent removed", why, err)
	}
	// The configuration's own agent with its live token goes on.
	if why, err := check(named, tokensStore{toks: live}, nil).refusal(ctx, inv("token:0123456789abcdef")); why != "" || err != nil {
		t.Errorf("a live token: %q %v; want it to go on", why, err)
	}
	// The same ID listed as another agent's is not the call's token.
	other := []store.TokenInfo{{ID: "0123456789abcdef", Agent: "b"}}
	if why, err := check(named, tokensStore{toks: other}, nil).refusal(ctx, inv("token:0123456789abcdef")); err != nil || !strings.HasPrefix(why, "token unknown: the agent token this call was made with (ID 0123456789abcdef)") {
		t.Errorf("a token of agent b with the call's ID: %q %v; want token unknown", why, err)
	}
	// A store that cannot list the agent's tokens: ErrState.
	boom := errors.New("disk on fire")
	if why, err := check(named, tokensStore{err: boom}, nil).refusal(ctx, inv("token:0123456789abcdef")); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Tokens failing: %q %v; want ErrState naming the cause", why, err)
	}
	// A store that cannot be opened: its error.
	if why, err := check(named, nil, ErrClosed).refusal(ctx, inv("token:0123456789abcdef")); !errors.Is(err, ErrClosed) {
		t.Errorf("the store unavailable: %q %v; want its error (ErrClosed)", why, err)
	}
}

// TestAuthenticateRefusalDecisions: a configuration without [agents]
// refuses every token naming why, without opening (and so creating) a
// state store; a state store that cannot answer, or is closed, is its
// error, not ErrBadToken nor a pass; TokenCredential names only agent
// tokens.
func TestAuthenticateRefusalDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	echo := testkit.Component(t, "echo")

	dir := t.TempDir()
	h, _ := testHost(t, dir, "version = 1\n[tools.echo]\npath = \""+echo+"\"\n", &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	if a, err := h.Authenticate(ctx, "mdn_whatever"); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "declares no [agents], so there are no agent tokens") {
		t.Errorf("a token with no [agents]: %q %v; want ErrBadToken naming why", a, err)
	}
	if _, err := os.Stat(filepath.Join(dir, config.DefaultStateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a configuration without [agents] had its state store opened by Authenticate: %v", err)
	}

	dir = t.TempDir()
	h2, _ := testHost(t, dir, "version = 1\n[tools.echo]\npath = \""+echo+"\"\n[agents.a]\ntools = [\"echo\"]\n", &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	st, _, err := h2.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := st.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := h2.Authenticate(ctx, tok); err != nil || a != "a" {
		t.Fatalf("a's token: %q %v", a, err)
	}
	// The store fails under the Host: ErrState.
	h2.stateHolder.mu.Lock()
	h2.stateHolder.st = authFailStore{st}
	h2.stateHolder.mu.Unlock()
	if a, err := h2.Authenticate(ctx, tok); !errors.Is(err, ErrState) || errors.Is(err, ErrBadToken) {
		t.Errorf("a store that cannot answer: %q %v; want ErrState", a, err)
	}
	// The Host closed: its error.
	h2.Close(ctx)
	if a, err := h2.Authenticate(ctx, tok); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed Host: %q %v; want ErrClosed", a, err)
	}

	for _, s := range []string{"", "not-a-token", "Bearer x"} {
		if c := TokenCredential(s); c != "" {
			t.Errorf("TokenCredential(%q) = %q; want \"\" for what is not an agent token", s, c)
		}
	}
}
