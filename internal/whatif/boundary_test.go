package whatif_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/whatif"
)

func restricted(entries ...boundary.Entry) boundary.Boundary {
	return boundary.Boundary{Kind: boundary.Managed, Revision: 1, Filesystem: boundary.Restricted, Entries: entries,
		Deny: []string{"/etc/secret"}, Protected: []string{".git"}}
}

// TestBoundaryBeyond pins the words a human reads before widening a
// session's boundary: what each entry adds against what the boundary
// allows today, and "nothing new" exactly when the boundary allows it.
func TestBoundaryBeyond(t *testing.T) {
	srvRead := boundary.Entry{Path: "/srv", Access: boundary.Read, Match: boundary.Subtree}
	for _, tc := range []struct {
		name      string
		b         boundary.Boundary
		x         boundary.Expansion
		want      []string
		redundant bool
	}{
		{"write where today read", restricted(srvRead),
			boundary.Expansion{Entries: []boundary.Entry{{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree}}},
			[]string{"write under /srv/app/** (today read only)"}, false},
		{"read where today nothing", restricted(srvRead),
			boundary.Expansion{Entries: []boundary.Entry{{Path: "/opt/data", Access: boundary.Read, Match: boundary.Exact}}},
			[]string{"read /opt/data (today nothing there)"}, false},
		{"a subtree where today the directory itself", restricted(boundary.Entry{Path: "/opt", Access: boundary.Read, Match: boundary.Exact}),
			boundary.Expansion{Entries: []boundary.Entry{{Path: "/opt", Access: boundary.Read, Match: boundary.Subtree}}},
			[]string{"read under /opt/** (today only /opt itself)"}, false},
		{"already allowed", restricted(srvRead),
			boundary.Expansion{Entries: []boundary.Entry{{Path: "/srv/app/x", Access: boundary.Read, Match: boundary.Exact}}},
			[]string{"nothing new: the boundary allows read /srv/app/x already"}, true},
		{"the network", restricted(),
			boundary.Expansion{Network: true},
			[]string{"the network, as far as the agent's cards and agent.toml allow (today no network)"}, false},
		{"the network already", func() boundary.Boundary { b := restricted(); b.Network = true; return b }(),
			boundary.Expansion{Network: true},
			[]string{"nothing new: the boundary allows the network already"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, red := whatif.BoundaryBeyond(tc.b, tc.x)
			if diff := cmp.Diff(tc.want, lines); diff != "" || red != tc.redundant {
				t.Errorf("lines (-want +got):\n%s\nredundant %v, want %v", diff, red, tc.redundant)
			}
		})
	}
}

// TestBoundaryReplay: a widening shows the session's own failed calls of
// the built-ins that today's boundary refuses and the widened one allows;
// not another session's, not a call that succeeded, not what it still
// refuses. (The records name the built-ins by internal/builtin's names, so
// the replay's own copy of them cannot drift.)
func TestBoundaryReplay(t *testing.T) {
	if whatif.KindCallFailed != "call-failed" {
		t.Fatalf("KindCallFailed = %q", whatif.KindCallFailed)
	}
	before := restricted(boundary.Entry{Path: "/srv", Access: boundary.Read, Match: boundary.Subtree})
	before.Filesystem, before.Workspace = boundary.WorkspaceWrite, "/work"
	before.Entries = nil
	after := before
	after.Entries = []boundary.Entry{{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree}}
	var recs []api.AuditRecord
	add := func(kind, session, tool, rendered string) {
		b, _ := json.Marshal(map[string]any{"session": session, "rendered": rendered, "kind": "tool_error", "message": "outside"})
		recs = append(recs, api.AuditRecord{Seq: int64(len(recs) + 1), Kind: kind, Agent: "research", Tool: tool, Body: b})
	}
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/a.txt")     // allowed after
	add(whatif.KindCallFailed, "s2", builtin.ToolFSWrite, "--content=x --path=/srv/app/b.txt")     // another session
	add(whatif.KindCallAdmitted, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/c.txt")   // did not fail
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/other.txt")     // still outside
	add(whatif.KindCallFailed, "s1", builtin.ToolFSRead, "--path=/srv/app/d.txt")                  // read allowed today (workspace-write reads everywhere)
	add(whatif.KindCallFailed, "s1", builtin.ToolWebFetch, "--url=https://example.com/")           // the network is not asked for
	add(whatif.KindCallRefused, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/e/.git/x") // protected: never
	add(whatif.KindCallFailed, "s1", "pay", "--path=/srv/app/f")                                   // not a built-in
	r := whatif.NewBoundaryReplay("s1", before, after)
	for _, rec := range recs {
		r.Add(rec)
	}
	n, ex := r.Result()
	var got []string
	for _, e := range ex {
		got = append(got, e.Target)
	}
	if diff := cmp.Diff([]string{"fs_write: write /srv/app/a.txt"}, got); diff != "" || n != 1 {
		t.Errorf("calls %d, examples (-want +got):\n%s", n, diff)
	}
}
