package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
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

// whatIfPage is how many records WhatIf reads at once, and
// AuditPageBytes how many bytes of their bodies at most (one record
// beyond it: store.AuditPage): a record holds a call's rendered input,
// up to max_input_bytes, or a tool's error, so that 2,000 of the
// largest an agent or a tool can make were gigabytes in one read.
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
// wrapping ErrWhatIf*; records of the window that do not verify as a
// chain are an error wrapping ErrAuditBroken (trailCursor).
func (s *State) WhatIf(ctx context.Context, change api.WhatIfChange, since time.Time) (api.WhatIfReport, error) {
	return s.WhatIfConfig(ctx, change, nil, since)
}

// WhatIfConfig is WhatIf with, when after is not nil, a proposed
// agent.toml besides change (maiden audit whatif -config-after): its
// system grants replace each agent's system cards (the cards derived from
// a card it drops go with it, as a sync revokes them), and its agents and
// bindings decide the replayed calls with the change (a tool no longer
// bound, a secret no longer in a binding's secrets or reveal, a host no
// longer in its http_allow refuse; a reveal the binding refused may pass;
// a call is asked about the component the file runs its tool as).
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
		if st.After, err = whatIfConfig(after); err != nil {
			return api.WhatIfReport{}, err
		}
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
// selects, in the trail's order, each checked to link to the one before
// it (trailCursor): a window that does not verify is an error wrapping
// ErrAuditBroken, and no answer.
func (s *State) replay(ctx context.Context, since, now time.Time, keep func(store.AuditRecord) bool, add func(api.AuditRecord)) error {
	after, err := firstAuditAt(ctx, s.st, since.Add(-whatIfSlack))
	if err != nil {
		return err
	}
	c, err := cursorAt(ctx, s.st, after)
	if err != nil {
		return err
	}
	return c.read(ctx, s.st, func(rec store.AuditRecord) {
		if rec.At.Before(since) || rec.At.After(now) || !keep(rec) {
			return
		}
		add(adminlink.Audit(rec))
	})
}

// trailCursor is where a replay has read the trail to: the last record
// read, whose hash the next must link to (0 and "": the start).
type trailCursor struct {
	seq  int64
	hash string
}

// cursorAt is the cursor after record seq (0: before the first record):
// that record read for its hash. A replay's answer is only as good as the
// records it reads, so it checks them as a chain, as maiden audit verify
// checks the whole trail: a record of its window edited, deleted or
// inserted (a refused call taken out, a decision changed) fails the
// replay rather than answer from it. The chain has no key: a trail
// rewritten from some record on, every hash recomputed, still links; the
// head compared with one noted earlier tells (maiden audit verify -head).
func cursorAt(ctx context.Context, st store.Store, seq int64) (trailCursor, error) {
	if seq == 0 {
		return trailCursor{}, nil
	}
	recs, err := st.AuditTail(ctx, seq-1, 1)
	if err != nil {
		return trailCursor{}, err
	}
	if len(recs) == 0 || recs[0].Seq != seq {
		return trailCursor{}, fmt.Errorf("the replay's window starts after record %d: %w", seq,
			&store.AuditProblem{Seq: seq, Reason: "deleted", Detail: "the record the window's first links to is missing"})
	}
	return trailCursor{seq, recs[0].Hash}, nil
}

// read hands each the records after c, in the trail's order, a page at a
// time (at most whatIfPage records, AuditPageBytes of bodies), each
// checked to come next in the chain; c moves on with them.
func (c *trailCursor) read(ctx context.Context, st store.Store, each func(store.AuditRecord)) error {
	for {
		recs, err := st.AuditPage(ctx, c.seq, whatIfPage, AuditPageBytes)
		if err != nil {
			return err
		}
		var n int64
		for _, rec := range recs {
			if err := store.AuditLink(c.seq, c.hash, rec); err != nil {
				return fmt.Errorf("the records the replay reads: %w (maiden audit verify checks the whole trail)", err)
			}
			c.seq, c.hash = rec.Seq, rec.Hash
			n += int64(len(rec.Body))
			each(rec)
		}
		if len(recs) < whatIfPage && n < AuditPageBytes {
			return nil // neither bound cut the page: the trail ended
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
// narrowed by its binding as the call path narrows it, with the component
// the file runs each WebAssembly tool as (a local file hashed as it is
// now; one that cannot be read is an error wrapping ErrWhatIfConfig).
func whatIfConfig(cfg *config.Config) (*whatif.Config, error) {
	out := &whatif.Config{File: cfg.File(), Agents: map[string]whatif.ConfigAgent{}}
	digests := map[string]string{} // a local file's, by path
	component := func(t config.Tool) (string, error) {
		switch {
		case t.CLI != nil || t.MCP != nil || t.Path == "":
			return "", nil
		case t.OCI != nil:
			return t.OCI.Digest, nil
		}
		if d, ok := digests[t.Path]; ok {
			return d, nil
		}
		d, err := fileDigest(t.Path)
		if err != nil {
			return "", fmt.Errorf("%w: %s: tools.%s.path: %v", ErrWhatIfConfig, cfg.File(), t.Name, err)
		}
		digests[t.Path] = d
		return d, nil
	}
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
			if !b.Builtin {
				var err error
				if ct.Component, err = component(t); err != nil {
					return nil, err
				}
			}
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
	return out, nil
}

// fileDigest is "sha256:" and the hex SHA-256 of the file at path, as a
// call's record names a local component (the bytes the runner opened).
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
