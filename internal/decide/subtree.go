package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
)

// subtree answers a Subtree question: may the agent fs:verb everything
// beneath dir (fs:verb DIR/**), as a directory handed over whole needs.
// It is conservative: a grant of the directory alone or one level is not
// enough, and any negative grant that may reach inside the subtree (a
// lower-negative grant of the allowing card, an upper-negative grant of
// any card) or a ceiling that does not cover it refuses.
func subtree(w *cards.Wallet, verb, dir string) cards.Decision {
	if dir != "/" {
		dir = strings.TrimSuffix(dir, "/")
	}
	// Built from dir's segments, never by parsing dir as grant syntax: a
	// '\' or a space in a directory's name is part of the name.
	want, err := grant.FSSubtree(verb, dir)
	if err != nil {
		// A path the grant language cannot name: no card can cover it.
		return refuse(grant.Target{}, PolicyTarget, "the directory cannot be checked against the agent's cards: "+err.Error())
	}
	target := want.String()
	deny := func(c, bound string, g grant.Grant, reason string) cards.Decision {
		return cards.Decision{Card: c, Bound: bound, Grant: g, Reason: reason, Target: target, Wallet: w.RevisionText()}
	}
	mine := func(g cards.Grant) bool {
		return g.Recipient == "" || g.Recipient == "*" || g.Recipient == w.Agent()
	}
	applies := func(g grant.Grant) bool {
		return g.Class == grant.FS && (g.Verb == "" || g.Verb == verb)
	}
	touches := func(g grant.Grant) bool {
		if !applies(g) {
			return false
		}
		p, ok := g.LiteralPathPrefix()
		return !ok || g.Covers(want) || want.Covers(g) || prefixRelated(p, dir)
	}
	var allowed cards.Decision
	for _, c := range w.Cards() {
		for _, n := range c.Spec.UpperNeg {
			if mine(n) && touches(n.Grant) {
				return deny(c.ID, api.DecisionUpperNegative, n.Grant,
					fmt.Sprintf("card %s of agent %q may forbid part of %s (its upper-negative grant %q), so the directory is not handed over whole", c.ID, w.Agent(), target, n.Grant.String()))
			}
		}
		if len(c.Spec.UpperPos) > 0 && !slices.ContainsFunc(c.Spec.UpperPos, func(u cards.Grant) bool {
			return mine(u) && (u.Grant.Class != grant.FS || applies(u.Grant)) && u.Grant.Covers(want)
		}) {
			return deny(c.ID, api.DecisionUpperPositive, grant.Grant{},
				fmt.Sprintf("card %s of agent %q caps its wallet below %s, so the directory is not handed over whole", c.ID, w.Agent(), target))
		}
		if allowed.Allow {
			continue
		}
		i := slices.IndexFunc(c.Spec.LowerPos, func(g cards.Grant) bool { return mine(g) && applies(g.Grant) && g.Grant.Covers(want) })
		if i >= 0 && !slices.ContainsFunc(c.Spec.LowerNeg, func(n cards.Grant) bool { return mine(n) && touches(n.Grant) }) {
			allowed = cards.Decision{Allow: true, Card: c.ID, Bound: api.DecisionLowerPositive, Grant: c.Spec.LowerPos[i].Grant}
		}
	}
	if allowed.Allow {
		allowed.Target, allowed.Wallet = target, w.RevisionText()
		return allowed
	}
	return deny("", "", grant.Grant{},
		fmt.Sprintf("no card of agent %q allows all of %s, without an exception that may reach inside it, so the directory is not handed over whole", w.Agent(), target))
}

// prefixRelated reports whether one of two clean absolute paths is within
// the other.
func prefixRelated(a, b string) bool { return pathWithin(a, b) || pathWithin(b, a) }

// pathWithin reports whether p is root or beneath it (both clean and
// absolute).
func pathWithin(p, root string) bool {
	if root == "/" || p == root {
		return true
	}
	return strings.HasPrefix(p, root) && p[len(root)] == '/'
}
