package maiden

import (
	"fmt"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// preopensFor is the WASI preopened directories a WebAssembly tool gets in a
// session: its policy (config.Tool.FS) intersected with the session's
// boundary. Only a kind whose backend takes preopens (WebAssembly) is
// given any (sessionGate). Guest paths are the host paths. See preopensExplained for the
// rule and for why an entry is left out or made read-only.
func preopensFor(t config.Tool, b boundary.Boundary) []sandbox.Preopen {
	dirs, _ := preopensExplained(t, b)
	return dirs
}

// preopensExplained is preopensFor with a note for every boundary entry it
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
func preopensExplained(t config.Tool, b boundary.Boundary) ([]sandbox.Preopen, []string) {
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
