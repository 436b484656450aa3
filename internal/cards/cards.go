package cards

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/grant"
)

// Errors of the card model, named as CARDS.md names them; test with errors.Is.
// Every error returned here wraps one of them with what was wrong and where.
var (
	// ErrLowerBoundTooBroad: a derived card allows something its parent does
	// not, or drops one of the parent's negative grants.
	ErrLowerBoundTooBroad = errors.New("lower-bound-too-broad")
	// ErrUpperBoundTooBroad: the parent has a ceiling (upper-positive grants)
	// and the child has none, or one that is not under it.
	ErrUpperBoundTooBroad = errors.New("upper-bound-too-broad")
	// ErrCardExpired: the card has expired, or a child would outlive its
	// parent.
	ErrCardExpired = errors.New("card-expired")
	// ErrCardRevoked: the card was revoked (revoking it again included).
	ErrCardRevoked = errors.New("card-revoked")
	// ErrInstallRecipientMismatch: none of the card's positive grants covers
	// the agent whose wallet it would go to.
	ErrInstallRecipientMismatch = errors.New("install-recipient-mismatch")
	// ErrSystemCard: agents cannot revoke (or transfer) a system card.
	ErrSystemCard = errors.New("system-card")
	// ErrEmptyCard: a card with no grant at all means nothing.
	ErrEmptyCard = errors.New("empty-card")
)

// Grant is a grant as a card holds it: the grant and its recipient, the
// agent that may use it ("" or "*" for whichever agent holds the card).
type Grant struct {
	Grant     grant.Grant `json:"grant"`
	Recipient string      `json:"recipient,omitempty"`
}

// Any wraps gs as grants for any recipient.
func Any(gs ...grant.Grant) []Grant {
	out := make([]Grant, len(gs))
	for i, g := range gs {
		out[i] = Grant{Grant: g}
	}
	return out
}

// covers reports whether the grant's recipient covers agent.
func (g Grant) covers(agent string) bool {
	return g.Recipient == "" || g.Recipient == "*" || g.Recipient == agent
}

// coversRecipient reports whether recipient pattern p is at least as broad
// as c (for derivation).
func coversRecipient(p, c string) bool {
	return p == "" || p == "*" || p == c
}

func (g Grant) String() string {
	if g.Recipient == "" || g.Recipient == "*" {
		return g.Grant.String()
	}
	return g.Grant.String() + " (for " + g.Recipient + ")"
}

// Spec is what a card says: its four grant lists and its expiry. It is what
// an operator grants and what a derivation proposes.
type Spec struct {
	// LowerPos is what the card allows.
	LowerPos []Grant `json:"lower_positive,omitempty"`
	// LowerNeg are exceptions inside this same card.
	LowerNeg []Grant `json:"lower_negative,omitempty"`
	// UpperPos, when not empty, is a ceiling over the whole wallet: every
	// target must be under one of these grants.
	UpperPos []Grant `json:"upper_positive,omitempty"`
	// UpperNeg forbids across the whole wallet.
	UpperNeg []Grant `json:"upper_negative,omitempty"`
	// Expires is when the card stops counting; zero means never.
	Expires time.Time `json:"expires,omitzero"`
	// Bound, when set, ties the card to what a human was shown when it was
	// given: maiden sets it on an approve:always card minted from an
	// approval (the tool's code identity and policy), and its approve layer
	// counts the card only for calls of that same tool and policy. The
	// card model does not interpret it; a derived card keeps it.
	Bound string `json:"bound,omitempty"`
	// Budget, when not empty, limits how much the card (and every card
	// derived from it) may be used (budget.go); the store keeps what it
	// has spent.
	Budget Budget `json:"budget,omitempty"`
}

// Empty reports whether s has no grant at all.
func (s Spec) Empty() bool {
	return len(s.LowerPos)+len(s.LowerNeg)+len(s.UpperPos)+len(s.UpperNeg) == 0
}

// Card is a card in a wallet.
type Card struct {
	ID      string   `json:"id"`
	Holder  string   `json:"agent"`             // the agent whose wallet holds it
	Parents []string `json:"parents,omitempty"` // the cards it was derived from
	Spec
	System  bool      `json:"system,omitempty"` // from the operator's configuration
	Manager string    `json:"manager"`          // "operator", "system" or the deriving agent
	Created time.Time `json:"created"`
	Revoked time.Time `json:"revoked,omitzero"` // zero while it counts
	// Spent is what the card has spent of its budget, as the store read
	// it with the card (Store.Card, Cards; a pinned wallet's cards leave
	// it nil: spending is not part of a decision).
	Spent Budget `json:"spent,omitempty"`
}

// ExpiredAt reports whether c has expired at time t.
func (c Card) ExpiredAt(t time.Time) bool { return !c.Expires.IsZero() && !t.Before(c.Expires) }

// Live reports whether c counts at time t: not revoked, not expired.
func (c Card) Live(t time.Time) bool { return c.Revoked.IsZero() && !c.ExpiredAt(t) }

// CheckInstall says whether spec may go to agent's wallet: at least one of
// its grants that act on the holder's wallet (lower-positive, or a
// wallet-wide upper bound) must cover agent (CARDS.md "Install"). A card of
// lower-negative grants only means nothing (they are exceptions to the same
// card's allowances) and is refused (A9); a card of upper-negative grants
// only is a prohibition over the whole wallet and installs.
func CheckInstall(s Spec, agent string) error {
	if s.Empty() {
		return fmt.Errorf("%w: the card has no grant", ErrEmptyCard)
	}
	for _, list := range [][]Grant{s.LowerPos, s.UpperPos, s.UpperNeg} {
		for _, g := range list {
			if g.covers(agent) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: no grant of the card is for agent %q (a card of lower-negative grants only excepts nothing and cannot be installed)",
		ErrInstallRecipientMismatch, agent)
}

// CheckDerive says whether child may be derived from parent at time now:
// attenuation only (CARDS.md "Derivation"). The error names the first rule
// broken and the grant that broke it.
func CheckDerive(parent Card, child Spec, now time.Time) error {
	switch {
	case !parent.Revoked.IsZero():
		return fmt.Errorf("%w: parent card %s was revoked", ErrCardRevoked, parent.ID)
	case parent.ExpiredAt(now):
		return fmt.Errorf("%w: parent card %s expired at %s", ErrCardExpired, parent.ID, parent.Expires.UTC().Format(time.RFC3339))
	case !parent.Expires.IsZero() && child.Expires.IsZero():
		return fmt.Errorf("%w: parent card %s expires at %s, the child must expire too", ErrCardExpired, parent.ID, parent.Expires.UTC().Format(time.RFC3339))
	case !parent.Expires.IsZero() && child.Expires.After(parent.Expires):
		return fmt.Errorf("%w: the child (expires %s) would outlive parent card %s (expires %s)", ErrCardExpired,
			child.Expires.UTC().Format(time.RFC3339), parent.ID, parent.Expires.UTC().Format(time.RFC3339))
	case child.Empty():
		return fmt.Errorf("%w: the child of card %s has no grant", ErrEmptyCard, parent.ID)
	case parent.Bound != "" && child.Bound != parent.Bound:
		return fmt.Errorf("%w: parent card %s is bound to %q, the child must keep that binding", ErrLowerBoundTooBroad, parent.ID, parent.Bound)
	}
	for _, c := range child.LowerPos {
		if !coveredBy(parent.LowerPos, c) {
			return fmt.Errorf("%w: child grant %q is not under any lower-positive grant of parent card %s (%s)",
				ErrLowerBoundTooBroad, c.String(), parent.ID, list(parent.LowerPos))
		}
	}
	// The child keeps every prohibition of the parent: a parent
	// lower-negative as a lower- or upper-negative of the child (upper is
	// stronger), a parent upper-negative as an upper-negative.
	for _, p := range parent.LowerNeg {
		if !negCovered(child.LowerNeg, p) && !negCovered(child.UpperNeg, p) {
			return fmt.Errorf("%w: the child drops negative grant %q of parent card %s", ErrLowerBoundTooBroad, p.String(), parent.ID)
		}
	}
	for _, p := range parent.UpperNeg {
		if !negCovered(child.UpperNeg, p) {
			return fmt.Errorf("%w: the child drops upper-negative grant %q of parent card %s", ErrLowerBoundTooBroad, p.String(), parent.ID)
		}
	}
	// The ceiling is checked per agent that could hold the card, because a
	// grant for one recipient does not cap another: every named recipient,
	// and any other agent.
	agents := []string{"\x00any other agent"}
	for _, g := range append(slices.Clone(parent.UpperPos), child.UpperPos...) {
		if g.Recipient != "" && g.Recipient != "*" {
			agents = append(agents, g.Recipient)
		}
	}
	for _, a := range agents {
		pc, cc := forAgent(parent.UpperPos, a), forAgent(child.UpperPos, a)
		if len(pc) == 0 {
			continue
		}
		if len(cc) == 0 {
			return fmt.Errorf("%w: parent card %s has a ceiling (%s) and the child has none%s", ErrUpperBoundTooBroad, parent.ID, list(pc), forWhom(a))
		}
		for _, c := range cc {
			if !coveredBy(pc, Grant{Grant: c.Grant}) {
				return fmt.Errorf("%w: child ceiling grant %q is not under parent card %s's ceiling (%s)%s",
					ErrUpperBoundTooBroad, c.String(), parent.ID, list(pc), forWhom(a))
			}
		}
	}
	return nil
}

// coveredBy reports whether some grant of ps covers c, recipient included.
func coveredBy(ps []Grant, c Grant) bool {
	for _, p := range ps {
		if coversRecipient(p.Recipient, c.Recipient) && p.Grant.Covers(c.Grant) {
			return true
		}
	}
	return false
}

// negCovered reports whether some negative grant of cs forbids at least
// what p forbids, for at least p's recipients.
func negCovered(cs []Grant, p Grant) bool {
	for _, c := range cs {
		if coversRecipient(c.Recipient, p.Recipient) && c.Grant.Covers(p.Grant) {
			return true
		}
	}
	return false
}

// Child builds the spec of a card derived from parent that allows grants
// and keeps everything the parent requires: its negative grants, its
// ceiling, and its expiry when expires is zero. The result still goes
// through CheckDerive (a grant broader than the parent, or an expiry after
// the parent's, is refused, not silently narrowed).
func Child(parent Card, grants []grant.Grant, expires time.Time) Spec {
	s := Spec{
		LowerPos: Any(grants...),
		LowerNeg: append([]Grant(nil), parent.LowerNeg...),
		UpperPos: append([]Grant(nil), parent.UpperPos...),
		UpperNeg: append([]Grant(nil), parent.UpperNeg...),
		Expires:  expires,
		Bound:    parent.Bound,
	}
	if s.Expires.IsZero() {
		s.Expires = parent.Expires
	}
	return s
}

func forWhom(agent string) string {
	if strings.HasPrefix(agent, "\x00") {
		return ""
	}
	return fmt.Sprintf(" for agent %q", agent)
}

func list(gs []Grant) string {
	s := make([]string, len(gs))
	for i, g := range gs {
		s[i] = fmt.Sprintf("%q", g.String())
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
