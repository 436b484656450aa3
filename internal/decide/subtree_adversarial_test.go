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
