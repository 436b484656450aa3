package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/internal/limits"
)

// BucketKey names a rate-limit token bucket: one per agent, tool and rule.
type BucketKey struct{ Agent, Tool, Rule string }

func (k BucketKey) String() string { return k.Agent + "\x1f" + k.Tool + "\x1f" + k.Rule }

// Rate is a token bucket: it holds at most Capacity tokens and gains
// Refill tokens every Interval.
type Rate struct {
	Capacity int64
	Refill   int64
	Interval time.Duration
}

// Take takes cost tokens from bucket key at time now. It returns allowed,
// or, when the bucket holds too few, the earliest time the same take
// would be allowed. The read and the write are one transaction holding
// the bucket's row (SQLite: the write lock; PostgreSQL: the row, locked
// FOR UPDATE, not the store's one write lock, so that takers of other
// buckets, and every other writer, run beside it), so that concurrent
// takers (in any process) never both spend the same tokens, and the state
// survives restarts.
//
// The bucket is stored as one number, its theoretical arrival time (the
// generic cell rate algorithm): the bucket is full when tat <= now, each
// token moves tat on by Interval/Refill, and a take is allowed while tat
// stays within Capacity tokens of now. A cost above Capacity is never
// allowed (wait is then the zero time). The arithmetic is
// internal/limits' (Take, Spend); this file persists its state.
func (s *DB) Take(ctx context.Context, key BucketKey, rate Rate, cost int64, now time.Time) (allowed bool, wait time.Time, err error) {
	if rate.Capacity <= 0 || rate.Refill <= 0 || rate.Interval <= 0 || cost < 0 {
		return false, time.Time{}, fmt.Errorf("rate limit %q: %w: capacity, refill and interval must be positive and cost not negative (%+v, cost %d)", key.Rule, ErrBadInput, rate, cost)
	}
	for what, v := range map[string]string{"agent name": key.Agent, "tool name": key.Tool, "rule": key.Rule} {
		if err := checkName(what, v); err != nil { // printable: the key's separator cannot occur
			return false, time.Time{}, fmt.Errorf("rate limit: %w", err)
		}
	}
	b := limits.Bucket{Capacity: rate.Capacity, Refill: rate.Refill, Interval: rate.Interval}
	if err := b.Check(); err != nil {
		return false, time.Time{}, fmt.Errorf("rate limit %q: %w: %v", key.Rule, ErrBadInput, err)
	}
	err = s.writeRows(ctx, func(tx *sql.Tx) error {
		if s.pg != nil {
			// A row to lock: tat 0 is a full bucket, as no row is.
			if _, err := tx.ExecContext(ctx, `INSERT INTO rate_buckets (bucket, tat) VALUES (?, 0) ON CONFLICT (bucket) DO NOTHING`, key.String()); err != nil {
				return err
			}
		}
		var st limits.BucketState // zero: a full bucket
		err := tx.QueryRowContext(ctx, `SELECT tat FROM rate_buckets WHERE bucket = ?`+s.forUpdate(), key.String()).Scan(&st.TAT)
		if err != nil && !isNoRows(err) {
			return err
		}
		d, next, err := limits.Take(b, st, cost, now)
		if err != nil {
			return err
		}
		if !d.Allowed {
			allowed, wait = false, time.Time{}
			if !d.Never {
				wait = now.Add(d.Wait).UTC()
			}
			return nil
		}
		allowed = true
		_, err = tx.ExecContext(ctx, `INSERT INTO rate_buckets (bucket, tat) VALUES (?, ?)
			ON CONFLICT (bucket) DO UPDATE SET tat = excluded.tat`, key.String(), next.TAT)
		return err
	})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("rate limit %q for agent %q, tool %q: %w", key.Rule, key.Agent, key.Tool, err)
	}
	return allowed, wait, nil
}

// QuotaKey names a cost window: one per agent and rule.
type QuotaKey struct{ Agent, Rule string }

func (k QuotaKey) String() string { return k.Agent + "\x1f" + k.Rule }

// Spend spends cost units of quota key's window at time now: windows are
// fixed, Window long, aligned on the Unix epoch, and hold limit units. It
// returns allowed, or when the window is spent, the time the next window
// starts. One transaction, as Take.
func (s *DB) Spend(ctx context.Context, key QuotaKey, limit int64, window time.Duration, cost int64, now time.Time) (allowed bool, reset time.Time, err error) {
	if limit <= 0 || window <= 0 || cost < 0 {
		return false, time.Time{}, fmt.Errorf("quota %q: %w: limit and window must be positive and cost not negative", key.Rule, ErrBadInput)
	}
	for what, v := range map[string]string{"agent name": key.Agent, "rule": key.Rule} {
		if err := checkName(what, v); err != nil {
			return false, time.Time{}, fmt.Errorf("quota: %w", err)
		}
	}
	w := limits.Window{Limit: limit, Length: window}
	err = s.writeRows(ctx, func(tx *sql.Tx) error {
		if s.pg != nil {
			// A row to lock: the zero window, as no row is.
			if _, err := tx.ExecContext(ctx, `INSERT INTO quota_windows (quota, start, used) VALUES (?, 0, 0) ON CONFLICT (quota) DO NOTHING`, key.String()); err != nil {
				return err
			}
		}
		var st limits.WindowState
		err := tx.QueryRowContext(ctx, `SELECT start, used FROM quota_windows WHERE quota = ?`+s.forUpdate(), key.String()).Scan(&st.Start, &st.Used)
		if err != nil && !isNoRows(err) {
			return err
		}
		d, next, err := limits.Spend(w, st, cost, now)
		if err != nil {
			return err
		}
		// The window that counts: the one the state is in (a clock that
		// went back stays in the later window), else the current one.
		start := max(next.Start, now.UnixNano()-((now.UnixNano()%int64(window))+int64(window))%int64(window))
		reset = time.Unix(0, start+int64(window)).UTC()
		if !d.Allowed {
			return nil
		}
		allowed = true
		_, err = tx.ExecContext(ctx, `INSERT INTO quota_windows (quota, start, used) VALUES (?, ?, ?)
			ON CONFLICT (quota) DO UPDATE SET start = excluded.start, used = excluded.used`, key.String(), next.Start, next.Used)
		return err
	})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("quota %q for agent %q: %w", key.Rule, key.Agent, err)
	}
	return allowed, reset, nil
}
