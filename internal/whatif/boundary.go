package whatif

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/grant"
)

// This file is "what would newly be possible" for a session's request to
// widen its sandbox boundary: what the expansion adds to the boundary, in
// words, and the session's recorded calls of the built-ins the boundary
// refused that the widened boundary would have let run.

// The built-ins whose calls a boundary decides, by name (internal/builtin's;
// a test keeps them equal), and what each needs.
const (
	toolFSRead   = "fs_read"
	toolFSWrite  = "fs_write"
	toolFSList   = "fs_list"
	toolWebFetch = "web_fetch"
)

// toolKindBuiltin is the tool_kind of a built-in's call record
// (internal/pipeline's toolKind).
const toolKindBuiltin = "builtin"

// fileTool reports whether tool is a file built-in, whose path a call's
// fs decision is (not a directory it was handed).
func fileTool(tool string) bool {
	return tool == toolFSRead || tool == toolFSWrite || tool == toolFSList
}

// BoundaryBeyond says in words what expansion x adds to boundary b, one
// line per entry (and one for the network): "write under /srv/app/**
// (today read only)", or "nothing new: ..." for what b allows already;
// redundant when nothing is new.
func BoundaryBeyond(b boundary.Boundary, x boundary.Expansion) (lines []string, redundant bool) {
	redundant = true
	for _, e := range x.Entries {
		where := e.Path
		if e.Match == boundary.Subtree {
			where = "under " + strings.TrimSuffix(e.Path, "/") + "/**"
		}
		what := string(e.Access) + " " + where
		need := boundary.Need{Path: e.Path, Access: e.Access, Match: e.Match}
		if boundary.Allows(b, need) {
			lines = append(lines, "nothing new: the boundary allows "+what+" already")
			continue
		}
		redundant = false
		today := "today nothing there"
		if e.Access == boundary.Write && boundary.Allows(b, boundary.Need{Path: e.Path, Access: boundary.Read, Match: e.Match}) {
			today = "today read only"
		} else if e.Match == boundary.Subtree && boundary.Allows(b, boundary.Need{Path: e.Path, Access: e.Access}) {
			today = "today only " + e.Path + " itself"
		}
		lines = append(lines, what+" ("+today+")")
	}
	if x.Network {
		if b.Network {
			lines = append(lines, "nothing new: the boundary allows the network already")
		} else {
			redundant = false
			lines = append(lines, "the network, as far as the agent's cards and agent.toml allow (today no network)")
		}
	}
	return lines, redundant
}

// BoundaryReplay finds a session's recorded calls of the built-ins that
// failed or were refused by the boundary in force when they ran (the
// revision each record names), that the session's boundary today does not
// allow either and the widened boundary would: build it with
// NewBoundaryReplay, feed it the trail's records with Add, read Result.
// A record of such a call that names no revision (made before calls
// recorded it), or a revision the session's history does not hold, is
// counted as not replayable, never taken as refused or allowed.
type BoundaryReplay struct {
	session    string
	revisions  map[int64]boundary.Boundary
	now, after boundary.Boundary
	calls      int
	examples   []api.WhatIfExample
	unknown    int
}

// NewBoundaryReplay replays session's records: each against the revision
// of its boundary it ran under (revisions: every revision of the
// session's boundary by number), today's boundary now and the widened one
// after.
func NewBoundaryReplay(session string, revisions map[int64]boundary.Boundary, now, after boundary.Boundary) *BoundaryReplay {
	return &BoundaryReplay{session: session, revisions: revisions, now: now, after: after}
}

// NotReplayable is the reason a call of a session is counted in
// BoundaryReplay's third result.
const NotReplayable = "not replayable: the call's record names no revision of the boundary it ran under (recorded before maiden recorded it), or one the session's history does not hold"

// Add replays one record (others than the session's failed or refused
// calls of the built-ins are passed over).
func (r *BoundaryReplay) Add(rec api.AuditRecord) {
	if rec.Kind != KindCallRefused && rec.Kind != KindCallFailed {
		return
	}
	switch rec.Tool {
	case toolFSRead, toolFSList, toolFSWrite, toolWebFetch:
	default:
		return
	}
	var b struct {
		Session  string `json:"session"`
		Rendered string `json:"rendered"`
		Revision *int64 `json:"boundary_revision"`
		ToolKind string `json:"tool_kind"`
	}
	// A [tools], [clis] or [mcp] entry of a built-in's name shadows the
	// built-in (its record names its kind): its calls are not the
	// built-in's, whatever their arguments say.
	if json.Unmarshal(rec.Body, &b) != nil || b.Session != r.session || b.ToolKind != "" && b.ToolKind != toolKindBuiltin {
		return
	}
	var then boundary.Boundary
	ok := b.Revision != nil
	if ok {
		then, ok = r.revisions[*b.Revision]
	}
	if !ok {
		r.unknown++
		return
	}
	need, what, ok := builtinNeed(rec.Tool, b.Rendered, then)
	// Refused by the boundary it ran under, still refused today, allowed
	// by the widened one.
	if !ok || boundary.Allows(then, need) || boundary.Allows(r.now, need) || !boundary.Allows(r.after, need) {
		return
	}
	r.calls++
	if len(r.examples) < api.MaxNewlyExamples {
		refused := api.Decision{Rule: "boundary", Reason: fmt.Sprintf("outside the session's boundary (revision %d)", then.Revision), Target: what}
		r.examples = append(r.examples, api.WhatIfExample{Seq: rec.Seq, At: rec.At, Agent: rec.Agent, Tool: rec.Tool, Record: rec.Kind, Target: what,
			Recorded: refused, Before: refused, After: api.Decision{Allow: true, Rule: "boundary", Target: what}})
	}
}

// Result is how many calls the widening would have let run, the first of
// them, and how many of the session's refused or failed built-in calls
// could not be replayed (NotReplayable).
func (r *BoundaryReplay) Result() (int, []api.WhatIfExample, int) {
	return r.calls, r.examples, r.unknown
}

// KindCallFailed is the audit kind of a call that failed after it was
// admitted (internal/callaudit's).
const KindCallFailed = "call-failed"

// builtinNeed is what a built-in's call with that rendering needed of the
// boundary b (a relative path taken in b's workspace, as the built-in
// takes it), and the need in words.
func builtinNeed(tool, rendered string, b boundary.Boundary) (boundary.Need, string, bool) {
	switch tool {
	case toolWebFetch:
		return boundary.Need{Network: true}, "web_fetch: the network", true
	case toolFSRead, toolFSList, toolFSWrite:
	default:
		return boundary.Need{}, "", false
	}
	c, err := grant.ParseRendering(rendered)
	if err != nil {
		return boundary.Need{}, "", false
	}
	p := ""
	for _, a := range c.Args {
		if a.Name == "path" && a.Form == grant.FormValue {
			p = a.Value
		}
	}
	if p == "" {
		return boundary.Need{}, "", false
	}
	if !strings.HasPrefix(p, "/") {
		if b.Filesystem != boundary.WorkspaceWrite || b.Workspace == "" || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
			return boundary.Need{}, "", false
		}
		p = path.Join(b.Workspace, p)
	}
	if path.Clean(p) != p {
		return boundary.Need{}, "", false
	}
	acc := boundary.Read
	if tool == toolFSWrite {
		acc = boundary.Write
	}
	return boundary.Need{Path: p, Access: acc}, tool + ": " + string(acc) + " " + p, true
}
