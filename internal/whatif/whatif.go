// Package whatif replays the audit trail's recorded decisions on a proposed
// change of the cards (maiden audit whatif): each recorded decision of an
// agent's cards — a call's tool:invoke (with those on its inputs before
// a middleware rewrite, the secret:use of an import's credential and the
// fs decisions of its session's preopens), an
// http-fetch's network:connect and secret:use, a reveal's secret:reveal —
// is rebuilt as the question and
// basis internal/decide answered (the question from the record: the
// call's canonical rendering, the fetch's destination and credential, the
// revealed secret), decided again on the agent's cards as they are today
// and on the same cards with the change, and reported when the change
// flips its outcome. It is pure: the caller (admin) reads the store and
// hands over the cards and the records: maiden audit whatif over a
// SQLite store of 100,000 records took about 2 s of CPU end to end on the
// project's 2-core VM (docs/cards.md, "What if").
//
//	r, err := whatif.New(whatif.State{Now: now, Agents: agents, Cards: all}, api.WhatIfChange{Revoke: []string{"c_1"}})
//	for _, rec := range records {
//		r.Add(rec)
//	}
//	rep := r.Report() // rep.Flips, rep.Groups
//
// Design notes:
//   - Exactness is checked, not assumed: a decision names the revision of
//     the wallet that made it (api.Decision.Wallet), and a record made on
//     a wallet of today's revision must replay on today's cards to the
//     same outcome, card, bound and grant, or the report lists it as
//     inexact (maiden audit whatif then refuses to answer: exit 2).
//   - A flip is today's outcome against today's with the change, so a
//     card granted or revoked since a call was recorded is not blamed on
//     the change; such calls are counted apart (ChangedSince).
//   - The binding a reveal needs is read from the record: a reveal the
//     binding refused never asked the cards (the change cannot flip it);
//     one it let through had the secret in the binding's secrets and
//     reveal, which is all Decide reads of it.
//   - An approval request (an approve layer that found no always-card
//     and asked a human) is replayed as the approve:always question it
//     asked, on the agent's cards less the always-cards bound to another
//     version or policy of the tool (as the approve layer counts them),
//     so a grant of approve:always shows the asked calls it would have
//     let through (Asked).
//   - A standing approval (an always-card let an admitted call skip an
//     approve layer: its record names the card in the layer's verdict) is
//     replayed the same way, on the card's own binding, so revoking the
//     card shows the calls that would have asked a human (Standing).
//   - The layer's answer to approve:always, recorded in its verdict
//     (pass by the card, or pending/approved/denied naming the request),
//     is checked as every decision is: asked again under the binding it
//     was asked under (the card's, the request's, or the one whose wallet
//     has the answer's revision) about the input the layer saw.
//   - A proposed agent.toml (State.After, config.go) decides the "after"
//     side besides the cards: its system grants replace the system cards,
//     and a tool it does not bind, or a binding that no longer covers a
//     fetch's destination or a secret, refuses; a call is asked about the
//     component the file runs its tool as (ConfigTool.Component).
//   - A call's question carries the component it ran (the recorded
//     decision's component), so a grant naming a digest flips only the
//     calls of that component; a record made before decisions carried it
//     is asked with none, which no such grant allows.
//   - A call's record may hold more than its tool:invoke: the decision on
//     each input a middleware then rewrote (before_rewrite, asked first,
//     until one refuses) and the fs decisions of its session's preopens
//     (fs: decide.AccessTree, asked once the call is allowed). The call
//     flips when whether it runs flips, or, running either way, when one
//     of its fs decisions does. A call the cards refused is replayed as
//     far as it got: what the layers or the session would have done past
//     the refusal was never recorded.
//   - A call of an imported tool whose import sends a credential records
//     the cards' secret:use of it (secret_use), asked once the agent's
//     own input's tool:invoke allowed the call, and deciding whether it
//     ran as a fetch's credential does; records made before it was
//     recorded replay as before, without it.
//   - Not replayed: the session boundary's own checks (not the cards';
//     BoundaryReplay replays a boundary request over refused built-ins).
package whatif

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
)

// The audit kinds a replay reads (the store's names: admin's test keeps
// them equal); records of other kinds are passed over.
const (
	KindCallAdmitted = "call-admitted"
	KindCallRefused  = "call-refused"
	KindFetch        = "fetch"
	KindReveal       = "secret-reveal"
	KindApproval     = "approval"
)

// Errors of a change that cannot be replayed; the error wrapping one names
// the card, agent or grant.
var (
	// ErrUnknownCard: a card to revoke that the store does not hold.
	ErrUnknownCard = errors.New("unknown card")
	// ErrRevoked: a card to revoke that is revoked already.
	ErrRevoked = errors.New("card already revoked")
	// ErrUnknownAgent: a grant for an agent the store does not know.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrBadGrant: a grant that does not parse or cannot be installed.
	ErrBadGrant = errors.New("bad grant")
)

// State is what a change applies to.
type State struct {
	// Now is the instant today's wallets are pinned at.
	Now time.Time
	// Agents are the agents the store knows (a grant must name one).
	Agents []string
	// Cards are every card of the store, revoked ones included, in the
	// order they were made (store.Cards("")).
	Cards []cards.Card
	// AllowAlways says whether the approve rule of that name may be
	// approved always (allow_always in agent.toml); an approval request
	// of a rule that may not is passed over (Skipped): no card can let
	// its calls skip the human. Nil means every rule may.
	AllowAlways func(rule string) bool
	// After, when set, is a proposed agent.toml (-config-after): its
	// system grants replace the agents' system cards (as a sync would),
	// and its agents and bindings decide the replay with the change.
	After *Config
}

// examplesPerWay bounds the examples a group keeps of each way of flipping.
const examplesPerWay = 3

// Replay replays records on a change; build it with New, feed it records
// with Add in the trail's order, read the Report. Not safe for concurrent
// use.
type Replay struct {
	now    time.Time
	change api.WhatIfChange
	held   map[string][]cards.Card // today's cards by holder, in the order made
	added  map[string][]cards.Card // the change's new cards of each agent
	gone   map[string]bool         // cards the change revokes, descendants included
	before map[string]*cards.Wallet
	// after is the wallet with the change of each agent it touches;
	// another agent's decisions cannot flip and are not decided twice.
	after map[string]*cards.Wallet
	// bound are the wallets an approval request is replayed on: the
	// agent's, before or after the change, less the always-cards bound
	// to another version or policy of the tool.
	bound     map[boundKey]*cards.Wallet
	bindingOf map[string]string // each card's Bound, by ID
	// requests are the bindings of the approval requests replayed so
	// far, by ID: an approve verdict naming one was asked under it.
	requests    map[string]string
	allowAlways func(string) bool
	cfg         *Config // the proposed configuration, or nil
	// bufBefore and bufAfter hold a unit's decisions today and with the
	// change, reused from record to record.
	bufBefore, bufAfter []cards.Decision
	rep                 api.WhatIfReport
	groups              map[[2]string]*api.WhatIfGroup
}

// New checks change against st (every card to revoke exists and is not
// revoked yet, every grant parses and names a known agent and can be
// installed in its wallet) and returns a Replay of it.
func New(st State, change api.WhatIfChange) (*Replay, error) {
	r := &Replay{now: st.Now, change: change, held: map[string][]cards.Card{}, added: map[string][]cards.Card{},
		gone: map[string]bool{}, before: map[string]*cards.Wallet{}, after: map[string]*cards.Wallet{},
		bound: map[boundKey]*cards.Wallet{}, bindingOf: map[string]string{}, requests: map[string]string{}, allowAlways: st.AllowAlways, groups: map[[2]string]*api.WhatIfGroup{}}
	byID := map[string]*cards.Card{}
	children := map[string][]string{}
	for i := range st.Cards {
		c := &st.Cards[i]
		byID[c.ID] = c
		r.bindingOf[c.ID] = c.Bound
		r.held[c.Holder] = append(r.held[c.Holder], *c)
		for _, p := range c.Parents {
			children[p] = append(children[p], c.ID)
		}
	}
	touched := map[string]bool{}
	// A revocation takes every card derived from the card with it.
	cascade := func(id string) {
		ids, _ := cards.Cascade(id, func(level []string) ([]string, error) {
			var kids []string
			for _, p := range level {
				kids = append(kids, children[p]...)
			}
			return kids, nil
		})
		for _, g := range ids {
			r.gone[g] = true
			touched[byID[g].Holder] = true
		}
	}
	for _, id := range change.Revoke {
		c, ok := byID[id]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: -revoke %s: the store holds no card of that ID (maiden cards ls lists them)", ErrUnknownCard, id)
		case !c.Revoked.IsZero():
			return nil, fmt.Errorf("%w: -revoke %s: the card was revoked at %s", ErrRevoked, id, c.Revoked.UTC().Format(time.RFC3339))
		}
		cascade(id)
	}
	if st.After != nil {
		r.applyConfig(st.After, st.Agents, cascade, touched)
	}
	known := map[string]bool{}
	for _, a := range st.Agents {
		known[a] = true
	}
	// One new card per agent, binding and kind of grant (an allowance, a
	// prohibition, a ceiling), as cards grant makes one card of its grants
	// and -deny or -ceiling.
	specs := map[[3]string]*cards.Spec{}
	var order [][3]string
	for _, g := range change.Grants {
		flag := "-grant"
		switch g.As {
		case "":
		case api.WhatIfDeny, api.WhatIfCeiling:
			flag = "-" + g.As
		default:
			return nil, fmt.Errorf("%w: %q for agent %s: as %q: want \"\", %q or %q", ErrBadGrant, g.Grant, g.Agent, g.As, api.WhatIfDeny, api.WhatIfCeiling)
		}
		if !known[g.Agent] {
			return nil, fmt.Errorf("%w: -agent %s: no agent of that name (maiden agents ls lists them)", ErrUnknownAgent, g.Agent)
		}
		parsed, err := grant.Parse(g.Grant)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %q for agent %s: %v", ErrBadGrant, flag, g.Grant, g.Agent, err)
		}
		k := [3]string{g.Agent, g.Bound, g.As}
		s := specs[k]
		if s == nil {
			s = &cards.Spec{Bound: g.Bound}
			specs[k] = s
			order = append(order, k)
		}
		cg := cards.Grant{Grant: parsed}
		switch g.As {
		case api.WhatIfDeny:
			s.UpperNeg = append(s.UpperNeg, cg)
		case api.WhatIfCeiling:
			s.UpperPos = append(s.UpperPos, cg)
		default:
			s.LowerPos = append(s.LowerPos, cg)
		}
	}
	for _, k := range order {
		a := k[0]
		if err := cards.CheckInstall(*specs[k], a); err != nil {
			return nil, fmt.Errorf("%w: the grants for agent %s: %v", ErrBadGrant, a, err)
		}
		id := "(what-if card of " + a + ")"
		if k[2] != "" {
			id = "(what-if " + k[2] + " card of " + a + ")"
		}
		// Made now, after every card of the store, as a grant would be.
		r.added[a] = append(r.added[a], cards.Card{ID: id, Holder: a, Spec: *specs[k], Manager: "operator", Created: st.Now})
		touched[a] = true
	}
	for a := range touched {
		var cs []cards.Card
		for _, c := range r.held[a] {
			if !r.gone[c.ID] {
				cs = append(cs, c)
			}
		}
		cs = append(cs, r.added[a]...)
		r.after[a] = cards.NewWallet(a, st.Now, cs)
	}
	r.rep.Change = change
	return r, nil
}

// wallet is agent's wallet today, pinned on first need (an agent the store
// no longer holds cards of has an empty one).
func (r *Replay) wallet(agent string) *cards.Wallet {
	w := r.before[agent]
	if w == nil {
		w = cards.NewWallet(agent, r.now, r.held[agent])
		r.before[agent] = w
	}
	return w
}

// unit is one recorded decision to replay: a call's tool:invoke, a
// reveal, or an http-fetch (network:connect, then secret:use of its
// credential when it had one and the destination was allowed). A call
// may carry more: the tool:invoke of each input a middleware then
// rewrote (pre, asked before q[0]), the secret:use of an import's
// credential (after the agent's own input's tool:invoke: q[1], or in pre
// after its first when a layer rewrote the input), a file built-in's
// fs decision on its path (q[1]), and the fs decisions of its session's
// preopens (fs, asked once every tool:invoke is allowed). A fetch whose
// caller put secrets in headers itself (web_fetch's secret headers) asks
// the destination and each one's secret:use first (pre).
type unit struct {
	q        [2]decide.Question
	n        int // questions: 1, or 2 for a fetch with a credential, a call with an import's credential or a file built-in's path
	binding  decide.Binding
	recorded []api.Decision // in the order asked: pre, q, fs
	pre, fs  []decide.Question
	partial  bool // the record cut a list of its decisions
}

// Add replays one record of the trail (records of other kinds, and
// records whose cards were not asked, are passed over).
func (r *Replay) Add(rec api.AuditRecord) {
	var u unit
	switch rec.Kind {
	case KindCallAdmitted, KindCallRefused, KindFetch, KindReveal:
	case KindApproval:
		r.addApproval(rec)
		return
	default:
		return
	}
	r.addApproveVerdicts(rec)
	if !read(rec, &u) {
		if rec.Kind != KindReveal || r.cfg == nil || !r.addRefusedReveal(rec) {
			r.rep.Skipped++
		}
		return
	}
	r.rep.Replayed++
	if u.partial {
		r.rep.Partial++
	}
	w := r.wallet(rec.Agent)
	before, bm := decideUnit(w, &u, r.bufBefore[:0])
	r.bufBefore = before
	switch rev := walletOf(u.recorded, w.RevisionText()); rev {
	case revNone:
		r.rep.Unversioned++
	case revToday:
		if exact(u.recorded, before) {
			r.rep.Verified++
		} else {
			r.rep.Inexact = append(r.rep.Inexact, example(rec, u.recorded, before[bm-1], before[bm-1]))
		}
	default:
		r.rep.Stale++
		if _, changed := flipAt(recordedOutcomes(u.recorded, len(u.fs)), before, bm); changed {
			r.rep.ChangedSince++
		}
	}
	aw := r.after[rec.Agent]
	if aw == nil {
		return // the change does not touch this agent's wallet
	}
	after, am := r.decideAfter(aw, rec, &u, r.bufAfter[:0])
	r.bufAfter = after
	if i, flipped := flipAt(outcomes{after, am}, before, bm); flipped {
		// The example shows the recorded decision that flips: the one
		// whether the call ran, or an fs decision of a call that ran
		// either way.
		b, a, k := before[bm-1], after[am-1], len(u.recorded)-len(u.fs)
		if i >= bm {
			b, a, k = before[i], after[i], i+1
		}
		r.flip(rec, u.recorded[:k], b, a)
	}
}

// Kinds of the wallet revisions a record's decisions name (walletOf).
const (
	revNone  = "" // some decision names none: recorded before decisions did
	revToday = "today"
	revOther = "other"
)

// walletOf says whether every recorded decision was made on the wallet of
// revision today.
func walletOf(ds []api.Decision, today string) string {
	rev := revToday
	for i := range ds {
		switch ds[i].Wallet {
		case "":
			return revNone
		case today:
		default:
			rev = revOther
		}
	}
	return rev
}

// outcomes are a unit's decisions as one replay made them: the first m
// are the ones that decide whether it ran (a call's tool:invoke of each
// input, a fetch's destination and credential), asked until one refuses;
// the rest are a call's fs decisions, asked only when it ran.
type outcomes struct {
	ds []cards.Decision
	m  int
}

// recordedOutcomes is the recorded decisions as outcomes (the last nfs
// are fs decisions).
func recordedOutcomes(rec []api.Decision, nfs int) outcomes {
	ds := make([]cards.Decision, len(rec))
	for i := range rec {
		ds[i].Allow = rec[i].Allow
	}
	return outcomes{ds, len(rec) - nfs}
}

// flipAt reports whether other's outcome differs from the unit's decided
// as before (m decisions deciding whether it ran): whether it ran, else,
// when it ran both ways, the first fs decision that differs (its index).
func flipAt(other outcomes, before []cards.Decision, m int) (int, bool) {
	ran := before[m-1].Allow
	if other.ds[other.m-1].Allow != ran {
		return m - 1, true
	}
	if !ran {
		return 0, false
	}
	for i := m; i < len(before) && i < len(other.ds); i++ {
		if before[i].Allow != other.ds[i].Allow {
			return i, true
		}
	}
	return 0, false
}

// flip counts and keeps a flip of rec's decision: b today, a with the
// change.
func (r *Replay) flip(rec api.AuditRecord, recorded []api.Decision, b, a cards.Decision) {
	r.rep.Flips++
	key := [2]string{rec.Agent, rec.Tool}
	g := r.groups[key]
	if g == nil {
		g = &api.WhatIfGroup{Agent: rec.Agent, Tool: rec.Tool}
		r.groups[key] = g
	}
	n := &g.AllowedToDenied
	if a.Allow {
		n = &g.DeniedToAllowed
	}
	*n++
	if *n <= examplesPerWay {
		g.Examples = append(g.Examples, example(rec, recorded, b, a))
	}
}

// Report is what the replay found so far, its groups sorted by agent and
// tool.
func (r *Replay) Report() api.WhatIfReport {
	rep := r.rep
	rep.Groups = make([]api.WhatIfGroup, 0, len(r.groups))
	for _, g := range r.groups {
		rep.Groups = append(rep.Groups, *g)
	}
	slices.SortFunc(rep.Groups, func(x, y api.WhatIfGroup) int {
		return cmp.Or(strings.Compare(x.Agent, y.Agent), strings.Compare(x.Tool, y.Tool))
	})
	return rep
}

// decideUnit decides u's questions on w, as the call path asked them,
// appended to out: each input's tool:invoke until one refuses (or a
// fetch's secret:use only once its destination is allowed), then a
// call's fs decisions if it ran. It returns them, and how many decide
// whether the unit ran (the last of those is its outcome).
func decideUnit(w *cards.Wallet, u *unit, out []cards.Decision) ([]cards.Decision, int) {
	b := decide.Basis{Wallet: w, Binding: u.binding}
	for _, q := range u.pre {
		d := decide.Decide(b, q)
		out = append(out, d)
		if !d.Allow {
			return out, len(out)
		}
	}
	d := decide.Decide(b, u.q[0])
	out = append(out, d)
	if u.n == 2 && d.Allow {
		d = decide.Decide(b, u.q[1])
		out = append(out, d)
	}
	m := len(out)
	if d.Allow {
		for _, q := range u.fs {
			out = append(out, decide.Decide(b, q))
		}
	}
	return out, m
}

// exact reports whether the replay made the recorded decisions: as many,
// each with the same outcome, card, bound and grant (and target, where the
// record names it).
func exact(rec []api.Decision, got []cards.Decision) bool {
	if len(rec) != len(got) {
		return false
	}
	for i, d := range got {
		r := rec[i]
		if r.Allow != d.Allow || r.Card != d.Card || r.Bound != d.Bound || r.Grant != d.GrantText() {
			return false
		}
		if r.Target != "" && r.Target != d.API().Target {
			return false
		}
	}
	return true
}

func example(rec api.AuditRecord, recorded []api.Decision, before, after cards.Decision) api.WhatIfExample {
	b, a := before.API(), after.API()
	target := b.Target
	if !after.Allow {
		target = a.Target // the question the change refuses
	}
	return api.WhatIfExample{Seq: rec.Seq, At: rec.At, Agent: rec.Agent, Tool: rec.Tool, Record: rec.Kind, Target: target,
		Recorded: recorded[len(recorded)-1], Before: b, After: a}
}

// cardsAsked reports whether the agent's cards made the recorded decision
// d (not the implicit agent, the tool's binding, or a question that could
// not be asked).
func cardsAsked(d *api.Decision) bool { return d != nil && (d.Card != "" || d.Rule == "no card") }

// Bodies of the records a replay reads, as the call path writes them
// (internal/callaudit's Record and Fetch, internal/secret's RevealRecord).
type (
	callBody struct {
		Rendered      string        `json:"rendered"`
		Decision      *api.Decision `json:"decision"`
		BeforeRewrite []struct {
			Rendered string        `json:"rendered"`
			Decision *api.Decision `json:"decision"`
		} `json:"before_rewrite"`
		RewritesTruncated bool           `json:"before_rewrite_truncated"`
		FS                []api.Decision `json:"fs"`
		FSTruncated       bool           `json:"fs_truncated"`
		SecretUse         *api.Decision  `json:"secret_use"`
	}
	fetchBody struct {
		Credential    string         `json:"credential"`
		HeaderSecrets []string       `json:"header_secrets"`
		Decisions     []api.Decision `json:"decisions"`
	}
	revealBody struct {
		Secret   string        `json:"secret"`
		Decision *api.Decision `json:"decision"`
	}
)

// read rebuilds the questions of rec into u; false when the cards were not
// asked or the record cannot be read back.
func read(rec api.AuditRecord, u *unit) bool {
	switch rec.Kind {
	case KindCallAdmitted, KindCallRefused:
		var b callBody
		if json.Unmarshal(rec.Body, &b) != nil || !cardsAsked(b.Decision) {
			return false
		}
		// The component the call ran, as its decision was asked it: a
		// grant naming a digest is decided again against that digest.
		q, ok := invokeOf(rec.Tool, b.Rendered, b.Decision.Component)
		if !ok {
			return false
		}
		u.q[0], u.n = q, 1
		if len(b.BeforeRewrite) == 0 && len(b.FS) == 0 && b.SecretUse == nil && !fileTool(rec.Tool) {
			u.recorded = []api.Decision{*b.Decision}
			break
		}
		// An import's credential: secret:use, asked once the tool:invoke
		// of the agent's own input allowed the call (before any layer
		// rewrote it), deciding whether it ran.
		var use decide.Question
		if b.SecretUse != nil {
			q, ok := useOf(b.SecretUse.Target)
			if !ok || !cardsAsked(b.SecretUse) || fileTool(rec.Tool) {
				return false
			}
			use = q
		}
		// The input before each rewrite: allowed, or no rewrite would
		// have followed.
		for i, p := range b.BeforeRewrite {
			if !cardsAsked(p.Decision) || !p.Decision.Allow {
				return false
			}
			q, ok := invokeOf(rec.Tool, p.Rendered, p.Decision.Component)
			if !ok {
				return false
			}
			u.pre = append(u.pre, q)
			u.recorded = append(u.recorded, *p.Decision)
			if i == 0 && b.SecretUse != nil && b.SecretUse.Allow {
				u.pre = append(u.pre, use)
				u.recorded = append(u.recorded, *b.SecretUse)
			}
		}
		u.recorded = append(u.recorded, *b.Decision)
		// Its refusal (asked again after a human's wait, it may follow a
		// rewrite) or, with no rewrite, its answer: once the last
		// tool:invoke allowed the call.
		if b.SecretUse != nil && (len(b.BeforeRewrite) == 0 || !b.SecretUse.Allow) {
			if !b.Decision.Allow {
				return false // never asked after a refusal
			}
			u.q[1], u.n = use, 2
			u.recorded = append(u.recorded, *b.SecretUse)
		}
		if fileTool(rec.Tool) {
			// A file built-in's path: asked once its tool:invoke allowed
			// the call, and deciding whether it ran (as a fetch's
			// credential is), not a directory it ran with or without.
			if len(b.FS) > 1 || b.FSTruncated {
				return false
			}
			if len(b.FS) == 1 {
				q, ok := fsOf(b.FS[0].Target)
				if !ok || q.Kind != decide.FS || !cardsAsked(&b.FS[0]) {
					return false
				}
				u.q[1], u.n = q, 2
				u.recorded = append(u.recorded, b.FS[0])
			}
			u.partial = b.RewritesTruncated
			break
		}
		for i := range b.FS {
			q, ok := fsOf(b.FS[i].Target)
			if !ok || !cardsAsked(&b.FS[i]) {
				return false
			}
			u.fs = append(u.fs, q)
			u.recorded = append(u.recorded, b.FS[i])
		}
		u.partial = b.RewritesTruncated || b.FSTruncated
	case KindReveal:
		var b revealBody
		if json.Unmarshal(rec.Body, &b) != nil || !cardsAsked(b.Decision) || b.Secret == "" {
			return false
		}
		// The binding let it through to the cards: the secret was in its
		// secrets and reveal, which is all Decide reads of the binding.
		u.q[0], u.n = decide.Reveal(b.Secret), 1
		u.binding = decide.Binding{Tool: rec.Tool, Secrets: []string{b.Secret}, Reveal: []string{b.Secret}}
		u.recorded = []api.Decision{*b.Decision}
	case KindFetch:
		var b fetchBody
		if json.Unmarshal(rec.Body, &b) != nil || len(b.Decisions) == 0 || len(b.HeaderSecrets) > maxHeaderSecrets {
			return false
		}
		for i := range b.Decisions {
			if !cardsAsked(&b.Decisions[i]) {
				return false
			}
		}
		host, port, ok := connectTarget(b.Decisions[0].Target)
		if !ok {
			return false
		}
		connect := decide.Connect(host, port)
		// The questions as the gate asks them (internal/egress's Fetch):
		// for each secret the caller put in a header itself (web_fetch's
		// secret headers) the destination, then its secret:use; then the
		// destination and the credential's secret:use. A secret:use only
		// after an allowed destination; the first refusal ends them.
		var qs []decide.Question
		for _, name := range b.HeaderSecrets {
			if name == "" {
				return false
			}
			qs = append(qs, connect, decide.Use(name))
		}
		qs = append(qs, connect)
		u.q[0], u.n = connect, 1
		if b.Credential != "" {
			qs = append(qs, decide.Use(b.Credential))
			u.q[1], u.n = qs[len(qs)-1], 2
		}
		if !fetchAsked(b.Decisions, qs, b.Decisions[0].Target) {
			return false
		}
		u.pre = qs[:len(qs)-u.n]
		u.recorded = b.Decisions
	}
	return true
}

// maxHeaderSecrets bounds the header secrets of a fetch record a replay
// reads (a request names each once; web_fetch's material holds a few).
const maxHeaderSecrets = 64

// fetchAsked reports whether a fetch record's decisions are the gate's
// questions qs asked in order up to the first refusal, each naming its
// question where it names one (connect, the destination's target). A list
// that stops at an allowed decision before the last question was cut by
// agent.toml's own rules (a header secret's destination): not the cards'.
func fetchAsked(ds []api.Decision, qs []decide.Question, connect string) bool {
	if len(ds) > len(qs) {
		return false
	}
	for i := range ds {
		if i < len(ds)-1 && !ds[i].Allow {
			return false
		}
		want := connect
		if qs[i].Kind == decide.SecretUse {
			want = grant.SecretTarget("use", qs[i].Secret).String()
		}
		if ds[i].Target != "" && ds[i].Target != want {
			return false
		}
	}
	return len(ds) == len(qs) || !ds[len(ds)-1].Allow
}

// invokeOf is the tool:invoke question of a call of tool with the
// canonical rendering rendered.
func invokeOf(tool, rendered, component string) (decide.Question, bool) {
	c, err := grant.ParseRendering(rendered)
	if err != nil {
		return decide.Question{}, false
	}
	t := grant.CommandTarget(tool, c.Command, c.Args, c.Positionals)
	t.Component = component
	return decide.Invoke(t), true
}

// useOf reads a recorded secret:use decision's target ("secret:use NAME",
// as decide.Use names it) back into its question.
func useOf(target string) (decide.Question, bool) {
	name, ok := strings.CutPrefix(target, "secret:use ")
	if !ok || name == "" || grant.SecretTarget("use", name).String() != target {
		return decide.Question{}, false
	}
	return decide.Use(name), true
}

// fsOf reads a recorded fs decision's target back into its question:
// "fs:VERB DIR/**", a preopen's, as decide.AccessTree names it, or
// "fs:VERB PATH", a file built-in's path, as decide.Access names it.
func fsOf(target string) (decide.Question, bool) {
	g, err := grant.Parse(target)
	if err != nil || g.Class != grant.FS || (g.Verb != "read" && g.Verb != "write") {
		return decide.Question{}, false
	}
	// The directory is the grant's literal prefix, and the grant exactly
	// that directory's subtree (its names as they are: a quoted space, an
	// escaped '\').
	dir, ok := g.LiteralPathPrefix()
	if !ok {
		return decide.Question{}, false
	}
	if want, err := grant.FSSubtree(g.Verb, dir); err == nil && want.Equal(g) {
		return decide.AccessTree(g.Verb, dir), true
	}
	// A path: every segment literal, written back exactly as it was.
	if t, err := grant.FSTarget(g.Verb, dir); err == nil && t.String() == target {
		return decide.Access(g.Verb, dir), true
	}
	return decide.Question{}, false
}

// connectTarget reads "network:connect HOST:PORT" (an IPv6 address in
// brackets) as grant.Target.String writes it.
func connectTarget(s string) (string, int, bool) {
	rest, ok := strings.CutPrefix(s, "network:connect ")
	if !ok {
		return "", 0, false
	}
	host, p, err := net.SplitHostPort(rest)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(p)
	return host, port, err == nil
}

// boundKey names a wallet an approval request is replayed on.
type boundKey struct {
	agent, bound string
	after        bool
}

// boundWallet is w less the approve:always cards bound to another
// version or policy of the tool than bound (Wallet.BoundTo, as the approve layer
// asks: cards with no binding stay), made once per agent, binding
// and side of the change.
func (r *Replay) boundWallet(w *cards.Wallet, k boundKey) *cards.Wallet {
	if bw := r.bound[k]; bw != nil {
		return bw
	}
	bw := w.BoundTo(k.bound)
	r.bound[k] = bw
	return bw
}

// approvalBody is the body of an approval request's record, as the
// approve layer writes it (internal/pipeline's middleware_approve.go).
type approvalBody struct {
	Event      string          `json:"event"`
	Approval   string          `json:"approval"`
	Rule       string          `json:"rule"`
	Rendered   string          `json:"rendered"`
	ToolDigest string          `json:"tool_digest"`
	Policy     json.RawMessage `json:"policy"`
}

// addApproval replays an approval request's record as the approve:always
// question its approve layer asked and a human answered; the request's
// binding is kept for the call records whose approve verdicts name it
// (addApproveVerdicts).
func (r *Replay) addApproval(rec api.AuditRecord) {
	var b approvalBody
	if json.Unmarshal(rec.Body, &b) != nil || b.Event != "requested" {
		return // a human's decision, not a request
	}
	bound := BindingKey(b.ToolDigest, string(b.Policy))
	if b.Approval != "" {
		r.requests[b.Approval] = bound
	}
	c, err := grant.ParseRendering(b.Rendered)
	if err != nil || rec.Tool == "" || r.allowAlways != nil && !r.allowAlways(b.Rule) {
		r.rep.Skipped++
		return
	}
	r.rep.Asked++
	aw := r.after[rec.Agent]
	if aw == nil {
		return // the change does not touch this agent's wallet
	}
	t := alwaysTarget(rec.Tool, c)
	q := decide.AlwaysApprove(t)
	before := decide.Decide(decide.Basis{Wallet: r.boundWallet(r.wallet(rec.Agent), boundKey{rec.Agent, bound, false})}, q)
	after := decide.Decide(decide.Basis{Wallet: r.boundWallet(aw, boundKey{rec.Agent, bound, true})}, q)
	if before.Allow == after.Allow {
		return
	}
	asked := api.Decision{Rule: api.RuleAsked, Reason: "a human was asked (approval request " + b.Approval + ", rule " + b.Rule + ")", Target: t.String()}
	r.flip(rec, []api.Decision{asked}, before, after)
}

// verdictsBody is what a call's record says of its middleware layers,
// and the inputs an approve layer may have seen (the agent's own and each
// a layer rewrote, before_rewrite, then the last, rendered).
type verdictsBody struct {
	Rendered      string `json:"rendered"`
	BeforeRewrite []struct {
		Rendered string `json:"rendered"`
	} `json:"before_rewrite"`
	RewritesTruncated bool `json:"before_rewrite_truncated"`
	Middleware        []struct {
		Use      string        `json:"use"`
		Verdict  string        `json:"verdict"`
		Detail   string        `json:"detail"`
		Decision *api.Decision `json:"decision"`
	} `json:"middleware"`
}

// standingPrefix starts the detail of an approve layer's verdict when an
// always-card let the call skip the human (internal/pipeline's
// middleware_approve.go writes it; the test of a real Host's records keeps
// the two equal).
const standingPrefix = "approved always by card "

// approveUse is how a call's record names an approve layer's verdict
// (encoding/json's encoding of chain.Verdict): only records holding one
// are decoded a second time.
var approveUse = []byte(`"use":"approve"`)

// addApproveVerdicts replays the approve layers' answers a call's record
// holds: each approve layer that may approve always asked approve:always
// on the agent's cards less the always-cards bound to another version or
// policy of the tool, and its verdict records the answer (decision). The
// answer is asked again on today's cards, with the binding the answer was
// asked under (an always-card's own, or the approval request's the
// verdict names), and checked as every recorded decision is (verified,
// stale, inexact). A standing approval (an always-card let an admitted
// call skip the human) is also replayed with the change, so revoking the
// card shows the calls that would ask a human again; an asked one flips on
// its request's record (addApproval).
func (r *Replay) addApproveVerdicts(rec api.AuditRecord) {
	// Most calls passed no approve layer: read the body again only when
	// one did.
	if !bytes.Contains(rec.Body, approveUse) {
		return
	}
	var b verdictsBody
	if json.Unmarshal(rec.Body, &b) != nil {
		return
	}
	rewrites := 0 // input rewrites before the verdict: the input it saw
	for _, v := range b.Middleware {
		if v.Verdict == "rewrite" {
			rewrites++
			continue
		}
		if v.Use != "approve" {
			continue
		}
		card, standing := strings.CutPrefix(v.Detail, standingPrefix)
		standing = standing && v.Verdict == "pass" && rec.Kind == KindCallAdmitted
		if !standing && v.Decision == nil {
			continue // a layer that may not approve always asks no card
		}
		rendered, ok := b.Rendered, true
		switch {
		case rewrites < len(b.BeforeRewrite):
			rendered = b.BeforeRewrite[rewrites].Rendered
		case rewrites > len(b.BeforeRewrite) || b.RewritesTruncated:
			ok = false // a rewrite the record did not keep
		}
		c, err := grant.ParseRendering(rendered)
		// The binding the layer asked under: a bound always-card's own
		// (the layer counts it only for calls of its binding), else the
		// request's the verdict names (pending and denied: its ID;
		// approved: "ID by WHO"), made under the call's binding.
		var bound string
		known := true
		if standing {
			bound, known = r.bindingOf[card]
		} else {
			id, _, _ := strings.Cut(v.Detail, " by ")
			bound, known = r.requests[id]
		}
		if (standing && known && bound == "" || !standing && !known) && v.Decision != nil {
			// An always-card bound to nothing, or a request before the
			// window: the binding is the one whose wallet has the
			// revision the answer names (none: the cards changed since,
			// and the answer is stale whatever the binding).
			bound, known = r.bindingByRevision(rec.Agent, v.Decision.Wallet), true
		}
		if !ok || !known || err != nil || rec.Tool == "" {
			r.rep.Skipped++
			continue
		}
		t := alwaysTarget(rec.Tool, c)
		q := decide.AlwaysApprove(t)
		w := r.boundWallet(r.wallet(rec.Agent), boundKey{rec.Agent, bound, false})
		before := decide.Decide(decide.Basis{Wallet: w}, q)
		if v.Decision != nil {
			r.checkOne(rec, *v.Decision, before, w)
		}
		if !standing {
			continue
		}
		r.rep.Standing++
		aw := r.after[rec.Agent]
		if aw == nil {
			continue
		}
		after := decide.Decide(decide.Basis{Wallet: r.boundWallet(aw, boundKey{rec.Agent, bound, true})}, q)
		if before.Allow != after.Allow {
			r.flip(rec, []api.Decision{{Allow: true, Rule: api.RuleApprovedAlways, Card: card, Target: t.String()}}, before, after)
		}
	}
}

// bindingByRevision is the binding of agent's always-cards under which
// its wallet (less the cards bound to another) has revision rev: none
// ("") when that wallet has it or no binding's has.
func (r *Replay) bindingByRevision(agent, rev string) string {
	w := r.wallet(agent)
	if r.boundWallet(w, boundKey{agent, "", false}).RevisionText() == rev {
		return ""
	}
	for _, c := range w.Cards() {
		if c.Bound != "" && r.boundWallet(w, boundKey{agent, c.Bound, false}).RevisionText() == rev {
			return c.Bound
		}
	}
	return ""
}

// checkOne checks one recorded decision against its replay on today's
// wallet w, as Add checks a unit's: verified when recorded on w's
// revision and reproduced exactly, inexact when not reproduced, stale
// when recorded on another revision.
func (r *Replay) checkOne(rec api.AuditRecord, recorded api.Decision, got cards.Decision, w *cards.Wallet) {
	r.rep.Replayed++
	ds := []api.Decision{recorded}
	switch walletOf(ds, w.RevisionText()) {
	case revNone:
		r.rep.Unversioned++
	case revToday:
		if exact(ds, []cards.Decision{got}) {
			r.rep.Verified++
		} else {
			r.rep.Inexact = append(r.rep.Inexact, example(rec, ds, got, got))
		}
	default:
		r.rep.Stale++
		if recorded.Allow != got.Allow {
			r.rep.ChangedSince++
		}
	}
}

// alwaysTarget is the approve:always question of a call of tool with
// rendering c, as the approve layer asks it.
func alwaysTarget(tool string, c grant.Call) grant.Target {
	if len(c.Command) > 0 || len(c.Positionals) > 0 {
		return grant.AlwaysCommandTarget(tool, c.Command, c.Args, c.Positionals)
	}
	return grant.AlwaysTarget(tool, c.Args)
}

// BindingKey is the binding an approval request was made under, as the
// always-card minted from it is bound (store.Binding.Key: the tool's code
// identity and a digest of its policy; admin's test keeps the two equal).
func BindingKey(toolDigest, policy string) string {
	sum := sha256.Sum256([]byte(policy))
	if toolDigest == "" {
		toolDigest = "none"
	}
	return "tool=" + toolDigest + " policy=sha256:" + hex.EncodeToString(sum[:])
}
