package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/maiden-run/maiden/internal/cards"
)

// Budgets on cards (docs/cards.md, "Budgets"). A card's budget is part of
// its spec, immutable like its grants; what it has spent is a row per card
// and key of card_spend, changed only here. Spending a card spends every
// ancestor with a budget too (the chain). A check and the spend it allows
// (ReserveBudget, SpendBudgetBytes) are one transaction that holds, from
// before it reads what the chain spent until it commits, a lock on each
// card of the chain that has a budget: on SQLite the file's one write lock,
// on PostgreSQL a transaction-scoped advisory lock per card (lockBudgets),
// taken in one order by every instance, so that concurrent calls in any
// process never both spend what only one may, while calls on cards of
// other chains, and every other writer, do not wait for them (before, the
// store's one write lock, which also woke every instance's change feed).
// ChargeBudget only adds (an atomic ON CONFLICT DO UPDATE) and takes no
// such lock.

// budgetMigration is migration 8: what each card has spent of each budget.
const budgetMigration = `
CREATE TABLE card_spend (
	card_id TEXT NOT NULL REFERENCES cards(id),
	budget  TEXT NOT NULL,
	spent   BIGINT NOT NULL,
	PRIMARY KEY (card_id, budget)
)`

// BudgetSpend is what a call reserved of the budgets of the card that
// allowed it and its ancestors (ReserveBudget); ChargeBudget adds the
// call's wall time and bytes at its end. The zero BudgetSpend is a call
// no budget limits.
type BudgetSpend struct {
	// Card is the card that allowed the call.
	Card string `json:"card"`
	// Cards are the cards charged: Card and its ancestors that have a
	// budget.
	Cards []string `json:"cards"`
	// Spent is what the call spent up front: calls=1, its cost, and the
	// wall time it reserved (WallMS).
	Spent cards.Budget `json:"spent"`
	// WallMS is the wall time (ms) the call reserved where the chain
	// limits wall_ms: the most it may run, spent up front and settled at
	// its end (ChargeBudget); 0 where no card of the chain limits it.
	WallMS int64 `json:"wall_ms,omitzero"`
	// BytesPaid is what the call's requests spent of bytes_out as they
	// were sent (SpendBudgetBytes), set by the caller before
	// ChargeBudget, which settles against it.
	BytesPaid int64 `json:"bytes_paid,omitzero"`
	// Left is what Card's chain had left after it (ChainLeft).
	Left cards.Budget `json:"left"`
}

// Zero reports whether no budget limits the call.
func (b BudgetSpend) Zero() bool { return len(b.Cards) == 0 }

// lockedChain is card id and its ancestors, each with what it has spent,
// read inside tx: id first, then breadth first (a card derived from
// several parents has each once); and the IDs of those with a budget, in
// that order. What they spent is read after their budget locks are taken
// (lockBudgets), so it stays what it was read as until tx ends but for
// ChargeBudget's additions. The cards themselves (budgets, parents) never
// change.
func (s *DB) lockedChain(ctx context.Context, tx *sql.Tx, id string) ([]cards.Metered, []string, error) {
	var out []cards.Metered
	var ids []string
	seen := map[string]bool{id: true}
	for next := []string{id}; len(next) > 0; {
		cur := next[0]
		next = next[1:]
		c, err := s.loadCard(ctx, tx, cur)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, cards.Metered{ID: c.ID, Budget: c.Budget})
		if len(c.Budget) > 0 {
			ids = append(ids, c.ID)
		}
		for _, p := range c.Parents {
			if !seen[p] {
				seen[p] = true
				next = append(next, p)
			}
		}
	}
	if len(ids) == 0 {
		return out, nil, nil
	}
	if err := s.lockBudgets(ctx, tx, ids); err != nil {
		return nil, nil, err
	}
	for i := range out {
		if len(out[i].Budget) == 0 {
			continue
		}
		var err error
		if out[i].Spent, err = s.spentOf(ctx, tx, out[i].ID); err != nil {
			return nil, nil, err
		}
	}
	if s.testHookChainRead != nil {
		s.testHookChainRead()
	}
	return out, ids, nil
}

// pgLockBudgetClass is the first key of the PostgreSQL advisory locks
// lockBudgets takes, the second a hash of the card's ID. Advisory locks of
// two 32-bit keys are a key space of their own, apart from the one-key
// locks of pgLockWrite.
const pgLockBudgetClass int32 = 0x6d616964 // "maid"

// lockBudgets takes, until tx ends, the budget lock of each card of ids:
// on PostgreSQL the advisory lock (pgLockBudgetClass, budgetLockKey(id)),
// in ascending key order whoever asks (two transactions that each hold one
// card's lock and want the other's never wait for each other); two cards
// whose keys collide share one lock, which makes them wait for each other
// and nothing worse. A wait is bounded by the lock timeout writeRows sets.
// On SQLite tx holds the file's write lock already.
func (s *DB) lockBudgets(ctx context.Context, tx *sql.Tx, ids []string) error {
	if s.pg == nil {
		return nil
	}
	keys := make([]int32, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, budgetLockKey(id))
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?, ?)`, pgLockBudgetClass, k); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "55P03" {
				return fmt.Errorf("take the budget lock of the card chain: another call on these cards held it for more than %s: %w", s.pg.busy, err)
			}
			return fmt.Errorf("take the budget lock of the card chain: %w", err)
		}
	}
	return nil
}

// budgetLockKey is card id's key among the budget locks: FNV-1a of the ID.
func budgetLockKey(id string) int32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int32(h.Sum32())
}

// spentOf is what card id has spent, by key (nil when nothing).
func (s *DB) spentOf(ctx context.Context, q querier, id string) (cards.Budget, error) {
	rows, err := q.QueryContext(ctx, `SELECT budget, spent FROM card_spend WHERE card_id = ?`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out cards.Budget
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if out == nil {
			out = cards.Budget{}
		}
		out[k] = v
	}
	return out, rows.Err()
}

// withSpent fills what cs with a budget have spent (Card, Cards).
func (s *DB) withSpent(ctx context.Context, cs []cards.Card) error {
	for i := range cs {
		if len(cs[i].Budget) == 0 {
			continue
		}
		sp, err := s.spentOf(ctx, s.db, cs[i].ID)
		if err != nil {
			return fmt.Errorf("card %s: what it spent: %w", cs[i].ID, err)
		}
		cs[i].Spent = sp
	}
	return nil
}

// spend adds more to what each of ids has spent, the rows in ascending
// order of card ID and key whoever writes them (on PostgreSQL each
// addition locks its row until tx ends: two transactions adding to the
// same cards never each hold a row the other waits for).
func (s *DB) spend(ctx context.Context, tx *sql.Tx, ids []string, more cards.Budget) error {
	for _, id := range slices.Sorted(slices.Values(ids)) {
		for _, k := range cards.BudgetKeys {
			v, ok := more[k]
			if !ok || v == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO card_spend (card_id, budget, spent) VALUES (?, ?, ?)
				ON CONFLICT (card_id, budget) DO UPDATE SET spent = card_spend.spent + excluded.spent`, id, k, min(v, cards.MaxBudget)); err != nil {
				return fmt.Errorf("spend %s of card %s: %w", k, id, err)
			}
		}
	}
	return nil
}

// ReserveBudget starts a call allowed by card id that costs cost units and
// may run for up to maxWallMS milliseconds: if id and every ancestor have
// enough of each budget left (cards.Admit), it spends one call and cost on
// each of them that has a budget and, where the chain limits wall_ms,
// reserves the call's wall time: maxWallMS or what the chain has left,
// the lesser (BudgetSpend.WallMS), which the caller holds the call to. So
// calls running at once never together run past a wall_ms budget: each
// holds its share from its start. It returns what it spent. When one is
// short the error is a *cards.Exhausted naming the card, the budget and
// what is left (test with errors.Is(err, cards.ErrBudgetExhausted)), and
// nothing is spent.
func (s *DB) ReserveBudget(ctx context.Context, id string, cost, maxWallMS int64) (BudgetSpend, error) {
	if cost < 0 || cost > cards.MaxBudget {
		return BudgetSpend{}, fmt.Errorf("budget of card %s: %w: cost %d", id, ErrBadInput, cost)
	}
	if maxWallMS < 1 || maxWallMS > cards.MaxBudget {
		return BudgetSpend{}, fmt.Errorf("budget of card %s: %w: wall time %d ms", id, ErrBadInput, maxWallMS)
	}
	var out BudgetSpend
	err := s.writeRows(ctx, func(tx *sql.Tx) error {
		out = BudgetSpend{}
		chain, ids, err := s.lockedChain(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		spent, err := cards.Admit(chain, cost)
		if err != nil {
			return err
		}
		wall := int64(0)
		if left, limited := cards.ChainLeft(chain)[cards.BudgetWallMS]; limited {
			wall = min(maxWallMS, left) // Admit saw at least 1 left
			spent[cards.BudgetWallMS] = wall
		}
		if err := s.spend(ctx, tx, ids, spent); err != nil {
			return err
		}
		for i := range chain {
			if len(chain[i].Budget) > 0 {
				chain[i].Spent = cards.Add(chain[i].Spent, spent)
			}
		}
		out = BudgetSpend{Card: id, Cards: ids, Spent: spent, WallMS: wall, Left: cards.ChainLeft(chain)}
		return nil
	})
	if err != nil {
		var ex *cards.Exhausted
		if errors.As(err, &ex) {
			return BudgetSpend{}, ex
		}
		return BudgetSpend{}, fmt.Errorf("budget of card %s: %w", id, err)
	}
	return out, nil
}

// ChargeBudget settles a call's wall time (ms) and adds the bytes it sent
// on every card sp reserved on, whatever is left: the call ran, so what it
// used is spent, and a card that went over allows no further call. The
// wall time sp reserved (sp.WallMS) was spent at the start: only the
// difference is added, and a call that ended early gives back what it
// did not use. A negative amount is bad input, and nothing is charged.
func (s *DB) ChargeBudget(ctx context.Context, sp BudgetSpend, wallMS, bytesOut int64) error {
	if wallMS < 0 || bytesOut < 0 || sp.WallMS < 0 || sp.BytesPaid < 0 {
		return fmt.Errorf("charge the budget of card %s: %w: wall_ms %d (reserved %d) and bytes_out %d (paid %d) cannot be negative", sp.Card, ErrBadInput, wallMS, sp.WallMS, bytesOut, sp.BytesPaid)
	}
	wall := min(wallMS, cards.MaxBudget) - sp.WallMS
	bytes := min(bytesOut, cards.MaxBudget) - sp.BytesPaid
	if sp.Zero() || wall == 0 && bytes == 0 {
		return nil
	}
	// Additions only (ON CONFLICT DO UPDATE adds to the row atomically; a
	// refund of reserved wall time is a negative addition to a row the
	// reservation wrote): row locks suffice, no budget lock.
	err := s.writeRows(ctx, func(tx *sql.Tx) error {
		return s.spend(ctx, tx, sp.Cards, cards.Budget{cards.BudgetWallMS: wall, cards.BudgetBytesOut: bytes})
	})
	if err != nil {
		return fmt.Errorf("charge the budget of card %s: %w", sp.Card, err)
	}
	return nil
}

// SpendBudgetBytes spends n bytes of bytes_out on the chain sp reserved on,
// before a request of n bytes is sent: if every card of the chain that
// limits bytes_out has n left, it spends them on every card sp charges;
// else the error is a *cards.Exhausted and nothing is spent. So requests
// sent at once, by one call or many, never together send past a bytes_out
// budget. The check and the spend are one transaction under the chain's
// budget locks, as ReserveBudget's.
func (s *DB) SpendBudgetBytes(ctx context.Context, sp BudgetSpend, n int64) error {
	if n < 0 || n > cards.MaxBudget {
		return fmt.Errorf("budget of card %s: %w: %d bytes", sp.Card, ErrBadInput, n)
	}
	if sp.Zero() || n == 0 {
		return nil
	}
	err := s.writeRows(ctx, func(tx *sql.Tx) error {
		chain, _, err := s.lockedChain(ctx, tx, sp.Card)
		if err != nil {
			return err
		}
		for _, m := range chain {
			if left, limited := cards.Left(m.Budget, m.Spent)[cards.BudgetBytesOut]; limited && left < n {
				return &cards.Exhausted{Card: m.ID, Key: cards.BudgetBytesOut, Limit: m.Budget[cards.BudgetBytesOut], Left: left, Need: n}
			}
		}
		return s.spend(ctx, tx, sp.Cards, cards.Budget{cards.BudgetBytesOut: n})
	})
	if err != nil {
		var ex *cards.Exhausted
		if errors.As(err, &ex) {
			return ex
		}
		return fmt.Errorf("budget of card %s: %w", sp.Card, err)
	}
	return nil
}
