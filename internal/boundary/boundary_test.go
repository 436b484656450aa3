package boundary

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func entryJSON(p, access, scope string) string {
	b, _ := json.Marshal(map[string]string{"path": p, "access": access, "scope": scope})
	return string(b)
}

func fsJSON(entries ...string) string {
	return `{"filesystem":{"entries":[` + strings.Join(entries, ",") + `]}}`
}

func reasonOf(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

func TestValidateScenarios(t *testing.T) {
	many := func(n int, p func(i int) string) string {
		var es []string
		for i := range n {
			es = append(es, entryJSON(p(i), "read", "exact"))
		}
		return fsJSON(es...)
	}
	long := "/" + strings.Repeat("a", 4095)
	cases := []struct {
		name, in, want string
	}{
		{"B1 empty object", `{}`, ReasonEmptyExpansion},
		{"B1 empty entries", fsJSON(), ReasonEmptyExpansion},
		{"B1 empty filesystem", `{"filesystem":{}}`, ReasonEmptyExpansion},
		{"B2 33 entries", many(33, func(i int) string { return fmt.Sprintf("/f%d", i) }), ReasonTooManyEntries},
		// Rule 2 comes before rule 3: 33 broken entries are still too_many_entries.
		{"B2 33 broken entries", fsJSON(strings.Repeat(`{"x":1},`, 32) + `{"x":1}`), ReasonTooManyEntries},
		{"32 entries pass", many(32, func(i int) string { return fmt.Sprintf("/f%d", i) }), ""},
		{"B3 relative", fsJSON(entryJSON("a/b", "read", "exact")), ReasonInvalidPath},
		{"B3 dotdot", fsJSON(entryJSON("/a/../b", "read", "exact")), ReasonInvalidPath},
		{"B3 dotdot at root", fsJSON(entryJSON("/..", "read", "exact")), ReasonInvalidPath},
		{"B3 dot", fsJSON(entryJSON("/a/./b", "read", "exact")), ReasonInvalidPath},
		{"B3 double slash", fsJSON(entryJSON("/a//b", "read", "exact")), ReasonInvalidPath},
		{"B3 trailing slash", fsJSON(entryJSON("/a/", "read", "exact")), ReasonInvalidPath},
		{"B3 empty", fsJSON(entryJSON("", "read", "exact")), ReasonInvalidPath},
		{"B3 NUL", fsJSON(entryJSON("/a\x00b", "read", "exact")), ReasonInvalidPath},
		{"root is fine", fsJSON(entryJSON("/", "read", "subtree")), ""},
		{"B4 4097 characters", fsJSON(entryJSON(long+"b", "read", "exact")), ReasonPathTooLong},
		{"4096 characters pass", fsJSON(entryJSON(long, "read", "exact")), ""},
		// Rule 4 before rule 5: a long non-normalised path is invalid_path.
		{"B3 before B4", fsJSON(entryJSON(long+"/", "read", "exact")), ReasonInvalidPath},
		// Rule 4 is checked over all entries before rule 5.
		{"B3 in a later entry wins over B4", fsJSON(entryJSON(long+"b", "read", "exact"), entryJSON("rel", "read", "exact")), ReasonInvalidPath},
		{"B5 access deny", fsJSON(entryJSON("/a", "deny", "exact")), ReasonInvalidEntry},
		{"B5 extra key", fsJSON(`{"path":"/a","access":"read","scope":"exact","x":1}`), ReasonInvalidEntry},
		{"B5 missing scope", fsJSON(`{"path":"/a","access":"read"}`), ReasonInvalidEntry},
		{"B5 scope other", fsJSON(entryJSON("/a", "read", "deep")), ReasonInvalidEntry},
		{"B5 match is not scope", fsJSON(`{"path":"/a","access":"read","match":"exact"}`), ReasonInvalidEntry},
		{"B5 null path", fsJSON(`{"path":null,"access":"read","scope":"exact"}`), ReasonInvalidEntry},
		{"B5 entry not an object", fsJSON(`"/a"`), ReasonInvalidEntry},
		{"B5 duplicate key in entry", fsJSON(`{"path":"/a","path":"/b","access":"read","scope":"exact"}`), ReasonInvalidEntry},
		// Rule 3 before rule 4.
		{"B5 before B3", fsJSON(entryJSON("rel", "read", "exact"), entryJSON("/a", "deny", "exact")), ReasonInvalidEntry},
		{"B6 32 x 4000", many(32, func(i int) string { return fmt.Sprintf("/%02d%s", i, strings.Repeat("x", 3997)) }), ReasonPayloadTooLarge},
		{"unknown top key", `{"filesystem":{"entries":[]},"shell":true}`, ReasonInvalidExpansion},
		{"unknown filesystem key", `{"filesystem":{"entries":[],"deny":[]}}`, ReasonInvalidExpansion},
		{"unknown network key", `{"network":{"enabled":true,"hosts":["x"]}}`, ReasonInvalidExpansion},
		// Rule 1 before rule 2.
		{"unknown key before count", `{"x":1,"filesystem":{"entries":[` + strings.Repeat(`{},`, 40) + `{}]}}`, ReasonInvalidExpansion},
		{"network false", `{"network":{"enabled":false}}`, ReasonInvalidExpansion},
		{"network string", `{"network":{"enabled":"true"}}`, ReasonInvalidExpansion},
		{"network empty", `{"network":{}}`, ReasonInvalidExpansion},
		{"network true", `{"network":{"enabled":true}}`, ""},
		{"entries null", `{"filesystem":{"entries":null}}`, ReasonInvalidExpansion},
		{"not JSON", `{`, ReasonInvalidExpansion},
		{"array", `[]`, ReasonInvalidExpansion},
		{"trailing data", `{} {}`, ReasonInvalidExpansion},
		{"duplicate top key", `{"network":{"enabled":true},"network":{"enabled":true}}`, ReasonInvalidExpansion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Validate([]byte(c.in))
			if got := reasonOf(err); got != c.want {
				t.Errorf("Validate: reason %q, want %q (err %v)", got, c.want, err)
			}
		})
	}
}

func TestCompactB7(t *testing.T) {
	x, err := Validate([]byte(fsJSON(entryJSON("/a/f", "read", "exact"), entryJSON("/a", "read", "subtree"))))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Path: "/a", Access: Read, Match: Subtree}}
	if !reflect.DeepEqual(x.Entries, want) {
		t.Fatalf("B7: compacted to %+v, want %+v", x.Entries, want)
	}
	out, _ := json.Marshal(x)
	if string(out) != `{"filesystem":{"entries":[{"path":"/a","access":"read","scope":"subtree"}]}}` {
		t.Fatalf("B7: canonical JSON %s", out)
	}
}

func TestCompactRules(t *testing.T) {
	e := func(p string, a Access, m Match) Entry { return Entry{Path: p, Access: a, Match: m} }
	cases := []struct {
		name     string
		in, want []Entry
	}{
		{"write covers read at the same path", []Entry{e("/a", Read, Exact), e("/a", Write, Exact)}, []Entry{e("/a", Write, Exact)}},
		{"read does not cover write", []Entry{e("/a", Read, Subtree), e("/a/b", Write, Exact)}, []Entry{e("/a", Read, Subtree), e("/a/b", Write, Exact)}},
		{"exact does not cover inside", []Entry{e("/a", Write, Exact), e("/a/b", Read, Exact)}, []Entry{e("/a", Write, Exact), e("/a/b", Read, Exact)}},
		{"sibling with a shared prefix is not inside", []Entry{e("/a", Write, Subtree), e("/ab", Read, Exact)}, []Entry{e("/a", Write, Subtree), e("/ab", Read, Exact)}},
		{"root subtree covers all", []Entry{e("/x/y", Write, Subtree), e("/", Write, Subtree), e("/z", Read, Exact)}, []Entry{e("/", Write, Subtree)}},
		{"duplicates keep one", []Entry{e("/a", Read, Exact), e("/a", Read, Exact)}, []Entry{e("/a", Read, Exact)}},
		{"sorted", []Entry{e("/b", Read, Exact), e("/a", Read, Exact)}, []Entry{e("/a", Read, Exact), e("/b", Read, Exact)}},
		{"deep ancestor", []Entry{e("/a/b/c/d", Write, Exact), e("/a", Write, Subtree)}, []Entry{e("/a", Write, Subtree)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Compact(c.in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Compact(%+v) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func managed(fs FSKind, entries ...Entry) Boundary {
	return Boundary{Kind: Managed, Revision: 3, Filesystem: fs, Entries: entries, Deny: []string{}, Protected: []string{}}
}

func mustX(t *testing.T, s string) Expansion {
	t.Helper()
	x, err := Validate([]byte(s))
	if err != nil {
		t.Fatalf("Validate(%s): %v", s, err)
	}
	return x
}

func TestAssessScenarios(t *testing.T) {
	ws := managed(WorkspaceWrite)
	ws.Workspace = "/ws"
	ws.Protected = []string{".agents", ".git"}

	b8 := managed(Restricted)
	b8.Deny = []string{"/o/locked"}
	b9 := managed(Unrestricted)
	b9.Deny = []string{"/locked"}
	b11 := managed(Restricted, Entry{Path: "/o", Access: Read, Match: Exact})

	cases := []struct {
		name       string
		b          Boundary
		x          string
		wantStatus Status
		wantReason string
		wantRev    int64
	}{
		{"B8 write subtree containing a deny root", b8, fsJSON(entryJSON("/o", "write", "subtree")), Conflict, ReasonExplicitDeny, 3},
		{"B8 read subtree containing a deny root", b8, fsJSON(entryJSON("/o", "read", "subtree")), Conflict, ReasonExplicitDeny, 3},
		{"B8 exact on the deny root", b8, fsJSON(entryJSON("/o/locked", "read", "exact")), Conflict, ReasonExplicitDeny, 3},
		{"B8 subtree inside a deny root", b8, fsJSON(entryJSON("/o/locked/in", "read", "subtree")), Conflict, ReasonExplicitDeny, 3},
		{"B8 one bad entry spoils the request", b8, fsJSON(entryJSON("/p", "read", "exact"), entryJSON("/o/locked/k", "read", "exact")), Conflict, ReasonExplicitDeny, 3},
		{"B8 exact /o beside the deny root is fine", b8, fsJSON(entryJSON("/o", "write", "exact")), Approved, ReasonApplied, 4},
		{"B8 sibling with a shared prefix is fine", b8, fsJSON(entryJSON("/o/locked2", "write", "subtree")), Approved, ReasonApplied, 4},
		{"B9 unrestricted, exact inside deny", b9, fsJSON(entryJSON("/locked/f", "read", "exact")), Conflict, ReasonExplicitDeny, 3},
		{"B10 write under protected .git", ws, fsJSON(entryJSON("/ws/.git/config", "write", "exact")), Conflict, ReasonExplicitDeny, 3},
		{"B10 write subtree of .git itself", ws, fsJSON(entryJSON("/ws/.git", "write", "subtree")), Conflict, ReasonExplicitDeny, 3},
		{"B10 protected anywhere, not only in the workspace", ws, fsJSON(entryJSON("/other/.agents/x", "write", "exact")), Conflict, ReasonExplicitDeny, 3},
		{"B10 reading under .git is not a conflict", ws, fsJSON(entryJSON("/ws/.git/config", "read", "exact")), Approved, ReasonAlreadyApplied, 3},
		{"B10 a name containing .git is not protected", managed(Restricted), fsJSON(entryJSON("/ws/.github/x", "write", "exact")), Approved, ReasonApplied, 4},
		{"B11 exact /o does not cover /o/child", b11, fsJSON(entryJSON("/o/child", "read", "exact")), Approved, ReasonApplied, 4},
		{"B11 write over read /o", b11, fsJSON(entryJSON("/o", "write", "exact")), Approved, ReasonApplied, 4},
		{"B11 the same entry again", b11, fsJSON(entryJSON("/o", "read", "exact")), Approved, ReasonAlreadyApplied, 3},
		{"B12 workspace-write covers /tmp/x", ws, fsJSON(entryJSON("/tmp/x", "write", "subtree")), Approved, ReasonAlreadyApplied, 3},
		{"B12 and reads anywhere", ws, fsJSON(entryJSON("/etc", "read", "subtree")), Approved, ReasonAlreadyApplied, 3},
		{"B12 but not writes outside", ws, fsJSON(entryJSON("/etc/x", "write", "exact")), Approved, ReasonApplied, 4},
		{"network on", managed(Restricted), `{"network":{"enabled":true}}`, Approved, ReasonApplied, 4},
		{"network already on", func() Boundary { b := managed(Restricted); b.Network = true; return b }(), `{"network":{"enabled":true}}`, Approved, ReasonAlreadyApplied, 3},
		{"an external boundary is not widened", func() Boundary { b := managed(Restricted); b.Kind = External; return b }(), fsJSON(entryJSON("/etc", "write", "subtree")), Conflict, ReasonBoundaryKindChanged, 3},
		{"a bypass boundary is not rewritten", func() Boundary { b := managed(Restricted); b.Kind = Bypass; return b }(), `{"network":{"enabled":true}}`, Conflict, ReasonBoundaryKindChanged, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := c.b.Canonical()
			a := Assess(c.b, mustX(t, c.x))
			if a.Status != c.wantStatus || a.Reason != c.wantReason || a.Boundary.Revision != c.wantRev {
				t.Fatalf("Assess = %s/%s revision %d, want %s/%s revision %d", a.Status, a.Reason, a.Boundary.Revision, c.wantStatus, c.wantReason, c.wantRev)
			}
			if after, _ := c.b.Canonical(); string(after) != string(before) {
				t.Fatalf("Assess changed its input boundary")
			}
			if a.Reason != ReasonApplied {
				return
			}
			// Applied: everything asked for now passes Check, and the new boundary is valid.
			if _, err := a.Boundary.Canonical(); err != nil {
				t.Fatalf("new boundary: %v", err)
			}
			x := mustX(t, c.x)
			for _, e := range x.Entries {
				if ok, _ := Check(a.Boundary, Need{Path: e.Path, Access: e.Access, Match: e.Match}); !ok {
					t.Errorf("after applying, %+v does not pass Check", e)
				}
			}
			if x.Network && !Allows(a.Boundary, Need{Network: true}) {
				t.Errorf("after applying, network does not pass Check")
			}
		})
	}
}

func TestAssessBoundaryCap(t *testing.T) {
	// Grow a boundary one expansion at a time until the 1 MiB cap refuses the next.
	b := managed(Restricted)
	for i := 0; ; i++ {
		var es []string
		for j := range 16 {
			es = append(es, entryJSON(fmt.Sprintf("/%06d/%02d/%s", i, j, strings.Repeat("p", 4000)), "read", "exact"))
		}
		a := Assess(b, mustX(t, fsJSON(es...)))
		if a.Status == Conflict {
			if a.Reason != ReasonPayloadTooLarge || a.Boundary.Revision != b.Revision {
				t.Fatalf("at %d: %s/%s revision %d", i, a.Status, a.Reason, a.Boundary.Revision)
			}
			out, err := b.Canonical()
			if err != nil || len(out) > MaxBoundarySize || len(out) < MaxBoundarySize-16*4100 {
				t.Fatalf("last accepted boundary: %d bytes, %v", len(out), err)
			}
			return
		}
		b = a.Boundary
		if i > 100 {
			t.Fatal("the 1 MiB cap never refused")
		}
	}
}

func TestCheck(t *testing.T) {
	b := managed(Restricted, Entry{Path: "/srv/work", Access: Read, Match: Subtree}, Entry{Path: "/srv/out", Access: Write, Match: Exact})
	b.Deny = []string{"/srv/work/secrets"}
	b.Protected = []string{".git"}
	exp := func(p string, a Access, m Match) *Expansion {
		return &Expansion{Entries: []Entry{{Path: p, Access: a, Match: m}}}
	}
	cases := []struct {
		name string
		b    Boundary
		need Need
		ok   bool
		req  *Expansion
	}{
		{"read inside subtree", b, Need{Path: "/srv/work/a/b", Access: Read}, true, nil},
		{"read subtree inside subtree", b, Need{Path: "/srv/work/a", Access: Read, Match: Subtree}, true, nil},
		{"write inside a read subtree asks for write exact", b, Need{Path: "/srv/work/a", Access: Write}, false, exp("/srv/work/a", Write, Exact)},
		{"write exact entry", b, Need{Path: "/srv/out", Access: Write}, true, nil},
		{"read through write", b, Need{Path: "/srv/out", Access: Read}, true, nil},
		{"exact does not cover inside", b, Need{Path: "/srv/out/x", Access: Read}, false, exp("/srv/out/x", Read, Exact)},
		{"exact does not cover its subtree", b, Need{Path: "/srv/out", Access: Write, Match: Subtree}, false, exp("/srv/out", Write, Subtree)},
		{"subtree need asks for subtree", b, Need{Path: "/data", Access: Read, Match: Subtree}, false, exp("/data", Read, Subtree)},
		{"denied root: nothing to ask", b, Need{Path: "/srv/work/secrets", Access: Read}, false, nil},
		{"denied inside: nothing to ask", b, Need{Path: "/srv/work/secrets/k", Access: Read}, false, nil},
		{"subtree containing deny: nothing to ask", b, Need{Path: "/srv/work", Access: Read, Match: Subtree}, false, nil},
		{"protected write: nothing to ask", b, Need{Path: "/srv/work/.git/config", Access: Write}, false, nil},
		{"protected read passes", b, Need{Path: "/srv/work/.git/config", Access: Read}, true, nil},
		{"relative path", b, Need{Path: "srv", Access: Read}, false, nil},
		{"not UTF-8 inside an entry passes", b, Need{Path: "/srv/work/\xc7", Access: Read}, true, nil},
		{"not UTF-8 inside a deny root", b, Need{Path: "/srv/work/secrets/\xc7", Access: Read}, false, nil},
		{"not UTF-8 outside: no expansion can name it", b, Need{Path: "/srv/\xc7", Access: Read}, false, nil},
		{"dotdot escape", b, Need{Path: "/srv/work/../../etc/passwd", Access: Read}, false, nil},
		{"unknown access", b, Need{Path: "/srv/work/a", Access: "exec"}, false, nil},
		{"network off", b, Need{Network: true}, false, &Expansion{Network: true}},
		{"deny holds in unrestricted", func() Boundary { u := b; u.Filesystem = Unrestricted; return u }(), Need{Path: "/srv/work/secrets/k", Access: Read}, false, nil},
		{"unrestricted writes elsewhere", func() Boundary { u := b; u.Filesystem = Unrestricted; return u }(), Need{Path: "/x", Access: Write}, true, nil},
		{"bypass allows", Boundary{Kind: Bypass}, Need{Path: "/x", Access: Write}, true, nil},
		{"external: maiden cannot widen", Boundary{Kind: External}, Need{Network: true}, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, req := Check(c.b, c.need)
			if ok != c.ok || !reflect.DeepEqual(req, c.req) {
				t.Fatalf("Check = %v, %+v; want %v, %+v", ok, req, c.ok, c.req)
			}
			if req == nil {
				return
			}
			// The required expansion is valid as a request and, applied, makes the need pass.
			raw, _ := json.Marshal(req)
			x, err := Validate(raw)
			if err != nil {
				t.Fatalf("required expansion %s does not validate: %v", raw, err)
			}
			a := Assess(c.b, x)
			if a.Reason != ReasonApplied || !Allows(a.Boundary, c.need) {
				t.Fatalf("applying the required expansion: %s/%s, then Allows = %v", a.Status, a.Reason, Allows(a.Boundary, c.need))
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	b := Boundary{Kind: Managed, Revision: 7, Filesystem: WorkspaceWrite, Workspace: "/ws",
		Entries:   []Entry{{Path: "/b", Access: Read, Match: Exact}, {Path: "/a", Access: Write, Match: Subtree}, {Path: "/a/x", Access: Read, Match: Exact}},
		Deny:      []string{"/z", "/y", "/z"},
		Protected: []string{".git", ".agents"},
		Network:   true,
	}
	got, err := b.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"managed","revision":7,"filesystem":"workspace-write","workspace":"/ws",` +
		`"entries":[{"path":"/a","access":"write","match":"subtree"},{"path":"/b","access":"read","match":"exact"}],` +
		`"deny":["/y","/z"],"protected":[".agents",".git"],"network":true}`
	if string(got) != want {
		t.Fatalf("Canonical:\n got %s\nwant %s", got, want)
	}
	back, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Canonical()
	if string(again) != want {
		t.Fatalf("Parse∘Canonical not stable: %s", again)
	}
	empty, _ := managed(Restricted).Canonical()
	if string(empty) != `{"kind":"managed","revision":3,"filesystem":"restricted","entries":[],"deny":[],"protected":[],"network":false}` {
		t.Fatalf("empty boundary: %s", empty)
	}
}

func TestBoundaryValidate(t *testing.T) {
	bad := []struct {
		name, json, want string
	}{
		{"unknown key", `{"kind":"managed","filesystem":"restricted","shell":1}`, "unknown field"},
		{"deny access entry", `{"kind":"managed","filesystem":"restricted","entries":[{"path":"/a","access":"deny","match":"exact"}]}`, `entries[0] ("/a"): access "deny"`},
		{"relative entry", `{"kind":"managed","filesystem":"restricted","entries":[{"path":"a","access":"read","match":"exact"}]}`, `entries[0] path "a": invalid_path`},
		{"bad deny", `{"kind":"managed","filesystem":"restricted","deny":["/a/"]}`, `deny[0] "/a/": invalid_path`},
		{"protected with slash", `{"kind":"managed","filesystem":"restricted","protected":["a/b"]}`, `protected[0] "a/b"`},
		{"protected dotdot", `{"kind":"managed","filesystem":"restricted","protected":[".."]}`, `protected[0] ".."`},
		{"kind", `{"kind":"open","filesystem":"restricted"}`, `kind "open"`},
		{"workspace missing", `{"kind":"managed","filesystem":"workspace-write"}`, `workspace "": invalid_path`},
		{"workspace on restricted", `{"kind":"managed","filesystem":"restricted","workspace":"/w"}`, `only for filesystem workspace-write`},
		{"negative revision", `{"kind":"managed","filesystem":"restricted","revision":-1}`, `revision -1`},
		{"trailing", `{"kind":"managed","filesystem":"restricted"} 1`, `data after`},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := Parse([]byte(strings.Repeat(" ", MaxBoundarySize+1))); err == nil || !strings.Contains(err.Error(), "cap") {
		t.Fatalf("over 1 MiB: %v", err)
	}
}

func TestLifecycle(t *testing.T) {
	cur := managed(Restricted, Entry{Path: "/o", Access: Read, Match: Exact})
	raw := []byte(fsJSON(entryJSON("/o/child", "read", "exact")))

	r, created, err := Create(nil, "req-1", cur, raw, "  need the child file  ")
	if err != nil || !created || r.Status != Pending || r.BaseRevision != 3 || r.Justification != "need the child file" {
		t.Fatalf("Create: %+v created=%v err=%v", r, created, err)
	}

	t.Run("same ID is the same request", func(t *testing.T) {
		again, created, err := Create(&r, "req-1", cur, []byte(`{"network":{"enabled":true}}`), "other")
		if err != nil || created || !reflect.DeepEqual(again, r) {
			t.Fatalf("Create again: %+v created=%v err=%v", again, created, err)
		}
	})

	t.Run("B13 pending, allow: approved, revision + 1", func(t *testing.T) {
		s, next, changed := Settle(r, cur, Allow())
		if !changed || s.Status != Approved || s.Reason != ReasonApplied || s.Revision != 4 || next == nil || next.Revision != 4 {
			t.Fatalf("Settle: %+v next=%+v changed=%v", s, next, changed)
		}
		if !Allows(*next, Need{Path: "/o/child", Access: Read}) || Allows(cur, Need{Path: "/o/child", Access: Read}) {
			t.Fatal("the new revision does not allow what was asked, or the old one was changed")
		}
		t.Run("B14 settled, settle again: unchanged", func(t *testing.T) {
			for _, d := range []Answer{Allow(), Deny("no")} {
				s2, n2, changed := Settle(s, *next, d)
				if changed || n2 != nil || !reflect.DeepEqual(s2, s) {
					t.Fatalf("second Settle(%+v): %+v next=%v changed=%v", d, s2, n2, changed)
				}
			}
			if s2, changed := HostRestarted(s); changed || !reflect.DeepEqual(s2, s) {
				t.Fatalf("HostRestarted on a settled request: %+v %v", s2, changed)
			}
		})
	})

	t.Run("already applied", func(t *testing.T) {
		wide := managed(Restricted, Entry{Path: "/o", Access: Read, Match: Subtree})
		s, next, changed := Settle(r, wide, Allow())
		if !changed || s.Status != Approved || s.Reason != ReasonAlreadyApplied || s.Revision != 3 || next != nil {
			t.Fatalf("Settle: %+v next=%v", s, next)
		}
	})

	t.Run("assessed against the current profile, not the base", func(t *testing.T) {
		now := cur
		now.Revision = 9
		now.Deny = []string{"/o/child"}
		s, next, _ := Settle(r, now, Allow())
		if s.Status != Conflict || s.Reason != ReasonExplicitDeny || next != nil {
			t.Fatalf("Settle: %+v next=%v", s, next)
		}
	})

	t.Run("B15 boundary kind changed", func(t *testing.T) {
		for _, k := range []Kind{Bypass, External} {
			now := cur
			now.Kind = k
			s, next, changed := Settle(r, now, Allow())
			if !changed || s.Status != Conflict || s.Reason != ReasonBoundaryKindChanged || next != nil {
				t.Fatalf("Settle with kind %s: %+v next=%v", k, s, next)
			}
		}
	})

	t.Run("B16 host restarts", func(t *testing.T) {
		s, changed := HostRestarted(r)
		if !changed || s.Status != Denied || s.Reason != ReasonHostRestarted {
			t.Fatalf("HostRestarted: %+v %v", s, changed)
		}
	})

	t.Run("deny with the operator's words", func(t *testing.T) {
		s, next, _ := Settle(r, cur, Deny("  not on a Friday  "))
		if s.Status != Denied || s.Reason != "not on a Friday" || next != nil {
			t.Fatalf("Settle: %+v", s)
		}
		if s, _, _ := Settle(r, cur, Deny("")); s.Reason != ReasonDenied {
			t.Fatalf("empty denial reason: %q", s.Reason)
		}
		if s, _, _ := Settle(r, cur, Deny(ReasonTurnStopped)); s.Reason != ReasonTurnStopped {
			t.Fatalf("turn_stopped: %q", s.Reason)
		}
	})

	t.Run("request JSON round trip", func(t *testing.T) {
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Request
		if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip %s: %+v %v", out, back, err)
		}
		// A stored request whose expansion would not validate is refused on reading.
		bad := strings.Replace(string(out), `"access":"read"`, `"access":"deny"`, 1)
		if err := json.Unmarshal([]byte(bad), &back); reasonOf(err) != ReasonInvalidEntry {
			t.Fatalf("reading %s: %v", bad, err)
		}
	})

	refusals := []struct {
		name, id, raw, just, want string
		b                         Boundary
	}{
		{"bad id", "a b", string(raw), "j", ReasonInvalidID, cur},
		{"empty id", "", string(raw), "j", ReasonInvalidID, cur},
		{"long id", strings.Repeat("a", 129), string(raw), "j", ReasonInvalidID, cur},
		{"blank justification", "ok", string(raw), " \n\t ", ReasonInvalidJustification, cur},
		{"long justification", "ok", string(raw), strings.Repeat("é", 2001), ReasonInvalidJustification, cur},
		{"expansion reason", "ok", `{}`, "j", ReasonEmptyExpansion, cur},
		{"not managed", "ok", string(raw), "j", ReasonBoundaryNotManaged, Boundary{Kind: Bypass}},
	}
	for _, c := range refusals {
		t.Run("refused: "+c.name, func(t *testing.T) {
			_, created, err := Create(nil, c.id, c.b, []byte(c.raw), c.just)
			if created || reasonOf(err) != c.want {
				t.Fatalf("Create: created=%v reason %q, want %q", created, reasonOf(err), c.want)
			}
		})
	}
	if _, ok, err := Create(nil, strings.Repeat("a", 128), cur, raw, strings.Repeat("é", 2000)); !ok || err != nil {
		t.Fatalf("128-character id, 2000-character justification: %v", err)
	}
}

func TestCommandError(t *testing.T) {
	b := managed(Restricted)
	ok, req := Check(b, Need{Path: "/srv/x", Access: Write})
	if ok || req == nil {
		t.Fatal("Check passed")
	}
	e := Required(DomainFilesystem, StageValidation, *req, "fs_write /srv/x is outside the boundary")
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(e)
	want := `{"code":"SANDBOX_COMMAND_EXECUTION_FAILED","domain":"filesystem","stage":"validation",` +
		`"reason":"sandbox_boundary_required","requiredExpansion":{"filesystem":{"entries":[{"path":"/srv/x","access":"write","scope":"exact"}]}},` +
		`"message":"fs_write /srv/x is outside the boundary"}`
	if string(out) != want {
		t.Fatalf("JSON:\n got %s\nwant %s", out, want)
	}
	// The model can send requiredExpansion back as its request verbatim.
	var back struct {
		RequiredExpansion json.RawMessage `json:"requiredExpansion"`
	}
	_ = json.Unmarshal(out, &back)
	if _, created, err := Create(nil, "from-error", b, back.RequiredExpansion, "asked"); !created || err != nil {
		t.Fatalf("the required expansion as a request: %v", err)
	}
	if !strings.Contains(e.Error(), "SANDBOX_COMMAND_EXECUTION_FAILED: filesystem at validation: sandbox_boundary_required") {
		t.Fatalf("Error(): %s", e.Error())
	}

	r := Request{ID: "r1", Status: Denied, Reason: "Not today!"}
	s := Settled(DomainCommand, StageLaunch, r)
	if s.Reason != ReasonDenied || s.Message != "Not today!" || s.RequestID != "r1" || s.Validate() != nil {
		t.Fatalf("Settled with free text: %+v %v", s, s.Validate())
	}
	r.Reason = ReasonHostRestarted
	if s := Settled(DomainBackgroundCommand, StageLaunch, r); s.Reason != ReasonHostRestarted || s.Validate() != nil {
		t.Fatalf("Settled host_restarted: %+v", s)
	}

	for _, bad := range []*CommandError{
		{Code: "OTHER", Domain: DomainCommand, Stage: "launch", Reason: "x"},
		{Code: ErrorCode, Domain: "web", Stage: "launch", Reason: "x"},
		{Code: ErrorCode, Domain: DomainCommand, Stage: "Launch", Reason: "x"},
		{Code: ErrorCode, Domain: DomainCommand, Stage: "launch", Reason: "has space"},
		{Code: ErrorCode, Domain: DomainCommand, Stage: "launch", Reason: ReasonBoundaryRequired},
		{Code: ErrorCode, Domain: DomainCommand, Stage: "launch", Reason: "x", RequiredExpansion: &Expansion{Network: true}},
		{Code: ErrorCode, Domain: DomainCommand, Stage: "launch", Reason: "x", RequestID: "a b"},
	} {
		if bad.Validate() == nil {
			t.Errorf("Validate accepted %+v", bad)
		}
	}
	// maiden's own domain for a need of the network (web_fetch, http-fetch, a CLI's egress).
	if err := (&CommandError{Code: ErrorCode, Domain: DomainNetwork, Stage: "web_fetch", Reason: ReasonBoundaryRequired, RequiredExpansion: &Expansion{Network: true}}).Validate(); err != nil {
		t.Errorf("a network need: %v", err)
	}
}
