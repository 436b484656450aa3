package boundary

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Thirtieth pass (docs/security-tests.md, "Thirtieth pass: session boundaries"): each test here kills a planted bug
// the package's other tests let through. docs/mutation/boundary.tsv lists every plant.

// A workspace-write profile writes the whole workspace subtree, not the workspace directory alone (BOUNDARIES.md,
// Profile; B12 is the same rule for /tmp). Red when the implied workspace entry is exact: every write inside the
// workspace would ask a human for what the profile already grants.
func TestMutation30WorkspaceWriteCoversTheWorkspaceSubtree(t *testing.T) {
	ws := managed(WorkspaceWrite)
	ws.Workspace = "/ws"
	ws.Protected = []string{".git"}
	for _, need := range []Need{
		{Path: "/ws/src/main.go", Access: Write},
		{Path: "/ws/src", Access: Write, Match: Subtree},
	} {
		if ok, req := Check(ws, need); !ok || req != nil {
			t.Fatalf("Check(workspace-write /ws, %+v) = %v, %+v; want true, nil", need, ok, req)
		}
	}
	a := Assess(ws, mustX(t, fsJSON(entryJSON("/ws/src", "write", "subtree"))))
	if a.Status != Approved || a.Reason != ReasonAlreadyApplied || a.Boundary.Revision != 3 {
		t.Fatalf("B12 (workspace): write subtree /ws/src assessed %s/%s revision %d; want approved/already_applied revision 3",
			a.Status, a.Reason, a.Boundary.Revision)
	}
}

// B4: a path over 4096 bytes is refused whatever the profile grants, and with no expansion, since none can carry it.
// Red when Check refuses only invalid_path: a read-everywhere profile then lets a tool read the overlong path, and a
// restricted one offers an expansion Validate refuses with path_too_long.
func TestMutation30OverlongNeedIsRefusedWithoutExpansion(t *testing.T) {
	long := "/" + strings.Repeat("a", MaxPathLen) // 4097 bytes
	ws := managed(WorkspaceWrite)
	ws.Workspace = "/ws"
	for _, b := range []Boundary{ws, managed(Restricted), managed(Unrestricted)} {
		for _, need := range []Need{{Path: long, Access: Read}, {Path: long, Access: Write, Match: Subtree}} {
			if ok, req := Check(b, need); ok || req != nil {
				t.Fatalf("B4: Check(%s, %d-byte %s %s) = %v, %+v; want false, nil", b.Filesystem, len(need.Path), need.Access, need.Match, ok, req)
			}
		}
	}
	// The bound is exact: 4096 bytes still gets an expansion.
	at := "/" + strings.Repeat("a", MaxPathLen-1)
	if ok, req := Check(managed(Restricted), Need{Path: at, Access: Read}); ok || req == nil || len(req.Entries) != 1 || req.Entries[0].Path != at {
		t.Fatalf("B4: Check(restricted, 4096-byte read) = %v, %+v; want false with that path", ok, req)
	}
}

// expansionOfSize is an expansion of read-exact entries whose canonical JSON is exactly n bytes.
func expansionOfSize(t *testing.T, n int) []byte {
	t.Helper()
	var entries []Entry
	for i := 0; i < 16; i++ {
		entries = append(entries, Entry{Path: fmt.Sprintf("/%02d%s", i, strings.Repeat("x", 3997)), Access: Read, Match: Exact})
	}
	last := Entry{Path: "/zz", Access: Read, Match: Exact}
	base, _ := json.Marshal(Expansion{Entries: append(slices.Clone(entries), last)})
	if pad := n - len(base); pad < 0 || len(last.Path)+pad > MaxPathLen {
		t.Fatalf("cannot build %d bytes from %d", n, len(base))
	} else {
		last.Path += strings.Repeat("z", pad)
	}
	out, _ := json.Marshal(Expansion{Entries: append(entries, last)})
	if len(out) != n {
		t.Fatalf("built %d bytes, want %d", len(out), n)
	}
	return out
}

// B6 at its edge: the compacted expansion may be 65536 bytes, not one more. Red when the cap moves by one.
func TestMutation30ExpansionSizeCapIsExact(t *testing.T) {
	if x, err := Validate(expansionOfSize(t, MaxExpansionSize)); err != nil || len(x.Entries) != 17 {
		t.Fatalf("B6: 65536 bytes: %d entries, %v; want 17 entries accepted", len(x.Entries), err)
	}
	_, err := Validate(expansionOfSize(t, MaxExpansionSize+1))
	if reasonOf(err) != ReasonPayloadTooLarge || err.Error() != "boundary expansion: payload_too_large: 65537 bytes compacted, at most 65536" {
		t.Fatalf("B6: 65537 bytes: %v; want payload_too_large: 65537 bytes compacted, at most 65536", err)
	}
}

// Assessment 3: the new profile is the old plus the entries. Red when applying a filesystem-only expansion turns
// the session's network off (the new revision is then a narrowing the human never asked for).
func TestMutation30ApplyingEntriesKeepsTheNetwork(t *testing.T) {
	b := managed(Restricted, Entry{Path: "/o", Access: Read, Match: Exact})
	b.Network = true
	a := Assess(b, mustX(t, fsJSON(entryJSON("/o/child", "read", "exact"))))
	if a.Status != Approved || a.Reason != ReasonApplied || a.Boundary.Revision != 4 || !a.Boundary.Network {
		t.Fatalf("B11 with network on: %s/%s revision %d network %v; want approved/applied revision 4 network true",
			a.Status, a.Reason, a.Boundary.Revision, a.Boundary.Network)
	}
	if !Allows(a.Boundary, Need{Network: true}) {
		t.Fatal("the new revision refuses the network the old one allowed")
	}
}

// Assess validates a hand-built expansion again (its doc comment): a value no request could carry gets the reason
// a request would, and the boundary stays as it was. Red when Assess skips the validation: 33 entries are applied
// past the 32-entry bound (B2), and a relative path comes back as payload_too_large instead of invalid_path (B3).
func TestMutation30AssessRevalidatesAHandBuiltExpansion(t *testing.T) {
	b := managed(Restricted)
	var many []Entry
	for i := 0; i < MaxEntries+1; i++ {
		many = append(many, Entry{Path: fmt.Sprintf("/f%d", i), Access: Write, Match: Exact})
	}
	cases := []struct {
		name   string
		x      Expansion
		reason string
	}{
		{"B2 33 entries", Expansion{Entries: many}, ReasonTooManyEntries},
		{"B3 relative path", Expansion{Entries: []Entry{{Path: "etc/passwd", Access: Write, Match: Exact}}}, ReasonInvalidPath},
		{"B3 dotdot", Expansion{Entries: []Entry{{Path: "/o/../etc", Access: Write, Match: Subtree}}}, ReasonInvalidPath},
		{"B5 deny access", Expansion{Entries: []Entry{{Path: "/o", Access: "deny", Match: Exact}}}, ReasonInvalidEntry},
		{"B1 nothing", Expansion{}, ReasonEmptyExpansion},
	}
	for _, c := range cases {
		a := Assess(b, c.x)
		if a.Status != Conflict || a.Reason != c.reason || !reflect.DeepEqual(a.Boundary, b) {
			t.Fatalf("%s: %s/%s revision %d; want conflict/%s and the boundary unchanged", c.name, a.Status, a.Reason, a.Boundary.Revision, c.reason)
		}
	}
}

// The same ID is the same request; another ID is not (BOUNDARIES.md, Request). Red when Create returns any prior
// it is handed: an agent's new request would come back as someone else's settled one, approved or not.
func TestMutation30CreateIgnoresAPriorOfAnotherID(t *testing.T) {
	cur := managed(Restricted)
	prior := Request{ID: "req-old", Status: Approved, BaseRevision: 1, BaseKind: Managed,
		Expansion: Expansion{Network: true}, Justification: "old", Reason: ReasonApplied, Revision: 2}
	r, created, err := Create(&prior, "req-new", cur, []byte(fsJSON(entryJSON("/o", "read", "exact"))), "need /o")
	want := Request{ID: "req-new", Status: Pending, BaseRevision: 3, BaseKind: Managed,
		Expansion: Expansion{Entries: []Entry{{Path: "/o", Access: Read, Match: Exact}}}, Justification: "need /o"}
	if err != nil || !created || !reflect.DeepEqual(r, want) {
		t.Fatalf("Create(prior req-old, id req-new) = %+v created=%v err=%v; want %+v created", r, created, err, want)
	}
}

// TestMutation30NetworkShapeAfterCount (BOUNDARIES.md, Validation; B2):
// the first failure in the listed order is the result. A network that is
// not an object has no key to be unknown (step 1): it is step 6's "network
// other than {enabled: true}", so 33 entries beside it are refused
// too_many_entries (step 2) like 33 entries beside {"enabled": false};
// alone it is invalid_expansion. An object with a key twice is still step
// 1's. (Found by the thirtieth pass, fixed after it.)
func TestMutation30NetworkShapeAfterCount(t *testing.T) {
	var es []string
	for i := 0; i < 33; i++ {
		es = append(es, entryJSON(fmt.Sprintf("/f%d", i), "read", "exact"))
	}
	for _, net := range []string{`true`, `null`, `"on"`, `[]`, `{"enabled":false}`} {
		data := `{"filesystem":{"entries":[` + strings.Join(es, ",") + `]},"network":` + net + `}`
		if _, err := Validate([]byte(data)); reasonOf(err) != ReasonTooManyEntries {
			t.Errorf("B2 with network %s: %v; want too_many_entries (step 2 comes before step 6)", net, err)
		}
		one := `{"filesystem":{"entries":[` + es[0] + `]},"network":` + net + `}`
		if _, err := Validate([]byte(one)); reasonOf(err) != ReasonInvalidExpansion || !strings.Contains(err.Error(), `network: want {"enabled": true}`) {
			t.Errorf("one entry with network %s: %v; want invalid_expansion, network: want {\"enabled\": true}", net, err)
		}
	}
	dup := `{"filesystem":{"entries":[` + strings.Join(es, ",") + `]},"network":{"enabled":true,"enabled":true}}`
	if _, err := Validate([]byte(dup)); reasonOf(err) != ReasonInvalidExpansion || !strings.Contains(err.Error(), "network is not an object with distinct keys") {
		t.Errorf("network with a key twice: %v; want invalid_expansion at step 1, network is not an object with distinct keys", err)
	}
}
