package cards

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/grant"
)

// Wallet is an agent's cards as they stood at one instant: the pinned view
// a call decides on. Build it with NewWallet; it is immutable and safe for
// concurrent use.
type Wallet struct {
	agent string
	at    time.Time
	cards []Card
	upper []*Card // live cards with upper grants for the agent
	// The lower-positive grants for the agent, those restricted to one
	// literal name indexed by it (a decision then looks at the few grants
	// that can match, not at the whole wallet), the others in card order.
	named map[nameKey][]entry
	other []entry
	// rev is Revision, and revText it as every decision of the wallet
	// carries it (Decision.Wallet): computed once when the wallet is
	// pinned, so recording it costs a call nothing.
	rev     int64
	revText string
	// budgeted are the IDs of the live cards with a budget (nil when
	// none has one): the call path asks it of every allowed call.
	budgeted map[string]bool
}

type nameKey struct {
	class grant.Class
	name  string
}

type entry struct {
	card *Card
	g    *Grant
	text *grantText // g's text, rendered once per wallet when first recorded
}

// grantText is a grant's canonical text, rendered on first use: an audited
// call records the grant that allowed it, and a wallet is pinned once per
// store change, not once per call.
type grantText struct{ p atomic.Pointer[string] }

func (t *grantText) get(g *grant.Grant) string {
	if s := t.p.Load(); s != nil {
		return *s
	}
	s := g.String()
	t.p.Store(&s)
	return s
}

// NewWallet pins cards (an agent's cards as the store returned them) at
// time at: revoked and expired cards are dropped, and grants whose
// recipient does not cover agent are ignored. The cards are copied.
func NewWallet(agent string, at time.Time, cards []Card) *Wallet {
	w := &Wallet{agent: agent, at: at, cards: make([]Card, 0, len(cards)), named: map[nameKey][]entry{}}
	for _, c := range cards {
		if !c.Live(at) {
			continue
		}
		c.LowerPos = forAgent(c.LowerPos, agent)
		c.LowerNeg = forAgent(c.LowerNeg, agent)
		c.UpperPos = forAgent(c.UpperPos, agent)
		c.UpperNeg = forAgent(c.UpperNeg, agent)
		w.cards = append(w.cards, c)
	}
	n := 0
	for i := range w.cards {
		n += len(w.cards[i].LowerPos)
	}
	texts := make([]grantText, n)
	for i := range w.cards {
		c := &w.cards[i]
		for j := range c.LowerPos {
			g := &c.LowerPos[j]
			e := entry{c, g, &texts[0]}
			texts = texts[1:]
			if name, ok := g.Grant.LiteralName(); ok {
				k := nameKey{g.Grant.Class, name}
				w.named[k] = append(w.named[k], e)
			} else {
				w.other = append(w.other, e)
			}
		}
		if len(c.UpperPos) > 0 || len(c.UpperNeg) > 0 {
			w.upper = append(w.upper, c)
		}
		if len(c.Budget) > 0 {
			if w.budgeted == nil {
				w.budgeted = map[string]bool{}
			}
			w.budgeted[c.ID] = true
		}
	}
	w.rev = revision(w.cards)
	w.revText = FormatRevision(w.rev)
	return w
}

// NextExpiry is the earliest expiry among the wallet's cards (zero if none
// expires): a caller that caches a wallet while the store reports no change
// must pin a new one by then.
func (w *Wallet) NextExpiry() time.Time {
	var next time.Time
	for _, c := range w.cards {
		if !c.Expires.IsZero() && (next.IsZero() || c.Expires.Before(next)) {
			next = c.Expires
		}
	}
	return next
}

// forAgent keeps the grants of gs whose recipient covers agent (gs itself
// when all do, which is the common case).
func forAgent(gs []Grant, agent string) []Grant {
	for i, g := range gs {
		if !g.covers(agent) {
			out := append([]Grant(nil), gs[:i]...)
			for _, g := range gs[i+1:] {
				if g.covers(agent) {
					out = append(out, g)
				}
			}
			return out
		}
	}
	return gs
}

// Agent is the wallet's agent.
func (w *Wallet) Agent() string { return w.agent }

// At is the instant the wallet was pinned at.
func (w *Wallet) At() time.Time { return w.at }

// Budgeted reports whether the wallet's live card id has a budget
// (docs/cards.md, "Budgets"): a call it allows must then be reserved.
// One map lookup, nothing when no card of the wallet has a budget.
func (w *Wallet) Budgeted(id string) bool { return w.budgeted[id] }

// Cards returns the live cards of the wallet (a copy of the slice).
func (w *Wallet) Cards() []Card { return append([]Card(nil), w.cards...) }

// BoundTo is w without the cards bound to another binding than bound (an
// approve:always card given for another version or policy of a tool: it
// approved what a human saw then, not what the tool is now); cards bound to
// none stay. It is w itself when no card goes. The approve layer asks its
// approve:always question on it, and the what-if replay does the same.
func (w *Wallet) BoundTo(bound string) *Wallet {
	keep := make([]Card, 0, len(w.cards))
	for _, c := range w.cards {
		if c.Bound == "" || c.Bound == bound {
			keep = append(keep, c)
		}
	}
	if len(keep) == len(w.cards) {
		return w
	}
	return NewWallet(w.agent, w.at, keep)
}

// Decision is the outcome of a decision: allowed or not, the rule (card,
// list and grant) that decided, and on a denial a reason an operator can
// act on and the command that would change it. An allowed Decision is
// built without allocating; API renders it as the shared api.Decision
// (text only) when it is shown or recorded.
type Decision struct {
	Allow bool
	// Card is the ID of the card that decided ("" when no card did: no
	// card allows the target).
	Card string
	// Bound is the list of that card that decided: "lower-positive" (an
	// allowing grant), "lower-negative" (an exception of the only cards
	// that allowed it), "upper-negative" or "upper-positive" (a ceiling
	// that does not cover the target; Grant is then zero).
	Bound string
	// Grant is the grant that decided.
	Grant grant.Grant
	// Reason is the whole denial in words an operator can paste from
	// ("" when allowed).
	Reason string
	// Target is the canonical form of what was asked (set on a denial;
	// API renders it from Asked otherwise).
	Target string
	// Fix is the command that would change a denial: a grant of the
	// exact target ("maiden cards grant -agent NAME GRANT"), or the
	// revocation of the card whose wallet-wide bound refused. "" when
	// allowed, and when nothing an operator runs would change it.
	Fix string
	// Policy names what decided when it was not a card: the agent.toml
	// rule of the tool's binding that refused, "implicit agent" for the
	// agent of a configuration without [agents] (which holds every card),
	// or why the question could not be asked of the cards. "" when the
	// cards decided.
	Policy string
	// Asked is what was asked, as a target (zero when it could not be
	// made one). It costs an allowed decision nothing: the caller's own
	// target, copied.
	Asked grant.Target
	// Wallet is the revision of the wallet that decided (Wallet.RevisionText; "" when no wallet did): what a replay of the
	// decision compares with the wallet it replays on (internal/whatif).
	Wallet string

	text *grantText // Grant's text, kept by the wallet (GrantText)
}

// GrantText is Grant in the grant language ("" for the zero grant). The
// text of an allowing grant is rendered once per pinned wallet, so
// recording it costs a call nothing after the first.
func (d Decision) GrantText() string {
	if d.text != nil {
		return d.text.get(&d.Grant)
	}
	return d.Grant.String()
}

// Rule names what decided, as "card ID: bound GRANT", "no card", or the
// policy that decided instead of the cards.
func (d Decision) Rule() string {
	if d.Policy != "" {
		return d.Policy
	}
	if d.Card == "" {
		return "no card"
	}
	if g := d.GrantText(); g != "" {
		return "card " + d.Card + ": " + d.Bound + " " + g
	}
	return "card " + d.Card + ": " + d.Bound
}

// API is d as the shared vocabulary carries it (api.Decision): every
// field rendered as text, the target in the grant language.
func (d Decision) API() api.Decision {
	a := api.Decision{Allow: d.Allow, Reason: d.Reason, Rule: d.Rule(), Card: d.Card, Bound: d.Bound, Grant: d.GrantText(), Target: d.Target, Fix: d.Fix, Wallet: d.Wallet,
		Component: d.Asked.Component}
	if a.Target == "" && d.Asked.Class != "" {
		a.Target = d.Asked.String()
	}
	return a
}

// Decide says whether the wallet allows target (CARDS.md "Decision"):
//  1. every card's ceiling (upper-positive, when not empty) covers it and
//     none of its upper-negative grants does;
//  2. some card has a lower-positive grant covering it and no
//     lower-negative grant of that same card covering it.
//
// The wallet-wide bounds are checked first because granting another card
// cannot lift them: their denial says which card to revoke instead. An
// allowed decision allocates nothing.
func (w *Wallet) Decide(t grant.Target) Decision {
	for _, c := range w.upper {
		if g, ok := firstForbidding(c.UpperNeg, &t); ok {
			return w.deny(t, c.ID, api.DecisionUpperNegative, g.Grant, revoke(c.ID),
				fmt.Sprintf("card %s of agent %q forbids %s (its upper-negative grant %q; only revoking that card lifts it: maiden cards revoke %s)",
					c.ID, w.agent, short(t), g.Grant.String(), c.ID))
		}
		if len(c.UpperPos) > 0 {
			if _, ok := first(c.UpperPos, &t); !ok {
				return w.deny(t, c.ID, api.DecisionUpperPositive, grant.Grant{}, revoke(c.ID),
					fmt.Sprintf("card %s of agent %q caps its wallet at %s, which does not cover %s%s (only revoking that card lifts it: maiden cards revoke %s)",
						c.ID, w.agent, list(c.UpperPos), short(t), componentNote(&t, c.UpperPos), c.ID))
			}
		}
	}
	var excepted *Card
	var exceptedBy Grant
	for _, list := range [2][]entry{w.named[nameKey{t.Class, t.Name}], w.other} {
		for _, e := range list {
			if !e.g.Grant.AllowsRef(&t) {
				continue
			}
			if n, neg := firstForbidding(e.card.LowerNeg, &t); neg {
				if excepted == nil {
					excepted, exceptedBy = e.card, n
				}
				continue
			}
			return Decision{Allow: true, Card: e.card.ID, Bound: api.DecisionLowerPositive, Grant: e.g.Grant, Asked: t, Wallet: w.revText, text: e.text}
		}
	}
	ts := t.String()
	what := ts
	fix := fmt.Sprintf("maiden cards grant -agent %s %s", shellQuote(w.agent), shellQuote(ts))
	hint := "grant it: " + fix
	if len(ts) > maxQuoted {
		// A call with a huge input would make a huge message; name the
		// tool and say how to write the grant instead.
		what = short(t)
		fix = fmt.Sprintf("maiden cards grant -agent %s", shellQuote(w.agent))
		hint = fmt.Sprintf("the exact grant is %d bytes long; grant a pattern with %s", len(ts), fix)
	}
	if excepted != nil {
		return w.deny(t, excepted.ID, api.DecisionLowerNegative, exceptedBy.Grant, fix,
			fmt.Sprintf("no card of agent %q allows %s: card %s excepts it (its lower-negative grant %q) (%s)",
				w.agent, what, excepted.ID, exceptedBy.Grant.String(), hint))
	}
	if e, ok := w.pinnedElsewhere(&t); ok {
		return w.denyComponent(t, e)
	}
	return w.deny(t, "", "", grant.Grant{}, fix, fmt.Sprintf("no card of agent %q allows %s (%s)", w.agent, what, hint))
}

// pinnedElsewhere finds a lower-positive grant that would allow t but for
// its component: it names another digest than t carries (or t's is not
// known). Only a denial asks, so an allowed call pays nothing for it.
func (w *Wallet) pinnedElsewhere(t *grant.Target) (entry, bool) {
	for _, list := range [2][]entry{w.named[nameKey{t.Class, t.Name}], w.other} {
		for _, e := range list {
			if e.g.Grant.AllowsOtherComponent(t) {
				return e, true
			}
		}
	}
	return entry{}, false
}

// denyComponent is the denial of a call that a grant naming another
// component would allow: it names both digests (the grant's and the
// call's), so an operator sees the tool changed rather than that nothing
// was granted, and its fix is the grant of exactly this call pinned to the
// component it runs now (never one that drops the pin, which would allow
// every later component too).
func (w *Wallet) denyComponent(t grant.Target, e entry) Decision {
	pinned := e.g.Grant.Component()
	exact := t.PinnedString() // t.String() when its component is not known
	fix := fmt.Sprintf("maiden cards grant -agent %s %s", shellQuote(w.agent), shellQuote(exact))
	if len(exact) > maxQuoted {
		fix = fmt.Sprintf("maiden cards grant -agent %s", shellQuote(w.agent))
	}
	var reason string
	if t.Component == "" {
		reason = fmt.Sprintf("no card of agent %q allows %s: card %s's grant %q allows it only while the tool's component is %s, and this call's component is not known (only a WebAssembly tool's component has a digest, known once its file loads) (to allow it whatever component runs it: %s)",
			w.agent, short(t), e.card.ID, e.g.Grant.String(), pinned, fix)
	} else {
		reason = fmt.Sprintf("no card of agent %q allows %s: the tool's component is %s, not %s, which card %s's grant %q names (the tool's file was rebuilt or its pinned reference changed since that grant; if the new component is trusted, grant it: %s)",
			w.agent, short(t), t.Component, pinned, e.card.ID, e.g.Grant.String(), fix)
	}
	return w.deny(t, "", "", grant.Grant{}, fix, reason)
}

// componentNote names t's component beside a ceiling some of whose
// grants name one, so that a call refused for its component says which
// it was ("" when no grant of gs names a component).
func componentNote(t *grant.Target, gs []Grant) string {
	for i := range gs {
		if gs[i].Grant.Component() != "" {
			if t.Component == "" {
				return " (this call's component is not known)"
			}
			return " (this call's component is " + t.Component + ")"
		}
	}
	return ""
}

// maxQuoted bounds the target a denial quotes in full.
const maxQuoted = 2048

// short is t for a message: in full up to maxQuoted bytes, else the tool
// and how many arguments.
func short(t grant.Target) string {
	if s := t.String(); len(s) <= maxQuoted {
		return s
	}
	return fmt.Sprintf("%s:%s %s with these %d arguments", t.Class, t.Verb, t.Name, len(t.Args))
}

func (w *Wallet) deny(t grant.Target, card, bound string, g grant.Grant, fix, reason string) Decision {
	return Decision{Card: card, Bound: bound, Grant: g, Reason: reason, Target: t.String(), Fix: fix, Asked: t, Wallet: w.revText}
}

// revoke is the command that lifts card id's wallet-wide bound.
func revoke(id string) string { return "maiden cards revoke " + id }

// first returns the first grant of gs that allows t.
func first(gs []Grant, t *grant.Target) (Grant, bool) {
	for i := range gs {
		if gs[i].Grant.AllowsRef(t) {
			return gs[i], true
		}
	}
	return Grant{}, false
}

// firstForbidding returns the first prohibiting grant of gs (a card's
// lower- or upper-negative list) that forbids t (grant.ForbidsRef: a case
// variant of a name it names, which Go's JSON decoder reads as that name,
// does not escape it).
func firstForbidding(gs []Grant, t *grant.Target) (Grant, bool) {
	for i := range gs {
		if gs[i].Grant.ForbidsRef(t) {
			return gs[i], true
		}
	}
	return Grant{}, false
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Revision identifies the wallet's live cards (their IDs, hashed): it
// changes when a card is added, revoked or expires. An approval made under
// one revision asks again under another, and a recorded decision replayed
// on a wallet of another revision may differ for that reason alone.
func (w *Wallet) Revision() int64 { return w.rev }

// RevisionText is Revision as decisions carry it (FormatRevision).
func (w *Wallet) RevisionText() string { return w.revText }

// FormatRevision is a revision as decisions carry it: 16 hex digits.
func FormatRevision(rev int64) string { return fmt.Sprintf("%016x", uint64(rev)) }

func revision(cs []Card) int64 {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	slices.Sort(ids)
	h := fnv.New64a()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return int64(h.Sum64() >> 1)
}
