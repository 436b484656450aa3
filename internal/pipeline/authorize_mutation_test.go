package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// walletStore is a state store that answers Generation and Wallet only,
// counting the wallets it reads; its cards and generation change under
// the test's hand.
type walletStore struct {
	store.Store
	gen   int64
	cards []cards.Card
	reads int
	err   error
}

func (s *walletStore) Generation(context.Context) (int64, error) { return s.gen, nil }

func (s *walletStore) Wallet(_ context.Context, agent string, at time.Time) (*cards.Wallet, error) {
	s.reads++
	if s.err != nil {
		return nil, s.err
	}
	return cards.NewWallet(agent, at, s.cards), nil
}

// TestWalletCacheFollowsTheStore: a cached wallet is used only while the
// store's generation is the one it was read at and no card in it has
// expired; at the instant a card expires (it no longer counts then) the
// wallet is read again.
func TestWalletCacheFollowsTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir(), "version = 1\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\n[agents.a]\ntools = [\"echo\"]\n")
	var cur atomic.Pointer[config.Config]
	cur.Store(cfg)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &walletStore{gen: 1, cards: []cards.Card{{ID: "c1", Holder: "a", Spec: cards.Spec{Expires: t0.Add(time.Hour)}}}}
	s := &stateHolder{current: &cur, log: slog.New(slog.DiscardHandler), st: st, synced: cfg, wallets: map[string]cachedWallet{}}
	read := func(at time.Time) *cards.Wallet {
		t.Helper()
		w, err := s.wallet(ctx, cfg, "a", at)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	first := read(t0)
	if read(t0.Add(time.Minute)) != first || st.reads != 1 {
		t.Fatalf("nothing changed: %d reads; want the cached wallet, 1 read", st.reads)
	}
	st.gen = 2 // a card granted or revoked by any process
	if read(t0.Add(2*time.Minute)) == first || st.reads != 2 {
		t.Errorf("the store's generation moved: %d reads; want the wallet read again", st.reads)
	}
	second := read(t0.Add(3 * time.Minute))
	if w := read(t0.Add(time.Hour)); w == second || st.reads != 3 {
		t.Errorf("at the instant card c1 expires: %d reads; want the wallet read again", st.reads)
	} else if w.NextExpiry() != (time.Time{}) {
		t.Errorf("the wallet read at c1's expiry still holds it (next expiry %v)", w.NextExpiry())
	}
	st.err = errors.New("disk on fire")
	st.gen = 3
	if _, err := s.wallet(ctx, cfg, "a", t0.Add(2*time.Hour)); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("a store that cannot read the wallet: %v; want ErrState naming the cause", err)
	}
}

// failingWallets is a state store whose Wallet cannot answer.
type failingWallets struct{ store.Store }

func (failingWallets) Wallet(context.Context, string, time.Time) (*cards.Wallet, error) {
	return nil, errors.New("disk on fire")
}

// TestCallWithoutWalletIsRefused: a declared agent's call whose wallet the
// state store cannot read is refused with ErrState, and the tool is not
// run: nothing runs on a question of authority left unanswered.
func TestCallWithoutWalletIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	h, _ := testHost(t, dir, "version = 1\n[tools.echo]\npath = \""+testkit.Component(t, "echo")+"\"\n[agents.a]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n",
		&Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	if res, err := h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: `{"message":"hi"}`}); err != nil || !res.OK {
		t.Fatalf("the agent's call with its store answering: %v %+v", err, res.Error)
	}
	h.stateHolder.mu.Lock()
	h.stateHolder.st = failingWallets{h.stateHolder.st}
	h.stateHolder.wallets = map[string]cachedWallet{}
	h.stateHolder.mu.Unlock()
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: `{"message":"again"}`})
	if res.OK || !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("a call whose wallet cannot be read: %+v %v; want ErrState naming the cause, nothing run", res, err)
	}
}

// failingSync is a state store that cannot write an agent's system cards.
type failingSync struct{ store.Store }

func (failingSync) SyncSystemCards(context.Context, string, []cards.Spec) (int, int, error) {
	return 0, 0, errors.New("disk on fire")
}

// TestCallRefusedWhenAgentsCannotBeWritten: after a reload, a call whose
// configuration's agents and system cards cannot be written to the state
// store is refused with ErrState, not decided on the cards of the
// configuration before; an input that cannot be rendered for the cards
// (a property with an empty name) is refused, kind input, not run unasked.
func TestCallRefusedWhenAgentsCannotBeWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	body := "version = 1\n[tools.echo]\npath = \"" + testkit.Component(t, "echo") + "\"\n[agents.a]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n"
	h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(ctx)
	if res, err := h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: `{"message":"hi"}`}); err != nil || !res.OK {
		t.Fatalf("the agent's call: %v %+v", err, res.Error)
	}
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: `{"":"hi"}`})
	if err != nil || res.OK || res.Error.Kind != KindInput || !strings.Contains(res.Error.Message, "input cannot be rendered for authorization: ") || !strings.Contains(res.Error.Message, "empty name") {
		t.Errorf("an input with an empty property name: %v %+v; want kind input, cannot be rendered for authorization", err, res.Error)
	}
	h.stateHolder.mu.Lock()
	h.stateHolder.st = failingSync{h.stateHolder.st}
	h.stateHolder.mu.Unlock()
	h.SetConfig(testConfig(t, dir, body+"\n[agents.b]\ntools = [\"echo\"]\n"))
	res, err = h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: `{"message":"again"}`})
	if res.OK || !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "writing the agents of") {
		t.Errorf("a call after a reload whose agents cannot be written: %+v %v; want ErrState, nothing run", res, err)
	}
}
