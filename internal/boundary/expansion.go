package boundary

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// The validation reasons of BOUNDARIES.md, exactly.
const (
	ReasonInvalidExpansion = "invalid_expansion"
	ReasonTooManyEntries   = "too_many_entries"
	ReasonInvalidEntry     = "invalid_entry"
	ReasonInvalidPath      = "invalid_path"
	ReasonPathTooLong      = "path_too_long"
	ReasonEmptyExpansion   = "empty_expansion"
	ReasonPayloadTooLarge  = "payload_too_large"
)

// Expansion is what a session asks for: filesystem entries (access read or write, never deny) and/or network.
// Its JSON is {"filesystem":{"entries":[{"path","access","scope"}]},"network":{"enabled":true}}, each part present
// only when asked for; an entry's Match is its "scope".
type Expansion struct {
	Entries []Entry
	Network bool
}

type wireEntry struct {
	Path   string `json:"path"`
	Access Access `json:"access"`
	Scope  Match  `json:"scope"`
}

type wireFS struct {
	Entries []wireEntry `json:"entries"`
}

type wireNet struct {
	Enabled bool `json:"enabled"`
}

type wireExpansion struct {
	Filesystem *wireFS  `json:"filesystem,omitempty"`
	Network    *wireNet `json:"network,omitempty"`
}

// MarshalJSON writes the expansion's canonical form (entries in the order held: Validate's result is compacted
// and sorted).
func (x Expansion) MarshalJSON() ([]byte, error) {
	var w wireExpansion
	if len(x.Entries) > 0 {
		w.Filesystem = &wireFS{Entries: make([]wireEntry, len(x.Entries))}
		for i, e := range x.Entries {
			w.Filesystem.Entries[i] = wireEntry{Path: e.Path, Access: e.Access, Scope: e.Match}
		}
	}
	if x.Network {
		w.Network = &wireNet{Enabled: true}
	}
	return json.Marshal(w)
}

// UnmarshalJSON accepts only what Validate accepts, so a stored expansion never holds what a request could not.
func (x *Expansion) UnmarshalJSON(data []byte) error {
	v, err := Validate(data)
	if err != nil {
		return err
	}
	*x = v
	return nil
}

// ValidationError is a refused expansion: Reason is one of the Reason* strings.
type ValidationError struct {
	Reason string
	Detail string // what and where, for people; the Reason is what programs match
}

func (e *ValidationError) Error() string {
	if e.Detail == "" {
		return "boundary expansion: " + e.Reason
	}
	return "boundary expansion: " + e.Reason + ": " + e.Detail
}

func refuse(reason, detail string) (Expansion, error) {
	return Expansion{}, &ValidationError{Reason: reason, Detail: detail}
}

// Validate checks an expansion's JSON in BOUNDARIES.md's order (the first failure is the result) and returns it
// compacted: sorted, and without the entries another entry of the request covers.
func Validate(data []byte) (Expansion, error) {
	if len(data) > MaxBoundarySize {
		// Far beyond anything valid (64 KiB compacted); refused before parsing.
		return refuse(ReasonPayloadTooLarge, "input over 1 MiB")
	}
	// 1. Unknown keys anywhere outside entries; the shape of the containers.
	top, ok := object(data)
	if !ok {
		return refuse(ReasonInvalidExpansion, "not a JSON object with distinct keys")
	}
	var rawEntries []json.RawMessage
	var rawNet map[string]json.RawMessage
	netNotObject := false
	for k, v := range top {
		switch k {
		case "filesystem":
			fs, ok := object(v)
			if !ok {
				return refuse(ReasonInvalidExpansion, "filesystem is not an object with distinct keys")
			}
			for fk, fv := range fs {
				if fk != "entries" {
					return refuse(ReasonInvalidExpansion, "unknown key filesystem."+fk)
				}
				if err := json.Unmarshal(fv, &rawEntries); err != nil || rawEntries == nil {
					return refuse(ReasonInvalidExpansion, "filesystem.entries is not an array")
				}
			}
		case "network":
			n, ok := object(v)
			if !ok {
				if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '{' {
					return refuse(ReasonInvalidExpansion, "network is not an object with distinct keys")
				}
				// Not an object (true, null, a string): it has no key
				// to be unknown, so it is step 6's "network other
				// than {enabled: true}", after the count and the
				// entries.
				netNotObject = true
				continue
			}
			for nk := range n {
				if nk != "enabled" {
					return refuse(ReasonInvalidExpansion, "unknown key network."+nk)
				}
			}
			rawNet = n
		default:
			return refuse(ReasonInvalidExpansion, "unknown key "+k)
		}
	}
	// 2. Count before looking at any entry.
	if len(rawEntries) > MaxEntries {
		return refuse(ReasonTooManyEntries, itoa(len(rawEntries))+" entries, at most 32")
	}
	// 3. Each entry's keys and values.
	entries := make([]Entry, len(rawEntries))
	for i, re := range rawEntries {
		m, ok := object(re)
		if !ok || len(m) != 3 {
			return refuse(ReasonInvalidEntry, "entries["+itoa(i)+"]: want an object of path, access and scope")
		}
		var e wireEntry
		dec := json.NewDecoder(bytes.NewReader(re))
		dec.DisallowUnknownFields()
		if dec.Decode(&e) != nil || !isString(m["path"]) || !isString(m["access"]) || !isString(m["scope"]) {
			return refuse(ReasonInvalidEntry, "entries["+itoa(i)+"]: want string path, access and scope and no other key")
		}
		if e.Access != Read && e.Access != Write {
			return refuse(ReasonInvalidEntry, "entries["+itoa(i)+"]: access "+quote(string(e.Access))+": want read or write")
		}
		if e.Scope != Exact && e.Scope != Subtree {
			return refuse(ReasonInvalidEntry, "entries["+itoa(i)+"]: scope "+quote(string(e.Scope))+": want exact or subtree")
		}
		entries[i] = Entry{Path: e.Path, Access: e.Access, Match: e.Scope}
	}
	// 4, 5. Paths: absolute and normalised, then length.
	for _, want := range []string{ReasonInvalidPath, ReasonPathTooLong} {
		for i, e := range entries {
			if pathReason(e.Path) == want {
				return refuse(want, "entries["+itoa(i)+"].path")
			}
		}
	}
	// 6. network is {enabled: true} or absent.
	x := Expansion{}
	if netNotObject {
		return refuse(ReasonInvalidExpansion, "network: want {\"enabled\": true}")
	}
	if rawNet != nil {
		if len(rawNet) != 1 || string(bytes.TrimSpace(rawNet["enabled"])) != "true" {
			return refuse(ReasonInvalidExpansion, "network: want {\"enabled\": true}")
		}
		x.Network = true
	}
	// 7. Something asked for.
	if len(entries) == 0 && !x.Network {
		return refuse(ReasonEmptyExpansion, "")
	}
	// 8. Compact.
	x.Entries = compact(entries)
	// 9. The compacted expansion's size.
	out, _ := json.Marshal(x)
	if len(out) > MaxExpansionSize {
		return refuse(ReasonPayloadTooLarge, itoa(len(out))+" bytes compacted, at most 65536")
	}
	return x, nil
}

// Compact sorts entries and drops those another entry covers (write covers read; subtree covers inside;
// duplicates keep one). The result is a new slice.
func Compact(entries []Entry) []Entry { return compact(entries) }

func compact(entries []Entry) []Entry {
	s := slices.Clone(entries)
	slices.SortFunc(s, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Access, b.Access), cmp.Compare(a.Match, b.Match))
	})
	s = slices.Compact(s)
	set := make(map[Entry]bool, len(s))
	for _, e := range s {
		set[e] = true
	}
	// An entry is covered by another at its own path or by a subtree entry at a proper ancestor: a map lookup per
	// ancestor instead of comparing every pair (a boundary may hold thousands of entries).
	coveredElsewhere := func(e Entry) bool {
		for _, a := range []Access{Read, Write} {
			for _, m := range []Match{Exact, Subtree} {
				o := Entry{Path: e.Path, Access: a, Match: m}
				if o != e && set[o] && covers(o, e) {
					return true
				}
			}
		}
		if e.Path == "" || e.Path[0] != '/' {
			return false // not a path Validate accepts: kept, never a reason to drop another
		}
		for p := e.Path; p != "/"; {
			i := strings.LastIndexByte(p, '/')
			if i == 0 {
				p = "/"
			} else {
				p = p[:i]
			}
			if set[Entry{Path: p, Access: Write, Match: Subtree}] ||
				(e.Access == Read && set[Entry{Path: p, Access: Read, Match: Subtree}]) {
				return true
			}
		}
		return false
	}
	out := make([]Entry, 0, len(s))
	for _, e := range s {
		if !coveredElsewhere(e) {
			out = append(out, e)
		}
	}
	return out
}

// object decodes a JSON object into its members, refusing duplicate keys (two parsers must never read one
// request two ways) and trailing data.
func object(data []byte) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, false
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, ok := t.(string)
		if !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		m[k] = v
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // data after the object
	}
	return m, true
}

func isString(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '"'
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
