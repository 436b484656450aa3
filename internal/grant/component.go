package grant

import (
	"strconv"
	"strings"
)

// A tool grant may name the component its calls must run: `tool:invoke
// echo@sha256:HEX --message=*` allows echo only while echo's component is
// that digest (issue 25: the provenance chain's digest → card link). The
// call path puts the digest of the component the call will run in the
// target (Target.Component: an oci:// tool's pinned manifest digest, a
// local file's SHA-256); a grant without a digest matches any component,
// one with a digest only a target carrying the same digest, so a call of
// a re-pinned or rebuilt tool, or of a tool whose component is not known
// (a wrapped CLI, an imported or built-in tool), is not covered by it.
// Prohibitions match the same way: a deny naming a digest forbids that
// component only (docs/cards.md, "Grants naming a component").

// digestAlgo is the one digest algorithm a grant may name: the one OCI
// manifests, maiden's compile cache and the audit trail use.
const digestAlgo = "sha256"

// digestHexLen is the length of a SHA-256 digest in hex.
const digestHexLen = 64

// parseComponent reads the digest after a tool name's '@' (w.b[at+1:]),
// normalised to "sha256:" and 64 lower-case hex digits. Anything else is
// refused, naming what was expected: a digest is compared, never matched
// as a pattern, so neither escapes nor '*' belong in it.
func parseComponent(s string, w word, at int) (string, error) {
	b, esc, off := w.b[at+1:], w.esc[at+1:], w.off[at+1:]
	pos := func(i int) int {
		if i < len(off) {
			return off[i]
		}
		return w.off[len(w.off)-1] + 1
	}
	for i, e := range esc {
		if e {
			return "", &ParseError{Input: s, Pos: pos(i), Expected: "a component digest without escapes (sha256:HEX)", Found: "'\\'"}
		}
	}
	text := asciiLower(b) // byte for byte: offsets into b stay offsets into text
	algo, hex, ok := strings.Cut(text, ":")
	switch {
	case text == "":
		return "", &ParseError{Input: s, Pos: pos(0), Expected: "a component digest after '@' (sha256: and 64 hex digits)", Found: describe(s[min(pos(0), len(s)):])}
	case !ok:
		return "", &ParseError{Input: s, Pos: pos(0), Expected: "a component digest sha256:HEX after '@' (write \\@ for a literal '@' in a name)", Found: strconv.Quote(string(b))}
	case algo != digestAlgo:
		return "", &ParseError{Input: s, Pos: pos(0), Expected: "a sha256: digest (the only algorithm a grant may name)", Found: strconv.Quote(string(b[:len(algo)]))}
	}
	start := len(algo) + 1
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", &ParseError{Input: s, Pos: pos(start + i), Expected: "a hex digit (0-9, a-f) of the sha256 digest", Found: describe(string(b[start+i:]))}
		}
	}
	if len(hex) != digestHexLen {
		return "", &ParseError{Input: s, Pos: pos(start), Expected: "64 hex digits after sha256: (the whole digest)", Found: strconv.Itoa(len(hex)) + " hex digits"}
	}
	return digestAlgo + ":" + hex, nil
}

func asciiLower(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// unescapedAt is the index of the first unescaped '@' in w, or -1.
func unescapedAt(w word) int {
	for i, c := range w.b {
		if c == '@' && !w.esc[i] {
			return i
		}
	}
	return -1
}

// ValidComponent reports whether d is a component digest as targets carry
// it: "sha256:" and 64 lower-case hex digits.
func ValidComponent(d string) bool {
	hex, ok := strings.CutPrefix(d, digestAlgo+":")
	if !ok || len(hex) != digestHexLen {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// sameComponent compares two digests in constant time (STYLE 15: a
// digest is compared like a secret, so the time taken says nothing of how
// much of it matched). It allocates nothing: a wallet compares it per
// grant on every call.
func sameComponent(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

// Component is the digest the calls tool grant g allows must run
// ("sha256:HEX"), or "" when g allows any component.
func (g Grant) Component() string { return g.component }

// AllowsOtherComponent reports whether g names a component and allows t
// in every respect but that: t's component is another one, or not known.
// A denial uses it to say that the tool's component changed rather than
// that nothing allows the call.
func (g *Grant) AllowsOtherComponent(t *Target) bool {
	if g.component == "" || sameComponent(g.component, t.Component) {
		return false
	}
	u := *t
	u.Component = g.component
	return g.AllowsRef(&u)
}

// PinnedString is t as String writes it, with its component after the
// tool's name when it has one: the grant that allows exactly t and only
// while its tool runs the same component.
func (t Target) PinnedString() string {
	s := t.String()
	if t.Component == "" || (t.Class != Tool && t.Class != Approve) {
		return s
	}
	head := string(t.Class) + ":" + t.Verb + " " + t.nameWord()
	return head + "@" + t.Component + s[len(head):]
}
