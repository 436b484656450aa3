// Package boundary is a session's ExecutionBoundary and the requests that widen it, as ../shared/BOUNDARIES.md
// describes them: the boundary value and its canonical JSON, Check (does a needed access pass, and if not, the
// minimal expansion that would make it pass), expansion validation and compaction with the exact reason strings,
// the assessment against explicit deny and protected names, and the request lifecycle as a pure state machine
// over values. It does no I/O and keeps no state: the caller persists boundaries and requests.
package boundary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits of BOUNDARIES.md.
const (
	MaxEntries       = 32       // filesystem entries in one expansion
	MaxPathLen       = 4096     // bytes of one path (≥ its characters, so never laxer)
	MaxExpansionSize = 64 << 10 // the compacted expansion's canonical JSON
	MaxBoundarySize  = 1 << 20  // a whole boundary's canonical JSON
	MaxJustification = 2000     // characters of a trimmed justification
)

// Kind is who governs a boundary.
type Kind string

const (
	Managed  Kind = "managed"  // maiden enforces it and a human can widen it
	Bypass   Kind = "bypass"   // no boundary: every access passes
	External Kind = "external" // someone else's: maiden can neither check nor widen it
)

// FSKind is the filesystem profile's base before entries.
type FSKind string

const (
	// Restricted: only the entries.
	Restricted FSKind = "restricted"
	// WorkspaceWrite: read everywhere, write in the workspace subtree and in /tmp, plus the entries.
	WorkspaceWrite FSKind = "workspace-write"
	// Unrestricted: read and write everywhere.
	Unrestricted FSKind = "unrestricted"
)

// Access is what an entry allows. Write covers read.
type Access string

const (
	Read  Access = "read"
	Write Access = "write"
)

// Match is how far an entry reaches: exact covers the path itself only, subtree everything inside too.
type Match string

const (
	Exact   Match = "exact"
	Subtree Match = "subtree"
)

// Entry is one filesystem entry of a boundary.
type Entry struct {
	Path   string `json:"path"`
	Access Access `json:"access"`
	Match  Match  `json:"match"`
}

// Boundary is an ExecutionBoundary: its kind, revision and profile. Deny paths are subtree roots no entry and no
// expansion can reach; a protected name (such as .git) is a path component under which nothing is writable, whatever
// the entries say. Deny and protected names hold for every filesystem kind.
type Boundary struct {
	Kind       Kind     `json:"kind"`
	Revision   int64    `json:"revision"`
	Filesystem FSKind   `json:"filesystem"`
	Workspace  string   `json:"workspace,omitempty"` // workspace-write only
	Entries    []Entry  `json:"entries"`
	Deny       []string `json:"deny"`
	Protected  []string `json:"protected"`
	Network    bool     `json:"network"`
}

// Validate reports the first thing wrong with b, naming the field.
func (b Boundary) Validate() error {
	switch b.Kind {
	case Managed, Bypass, External:
	default:
		return fmt.Errorf("boundary: kind %q: want managed, bypass or external", b.Kind)
	}
	if b.Revision < 0 {
		return fmt.Errorf("boundary: revision %d is negative", b.Revision)
	}
	switch b.Filesystem {
	case Restricted, Unrestricted:
		if b.Workspace != "" {
			return fmt.Errorf("boundary: workspace %q is only for filesystem workspace-write", b.Workspace)
		}
	case WorkspaceWrite:
		if r := pathReason(b.Workspace); r != "" {
			return fmt.Errorf("boundary: workspace %q: %s", b.Workspace, r)
		}
	default:
		return fmt.Errorf("boundary: filesystem %q: want restricted, workspace-write or unrestricted", b.Filesystem)
	}
	for i, e := range b.Entries {
		if e.Access != Read && e.Access != Write {
			return fmt.Errorf("boundary: entries[%d] (%q): access %q: want read or write (deny paths go in deny)", i, e.Path, e.Access)
		}
		if e.Match != Exact && e.Match != Subtree {
			return fmt.Errorf("boundary: entries[%d] (%q): match %q: want exact or subtree", i, e.Path, e.Match)
		}
		if r := pathReason(e.Path); r != "" {
			return fmt.Errorf("boundary: entries[%d] path %q: %s", i, e.Path, r)
		}
	}
	for i, d := range b.Deny {
		if r := pathReason(d); r != "" {
			return fmt.Errorf("boundary: deny[%d] %q: %s", i, d, r)
		}
	}
	for i, n := range b.Protected {
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || len(n) > 255 {
			return fmt.Errorf("boundary: protected[%d] %q: want one path component (no '/', not '.' or '..', at most 255 bytes)", i, n)
		}
	}
	return nil
}

// Normalize returns b with its entries compacted and sorted, and deny paths and protected names sorted and
// deduplicated; nil lists become empty, so equal boundaries have equal canonical JSON.
func (b Boundary) Normalize() Boundary {
	b.Entries = compact(b.Entries)
	b.Deny = sortedSet(b.Deny)
	b.Protected = sortedSet(b.Protected)
	return b
}

func sortedSet(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Canonical is b's stable JSON for storing a revision: validated, normalised, at most MaxBoundarySize bytes.
func (b Boundary) Canonical() ([]byte, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	out, err := json.Marshal(b.Normalize())
	if err != nil {
		return nil, fmt.Errorf("boundary: encoding: %w", err)
	}
	if len(out) > MaxBoundarySize {
		return nil, fmt.Errorf("boundary: %d bytes of canonical JSON, over the %d-byte cap", len(out), MaxBoundarySize)
	}
	return out, nil
}

// Parse reads a boundary's JSON strictly (unknown keys, trailing data and more than MaxBoundarySize bytes are
// refused) and validates it. Parse(b.Canonical()) gives back b.Normalize().
func Parse(data []byte) (Boundary, error) {
	if len(data) > MaxBoundarySize {
		return Boundary{}, fmt.Errorf("boundary: %d bytes, over the %d-byte cap", len(data), MaxBoundarySize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b Boundary
	if err := dec.Decode(&b); err != nil {
		return Boundary{}, fmt.Errorf("boundary: parsing: %w", err)
	}
	if dec.More() {
		return Boundary{}, fmt.Errorf("boundary: parsing: data after the object")
	}
	if err := b.Validate(); err != nil {
		return Boundary{}, err
	}
	return b.Normalize(), nil
}

// Need is one access a command or tool needs: Network, or a path with an access (and Match: subtree for a
// directory handed over whole, such as a preopened directory; empty means exact).
type Need struct {
	Network bool
	Path    string
	Access  Access
	Match   Match
}

// Check says whether b allows need. When it does not, required is the minimal expansion that would make it pass,
// or nil when no expansion can: the path is denied, the write is under a protected name, a subtree need contains a
// deny root, the path or access is malformed, the path is not UTF-8 (an expansion travels as JSON), or the boundary is not managed (bypass allows everything; external
// is someone else's and maiden cannot widen it). A subtree write need is allowed while protected names inside it
// still hold: whoever hands the directory over must refuse writes under them.
func Check(b Boundary, need Need) (ok bool, required *Expansion) {
	switch b.Kind {
	case Bypass:
		return true, nil
	case Managed:
	default:
		return false, nil
	}
	if need.Network {
		if b.Network {
			return true, nil
		}
		return false, &Expansion{Network: true}
	}
	m := need.Match
	if m == "" {
		m = Exact
	}
	e := Entry{Path: need.Path, Access: need.Access, Match: m}
	// A need's path may be any bytes a file name can hold; only an expansion has to travel as JSON.
	if (e.Access != Read && e.Access != Write) || (m != Exact && m != Subtree) || pathReason(strings.ToValidUTF8(e.Path, "x")) != "" {
		return false, nil
	}
	if conflicts(b, e) {
		return false, nil
	}
	if profileCovers(b, e) {
		return true, nil
	}
	if !utf8.ValidString(e.Path) {
		return false, nil // no expansion can name it
	}
	return false, &Expansion{Entries: []Entry{e}}
}

// Allows is Check without the expansion: whether b allows need now.
func Allows(b Boundary, need Need) bool {
	ok, _ := Check(b, need)
	return ok
}

// implied is what the filesystem kind grants before the entries.
func implied(b Boundary) []Entry {
	switch b.Filesystem {
	case Unrestricted:
		return []Entry{{Path: "/", Access: Write, Match: Subtree}}
	case WorkspaceWrite:
		return []Entry{
			{Path: "/", Access: Read, Match: Subtree},
			{Path: b.Workspace, Access: Write, Match: Subtree},
			{Path: "/tmp", Access: Write, Match: Subtree},
		}
	}
	return nil
}

// profileCovers: an entry of the profile (implied or explicit) covers e.
func profileCovers(b Boundary, e Entry) bool {
	for _, p := range implied(b) {
		if covers(p, e) {
			return true
		}
	}
	for _, p := range b.Entries {
		if covers(p, e) {
			return true
		}
	}
	return false
}

// conflicts is BOUNDARIES.md's explicit-deny rule for one entry: an exact entry inside a deny root, a subtree entry
// that contains or is inside a deny root, or a write with a protected name among its components.
func conflicts(b Boundary, e Entry) bool {
	for _, d := range b.Deny {
		if within(e.Path, d) || (e.Match == Subtree && within(d, e.Path)) {
			return true
		}
	}
	if e.Access == Write {
		for _, c := range strings.Split(e.Path, "/") {
			if slices.Contains(b.Protected, c) {
				return true
			}
		}
	}
	return false
}

// covers: a allows everything e allows. Write covers read; subtree covers itself and everything inside.
func covers(a, e Entry) bool {
	if a.Access == Read && e.Access == Write {
		return false
	}
	if a.Path == e.Path {
		return a.Match == Subtree || e.Match == Exact
	}
	return a.Match == Subtree && within(e.Path, a.Path)
}

// within: p is root or inside it (both absolute and normalised).
func within(p, root string) bool {
	if root == "/" || p == root {
		return true
	}
	return strings.HasPrefix(p, root) && p[len(root)] == '/'
}

// pathReason is "" for an absolute, normalised path, else what is wrong with it (the validation reason).
func pathReason(p string) string {
	// Not UTF-8: JSON cannot carry it unchanged (a decoder replaces the bytes), so the path stored would not be
	// the path checked.
	if p == "" || p[0] != '/' || strings.IndexByte(p, 0) >= 0 || !utf8.ValidString(p) || path.Clean(p) != p {
		return ReasonInvalidPath
	}
	if len(p) > MaxPathLen {
		return ReasonPathTooLong
	}
	return ""
}
