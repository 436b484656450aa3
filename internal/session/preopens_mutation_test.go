package session

import (
	"testing"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
)

// TestPreopensDenyRootAtTheEntryOrRoot: a deny root that is the entry
// itself, or the root /, leaves the entry out (written when a planted bug
// in pathWithin's two shortcuts left TestPreopensFor green).
func TestPreopensDenyRootAtTheEntryOrRoot(t *testing.T) {
	t.Parallel()
	w := config.Tool{Name: "t", FS: config.FSWrite}
	for _, deny := range []string{"/srv/work", "/"} {
		b := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Deny: []string{deny},
			Entries: []boundary.Entry{{Path: "/srv/work", Access: boundary.Write, Match: boundary.Subtree}}}
		if dirs, notes := PreopensExplained(w, b); len(dirs) != 0 || len(notes) != 1 {
			t.Errorf("deny root %s, entry /srv/work: preopens %+v, notes %q; want none, the entry left out", deny, dirs, notes)
		}
	}
}
