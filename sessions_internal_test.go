package maiden

import (
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
)

// TestNarrowWritable: a wrapped CLI's write_paths against the session's
// boundary: kept whole when the boundary allows writing the subtree,
// otherwise only the boundary's write subtree entries inside stay
// writable; an entry containing a deny root, or with a protected name on
// its path, is never writable (Landlock cannot carve them out).
func TestNarrowWritable(t *testing.T) {
	b := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Protected: []string{".git"}, Deny: []string{"/w/mixed/locked"},
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
		{[]string{"/w"}, "[/w/ok]", "[/w]"},
		{[]string{"/w/ro"}, "[]", "[/w/ro]"},
		{[]string{"/w/mixed"}, "[]", "[/w/mixed]"},
		{[]string{"/w/repo"}, "[]", "[/w/repo]"},
		{[]string{"/elsewhere"}, "[]", "[/elsewhere]"},
	} {
		w, l := narrowWritable(tc.paths, b)
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
