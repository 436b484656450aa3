package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/whatif"
)

// This file is the what-if replay (maiden audit whatif): the store read
// here, the replay itself in internal/whatif, which is pure.

// Errors of a change WhatIf cannot replay (the message names the card,
// agent or grant), for errors.Is.
var (
	ErrWhatIfUnknownCard  = whatif.ErrUnknownCard
	ErrWhatIfRevoked      = whatif.ErrRevoked
	ErrWhatIfUnknownAgent = whatif.ErrUnknownAgent
	ErrWhatIfBadGrant     = whatif.ErrBadGrant
	// ErrWhatIfConfig: a proposed configuration the replay cannot use.
	ErrWhatIfConfig = errors.New("proposed configuration")
)

// DefaultWhatIfWindow is how far back WhatIf replays when no window is
// given: a week of calls, the same window an approval's summary of what
// a new card would newly allow looks at.
const DefaultWhatIfWindow = 7 * 24 * time.Hour

// whatIfPage is how many records WhatIf reads at once.
const whatIfPage = 2000

// whatIfSlack is how far before the window's start the first record is
// looked for: records reach the chain through journals in batches, so the
// trail's order of times is only nearly monotone; the window itself is
// applied to each record exactly.
const whatIfSlack = time.Minute

// WhatIf replays the recorded decisions of the audit trail made since
// since (the agents' cards deciding a call, an http-fetch, a reveal) on
// the cards as they are now and on the same cards with change, and
// reports the decisions whose outcome the change flips, grouped by agent
// and tool. Nothing is written. A change naming a card the store does not
// hold, a revoked card, an unknown agent or a bad grant is an error
// wrapping ErrWhatIf*.
func (s *State) WhatIf(ctx context.Context, change api.WhatIfChange, since time.Time) (api.WhatIfReport, error) {
	return s.WhatIfConfig(ctx, change, nil, since)
}

// WhatIfConfig is WhatIf with, when after is not nil, a proposed
// agent.toml besides change (maiden audit whatif -config-after): its
// system grants replace each agent's system cards (the cards derived from
// a card it drops go with it, as a sync revokes them), and its agents and
// bindings decide the replayed calls with the change (a tool no longer
// bound, a secret no longer in a binding's secrets or reveal, a host no
// longer in its http_allow refuse; a reveal the binding refused may pass).
// A configuration without [agents] is refused (ErrWhatIfConfig): it has
// one implicit agent allowed everything, whose decisions the trail does
// not record.
func (s *State) WhatIfConfig(ctx context.Context, change api.WhatIfChange, after *config.Config, since time.Time) (api.WhatIfReport, error) {
	now := time.Now()
	st, err := s.whatIfState(ctx, now)
	if err != nil {
		return api.WhatIfReport{}, err
	}
	if after != nil {
		if after.Implicit() {
			return api.WhatIfReport{}, fmt.Errorf("%w: %s declares no [agents]: every call would run as the implicit agent %q, which the cards do not decide", ErrWhatIfConfig, after.File(), config.DefaultAgent)
		}
		st.After = whatIfConfig(after)
	}
	r, err := whatif.New(st, change)
	if err != nil {
		return api.WhatIfReport{}, err
	}
	if err := s.replay(ctx, since, now, func(rec store.AuditRecord) bool { return true }, r.Add); err != nil {
		return api.WhatIfReport{}, err
	}
	rep := r.Report()
	rep.Since, rep.Until = since, now
	return rep, nil
}

// replay hands add the trail's records from since to now that keep
// selects, in the trail's order.
func (s *State) replay(ctx context.Context, since, now time.Time, keep func(store.AuditRecord) bool, add func(api.AuditRecord)) error {
	after, err := firstAuditAt(ctx, s.st, since.Add(-whatIfSlack))
	if err != nil {
		return err
	}
	for {
		recs, err := s.st.AuditTail(ctx, after, whatIfPage)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			after = rec.Seq
			if rec.At.Before(since) || rec.At.After(now) || !keep(rec) {
				continue
			}
			add(adminlink.Audit(rec))
		}
		if len(recs) < whatIfPage {
			return nil
		}
	}
}

// allowAlways says whether an approve rule of the configuration may be
// approved always (nil, every rule, for a store opened without one).
func (s *State) allowAlways() func(string) bool {
	if s.cfg == nil {
		return nil
	}
	cfg := s.cfg
	return func(rule string) bool {
		m, ok := cfg.MiddlewareRule(rule)
		return ok && m.AllowAlways
	}
}

// firstAuditAt is the sequence number after which the trail's first
// record at or after t comes (0: from the start), found with O(log n)
// one-record reads, the records' times taken as ordered.
func firstAuditAt(ctx context.Context, st store.Store, t time.Time) (int64, error) {
	last, err := lastAuditSeq(ctx, st)
	if err != nil || last == 0 {
		return 0, err
	}
	// at reports whether the record after k is at or after t (true past
	// the end, where no record is before t).
	at := func(k int64) (bool, error) {
		recs, err := st.AuditTail(ctx, k, 1)
		if err != nil || len(recs) == 0 {
			return true, err
		}
		return !recs[0].At.Before(t), nil
	}
	// Invariant: at(hi) holds; the answer is the least such k in [lo, hi].
	lo, hi := int64(0), last
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := at(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// whatIfConfig is what the replay reads of a proposed configuration: each
// agent's system cards (as Sync installs them) and its bound tools, each
// narrowed by its binding as the call path narrows it.
func whatIfConfig(cfg *config.Config) *whatif.Config {
	out := &whatif.Config{File: cfg.File(), Agents: map[string]whatif.ConfigAgent{}}
	for _, a := range cfg.Agents() {
		ca := whatif.ConfigAgent{System: systemSpecs(a), Tools: map[string]whatif.ConfigTool{}}
		for _, b := range a.Bindings {
			var t config.Tool
			if !b.Builtin {
				var ok bool
				if t, ok = cfg.Tool(b.Tool); !ok {
					continue
				}
			}
			t = t.Narrowed(b)
			ct := whatif.ConfigTool{Secrets: t.Secrets, Reveal: t.Reveal, HTTPAllow: t.HTTPAllow, CIDRs: t.HTTPAllowCIDRs}
			ports := t.HTTPPorts
			if b.Builtin {
				// web_fetch's network keys are its binding's own (its
				// http_allow came with Narrowed: a built-in has no tool).
				ct.CIDRs, ports = b.HTTPAllowCIDRs, b.HTTPPorts
			}
			for _, p := range ports {
				ct.Ports = append(ct.Ports, int(p))
			}
			ca.Tools[b.Tool] = ct
		}
		out.Agents[a.Name] = ca
	}
	return out
}
