package session

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestNarrowWritable: a wrapped CLI's write_paths against the session's
// boundary: kept whole when the boundary allows writing the subtree,
// otherwise read-only when it allows reading it, and inside only the
// boundary's write subtree entries stay writable (its read entries
// read-only); an entry containing a deny root is neither writable nor
// readable (Landlock cannot carve it out), nor is a path outside every
// entry. Before the review of the CLIs' reads, a path not writable was
// read-only whatever the boundary said: /w, /w/mixed and /elsewhere were
// readable, deny root and all.
func TestNarrowWritable(t *testing.T) {
	b := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Deny: []string{"/w/mixed/locked"},
		Entries: []boundary.Entry{
			{Path: "/w/ok", Access: boundary.Write, Match: boundary.Subtree},
			{Path: "/w/ro", Access: boundary.Read, Match: boundary.Subtree},
			{Path: "/w/mixed", Access: boundary.Write, Match: boundary.Subtree},
			{Path: "/w/repo/.git", Access: boundary.Write, Match: boundary.Subtree},
			{Path: "/w/file", Access: boundary.Write, Match: boundary.Exact},
		}}
	for _, tc := range []struct {
		paths          []string
		writable, lost string
	}{
		{[]string{"/w/ok"}, "[/w/ok]", "[]"},
		{[]string{"/w/ok/sub"}, "[/w/ok/sub]", "[]"},
		{[]string{"/w"}, "[/w/ok /w/repo/.git]", "[/w/ro]"},
		{[]string{"/w/ro"}, "[]", "[/w/ro]"},
		{[]string{"/w/ro/sub"}, "[]", "[/w/ro/sub]"},
		{[]string{"/w/mixed"}, "[]", "[]"},
		{[]string{"/w/repo"}, "[/w/repo/.git]", "[]"}, // no protected names here: see TestNarrowWritableProtected
		{[]string{"/elsewhere"}, "[]", "[]"},
		{[]string{"/w/ok", "/w"}, "[/w/ok /w/repo/.git]", "[/w/ro]"},
	} {
		w, l := NarrowWritable(tc.paths, b)
		if fmt.Sprint(nilEmpty(w)) != tc.writable || fmt.Sprint(nilEmpty(l)) != tc.lost {
			t.Errorf("%v: writable %v lost %v; want %s %s", tc.paths, w, l, tc.writable, tc.lost)
		}
	}
}

func nilEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// grantsOf parses ss as grants for any recipient.
func grantsOf(t *testing.T, ss []string) []cards.Grant {
	t.Helper()
	var gs []grant.Grant
	for _, s := range ss {
		g, err := grant.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	return cards.Any(gs...)
}

// TestCardPreopens (a security review found the first version decided on
// the directory's own path only): a directory is preopened only when the
// cards allow its whole subtree, and any exception, prohibition or ceiling
// that may reach inside drops it.
func TestCardPreopens(t *testing.T) {
	card := func(id string, lowerPos, lowerNeg, upperPos, upperNeg []string) cards.Card {
		return cards.Card{ID: id, Holder: "a", Spec: cards.Spec{LowerPos: grantsOf(t, lowerPos), LowerNeg: grantsOf(t, lowerNeg), UpperPos: grantsOf(t, upperPos), UpperNeg: grantsOf(t, upperNeg)}}
	}
	dirs := []sandbox.Preopen{{HostPath: "/srv/work", GuestPath: "/srv/work", Write: true}, {HostPath: "/data/x", GuestPath: "/data/x"}}
	for _, tc := range []struct {
		name  string
		cards []cards.Card
		want  string
	}{
		{"a subtree grant", []cards.Card{card("c", []string{"fs:read /srv/**", "fs:write /srv/work/**", "fs:read /data/x/**"}, nil, nil, nil)}, "[/srv/work:w /data/x:r]"},
		{"read only where write is not carded", []cards.Card{card("c", []string{"fs:read /srv/**", "fs:read /data/**"}, nil, nil, nil)}, "[/srv/work:r /data/x:r]"},
		{"the directory alone is not its subtree", []cards.Card{card("c", []string{"fs:read /srv/work", "fs:read /data/x"}, nil, nil, nil)}, "[]"},
		{"one level is not the subtree", []cards.Card{card("c", []string{"fs:read /data/*", "fs:read /srv/*"}, nil, nil, nil)}, "[]"},
		{"an exception inside drops it", []cards.Card{card("c", []string{"fs:read /srv/**", "fs:read /data/**"}, []string{"fs:read /srv/work/secret/**"}, nil, nil)}, "[/data/x:r]"},
		{"a prohibition inside drops it", []cards.Card{card("c", []string{"fs:read /srv/**", "fs:read /data/**"}, nil, nil, nil), card("d", []string{"tool:invoke x --..."}, nil, nil, []string{"fs /data/x/y"})}, "[/srv/work:r]"},
		{"a write prohibition keeps it read-only", []cards.Card{card("c", []string{"fs /srv/**"}, nil, nil, nil), card("d", []string{"tool:invoke x --..."}, nil, nil, []string{"fs:write /srv/work/.git/**"})}, "[/srv/work:r]"},
		{"a ceiling that does not cover it", []cards.Card{card("c", []string{"fs:read /srv/**", "fs:read /data/**"}, nil, nil, nil), card("d", []string{"tool:invoke x --..."}, nil, []string{"fs:read /data/**", "tool:invoke x --..."}, nil)}, "[/data/x:r]"},
		{"a prohibition elsewhere changes nothing", []cards.Card{card("c", []string{"fs:read /srv/**", "fs:read /data/**"}, []string{"fs:read /etc/**"}, nil, nil)}, "[/srv/work:r /data/x:r]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ds := CardPreopens(dirs, cards.NewWallet("a", time.Now(), tc.cards))
			// The decisions it returns are those that kept, narrowed or
			// dropped each directory, each naming its question: the
			// call's audit record carries them for a replay.
			var asked []string
			for _, d := range ds {
				a := d.API()
				asked = append(asked, fmt.Sprintf("%s=%v", a.Target, a.Allow))
			}
			var want []string
			for _, d := range dirs {
				kept := slices.IndexFunc(got, func(p sandbox.Preopen) bool { return p.HostPath == d.HostPath })
				want = append(want, fmt.Sprintf("fs:read %s/**=%v", d.HostPath, kept >= 0))
				if kept >= 0 && d.Write {
					want = append(want, fmt.Sprintf("fs:write %s/**=%v", d.HostPath, got[kept].Write))
				}
			}
			if diff := cmp.Diff(want, asked); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
			var parts []string
			for _, d := range got {
				a := "r"
				if d.Write {
					a = "w"
				}
				parts = append(parts, d.HostPath+":"+a)
			}
			if s := fmt.Sprint(nilEmpty(parts)); s != tc.want {
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
	if got, ds := CardPreopens(dirs, nil); len(got) != 2 || !got[0].Write || ds != nil {
		t.Errorf("the implicit agent (no wallet): %v, decisions %v", got, ds)
	}
}

// TestCardWritable: a wrapped CLI's write path is held to the cards as a
// preopen is: given to the sandbox only when they allow reading its whole
// subtree (dropped otherwise, even with a write grant: CARDS.md's resource
// grants), and writable only when they allow writing it too: a grant of
// the subtree keeps it, an exception inside or a read grant alone makes it
// read-only; a path the boundary left read-only stays so, when readable;
// the implicit agent (no wallet) keeps them all, deciding none.
func TestCardWritable(t *testing.T) {
	wallet := func(lowerPos, lowerNeg []string) *cards.Wallet {
		return cards.NewWallet("a", time.Now(), []cards.Card{{ID: "c", Holder: "a", Spec: cards.Spec{LowerPos: grantsOf(t, lowerPos), LowerNeg: grantsOf(t, lowerNeg)}}})
	}
	paths := []string{"/srv/work", "/srv/data"}
	for _, tc := range []struct {
		name                     string
		w                        *cards.Wallet
		readOnly                 []string
		writable, lost, decision string
	}{
		{"a subtree grant", wallet([]string{"fs /srv/**"}, nil), nil, "[/srv/work /srv/data]", "[]", "[fs:read /srv/work/**=true fs:write /srv/work/**=true fs:read /srv/data/**=true fs:write /srv/data/**=true]"},
		{"one of two", wallet([]string{"fs:read /srv/**", "fs:write /srv/work/**"}, nil), nil, "[/srv/work]", "[/srv/data]", "[fs:read /srv/work/**=true fs:write /srv/work/**=true fs:read /srv/data/**=true fs:write /srv/data/**=false]"},
		{"an exception inside", wallet([]string{"fs /srv/**"}, []string{"fs:write /srv/work/.git/**"}), nil, "[/srv/data]", "[/srv/work]", "[fs:read /srv/work/**=true fs:write /srv/work/**=false fs:read /srv/data/**=true fs:write /srv/data/**=true]"},
		{"read is not write", wallet([]string{"fs:read /srv/**"}, nil), nil, "[]", "[/srv/work /srv/data]", "[fs:read /srv/work/**=true fs:write /srv/work/**=false fs:read /srv/data/**=true fs:write /srv/data/**=false]"},
		{"write is not read", wallet([]string{"fs:write /srv/**"}, nil), nil, "[]", "[]", "[fs:read /srv/work/**=false fs:read /srv/data/**=false]"},
		{"read of one", wallet([]string{"fs:write /srv/**", "fs:read /srv/data/**"}, nil), nil, "[/srv/data]", "[]", "[fs:read /srv/work/**=false fs:read /srv/data/**=true fs:write /srv/data/**=true]"},
		{"an exception to the read", wallet([]string{"fs /srv/**"}, []string{"fs:read /srv/work/secret"}), nil, "[/srv/data]", "[]", "[fs:read /srv/work/**=false fs:read /srv/data/**=true fs:write /srv/data/**=true]"},
		{"read-only by the boundary", wallet([]string{"fs /srv/work/**"}, nil), []string{"/srv/old", "/srv/work/ro"}, "[/srv/work]", "[/srv/work/ro]", "[fs:read /srv/work/**=true fs:write /srv/work/**=true fs:read /srv/data/**=false fs:read /srv/old/**=false fs:read /srv/work/ro/**=true]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writable, lost, ds := CardWritable(paths, tc.readOnly, tc.w)
			var decided []string
			for _, d := range ds {
				decided = append(decided, fmt.Sprintf("%s=%v", d.API().Target, d.Allow))
			}
			if got := fmt.Sprint(nilEmpty(writable), nilEmpty(lost), nilEmpty(decided)); got != tc.writable+" "+tc.lost+" "+tc.decision {
				t.Errorf("got %s, want %s %s %s", got, tc.writable, tc.lost, tc.decision)
			}
		})
	}
	if writable, lost, ds := CardWritable(paths, []string{"/srv/old"}, nil); len(writable) != 2 || len(lost) != 1 || ds != nil {
		t.Errorf("the implicit agent: writable %v, lost %v, decisions %v", writable, lost, ds)
	}
}

// TestNarrowWritableProtected (found by a security review): with protected
// names, nothing a wrapped CLI is given is writable, since Landlock
// cannot refuse writes under a .git inside a writable directory; what the
// boundary lets the session read stays readable, and no more.
func TestNarrowWritableProtected(t *testing.T) {
	b := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Protected: []string{".git"},
		Entries: []boundary.Entry{{Path: "/w/ok", Access: boundary.Write, Match: boundary.Subtree}}}
	if w, lost := NarrowWritable([]string{"/w/ok", "/w"}, b); len(w) != 0 || fmt.Sprint(lost) != "[/w/ok]" {
		t.Errorf("writable %v, lost %v; want none writable, only /w/ok read-only", w, lost)
	}
	// A workspace-write boundary: everything readable but deny roots, the
	// workspace writable.
	ws := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.WorkspaceWrite, Workspace: "/w/proj", Deny: []string{"/w/keys"}}
	if w, lost := NarrowWritable([]string{"/w", "/w/proj", "/srv"}, ws); fmt.Sprint(nilEmpty(w)) != "[/w/proj]" || fmt.Sprint(lost) != "[/srv]" {
		t.Errorf("workspace-write: writable %v, lost %v; want [/w/proj] writable, /srv read-only, /w (holding a deny root) neither", w, lost)
	}
}
