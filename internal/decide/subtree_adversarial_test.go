package decide_test

import (
	"testing"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
)

// TestAccessTreeNegativeWithSpaceAfterWildcard (CARDS.md A2/A4; decide's
// Subtree rule): a negative grant whose pattern has a wildcard segment and
// then a segment holding a space may still reach inside the directory, so
// the directory must not be handed over whole. The literal prefix of such
// a grant was taken from its quoted text split on spaces, which named
// another directory altogether (here `Data"` → "/Data\""), so the grant
// did not count against the home directory that holds the file.
func TestAccessTreeNegativeWithSpaceAfterWildcard(t *testing.T) {
	forbid := `fs:read "/home/*/.config/google-chrome/Default/Login Data"`
	upper := wallet(
		card("f1", cards.Spec{LowerPos: gs(t, "fs:read /home/**")}),
		card("f2", cards.Spec{UpperNeg: gs(t, forbid)}),
	)
	lower := wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /home/**"), LowerNeg: gs(t, forbid)}))
	for name, w := range map[string]*cards.Wallet{"upper-negative": upper, "lower-negative": lower} {
		t.Run(name, func(t *testing.T) {
			// The file itself is forbidden...
			if d := decide.Decide(decide.Basis{Wallet: w}, decide.Access("read", "/home/ann/.config/google-chrome/Default/Login Data")); d.Allow {
				t.Fatalf("the forbidden file is allowed: %+v", d.API())
			}
			// ...so its home directory may not be handed over whole.
			if d := decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree("read", "/home/ann")); d.Allow {
				t.Errorf("AccessTree(read, /home/ann) allowed by %s although %s forbids a file inside it", d.Rule(), forbid)
			}
		})
	}
}

// TestAccessTreeDirectoryWithBackslash: the directory handed over is the
// one checked. A directory whose name holds a backslash was read as grant
// syntax ("/srv/we\ird" became /srv/weird/**), so a card for /srv/weird
// let the tool have /srv/we\ird, and a prohibition of the real directory
// did not touch it.
func TestAccessTreeDirectoryWithBackslash(t *testing.T) {
	w := wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/weird/**")}))
	if d := decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree("read", `/srv/we\ird`)); d.Allow {
		t.Errorf(`AccessTree(read, /srv/we\ird) allowed by %s, a grant of another directory`, d.Rule())
	}
	w = wallet(
		card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}),
		card("f2", cards.Spec{UpperNeg: gs(t, `fs:read /srv/we\\ird/**`)}),
	)
	if d := decide.Decide(decide.Basis{Wallet: w}, decide.Access("read", `/srv/we\ird/x`)); d.Allow {
		t.Fatalf("the forbidden file is allowed: %+v", d.API())
	}
	if d := decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree("read", `/srv/we\ird`)); d.Allow {
		t.Errorf(`AccessTree(read, /srv/we\ird) allowed by %s although its whole subtree is forbidden`, d.Rule())
	}
	// A directory with a space is a directory like any other.
	w = wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}))
	if d := decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree("read", "/srv/my docs")); !d.Allow {
		t.Errorf(`AccessTree(read, "/srv/my docs") refused: %s`, d.Reason)
	}
}

// TestAccessTreeNegativeAddressedToTheAgent: a prohibition addressed to the
// agent by name (a card grant's recipient) forbids as much as one addressed
// to any holder. It forbids the file, so the directory that holds it is not
// handed over whole; the same prohibition addressed to another agent does
// not touch this one.
func TestAccessTreeNegativeAddressedToTheAgent(t *testing.T) {
	forbid := func(recipient string) []cards.Grant {
		g := gs(t, "fs:read /home/ann/.ssh/**")
		g[0].Recipient = recipient
		return g
	}
	for _, tc := range []struct {
		name   string
		wallet func(recipient string) *cards.Wallet
		rule   string
	}{
		{"upper-negative", func(r string) *cards.Wallet {
			return wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /home/ann/**")}), card("f2", cards.Spec{UpperNeg: forbid(r)}))
		}, "card f2: upper-negative fs:read /home/ann/.ssh/**"},
		{"lower-negative", func(r string) *cards.Wallet {
			return wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /home/**"), LowerNeg: forbid(r)}))
		}, "no card"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.wallet("research")
			if d := decide.Decide(decide.Basis{Wallet: w}, decide.Access("read", "/home/ann/.ssh/id_ed25519")); d.Allow {
				t.Fatalf("the forbidden key is allowed: %+v", d.API())
			}
			d := decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree("read", "/home/ann"))
			if d.Allow || d.API().Rule != tc.rule {
				t.Errorf("AccessTree(read, /home/ann) = allow %v by %q, want refused by %q: its prohibition for agent research forbids .ssh inside it", d.Allow, d.API().Rule, tc.rule)
			}
			if d := decide.Decide(decide.Basis{Wallet: tc.wallet("other")}, decide.AccessTree("read", "/home/ann")); !d.Allow {
				t.Errorf("AccessTree(read, /home/ann) refused by a prohibition for agent other: %s", d.Reason)
			}
		})
	}
}

// TestAccessTreeNegativeStartingWithWildcard: a prohibition whose first
// segment is a wildcard (`/*/.ssh/**`: every top directory's .ssh) has the
// root as its literal prefix, which holds every directory; it may reach
// inside /home, so /home is not handed over whole.
func TestAccessTreeNegativeStartingWithWildcard(t *testing.T) {
	w := wallet(
		card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}),
		card("f2", cards.Spec{UpperNeg: gs(t, "fs:read /*/.ssh/**")}),
	)
	if d := decide.Decide(decide.Basis{Wallet: w}, decide.Access("read", "/home/.ssh/id_ed25519")); d.Allow {
		t.Fatalf("the forbidden key is allowed: %+v", d.API())
	}
	d := decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree("read", "/home"))
	if want := "card f2: upper-negative fs:read /*/.ssh/**"; d.Allow || d.API().Rule != want {
		t.Errorf("AccessTree(read, /home) = allow %v by %q, want refused by %q: /home/.ssh is forbidden", d.Allow, d.API().Rule, want)
	}
}
