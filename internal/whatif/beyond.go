package whatif

import (
	"strings"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
)

// Beyond says in words what a new card of grants add (its lower-positive
// grants, bound as an always-card minted from an approval is, or "") would
// allow agent beyond the wallet it joins (agent's cards in st, live at
// st.Now): one line per grant (grant.Beyond against the wallet's
// allowances), and whether none of them allows anything new. A grant the
// wallet's prohibition covers allows nothing; one outside its ceiling
// allows only what the ceiling leaves, which its line says.
func Beyond(st State, agent string, add []grant.Grant, bound string) (lines []string, redundant bool) {
	var held, partial, neg []grant.Grant
	var upperNeg []cards.Grant
	var ceilings []cards.Card
	for _, c := range st.Cards {
		if c.Holder != agent || !c.Live(st.Now) {
			continue
		}
		upperNeg = append(upperNeg, forAgent(c.UpperNeg, agent)...)
		if len(forAgent(c.UpperPos, agent)) > 0 {
			ceilings = append(ceilings, c)
		}
		for _, g := range forAgent(c.LowerPos, agent) {
			// An always-card bound to another version or policy of the
			// tool does not approve these calls (Wallet.BoundTo, as the
			// approve layer asks); and a grant its own card makes exceptions
			// to is not whole.
			switch {
			case g.Grant.Class == grant.Approve && c.Bound != "" && c.Bound != bound:
			case excepted(c, g.Grant):
				partial = append(partial, g.Grant)
			default:
				held = append(held, g.Grant)
			}
		}
	}
	for _, n := range upperNeg {
		neg = append(neg, n.Grant)
	}
	redundant = len(add) > 0
	for _, g := range add {
		if n, ok := forbidden(neg, g); ok {
			lines = append(lines, "nothing new: "+g.String()+" is forbidden across the wallet by "+n.String())
			continue
		}
		line, red := grant.Beyond(g, held, partial)
		if !red {
			redundant = false
			if c, ok := outside(ceilings, agent, g); ok {
				line += "; only as far as card " + c.ID + "'s ceiling allows (" + list(forAgent(c.UpperPos, agent)) + ")"
			}
		}
		lines = append(lines, line)
	}
	return lines, redundant
}

// forAgent is the grants of gs whose recipient is agent or anyone.
func forAgent(gs []cards.Grant, agent string) []cards.Grant {
	var out []cards.Grant
	for _, g := range gs {
		if g.Recipient == "" || g.Recipient == "*" || g.Recipient == agent {
			out = append(out, g)
		}
	}
	return out
}

// excepted reports whether card c makes an exception (lower-negative) of
// g's class: then g does not allow all it says by itself.
func excepted(c cards.Card, g grant.Grant) bool {
	for _, n := range c.LowerNeg {
		if n.Grant.Class == g.Class {
			return true
		}
	}
	return false
}

func forbidden(neg []grant.Grant, g grant.Grant) (grant.Grant, bool) {
	for _, n := range neg {
		if n.Covers(g) {
			return n, true
		}
	}
	return grant.Grant{}, false
}

// outside is the first ceiling card none of whose ceiling grants covers g.
func outside(ceilings []cards.Card, agent string, g grant.Grant) (cards.Card, bool) {
	for _, c := range ceilings {
		in := false
		for _, u := range forAgent(c.UpperPos, agent) {
			if u.Grant.Covers(g) {
				in = true
				break
			}
		}
		if !in {
			return c, true
		}
	}
	return cards.Card{}, false
}

func list(gs []cards.Grant) string {
	s := make([]string, len(gs))
	for i, g := range gs {
		s[i] = g.Grant.String()
	}
	return strings.Join(s, ", ")
}
