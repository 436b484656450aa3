package whatif_test

import (
	"encoding/json"
	"slices"
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
// the built-ins that the boundary they ran under refused, that today's
// boundary refuses too and the widened one allows; not another session's,
// not a call that succeeded, not what it still refuses, not a call
// today's boundary allows already (widened since it ran), and a call
// whose record names no revision of its boundary (or one the history does
// not hold) is counted as not replayable, never as refused. (The records
// name the built-ins by internal/builtin's names, so the replay's own copy
// of them cannot drift.)
func TestBoundaryReplay(t *testing.T) {
	if whatif.KindCallFailed != "call-failed" {
		t.Fatalf("KindCallFailed = %q", whatif.KindCallFailed)
	}
	// Revision 1: a workspace, nothing more. Revision 2 (today): also
	// write under /srv/old. After: also write under /srv/app.
	rev1 := restricted()
	rev1.Filesystem, rev1.Workspace, rev1.Entries, rev1.Revision = boundary.WorkspaceWrite, "/work", nil, 1
	now := rev1
	now.Revision = 2
	now.Entries = []boundary.Entry{{Path: "/srv/old", Access: boundary.Write, Match: boundary.Subtree}}
	after := now
	after.Entries = append(slices.Clone(now.Entries), boundary.Entry{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree})
	revs := map[int64]boundary.Boundary{1: rev1, 2: now}
	var recs []api.AuditRecord
	add := func(kind, session, tool, rendered string, rev any) {
		body := map[string]any{"session": session, "rendered": rendered, "kind": "tool_error", "message": "outside"}
		if rev != nil {
			body["boundary_revision"] = rev
		}
		b, _ := json.Marshal(body)
		recs = append(recs, api.AuditRecord{Seq: int64(len(recs) + 1), Kind: kind, Agent: "research", Tool: tool, Body: b})
	}
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/a.txt", 1)     // allowed after
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/g.txt", 2)     // allowed after
	add(whatif.KindCallFailed, "s2", builtin.ToolFSWrite, "--content=x --path=/srv/app/b.txt", 1)     // another session
	add(whatif.KindCallAdmitted, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/c.txt", 1)   // did not fail
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/other.txt", 1)     // still outside
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/old/h.txt", 1)     // allowed today already
	add(whatif.KindCallFailed, "s1", builtin.ToolFSRead, "--path=/srv/app/d.txt", 1)                  // read allowed then (workspace-write reads everywhere)
	add(whatif.KindCallFailed, "s1", builtin.ToolWebFetch, "--url=https://example.com/", 1)           // the network is not asked for
	add(whatif.KindCallRefused, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/e/.git/x", 1) // protected: never
	add(whatif.KindCallFailed, "s1", "pay", "--path=/srv/app/f", nil)                                 // not a built-in
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/i.txt", nil)   // no revision: not replayable
	add(whatif.KindCallFailed, "s1", builtin.ToolFSWrite, "--content=x --path=/srv/app/j.txt", 7)     // unknown revision: not replayable
	r := whatif.NewBoundaryReplay("s1", revs, now, after)
	for _, rec := range recs {
		r.Add(rec)
	}
	n, ex, unknown := r.Result()
	var got []string
	for _, e := range ex {
		got = append(got, e.Target)
	}
	if diff := cmp.Diff([]string{"fs_write: write /srv/app/a.txt", "fs_write: write /srv/app/g.txt"}, got); diff != "" || n != 2 || unknown != 2 {
		t.Errorf("calls %d, not replayable %d (want 2, 2), examples (-want +got):\n%s", n, unknown, diff)
	}
}

// TestBoundaryReplayShadowedBuiltin: a record whose tool_kind is not the
// built-in's (a [tools], [clis] or [mcp] entry named fs_write, which
// shadows the built-in) is passed over, refused or failed; the built-in's
// own record (tool_kind builtin, or none in a refused record made before
// refused records named it) is replayed.
func TestBoundaryReplayShadowedBuiltin(t *testing.T) {
	b := restricted()
	b.Revision = 0
	after := b
	after.Entries = []boundary.Entry{{Path: "/srv/app", Access: boundary.Write, Match: boundary.Subtree}}
	r := whatif.NewBoundaryReplay("s1", map[int64]boundary.Boundary{0: b}, b, after)
	for i, c := range []struct{ record, kind, path string }{
		{whatif.KindCallFailed, "wasm", "/srv/app/a"},
		{whatif.KindCallRefused, "cli", "/srv/app/b"},
		{whatif.KindCallFailed, "mcp", "/srv/app/c"},
		{whatif.KindCallFailed, "builtin", "/srv/app/d"},
		{whatif.KindCallRefused, "", "/srv/app/e"},
	} {
		body, _ := json.Marshal(map[string]any{"session": "s1", "rendered": "--content=x --path=" + c.path, "boundary_revision": 0, "tool_kind": c.kind})
		r.Add(api.AuditRecord{Seq: int64(i + 1), Kind: c.record, Agent: "coder", Tool: builtin.ToolFSWrite, Body: body})
	}
	n, ex, unknown := r.Result()
	var got []string
	for _, e := range ex {
		got = append(got, e.Target)
	}
	if diff := cmp.Diff([]string{"fs_write: write /srv/app/d", "fs_write: write /srv/app/e"}, got); diff != "" || n != 2 || unknown != 0 {
		t.Errorf("calls %d, not replayable %d (want 2, 0), examples (-want +got):\n%s", n, unknown, diff)
	}
}
