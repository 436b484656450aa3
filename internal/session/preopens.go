package session

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// PreopensFor is the WASI preopened directories a WebAssembly tool gets in a
// session: its policy (config.Tool.FS) intersected with the session's
// boundary. Only a kind whose backend takes preopens (WebAssembly) is
// given any (Gate.Hold). Guest paths are the host paths. See PreopensExplained for the
// rule and for why an entry is left out or made read-only.
func PreopensFor(t config.Tool, b boundary.Boundary) []sandbox.Preopen {
	dirs, _ := PreopensExplained(t, b)
	return dirs
}

// PreopensExplained is PreopensFor with a note for every boundary entry it
// leaves out or narrows (for the call's log). The rule:
//
//   - a tool without fs gets nothing; nor does any tool in an external
//     boundary (someone else's: maiden cannot check it);
//   - only directories: subtree entries, and a workspace-write boundary's
//     workspace. An exact entry names one file or directory and cannot be
//     preopened (a preopen is a whole directory); what a filesystem kind
//     implies beyond them ("/" readable, or everything) is never preopened:
//     a tool gets named directories, never the root;
//   - an entry inside a deny root, or one that contains a deny root, is left
//     out whole: WASI cannot carve a directory out of a preopened one;
//   - an entry is writable only if the entry grants write and the tool's fs
//     is "write", and the boundary has no protected names: a writable
//     preopen could create or write under a directory of a protected name
//     anywhere inside it, which WASI cannot refuse. With protected names,
//     every preopen is read-only (writes then go through fs_write, which
//     checks each path);
//   - an entry that adds nothing to another one (inside it, with no more
//     access) is left out; at most sandbox.MaxPreopens, by path order.
func PreopensExplained(t config.Tool, b boundary.Boundary) ([]sandbox.Preopen, []string) {
	if t.FS == config.FSNone {
		return nil, nil
	}
	var notes []string
	if b.Kind != boundary.Managed && b.Kind != boundary.Bypass {
		return nil, []string{fmt.Sprintf("the session's boundary is %s: no directory is given to the tool", b.Kind)}
	}
	entries := slices.Clone(b.Entries)
	if b.Filesystem == boundary.WorkspaceWrite && b.Workspace != "" {
		entries = append(entries, boundary.Entry{Path: b.Workspace, Access: boundary.Write, Match: boundary.Subtree})
	}
	type dir struct {
		path  string
		write bool
	}
	var dirs []dir
	for _, e := range entries {
		if e.Match != boundary.Subtree {
			notes = append(notes, fmt.Sprintf("%s: an exact entry is not preopened (a preopen is a whole directory; the built-in fs tools reach it)", e.Path))
			continue
		}
		if d, ok := denyConflict(e.Path, b.Deny); ok {
			where := "contains it"
			if pathWithin(d, e.Path) {
				where = "is inside it, and a preopened directory cannot exclude part of itself"
			}
			notes = append(notes, fmt.Sprintf("%s: left out, because deny root %s %s", e.Path, d, where))
			continue
		}
		write := e.Access == boundary.Write && t.FS == config.FSWrite
		if write && len(b.Protected) > 0 {
			write = false
			notes = append(notes, fmt.Sprintf("%s: read-only, because the boundary protects %s and a writable preopen could write under such a name", e.Path, strings.Join(b.Protected, ", ")))
		}
		dirs = append(dirs, dir{e.Path, write})
	}
	// Strongest access per path, then drop what another directory already
	// gives.
	slices.SortFunc(dirs, func(a, b dir) int { return strings.Compare(a.path, b.path) })
	var merged []dir
	for _, d := range dirs {
		if n := len(merged); n > 0 && merged[n-1].path == d.path {
			merged[n-1].write = merged[n-1].write || d.write
			continue
		}
		merged = append(merged, d)
	}
	var out []sandbox.Preopen
	for _, d := range merged {
		redundant := false
		for _, o := range merged {
			if o.path != d.path && pathWithin(d.path, o.path) && (o.write || !d.write) {
				redundant = true
				break
			}
		}
		if redundant {
			continue
		}
		if len(out) == sandbox.MaxPreopens {
			notes = append(notes, fmt.Sprintf("%s: left out, over the %d directories a call may be given", d.path, sandbox.MaxPreopens))
			continue
		}
		out = append(out, sandbox.Preopen{HostPath: d.path, GuestPath: d.path, Write: d.write})
	}
	return out, notes
}

// denyConflict finds a deny root inside p or p inside a deny root.
func denyConflict(p string, deny []string) (string, bool) {
	for _, d := range deny {
		if pathWithin(p, d) || pathWithin(d, p) {
			return d, true
		}
	}
	return "", false
}

// pathWithin: p is root or inside it (both absolute and clean).
func pathWithin(p, root string) bool {
	if root == "/" || p == root {
		return true
	}
	return strings.HasPrefix(p, root) && p[len(root)] == '/'
}

// CardPreopens keeps the directories whose whole subtree the agent's
// cards allow: fs:read DIR/** for each (a grant covering it, such as
// fs:read /srv/** or fs:read /srv/work/**), and fs:write DIR/** for it to
// stay writable. A directory is handed over whole, so a grant of the
// directory alone (fs:read /srv/work) or one level (fs:read /srv/*) is not
// enough, and any exception or prohibition that may reach inside it (a
// lower-negative grant of the allowing card, an upper-negative grant of any
// card) or a ceiling that does not cover the subtree drops it. A nil
// wallet (the implicit agent, which holds every card) keeps them all. The
// effective capability is the tool's policy ∩ the binding ∩ the cards ∩ the
// session's boundary ∩ the component's imports.
//
// It returns the decisions it made too, in the order it asked them (each
// directory's read, then its write when the read was allowed and the
// directory writable): the call's audit record carries them, so that a
// replay of the trail (internal/whatif) asks them again.
func CardPreopens(dirs []sandbox.Preopen, w *cards.Wallet) ([]sandbox.Preopen, []cards.Decision) {
	if w == nil {
		return dirs, nil
	}
	var out []sandbox.Preopen
	var ds []cards.Decision
	for _, d := range dirs {
		r := subtree(w, "read", d.HostPath)
		ds = append(ds, r)
		if !r.Allow {
			continue
		}
		if d.Write {
			wd := subtree(w, "write", d.HostPath)
			ds = append(ds, wd)
			d.Write = wd.Allow
		}
		out = append(out, d)
	}
	return out, ds
}

// subtree is whether w allows fs:verb on everything beneath dir,
// conservatively (decide.AccessTree): a negative grant or a ceiling that
// might touch the subtree counts against it.
func subtree(w *cards.Wallet, verb, dir string) cards.Decision {
	return decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree(verb, dir))
}

// CardWritable holds a wrapped CLI's write_paths to the agent's cards as
// CardPreopens holds a WebAssembly tool's directories (CARDS.md: resource
// grants are separate from tool grants): each path, whether the boundary
// left it writable (writable) or read-only (readOnly), is given to the
// sandbox only if the cards allow fs:read DIR/** (decided as a preopen's:
// decide.AccessTree), and is dropped from it otherwise (Landlock then
// grants nothing beneath it: neither read nor write); a writable one stays
// writable only if they allow fs:write DIR/** too, and is read-only (in
// lost) otherwise. A nil wallet (the implicit agent, which holds every
// card) keeps them all as they are. It returns the decisions too, in the
// order it asked them (each writable path's read, then its write when the
// read was allowed; then each read-only path's read), for the call's audit
// record. The CLI's read_paths are not asked about: they are its runtime
// (binaries, libraries, configuration), which the operator declared.
func CardWritable(writable, readOnly []string, w *cards.Wallet) (keep, lost []string, ds []cards.Decision) {
	if w == nil {
		return writable, readOnly, nil
	}
	for _, p := range writable {
		r := subtree(w, "read", p)
		ds = append(ds, r)
		if !r.Allow {
			continue
		}
		d := subtree(w, "write", p)
		ds = append(ds, d)
		if d.Allow {
			keep = append(keep, p)
		} else {
			lost = append(lost, p)
		}
	}
	for _, p := range readOnly {
		r := subtree(w, "read", p)
		ds = append(ds, r)
		if r.Allow {
			lost = append(lost, p)
		}
	}
	return keep, lost, ds
}

// CLIWritable is what a wrapped CLI call may write (writable), and what it
// may only read (lost), of its write_paths: for an agent with a declared
// boundary, the paths narrowed to what the session's boundary lets it
// write (NarrowWritable; the rest read-only), then, for every declared
// agent, held to its cards (CardWritable: a path it has no fs:read DIR/**
// for is in neither list, so the sandbox gets nothing of it; one without
// fs:write DIR/** is read-only), with the cards' decisions. The session
// is c's (looked up once, kept in c.Sess).
func (g *Gate) CLIWritable(ctx context.Context, c *Call) (writable, lost []string, ds []cards.Decision, terr *api.ToolError, err error) {
	if c.Tool.CLI == nil || len(c.Tool.CLI.WritePaths) == 0 {
		return nil, nil, nil, nil, nil
	}
	writable = c.Tool.CLI.WritePaths
	if a, ok := c.Cfg.Agent(c.Agent); ok && a.BoundaryLine > 0 {
		s, terr, err := g.Session(ctx, c)
		if err != nil || terr != nil {
			return nil, nil, nil, terr, err
		}
		writable, lost = NarrowWritable(writable, s.Boundary)
	}
	writable, lost, ds = CardWritable(writable, lost, c.Wallet)
	return writable, lost, ds, nil, nil
}

// NarrowWritable holds a wrapped CLI's write_paths (its [clis.NAME]
// write_paths) to the session's boundary, for reads as well as writes (a
// path the CLI is given read-only is read by it as fs_read would read it):
//
//   - a path the boundary lets the session write as a whole subtree stays
//     writable;
//   - otherwise, one it lets the session read as a whole subtree is
//     read-only (in lost, for the caller's read-only list); and one it
//     does not is given no access at all;
//   - and, inside a path not writable whole, each of the boundary's subtree
//     entries (and a workspace-write boundary's workspace) that the
//     boundary lets the session write is writable, and one it lets it read
//     is read-only where the path itself is not readable.
//
// Landlock grants subtrees, so "as a whole subtree" means what
// boundary.Allows decides for a subtree need: an entry inside a deny root or
// containing one is neither writable nor readable (the CLI could otherwise
// read what the deny root holds); nor is a path outside every entry of a
// restricted boundary. A boundary with protected names makes nothing
// writable (Landlock cannot refuse writes under a .git inside a writable
// directory; writes go through fs_write, which checks each path). The
// CLI's read paths are its runtime (binaries, libraries, configuration)
// and stay as the operator declared them.
func NarrowWritable(paths []string, b boundary.Boundary) (writable, lost []string) {
	allows := func(p string, a boundary.Access) bool {
		if a == boundary.Write && len(b.Protected) > 0 {
			return false
		}
		return boundary.Allows(b, boundary.Need{Path: p, Access: a, Match: boundary.Subtree})
	}
	entries := b.Entries
	if b.Filesystem == boundary.WorkspaceWrite && b.Workspace != "" {
		entries = append(slices.Clone(entries), boundary.Entry{Path: b.Workspace, Access: boundary.Write, Match: boundary.Subtree})
	}
	add := func(list []string, p string) []string {
		if slices.Contains(list, p) {
			return list
		}
		return append(list, p)
	}
	for _, p := range paths {
		if allows(p, boundary.Write) {
			writable = add(writable, p)
			continue
		}
		readable := allows(p, boundary.Read)
		if readable {
			lost = add(lost, p)
		}
		for _, e := range entries {
			if e.Match != boundary.Subtree || e.Path == p || !pathWithin(e.Path, p) {
				continue
			}
			switch {
			case e.Access == boundary.Write && allows(e.Path, boundary.Write):
				writable = add(writable, e.Path)
			case !readable && allows(e.Path, boundary.Read):
				lost = add(lost, e.Path)
			}
		}
	}
	return writable, lost
}
