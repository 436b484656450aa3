package admin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/whatif"
)

// This file is "what would newly be possible" (issue 24): before an
// operator installs a card (maiden cards grant) or a human approves a call
// always (minting a card) or widens a session's boundary, what it would
// allow beyond what the agent's wallet (or the session's boundary) allows
// today, in words, and the recorded calls of the window it would have let
// through that were refused or asked. The comparison and the replay are
// internal/whatif's (pure); the store is read here.

// NewlyPossible says what grants (lower-positive, as one new card; bound
// as the always-card an approval mints is, or "") would newly allow agent:
// each grant against the wallet it joins, and the agent's recorded
// decisions since since that were refused or asked a human and that the
// card would have allowed. Nothing is written. An unknown agent or a bad
// grant is an error wrapping ErrWhatIfUnknownAgent or ErrWhatIfBadGrant.
func (s *State) NewlyPossible(ctx context.Context, agent string, grants []string, bound string, since time.Time) (api.NewlyPossible, error) {
	now := time.Now()
	st, err := s.whatIfState(ctx, now)
	if err != nil {
		return api.NewlyPossible{}, err
	}
	parsed := make([]grant.Grant, len(grants))
	change := api.WhatIfChange{Grants: make([]api.WhatIfGrant, len(grants))}
	for i, g := range grants {
		if parsed[i], err = grant.Parse(g); err != nil {
			return api.NewlyPossible{}, fmt.Errorf("%w: %q: %v", ErrWhatIfBadGrant, g, err)
		}
		change.Grants[i] = api.WhatIfGrant{Agent: agent, Grant: g, Bound: bound}
	}
	out := api.NewlyPossible{Since: since, Until: now}
	out.Beyond, out.Redundant = whatif.Beyond(st, agent, parsed, bound)
	rep, err := s.newlyReplay(ctx, st, change, since, now)
	if err != nil {
		return api.NewlyPossible{}, err
	}
	for _, g := range rep.Groups {
		out.Calls += g.DeniedToAllowed
		for _, ex := range g.Examples {
			if ex.After.Allow {
				out.Examples = append(out.Examples, ex)
			}
		}
	}
	slices.SortFunc(out.Examples, func(a, b api.WhatIfExample) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(out.Examples) > api.MaxNewlyExamples {
		out.Examples = out.Examples[:api.MaxNewlyExamples]
	}
	return out, nil
}

// whatIfState is what a replay applies a change to: the store's agents
// and cards at now, and which approve rules may be approved always.
func (s *State) whatIfState(ctx context.Context, now time.Time) (whatif.State, error) {
	agents, err := s.st.Agents(ctx)
	if err != nil {
		return whatif.State{}, err
	}
	all, err := s.st.Cards(ctx, "")
	if err != nil {
		return whatif.State{}, err
	}
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Name
	}
	return whatif.State{Now: now, Agents: names, Cards: all, AllowAlways: s.allowAlways()}, nil
}

// ApprovalNewlyPossible says what approving request id would newly allow.
// For a call that may be approved always: what its always-card (grant
// text, "" for the request's own always grant, bound to the tool and
// policy the request was made for) would allow, as NewlyPossible says it.
// For a session's boundary request: what the expansion adds to the
// session's boundary as it is now, and the session's recorded calls of
// the built-ins since since that the boundary refused and the widened one
// would have let run. An unknown ID is ErrUnknownApproval; a call that may
// not be approved always, or a grant that does not cover it, is
// ErrAlwaysRefused.
func (s *State) ApprovalNewlyPossible(ctx context.Context, id, grantText string, since time.Time) (api.NewlyPossible, error) {
	cur, binding, err := s.lookup(ctx, id)
	if err != nil {
		return api.NewlyPossible{}, err
	}
	if cur.Kind == api.RequestBoundary {
		return s.boundaryNewly(ctx, cur, since)
	}
	if !cur.AllowAlways {
		return api.NewlyPossible{}, fmt.Errorf("%w: the rule that asked (%s) may never be auto-approved: approving it once allows this call only", ErrAlwaysRefused, cur.Rule)
	}
	if grantText == "" {
		grantText = cur.AlwaysGrant
	}
	if _, err := checkAlwaysGrant(grantText, cur); err != nil {
		return api.NewlyPossible{}, err
	}
	return s.NewlyPossible(ctx, cur.Agent, []string{grantText}, binding.Key(), since)
}

// boundaryNewly is ApprovalNewlyPossible for a boundary request.
func (s *State) boundaryNewly(ctx context.Context, cur api.ApprovalRequest, since time.Time) (api.NewlyPossible, error) {
	now := time.Now()
	sess, err := s.st.Session(ctx, cur.Session)
	if err != nil {
		return api.NewlyPossible{}, fmt.Errorf("session %s of boundary request %s: %w", cur.Session, cur.ID, err)
	}
	var x boundary.Expansion
	if err := x.UnmarshalJSON(cur.Expansion); err != nil {
		return api.NewlyPossible{}, fmt.Errorf("boundary request %s: its expansion: %w", cur.ID, err)
	}
	out := api.NewlyPossible{Since: since, Until: now}
	out.Beyond, out.Redundant = whatif.BoundaryBeyond(sess.Boundary, x)
	a := boundary.Assess(sess.Boundary, x)
	if a.Reason != boundary.ReasonApplied {
		return out, nil // a conflict or nothing to apply: nothing would newly run
	}
	revs, err := s.st.Revisions(ctx, cur.Session)
	if err != nil {
		return api.NewlyPossible{}, fmt.Errorf("session %s of boundary request %s: its revisions: %w", cur.Session, cur.ID, err)
	}
	byRev := make(map[int64]boundary.Boundary, len(revs))
	for _, rv := range revs {
		byRev[rv.Revision] = rv.Boundary
	}
	r := whatif.NewBoundaryReplay(cur.Session, byRev, sess.Boundary, a.Boundary)
	if err := s.replay(ctx, since, now, func(rec store.AuditRecord) bool { return rec.Agent == cur.Agent }, r.Add); err != nil {
		return api.NewlyPossible{}, err
	}
	out.Calls, out.Examples, out.NotReplayable = r.Result()
	if out.NotReplayable > 0 {
		out.NotReplayableWhy = whatif.NotReplayable
	}
	return out, nil
}
