package boundary

import (
	"encoding/json"
	"errors"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var knownReasons = []string{ReasonInvalidExpansion, ReasonTooManyEntries, ReasonInvalidEntry, ReasonInvalidPath,
	ReasonPathTooLong, ReasonEmptyExpansion, ReasonPayloadTooLarge}

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"network":{"enabled":true}}`,
		fsJSON(entryJSON("/a/f", "read", "exact"), entryJSON("/a", "read", "subtree")),
		fsJSON(entryJSON("/o", "write", "subtree")),
		fsJSON(entryJSON("/locked/f", "read", "exact")),
		fsJSON(entryJSON("/ws/.git/config", "write", "exact")),
		fsJSON(entryJSON("/", "write", "subtree"), entryJSON("/x", "read", "exact")),
		fsJSON(entryJSON("/a/../b", "read", "exact")),
		fsJSON(`{"path":"/a","access":"read","scope":"exact","x":1}`),
		`{"filesystem":{"entries":[{"path":"/a","access":"write","scope":"subtree"}]},"network":{"enabled":true}}`,
	} {
		f.Add([]byte(s), "/o/locked", ".git", uint8(0))
	}
}

// Validation never panics, refuses only with a known reason, and what it accepts is within the limits and a fixed
// point: validating its canonical JSON again gives the same value, and compacting it again changes nothing.
func FuzzValidate(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, _ string, _ string, _ uint8) {
		x, err := Validate(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || !slices.Contains(knownReasons, ve.Reason) {
				t.Fatalf("refusal %v is not a known reason", err)
			}
			return
		}
		if len(x.Entries) > MaxEntries || (len(x.Entries) == 0 && !x.Network) {
			t.Fatalf("accepted %d entries, network %v", len(x.Entries), x.Network)
		}
		for _, e := range x.Entries {
			if pathReason(e.Path) != "" || (e.Access != Read && e.Access != Write) || (e.Match != Exact && e.Match != Subtree) {
				t.Fatalf("accepted entry %+v", e)
			}
		}
		if c := Compact(x.Entries); !reflect.DeepEqual(c, x.Entries) {
			t.Fatalf("compaction not idempotent: %+v → %+v", x.Entries, c)
		}
		out, err := json.Marshal(x)
		if err != nil || len(out) > MaxExpansionSize {
			t.Fatalf("canonical JSON: %d bytes, %v", len(out), err)
		}
		y, err := Validate(out)
		if err != nil || !reflect.DeepEqual(x, y) {
			t.Fatalf("validate∘compact not idempotent: %s → %+v, %v", out, y, err)
		}
	})
}

// under is an oracle written apart from the package's within: p is root or below it, component by component.
func under(p, root string) bool {
	pc, rc := strings.Split(strings.Trim(p, "/"), "/"), strings.Split(strings.Trim(root, "/"), "/")
	if root == "/" {
		return true
	}
	if p == "/" || len(pc) < len(rc) {
		return false
	}
	return slices.Equal(pc[:len(rc)], rc)
}

// An approved expansion never covers a denied path or makes a protected name writable, whatever the profile, and
// after it the boundary still refuses them.
func FuzzAssess(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, deny string, protected string, kind uint8) {
		b := Boundary{Kind: Managed, Revision: 1, Filesystem: []FSKind{Restricted, WorkspaceWrite, Unrestricted}[kind%3],
			Deny: []string{deny}, Protected: []string{protected}}
		if b.Filesystem == WorkspaceWrite {
			b.Workspace = "/ws"
		}
		if kind&4 != 0 {
			b.Entries = []Entry{{Path: "/o", Access: Read, Match: Subtree}}
		}
		if b.Validate() != nil {
			return
		}
		x, err := Validate(data)
		if err != nil {
			return
		}
		a := Assess(b, x)
		if a.Status != Approved {
			if a.Boundary.Revision != b.Revision {
				t.Fatalf("a conflict changed the revision")
			}
			return
		}
		for _, e := range x.Entries {
			if under(e.Path, deny) || (e.Match == Subtree && under(deny, e.Path)) {
				t.Fatalf("approved %+v against deny %q", e, deny)
			}
			if e.Access == Write && slices.Contains(strings.Split(e.Path, "/"), protected) {
				t.Fatalf("approved %+v against protected %q", e, protected)
			}
		}
		nb := a.Boundary
		if _, err := nb.Canonical(); err != nil {
			t.Fatalf("new boundary: %v", err)
		}
		probes := []Need{{Path: deny, Access: Read}, {Path: deny, Access: Write, Match: Subtree}}
		if deny != "/" {
			probes = append(probes, Need{Path: deny + "/k", Access: Read})
		}
		for _, e := range x.Entries {
			probes = append(probes, Need{Path: path.Join(e.Path, protected, "f"), Access: Write})
		}
		for _, n := range probes {
			if len(n.Path) <= MaxPathLen && Allows(nb, n) {
				t.Fatalf("after %s, the boundary allows %+v (deny %q, protected %q)", a.Reason, n, deny, protected)
			}
		}
	})
}

// Check and Assess agree: a need Check refuses with an expansion passes once that expansion is applied, and a need
// refused without one (denied, protected, malformed) is never allowed, by any kind of filesystem.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"/o/locked/k", "/ws/.git/config", "/srv/x", "/", "/o", "rel", "/a/../b"} {
		f.Add(s, "/o/locked", ".git", uint8(0))
		f.Add(s, "/o/locked", ".git", uint8(7))
	}
	f.Fuzz(func(t *testing.T, p string, deny string, protected string, bits uint8) {
		b := Boundary{Kind: Managed, Revision: 1, Filesystem: []FSKind{Restricted, WorkspaceWrite, Unrestricted}[bits%3],
			Deny: []string{deny}, Protected: []string{protected}, Entries: []Entry{{Path: "/o", Access: Read, Match: Subtree}}}
		if b.Filesystem == WorkspaceWrite {
			b.Workspace = "/ws"
		}
		if b.Validate() != nil {
			return
		}
		need := Need{Path: p, Access: []Access{Read, Write}[bits>>2&1], Match: []Match{Exact, Subtree}[bits>>3&1], Network: bits&16 != 0}
		ok, req := Check(b, need)
		if need.Network {
			if ok || req == nil || !req.Network {
				t.Fatalf("network need with network off: %v %+v", ok, req)
			}
			return
		}
		if ok && (under(p, deny) || (need.Access == Write && slices.Contains(strings.Split(p, "/"), protected))) {
			t.Fatalf("Check allowed %+v against deny %q, protected %q", need, deny, protected)
		}
		if ok || req == nil {
			return
		}
		a := Assess(b, *req)
		if a.Reason != ReasonApplied || !Allows(a.Boundary, need) {
			t.Fatalf("required %+v for %+v: %s/%s, then allowed %v", *req, need, a.Status, a.Reason, Allows(a.Boundary, need))
		}
	})
}
