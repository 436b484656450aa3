package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
)

// Mutation testing, thirty-fifth pass (internal/store's ops.go and
// operators.go): the operations on authority, agent and operator tokens,
// cards, their lineage and the caches in front of them.

// TestMutation35ExpiryIsInTheFuture: a card whose expiry is the store's
// present instant is already dead and refused (card-expired), as one in
// the past is.
func TestMutation35ExpiryIsInTheFuture(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := newClock()
		s := open(t, b.target(t), clk)
		mustAgents(t, s, "a")
		sp := spec(t, "tool:invoke x")
		sp.Expires = clk.now()
		if c, err := s.Grant(ctx, "a", sp); !errors.Is(err, cards.ErrCardExpired) {
			t.Fatalf("Grant of a card expiring now = %s, %v; want card-expired", c.ID, err)
		}
	})
}

// TestMutation35SystemCardsSync: a sync reconciles the agent's own system
// cards and nothing else. The operator's cards and another agent's system
// cards are left alone; a declared card that was revoked is installed
// again (docs/cards.md); a system card that expires, holds an empty grant
// or a malformed budget is refused before anything is written.
func TestMutation35SystemCardsSync(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := open(t, b.target(t), nil)
		mustAgents(t, s, "a", "b")
		op, err := s.Grant(ctx, "a", spec(t, "tool:invoke op --..."))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SyncSystemCards(ctx, "b", []cards.Spec{spec(t, "tool:invoke bee --...")}); err != nil {
			t.Fatal(err)
		}
		declared := []cards.Spec{spec(t, "tool:invoke sys --...")}
		if added, revoked, err := s.SyncSystemCards(ctx, "a", declared); err != nil || added != 1 || revoked != 0 {
			t.Fatalf("first sync of a: added %d, revoked %d, %v; want 1, 0", added, revoked, err)
		}
		if added, revoked, err := s.SyncSystemCards(ctx, "a", nil); err != nil || added != 0 || revoked != 1 {
			t.Fatalf("sync of a with nothing declared: added %d, revoked %d, %v; want 0, 1 (its one system card)", added, revoked, err)
		}
		if c, err := s.Card(ctx, op.ID); err != nil || !c.Revoked.IsZero() {
			t.Fatalf("the operator's card %s after a's sync: revoked %v, %v; want live (a sync touches system cards only)", op.ID, c.Revoked, err)
		}
		bs, err := s.Cards(ctx, "b")
		if err != nil || len(bs) != 1 || !bs[0].Revoked.IsZero() {
			t.Fatalf("b's cards after a's sync: %+v, %v; want its one system card live", bs, err)
		}
		// A declared card whose system card was revoked (by the sync
		// above) is installed again, as a new card.
		if added, revoked, err := s.SyncSystemCards(ctx, "a", declared); err != nil || added != 1 || revoked != 0 {
			t.Fatalf("sync of the declared card after its card was revoked: added %d, revoked %d, %v; want 1, 0 (a new system card)", added, revoked, err)
		}
		// Refused specs.
		expiring := spec(t, "tool:invoke sys --...")
		expiring.Expires = time.Now().Add(time.Hour)
		empty := cards.Spec{LowerPos: []cards.Grant{{}}}
		badBudget := spec(t, "tool:invoke sys --...")
		badBudget.Budget = cards.Budget{cards.BudgetCalls: -1}
		for _, tc := range []struct {
			name string
			sp   cards.Spec
		}{{"an expiring card", expiring}, {"a negative budget", badBudget}, {"an empty grant", empty}} {
			name, sp := tc.name, tc.sp
			before := dump(t, s)
			if added, revoked, err := s.SyncSystemCards(ctx, "a", []cards.Spec{sp}); !errors.Is(err, ErrBadInput) {
				t.Errorf("sync of %s: added %d, revoked %d, %v; want bad input", name, added, revoked, err)
			}
			if after := dump(t, s); after != before {
				t.Errorf("sync of %s wrote to the store", name)
			}
		}
	})
}

// TestMutation35DeriveChecksTheChild: a child is refused, and nothing
// written, when it could not be installed in the recipient's wallet (a
// card of lower-negative grants only, or grants bound to another agent:
// install-recipient-mismatch), when it is already dead (an expiry in the
// past under a parent that never expires: card-expired), or when its
// budget is malformed (bad input), even though each is under its parent.
func TestMutation35DeriveChecksTheChild(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := newClock()
		s := open(t, b.target(t), clk)
		mustAgents(t, s, "lead", "sub", "other")
		root, err := s.Grant(ctx, "lead", spec(t, "tool:invoke search --...", "card:derive *", "card:install sub"))
		if err != nil {
			t.Fatal(err)
		}
		negOnly := spec(t, "-tool:invoke search --q=x")
		boundElsewhere := spec(t, "tool:invoke search --q=x")
		boundElsewhere.LowerPos[0].Recipient = "other"
		past := spec(t, "tool:invoke search --q=x")
		past.Expires = clk.now().Add(-time.Minute)
		negBudget := spec(t, "tool:invoke search --q=x")
		negBudget.Budget = cards.Budget{cards.BudgetCalls: -1}
		for _, tc := range []struct {
			name string
			sp   cards.Spec
			want error
		}{
			{"a card of lower-negative grants only", negOnly, cards.ErrInstallRecipientMismatch},
			{"a card bound to another agent", boundElsewhere, cards.ErrInstallRecipientMismatch},
			{"a card that expired a minute ago", past, cards.ErrCardExpired},
			{"a card of a negative budget", negBudget, ErrBadInput},
		} {
			before := dump(t, s)
			if c, err := s.Derive(ctx, AgentActor("lead"), root.ID, "sub", tc.sp); !errors.Is(err, tc.want) {
				t.Errorf("lead derives %s for sub = %q, %v; want %v", tc.name, c.ID, err, tc.want)
			}
			if after := dump(t, s); after != before {
				t.Errorf("the refused derive of %s wrote to the store", tc.name)
			}
		}
	})
}

// TestMutation35TransferOnlyOwnCards: an agent holding card:transfer on
// every card, and card:install for its own wallet, still cannot move
// another agent's card to itself: it must hold the card.
func TestMutation35TransferOnlyOwnCards(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := open(t, b.target(t), nil)
		mustAgents(t, s, "thief", "victim")
		if _, err := s.Grant(ctx, "thief", spec(t, "card:transfer *", "card:install thief")); err != nil {
			t.Fatal(err)
		}
		loot, err := s.Grant(ctx, "victim", spec(t, "tool:invoke pay --..."))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Transfer(ctx, AgentActor("thief"), loot.ID, "thief"); !errors.Is(err, ErrNotAllowed) {
			t.Fatalf("thief transfers victim's card to itself: %v; want not-allowed", err)
		}
		if c, err := s.Card(ctx, loot.ID); err != nil || c.Holder != "victim" {
			t.Fatalf("victim's card after the refused transfer: holder %q, %v; want victim", c.Holder, err)
		}
	})
}

// TestMutation35TransferNeedsCardTransfer: holding a card and
// card:install for the recipient's wallet is not enough to move it; the
// agent needs card:transfer on the card too.
func TestMutation35TransferNeedsCardTransfer(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := open(t, b.target(t), nil)
		mustAgents(t, s, "a", "b")
		if _, err := s.Grant(ctx, "a", spec(t, "card:install b", "card:derive *")); err != nil {
			t.Fatal(err)
		}
		c, err := s.Grant(ctx, "a", spec(t, "tool:invoke pay --..."))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Transfer(ctx, AgentActor("a"), c.ID, "b"); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "card:transfer") {
			t.Fatalf("a transfers its card without card:transfer: %v; want not-allowed naming card:transfer", err)
		}
		if got, err := s.Card(ctx, c.ID); err != nil || got.Holder != "a" {
			t.Fatalf("the card after the refused transfer: holder %q, %v; want a", got.Holder, err)
		}
	})
}

// TestMutation35RevokeReach: an agent revokes a card only through its
// lineage (the card itself, or a card it was derived from, however many
// generations up) and only with card:revoke. card:revoke on every card
// does not reach a card outside the agent's lineage; the lineage without
// card:revoke does not either; and a revoked card's descendants, however
// deep, die with it.
func TestMutation35RevokeReach(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := open(t, b.target(t), nil)
		mustAgents(t, s, "lead", "sub", "leaf", "other", "meek")
		root, err := s.Grant(ctx, "lead", spec(t, "tool:invoke search --...", "card:derive *", "card:revoke *", "card:install *"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Grant(ctx, "sub", spec(t, "card:derive *", "card:install *")); err != nil {
			t.Fatal(err)
		}
		child, err := s.Derive(ctx, AgentActor("lead"), root.ID, "sub", spec(t, "tool:invoke search --q=*"))
		if err != nil {
			t.Fatal(err)
		}
		grandchild, err := s.Derive(ctx, AgentActor("sub"), child.ID, "leaf", spec(t, "tool:invoke search --q=a*"))
		if err != nil {
			t.Fatal(err)
		}
		// other holds card:revoke on every card but nothing of the lineage.
		if _, err := s.Grant(ctx, "other", spec(t, "card:revoke *")); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Revoke(ctx, AgentActor("other"), grandchild.ID); !errors.Is(err, ErrNotAllowed) {
			t.Fatalf("other (card:revoke *, outside the lineage) revokes the grandchild: %d, %v; want not-allowed", n, err)
		}
		// meek holds a card of its own but no card:revoke.
		own, err := s.Grant(ctx, "meek", spec(t, "tool:invoke search --..."))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.Revoke(ctx, AgentActor("meek"), own.ID); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "card:revoke") {
			t.Fatalf("meek revokes its own card without card:revoke: %d, %v; want not-allowed naming card:revoke", n, err)
		}
		if c, _ := s.Card(ctx, grandchild.ID); !c.Revoked.IsZero() {
			t.Fatal("the grandchild was revoked by a refused revocation")
		}
		// lead reaches the grandchild two generations down.
		if n, err := s.Revoke(ctx, AgentActor("lead"), grandchild.ID); err != nil || n != 1 {
			t.Fatalf("lead revokes its grandchild card: %d, %v; want 1, <nil>", n, err)
		}
		// lead revokes its own root: the child dies with it.
		if n, err := s.Revoke(ctx, AgentActor("lead"), root.ID); err != nil || n != 2 {
			t.Fatalf("lead revokes its own root: %d, %v; want 2 (root and child), <nil>", n, err)
		}
		if w, err := s.Wallet(ctx, "sub", time.Now()); err != nil || len(w.Cards()) != 1 {
			t.Fatalf("sub's wallet after the root's revocation: %v, %v; want its own grant only", w, err)
		}
	})
}

// TestMutation35SpecCacheFollowsTheRow: the decoded-spec cache serves a
// card's grants only while the stored text is the one it decoded; a row
// rewritten under the same ID (by anyone who can write the table) is read
// afresh, not answered from the cache.
func TestMutation35SpecCacheFollowsTheRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := open(t, b.target(t), nil)
		mustAgents(t, s, "a")
		c, err := s.Grant(ctx, "a", spec(t, "tool:invoke search --..."))
		if err != nil {
			t.Fatal(err)
		}
		grants := func() string {
			t.Helper()
			w, err := s.Wallet(ctx, "a", time.Now())
			if err != nil || len(w.Cards()) != 1 || len(w.Cards()[0].LowerPos) != 1 {
				t.Fatalf("a's wallet: %v, %v; want one card of one grant", w, err)
			}
			return w.Cards()[0].LowerPos[0].Grant.String()
		}
		if got := grants(); got != "tool:invoke search --..." {
			t.Fatalf("a's grant = %q", got)
		}
		narrower, err := json.Marshal(spec(t, "tool:invoke search --q=x"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.Exec(`UPDATE cards SET spec = '` + strings.ReplaceAll(string(narrower), "'", "''") + `' WHERE id = '` + c.ID + `'`); err != nil {
			t.Fatal(err)
		}
		if got := grants(); got != "tool:invoke search --q=x" {
			t.Fatalf("a's grant after its row was rewritten = %q; want %q (the row, not the cached spec)", got, "tool:invoke search --q=x")
		}
	})
}

// TestMutation35CascadeWideLevel: a revocation reaches every child of a
// level wider than one query's chunk (400 IDs): none outlives its parent.
func TestMutation35CascadeWideLevel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := open(t, b.target(t), nil)
		mustAgents(t, s, "a")
		root, err := s.Grant(ctx, "a", spec(t, "tool:invoke t --..."))
		if err != nil {
			t.Fatal(err)
		}
		const children = 401
		mid, err := s.Derive(ctx, Operator(), root.ID, "a", spec(t, "tool:invoke t --..."))
		if err != nil {
			t.Fatal(err)
		}
		var last cards.Card
		for range children {
			if last, err = s.Derive(ctx, Operator(), mid.ID, "a", spec(t, "tool:invoke t --p=*")); err != nil {
				t.Fatal(err)
			}
		}
		// Each child of mid has a child of its own: the level below is as
		// wide.
		var leaves []cards.Card
		cs, err := s.Cards(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if len(c.Parents) == 1 && c.Parents[0] == mid.ID {
				l, err := s.Derive(ctx, Operator(), c.ID, "a", spec(t, "tool:invoke t --p=1"))
				if err != nil {
					t.Fatal(err)
				}
				leaves = append(leaves, l)
			}
		}
		if n, err := s.Revoke(ctx, Operator(), root.ID); err != nil || n != 2+2*children {
			t.Fatalf("revoke the root (a card under it of %d children, each with a child): %d revoked, %v; want %d", children, n, err, 2+2*children)
		}
		for _, id := range []string{last.ID, leaves[len(leaves)-1].ID} {
			if c, err := s.Card(ctx, id); err != nil || c.Revoked.IsZero() {
				t.Fatalf("card %s after its root's revocation: revoked %v, %v; want revoked", id, c.Revoked, err)
			}
		}
		if w, err := s.Wallet(ctx, "a", time.Now()); err != nil || len(w.Cards()) != 0 {
			t.Fatalf("a's wallet after the cascade: %d cards, %v; want none", len(w.Cards()), err)
		}
	})
}

// TestMutation35ExpiredCardAuthorizesNothing: a card:derive or card:revoke
// grant on a card that has expired lets its holder do nothing, though the
// card was never revoked.
func TestMutation35ExpiredCardAuthorizesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clk := newClock()
		s := open(t, b.target(t), clk)
		mustAgents(t, s, "lead", "sub")
		root, err := s.Grant(ctx, "lead", spec(t, "tool:invoke search --..."))
		if err != nil {
			t.Fatal(err)
		}
		ops := spec(t, "card:derive *", "card:revoke *", "card:install sub")
		ops.Expires = clk.now().Add(time.Hour)
		if _, err := s.Grant(ctx, "lead", ops); err != nil {
			t.Fatal(err)
		}
		clk.add(2 * time.Hour)
		if c, err := s.Derive(ctx, AgentActor("lead"), root.ID, "sub", spec(t, "tool:invoke search --q=x")); !errors.Is(err, ErrNotAllowed) {
			t.Fatalf("lead derives after its card:derive card expired = %q, %v; want not-allowed", c.ID, err)
		}
		if n, err := s.Revoke(ctx, AgentActor("lead"), root.ID); !errors.Is(err, ErrNotAllowed) {
			t.Fatalf("lead revokes after its card:revoke card expired = %d, %v; want not-allowed", n, err)
		}
	})
}
