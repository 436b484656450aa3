package whatif_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
	"github.com/maiden-run/maiden/internal/whatif"
	"github.com/maiden-run/maiden/internal/whatif/whatiftest"
)

// The generated trails here are decision-faithful rather than made by a
// Host: every recorded decision is decide.Decide's on the wallet pinned
// from the same cards, written in its record's shape (trail in
// whatif_test.go). That is what lets 10,000 and 100,000 varied records be
// made in milliseconds; cmd/maiden's TestAuditWhatIfRealTrail replays a
// trail a real Host wrote, through the real encoders, fetches and reveals
// included.

var agents = whatiftest.Agents

// Two components the tools of a random trail run.
var compA, compB = whatiftest.CompA, whatiftest.CompB

func randomCards(t testing.TB, rng *rand.Rand, n int) []cards.Card {
	return whatiftest.RandomCards(t, rng, n, now)
}

func randomTrail(t testing.TB, rng *rand.Rand, cs []cards.Card, n int) *trail {
	return &trail{whatiftest.RandomTrail(t, rng, cs, now.Add(-time.Minute), n)}
}

// TestReplayIsExact: a replay of the unchanged state reproduces every one
// of 10,000 varied recorded decisions exactly (outcome, card, bound,
// grant, target), and the answers of 1,500 calls' approve layers to
// approve:always (asked a human, or passed by an always-card bound to the
// call's binding or to none), and flips nothing; and for changes (a card
// revoked, with its descendants; grants added), the flips it reports are
// exactly the decisions whose outcome differs when the same trail is
// recorded again on the changed cards (an asked request's and a standing
// approval's apart from its call's).
func TestReplayIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	// Besides the random cards, each agent's always-cards (two bound to
	// a binding, one to none), and besides the 10,000 varied calls, 1,500
	// calls through an approve layer that may approve always.
	cs := append(randomCards(t, rng, 40), whatiftest.AlwaysCards(t, now)...)
	const n = 10_000
	tr := randomTrail(t, rng, cs, n)
	tr.Bindings = map[int64]string{}
	whatiftest.RandomApprovals(rng, tr.Trail, 1500)
	r, err := whatif.New(whatif.State{Now: now, Agents: agents, Cards: cs}, api.WhatIfChange{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	answers, standing := 0, 0 // approve layers' answers recorded, and standing approvals
	for _, rec := range tr.Recs {
		r.Add(rec)
		kinds[rec.Kind]++
		if strings.Contains(string(rec.Body), `"use":"approve"`) {
			answers++
			if rec.Kind == whatif.KindCallAdmitted {
				standing++
			}
		}
	}
	rep := r.Report()
	skipped := rep.Skipped
	records := len(tr.Recs) - kinds[whatif.KindApproval] // the requests are counted as asked
	if rep.Flips != 0 || len(rep.Inexact) != 0 || rep.Verified != rep.Replayed || rep.Replayed+rep.Skipped != records+answers || rep.Stale != 0 {
		t.Fatalf("unchanged replay: flips %d, inexact %d (first %+v), verified %d of %d replayed, %d skipped: want 0 flips, all %d exact",
			rep.Flips, len(rep.Inexact), first(rep.Inexact), rep.Verified, rep.Replayed, rep.Skipped, records+answers)
	}
	if rep.Asked != kinds[whatif.KindApproval] || rep.Standing != standing || rep.Asked < 50 || standing < 50 {
		t.Errorf("asked %d, standing %d: want %d, %d (and at least 50 of each)", rep.Asked, rep.Standing, kinds[whatif.KindApproval], standing)
	}
	// Only the reveals the binding refused are not the cards'.
	if skipped == 0 || skipped > kinds[whatif.KindReveal] {
		t.Errorf("skipped %d of %d reveals", skipped, kinds[whatif.KindReveal])
	}
	allowed, denied := 0, 0
	var rewritten, fsAllowed, fsDenied, useAllowed, useDenied, useRewritten int
	for _, rec := range tr.Recs {
		if rec.Kind == whatif.KindCallAdmitted {
			allowed++
		} else if rec.Kind == whatif.KindCallRefused {
			denied++
		}
		var b struct {
			BeforeRewrite []any          `json:"before_rewrite"`
			FS            []api.Decision `json:"fs"`
			SecretUse     *api.Decision  `json:"secret_use"`
		}
		mustJSON(t, rec.Body, &b)
		if len(b.BeforeRewrite) > 0 {
			rewritten++
		}
		for _, d := range b.FS {
			if d.Allow {
				fsAllowed++
			} else {
				fsDenied++
			}
		}
		switch {
		case b.SecretUse == nil:
		case !b.SecretUse.Allow:
			useDenied++
		case len(b.BeforeRewrite) > 0:
			useRewritten++
			fallthrough
		default:
			useAllowed++
		}
	}
	if allowed < n/20 || denied < n/20 || rewritten < n/100 || fsAllowed < n/100 || fsDenied < n/100 {
		t.Errorf("the trail is not varied: %d calls admitted, %d refused, %d rewritten; %d fs decisions allowed, %d denied", allowed, denied, rewritten, fsAllowed, fsDenied)
	}
	// Imported tools' calls whose import sends a credential: its
	// secret:use allowed (some of them before a rewrite) and denied.
	if useAllowed < n/400 || useDenied < n/400 || useRewritten < n/1000 {
		t.Errorf("the trail is not varied: %d import credentials' secret:use allowed (%d of them before a rewrite), %d denied", useAllowed, useRewritten, useDenied)
	}
	// The built-in tools' calls and requests, and a wrapped CLI's
	// tunnels, are in it, allowed and refused.
	builtins := map[string]map[bool]int{}
	for _, rec := range tr.Recs {
		var b struct {
			Method   string
			Decision *api.Decision
			Allowed  bool
		}
		mustJSON(t, rec.Body, &b)
		key, ok := rec.Tool, b.Allowed
		switch {
		case rec.Kind == whatif.KindFetch && b.Method == "CONNECT":
			key = "CONNECT"
		case rec.Kind == whatif.KindFetch:
			key = rec.Tool + " request"
		case b.Decision != nil:
			ok = b.Decision.Allow
		}
		if builtins[key] == nil {
			builtins[key] = map[bool]int{}
		}
		builtins[key][ok]++
	}
	for _, k := range []string{"fs_read", "fs_write", "fs_list", "web_fetch", "web_fetch request", "CONNECT"} {
		if builtins[k][true] == 0 || builtins[k][false] == 0 {
			t.Errorf("%s: %d allowed, %d refused: want some of each", k, builtins[k][true], builtins[k][false])
		}
	}

	// Each record's outcome recorded again on today's cards, once.
	today, todayAlways := make([]*string, len(tr.Recs)), make([]*string, len(tr.Recs))
	for j, rec := range tr.Recs {
		today[j] = outcomeOf(t, tr, rec, tr.Plans)
		todayAlways[j] = alwaysOf(t, tr, rec, tr.Bindings)
	}
	// Revocations name live cards whose revocation changes some outcome
	// when the trail is recorded again (the slow way, not the replay): the
	// trail is random, and a card that only repeats what others decide
	// would flip nothing whatever the replay did. Found from index i on.
	flipsSome := func(revoke []string) bool {
		again := newTrail(t, applyChange(t, cs, api.WhatIfChange{Revoke: revoke}), tr.At)
		for j, rec := range tr.Recs {
			if after := outcomeOf(t, again, rec, tr.Plans); today[j] != nil && *today[j] != *after {
				return true
			}
		}
		return false
	}
	liveCard := func(t testing.TB, cs []cards.Card, i int) string {
		for k := range cs {
			if c := cs[(i+k)%len(cs)]; c.Live(now) && flipsSome([]string{c.ID}) {
				return c.ID
			}
		}
		t.Fatal("no live card whose revocation changes an outcome")
		return ""
	}
	liveDenyCard := func(t testing.TB, cs []cards.Card) string {
		for _, c := range cs {
			if c.Live(now) && len(c.UpperNeg) > 0 && flipsSome([]string{c.ID}) {
				return c.ID
			}
		}
		t.Fatal("no live prohibition card whose revocation changes an outcome")
		return ""
	}
	changes := []api.WhatIfChange{
		{Revoke: []string{liveCard(t, cs, 3)}},
		{Revoke: []string{liveCard(t, cs, 11), liveCard(t, cs, 17)}},
		{Grants: []api.WhatIfGrant{{Agent: "a1", Grant: "tool:invoke t1 --..."}, {Agent: "a1", Grant: "network:connect *"}}},
		{Revoke: []string{liveCard(t, cs, 0)}, Grants: []api.WhatIfGrant{{Agent: "a2", Grant: "secret:reveal *"}, {Agent: "a0", Grant: "tool:invoke git --..."}}},
		// Deny and ceiling changes: a prohibition removed, one added, a
		// ceiling added, and all three with an allowance at once.
		{Revoke: []string{liveDenyCard(t, cs)}},
		{Grants: []api.WhatIfGrant{{Agent: "a1", Grant: "tool:invoke t0 --to=a*", As: api.WhatIfDeny}, {Agent: "a3", Grant: "network:connect *:443", As: api.WhatIfDeny}}},
		{Grants: []api.WhatIfGrant{{Agent: "a2", Grant: "tool:invoke t1 --...", As: api.WhatIfCeiling}, {Agent: "a2", Grant: "secret:use *", As: api.WhatIfCeiling}}},
		{Grants: []api.WhatIfGrant{{Agent: "a0", Grant: "tool:invoke git --...", As: api.WhatIfCeiling}, {Agent: "a0", Grant: "tool:invoke git log --...", As: api.WhatIfDeny},
			{Agent: "a0", Grant: "tool:invoke git --..."}}},
		// Filesystem changes: a card of fs grants revoked, a prohibition
		// reaching inside an offered directory, a subtree granted.
		{Revoke: []string{liveFSCard(t, cs)}},
		{Grants: []api.WhatIfGrant{{Agent: "a0", Grant: "fs:read /srv/work/secret/**", As: api.WhatIfDeny}, {Agent: "a1", Grant: "fs:write /srv/work/secret/**", As: api.WhatIfDeny}}},
		{Grants: []api.WhatIfGrant{{Agent: "a3", Grant: "fs:read /**"}, {Agent: "a1", Grant: "fs /srv/work/**"}}},
		// Approve layers: an always-card revoked (its standing approvals
		// would ask), approve:always granted (asked calls would pass).
		{Revoke: []string{"always-a1-0", "always-a2-2"}},
		{Grants: []api.WhatIfGrant{{Agent: "a3", Grant: "approve:always t1 --..."}, {Agent: "a0", Grant: "approve:always t0 --to=*"}}},
		// Grants naming a component: an allowance, a prohibition, a
		// ceiling (issue 25).
		{Grants: []api.WhatIfGrant{{Agent: "a1", Grant: "tool:invoke t1@" + compB + " --..."}, {Agent: "a3", Grant: "tool:invoke t0@" + compA + " --..."}}},
		{Grants: []api.WhatIfGrant{{Agent: "a2", Grant: "tool:invoke *@" + compA + " --...", As: api.WhatIfDeny}}},
		{Grants: []api.WhatIfGrant{{Agent: "a0", Grant: "tool:invoke *@" + compB + " --...", As: api.WhatIfCeiling}}},
		// An import's credential: its secret:use prohibited (calls that
		// ran would not, fetches with it neither), and granted.
		{Grants: []api.WhatIfGrant{{Agent: "a1", Grant: "secret:use K0", As: api.WhatIfDeny}, {Agent: "a3", Grant: "secret:use K1", As: api.WhatIfDeny}}},
		{Grants: []api.WhatIfGrant{{Agent: "a0", Grant: "secret:use K2"}, {Agent: "a2", Grant: "secret:use *"}}},
	}
	// A prohibition of exactly the agent's own input of rewritten calls
	// (not of what a middleware rewrote it into): only the decisions
	// before the rewrites can flip them.
	changes = append(changes, denyOriginals(t, tr))
	plannedFlips, fsFlips := make([]int, len(changes)), make([]int, len(changes))
	for i, change := range changes {
		t.Run(fmt.Sprint("change ", i), func(t *testing.T) {
			changed := applyChange(t, cs, change)
			// The same decisions recorded again on the changed cards.
			again := newTrail(t, changed, tr.At)
			want, wantFlips := map[int64]bool{}, 0
			for j, rec := range tr.Recs {
				// A standing approval flips apart from its call.
				if b, a := todayAlways[j], alwaysOf(t, again, rec, tr.Bindings); b != nil && *b != *a {
					want[rec.Seq] = true
					wantFlips++
				}
				before, after := today[j], outcomeOf(t, again, rec, tr.Plans)
				if before != nil && *before != *after {
					want[rec.Seq] = true
					wantFlips++
					if _, planned := tr.Plans[rec.Seq]; planned {
						plannedFlips[i]++
						if strings.HasPrefix(*before, "ran ") && strings.HasPrefix(*after, "ran ") {
							fsFlips[i]++ // ran either way: only a directory flips
						}
					}
				}
			}
			r, err := whatif.New(whatif.State{Now: now, Agents: agents, Cards: cs}, change)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int64]bool{}
			for _, rec := range tr.Recs {
				r.Add(rec)
			}
			rep := r.Report()
			for _, g := range rep.Groups {
				if g.AllowedToDenied+g.DeniedToAllowed == 0 {
					t.Errorf("empty group %+v", g)
				}
			}
			// Every flip is counted; examples are the first of each
			// group, so compare the count and that each example is one.
			for _, g := range rep.Groups {
				for _, ex := range g.Examples {
					got[ex.Seq] = true
					if !want[ex.Seq] {
						t.Errorf("example #%d (%s) flips, but recorded again on the changed cards it does not", ex.Seq, ex.Target)
					}
				}
			}
			if rep.Flips != wantFlips || rep.Flips == 0 {
				t.Errorf("flips %d, want %d (and some)", rep.Flips, wantFlips)
			}
			// A change of secret:use flips imported tools' calls by their
			// credential, both ways.
			if g := change.Grants; len(g) > 0 && strings.HasPrefix(g[0].Grant, "secret:use ") {
				way := g[0].As == api.WhatIfDeny // allowed -> denied
				found := false
				for _, gr := range rep.Groups {
					for _, ex := range gr.Examples {
						found = found || (ex.Tool == "t0" || ex.Tool == "t1") && strings.HasPrefix(ex.Target, "secret:use ") && ex.Before.Allow == way && ex.After.Allow != way
					}
				}
				if !found {
					t.Errorf("no call of an imported tool flips by its credential's secret:use: %+v", rep.Groups)
				}
			}
		})
	}
	// The changes flip rewritten calls and calls given directories, and
	// some of them only through a directory: the test covers both.
	total, fs := 0, 0
	for i := range changes {
		total, fs = total+plannedFlips[i], fs+fsFlips[i]
	}
	if total == 0 || fs == 0 || fs == total {
		t.Errorf("the changes flip %d rewritten or directory-given calls, %d of them through a directory only: want some of each", total, fs)
	}
}

func first(xs []api.WhatIfExample) any {
	if len(xs) == 0 {
		return nil
	}
	return xs[0]
}

// liveCard is the first card from i on that is neither revoked nor
// expired (the change revokes it).
func liveCard(t testing.TB, cs []cards.Card, i int) string {
	for ; i < len(cs); i++ {
		if cs[i].Live(now) {
			return cs[i].ID
		}
	}
	t.Fatal("no live card")
	return ""
}

// applyChange is the change done the slow way: the revoked cards and
// every descendant marked revoked, each agent's grants one new card.
func applyChange(t testing.TB, cs []cards.Card, ch api.WhatIfChange) []cards.Card {
	out := append([]cards.Card(nil), cs...)
	gone := map[string]bool{}
	for _, id := range ch.Revoke {
		gone[id] = true
	}
	for changed := true; changed; {
		changed = false
		for _, c := range out {
			for _, p := range c.Parents {
				if gone[p] && !gone[c.ID] {
					gone[c.ID], changed = true, true
				}
			}
		}
	}
	for i := range out {
		if gone[out[i].ID] {
			out[i].Revoked = now.Add(-time.Second)
		}
	}
	byAgent := map[[2]string]*cards.Card{}
	for _, g := range ch.Grants {
		k := [2]string{g.Agent, g.As}
		c := byAgent[k]
		if c == nil {
			c = &cards.Card{ID: "new-" + g.Agent + g.As, Holder: g.Agent, Created: now}
			byAgent[k] = c
		}
		switch g.As {
		case api.WhatIfDeny:
			c.UpperNeg = append(c.UpperNeg, gs(t, g.Grant)...)
		case api.WhatIfCeiling:
			c.UpperPos = append(c.UpperPos, gs(t, g.Grant)...)
		default:
			c.LowerPos = append(c.LowerPos, gs(t, g.Grant)...)
		}
	}
	for _, a := range agents {
		for _, as := range []string{"", api.WhatIfDeny, api.WhatIfCeiling} {
			if c := byAgent[[2]string{a, as}]; c != nil {
				out = append(out, *c)
			}
		}
	}
	return out
}

// denyOriginals is a prohibition, for the agent of each of the first few
// admitted calls a middleware rewrote, of exactly the agent's own input
// (one whose rendering is a grant of itself: no glob, quote or space).
func denyOriginals(t testing.TB, tr *trail) api.WhatIfChange {
	var ch api.WhatIfChange
	for _, rec := range tr.Recs {
		var b struct {
			Rendered      string
			BeforeRewrite []struct{ Rendered string } `json:"before_rewrite"`
		}
		mustJSON(t, rec.Body, &b)
		if rec.Kind != whatif.KindCallAdmitted || len(b.BeforeRewrite) == 0 {
			continue
		}
		orig := b.BeforeRewrite[0].Rendered
		if orig == b.Rendered || strings.ContainsAny(orig, `*" \`) || orig == "" {
			continue
		}
		ch.Grants = append(ch.Grants, api.WhatIfGrant{Agent: rec.Agent, Grant: "tool:invoke " + rec.Tool + " " + orig, As: api.WhatIfDeny})
		if len(ch.Grants) == 5 {
			break
		}
	}
	if len(ch.Grants) == 0 {
		t.Fatal("no rewritten call to deny the input of")
	}
	return ch
}

// liveFSCard is the first live card allowing some fs access.
func liveFSCard(t testing.TB, cs []cards.Card) string {
	for _, c := range cs {
		if c.Live(now) && slices.ContainsFunc(c.LowerPos, func(g cards.Grant) bool { return g.Grant.Class == grant.FS }) {
			return c.ID
		}
	}
	t.Fatal("no live fs card")
	return ""
}

// outcomeOf decides rec's question again on tr's cards, the way the call
// path asked it (nil for a record whose cards were not asked): plans
// holds the calls a middleware rewrote or a session gave directories,
// which are recorded again as far as their record knows them. A call
// refused at an input never reached the later layers or its session's
// directories (nor, refused at the agent's own input, its import
// credential's secret:use), so none of them can be known: the refused input and those
// before it are recorded again, and a call they would let through counts
// as run (a flip of the cards' decisions, which is what a replay reports).
func outcomeOf(t testing.TB, tr *trail, rec api.AuditRecord, plans map[int64]plan) *string {
	n := len(tr.Recs)
	var ok bool
	if p, planned := plans[rec.Seq]; planned {
		if rec.Kind == whatif.KindCallRefused {
			var b struct {
				BeforeRewrite []any         `json:"before_rewrite"`
				SecretUse     *api.Decision `json:"secret_use"`
			}
			mustJSON(t, rec.Body, &b)
			p.Rendered, p.Dirs = p.Rendered[:len(b.BeforeRewrite)+1], nil
			if b.SecretUse == nil {
				p.Credential = "" // refused before its secret:use was asked: not known either
			}
		}
		saved := tr.Plans
		tr.Plans = nil
		out := tr.CallWith(p)
		tr.Plans, tr.Recs = saved, tr.Recs[:n]
		return &out
	}
	switch rec.Kind {
	case whatif.KindCallAdmitted, whatif.KindCallRefused:
		var b struct {
			Rendered string
			Decision api.Decision
		}
		mustJSON(t, rec.Body, &b)
		ok = tr.CallOf(rec.Agent, rec.Tool, b.Rendered, b.Decision.Component)
	case whatif.KindFetch:
		var b struct {
			Credential string
			Decisions  []api.Decision
		}
		mustJSON(t, rec.Body, &b)
		var host string
		var port int
		if _, err := fmt.Sscanf(b.Decisions[0].Target, "network:connect %s", &host); err != nil {
			t.Fatal(err)
		}
		hp := host
		if i := lastColon(hp); i >= 0 {
			host = hp[:i]
			fmt.Sscanf(hp[i+1:], "%d", &port)
		}
		host = trimBrackets(host)
		ok = tr.Fetch(rec.Agent, rec.Tool, host, port, b.Credential)
	case whatif.KindReveal:
		var b struct {
			Secret   string
			Decision api.Decision
		}
		mustJSON(t, rec.Body, &b)
		if b.Decision.Rule == "tools.vault.reveal" {
			return nil
		}
		ok = tr.Reveal(rec.Agent, rec.Tool, b.Secret, true)
	}
	tr.Recs = tr.Recs[:n]
	out := fmt.Sprint(ok)
	return &out
}

// alwaysOf is the outcome of the approve:always question rec records
// asking, decided again on tr's cards (nil when it records none that can
// flip): an approval request's (a human was asked) and a standing
// approval's (an always-card let the call through), under the binding the
// layer asked under (bindings: the generator's, by seq).
func alwaysOf(t testing.TB, tr *trail, rec api.AuditRecord, bindings map[int64]string) *string {
	var b struct {
		Event, Rendered string
		Middleware      []struct{ Use, Verdict, Detail string }
	}
	mustJSON(t, rec.Body, &b)
	switch {
	case rec.Kind == whatif.KindApproval && b.Event == "requested":
	case rec.Kind == whatif.KindCallAdmitted && len(b.Middleware) > 0 && b.Middleware[0].Use == "approve" && b.Middleware[0].Verdict == "pass":
	default:
		return nil
	}
	bound, ok := bindings[rec.Seq]
	if !ok {
		t.Fatalf("#%d: no binding recorded", rec.Seq)
	}
	c, err := grant.ParseRendering(b.Rendered)
	if err != nil {
		t.Fatal(err)
	}
	w := tr.Wallet(rec.Agent).BoundTo(bound)
	out := fmt.Sprint(decide.Decide(decide.Basis{Wallet: w}, decide.AlwaysApprove(grant.AlwaysTarget(rec.Tool, c.Args))).Allow)
	return &out
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return i
		}
	}
	return -1
}

func trimBrackets(s string) string {
	if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		return s[1 : len(s)-1]
	}
	return s
}

// BenchmarkReplay100k replays 100,000 recorded decisions (70% calls, 20%
// fetches, 10% reveals, on 40 cards of 4 agents) on a change that touches
// two agents' wallets: whatif.New, Add of each record (its JSON read back,
// the rendering parsed, decided today and with the change), Report.
// BenchmarkDecide100k is the baseline in the same run: only the 100,000
// decisions of the unchanged wallets, on questions built beforehand.
func BenchmarkReplay100k(b *testing.B) {
	rng := rand.New(rand.NewPCG(24, 2))
	cs := randomCards(b, rng, 40)
	tr := randomTrail(b, rng, cs, 100_000)
	change := api.WhatIfChange{Revoke: []string{liveCard(b, cs, 3)}, Grants: []api.WhatIfGrant{{Agent: "a1", Grant: "tool:invoke t1 --..."}}}
	cpu := cpuclock.Now()
	b.ResetTimer()
	for b.Loop() {
		r, err := whatif.New(whatif.State{Now: now, Agents: agents, Cards: cs}, change)
		if err != nil {
			b.Fatal(err)
		}
		for _, rec := range tr.Recs {
			r.Add(rec)
		}
		if r.Report().Replayed == 0 {
			b.Fatal("nothing replayed")
		}
	}
	cpuclock.Report(b, cpu)
}

func BenchmarkDecide100k(b *testing.B) {
	rng := rand.New(rand.NewPCG(24, 2))
	cs := randomCards(b, rng, 40)
	tr := newTrail(b, cs, now)
	ws := map[string]*cards.Wallet{}
	for _, a := range agents {
		ws[a] = tr.Wallet(a)
	}
	type q struct {
		w *cards.Wallet
		q decide.Question
	}
	qs := make([]q, 100_000)
	for i := range qs {
		tool, r := whatiftest.RandomRendering(rng)
		c, _ := grant.ParseRendering(r)
		qs[i] = q{ws[agents[rng.IntN(len(agents))]], decide.Invoke(grant.CommandTarget(tool, c.Command, c.Args, c.Positionals))}
	}
	cpu := cpuclock.Now()
	b.ResetTimer()
	for b.Loop() {
		for _, x := range qs {
			decide.Decide(decide.Basis{Wallet: x.w}, x.q)
		}
	}
	cpuclock.Report(b, cpu)
}
