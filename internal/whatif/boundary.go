package whatif

import (
	"encoding/json"
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
// failed or were refused, that its boundary today does not allow and the
// widened boundary would: build it with NewBoundaryReplay, feed it the
// trail's records with Add, read Result.
type BoundaryReplay struct {
	session       string
	before, after boundary.Boundary
	calls         int
	examples      []api.WhatIfExample
}

// NewBoundaryReplay replays session's records on its boundary before and
// after a widening.
func NewBoundaryReplay(session string, before, after boundary.Boundary) *BoundaryReplay {
	return &BoundaryReplay{session: session, before: before, after: after}
}

// Add replays one record (others than the session's failed or refused
// calls of the built-ins are passed over).
func (r *BoundaryReplay) Add(rec api.AuditRecord) {
	if rec.Kind != KindCallRefused && rec.Kind != KindCallFailed {
		return
	}
	var b struct {
		Session  string `json:"session"`
		Rendered string `json:"rendered"`
	}
	if json.Unmarshal(rec.Body, &b) != nil || b.Session != r.session {
		return
	}
	need, what, ok := builtinNeed(rec.Tool, b.Rendered, r.before)
	if !ok || boundary.Allows(r.before, need) || !boundary.Allows(r.after, need) {
		return
	}
	r.calls++
	if len(r.examples) < api.MaxNewlyExamples {
		r.examples = append(r.examples, api.WhatIfExample{Seq: rec.Seq, At: rec.At, Agent: rec.Agent, Tool: rec.Tool, Record: rec.Kind, Target: what,
			Recorded: api.Decision{Rule: "boundary", Reason: "outside the session's boundary"},
			Before:   api.Decision{Rule: "boundary", Reason: "outside the session's boundary", Target: what},
			After:    api.Decision{Allow: true, Rule: "boundary", Target: what}})
	}
}

// Result is how many calls the widening would have let run, and the first
// of them.
func (r *BoundaryReplay) Result() (int, []api.WhatIfExample) { return r.calls, r.examples }

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
