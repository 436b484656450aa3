package admin

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/whatif"
)

// This file bounds the replay behind every view of what a card would newly
// allow (an approval's inbox page, maiden pending ID, cards grant): the
// replay of an agent's week of records on a proposed card is kept, with
// the last record it read, and the next view of the same question feeds
// it only the records appended since, instead of the whole week again.
//
// The key is everything the answer depends on besides the trail: the
// store, the agent, the proposed grants and binding, the revision of the
// agent's wallet now (a card granted, revoked or expired since is another
// key, so another replay) and the configuration's allow_always rules. A
// kept replay is used for newlyTTL at most: its window started when it was
// built, so the oldest end of the window an answer covers is at most
// newlyTTL older than asked (a week's window, give or take five minutes),
// which is said in docs/cards.md.

const (
	newlyTTL     = 5 * time.Minute
	newlyEntries = 64 // kept replays; the oldest is dropped first
)

type newlyKey struct {
	st                   store.Store
	agent, grants, bound string
	wallet               string
	allowAlways          any // the configuration whose rules were read
}

type newlyEntry struct {
	mu    sync.Mutex // held while the replay is read or extended
	r     *whatif.Replay
	cur   trailCursor // the last record the replay read
	built time.Time
}

// newlyReplays are the kept replays, shared by every State (a Host makes
// one per operation over its store).
type newlyReplays struct {
	mu sync.Mutex
	m  map[newlyKey]*newlyEntry
}

var newlyCache = &newlyReplays{m: map[newlyKey]*newlyEntry{}}

// newlyReplay is the replay of change (one agent's grants) on the agent's
// records from since to now: a kept one extended with the records
// appended since it last read, or a new one.
func (s *State) newlyReplay(ctx context.Context, st whatif.State, change api.WhatIfChange, since, now time.Time) (api.WhatIfReport, error) {
	agent := change.Grants[0].Agent
	var held []cards.Card
	for _, c := range st.Cards {
		if c.Holder == agent {
			held = append(held, c)
		}
	}
	texts := make([]string, len(change.Grants))
	for i, g := range change.Grants {
		texts[i] = g.Grant
	}
	k := newlyKey{st: s.st, agent: agent, grants: strings.Join(texts, "\n"), bound: change.Grants[0].Bound,
		wallet: cards.NewWallet(agent, now, held).RevisionText()}
	if s.cfg != nil {
		k.allowAlways = s.cfg
	}
	e := newlyCache.get(k, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	// Only the agent's own records can flip: a card in one wallet decides
	// nothing of another's.
	keep := func(rec store.AuditRecord) bool { return rec.Agent == agent }
	if e.r == nil {
		r, err := whatif.New(st, change)
		if err != nil {
			newlyCache.drop(k)
			return api.WhatIfReport{}, err
		}
		after, err := firstAuditAt(ctx, s.st, since.Add(-whatIfSlack))
		if err != nil {
			newlyCache.drop(k)
			return api.WhatIfReport{}, err
		}
		cur, err := cursorAt(ctx, s.st, after)
		if err != nil {
			newlyCache.drop(k)
			return api.WhatIfReport{}, err
		}
		e.r, e.cur, e.built = r, cur, now
		// The first read applies the window to each record exactly.
		if err = s.replayFrom(ctx, &e.cur, func(rec store.AuditRecord) bool { return !rec.At.Before(since) && keep(rec) }, r.Add); err != nil {
			newlyCache.drop(k)
			return api.WhatIfReport{}, err
		}
		return r.Report(), nil
	}
	if err := s.replayFrom(ctx, &e.cur, keep, e.r.Add); err != nil {
		newlyCache.drop(k)
		return api.WhatIfReport{}, err
	}
	return e.r.Report(), nil
}

// get is k's entry: a kept one younger than newlyTTL, or a new empty one.
func (c *newlyReplays) get(k newlyKey, now time.Time) *newlyEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[k]; e != nil && (e.built.IsZero() || now.Sub(e.built) < newlyTTL) {
		return e
	}
	if len(c.m) >= newlyEntries {
		var oldest newlyKey
		var at time.Time
		first := true
		for key, e := range c.m {
			if first || e.built.Before(at) {
				oldest, at, first = key, e.built, false
			}
		}
		delete(c.m, oldest)
	}
	e := &newlyEntry{}
	c.m[k] = e
	return e
}

func (c *newlyReplays) drop(k newlyKey) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// replayFrom hands add the trail's records after c that keep selects,
// in the trail's order, each checked to link to the one before it
// (trailCursor.read); c moves on to the last record read.
func (s *State) replayFrom(ctx context.Context, c *trailCursor, keep func(store.AuditRecord) bool, add func(api.AuditRecord)) error {
	return c.read(ctx, s.st, func(rec store.AuditRecord) {
		if keep(rec) {
			add(adminlink.Audit(rec))
		}
	})
}
