package grant

import "strings"

// Glob is a value pattern in which an unescaped '*' matches any run of
// characters (including none). It is kept as the literal pieces between the
// stars, so matching a value allocates nothing: a decision over a large
// wallet matches many globs per call.
type Glob struct {
	parts []string // len 1: a literal; len n: n-1 stars between the pieces
}

// Literal returns the glob that matches exactly s (a '*' in s is literal).
func Literal(s string) Glob { return Glob{parts: []string{s}} }

// IsLiteral reports whether g has no wildcard.
func (g Glob) IsLiteral() bool { return len(g.parts) == 1 }

// Match reports whether g matches s. The middle pieces are found leftmost
// first, which is exact for patterns whose only wildcard is '*'.
func (g Glob) Match(s string) bool {
	if len(g.parts) == 0 {
		return false // the zero Glob matches nothing (deny by default)
	}
	if len(g.parts) == 1 {
		return s == g.parts[0]
	}
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// Covers reports whether every string child matches, g matches too
// (language inclusion). It matches g against child's pattern symbolically: a
// star of child is a symbol that only a star of g can consume. That is sound
// (a true answer is always right); it can say false for a few exotic pairs
// whose inclusion holds, which only makes a derivation stricter.
func (g Glob) Covers(child Glob) bool {
	if len(g.parts) == 0 || len(child.parts) == 0 {
		return len(child.parts) == 0 // the empty language is under everything
	}
	return wildcardMatch(g.tokens(), child.tokens(), false)
}

// String renders g in grant syntax: '*' for each wildcard, and the
// characters that mean something in a grant escaped with '\'.
func (g Glob) String() string { return g.word("") }

// word is String with the characters of extra escaped too (a tool name's
// '@', which would start a component digest).
func (g Glob) word(extra string) string {
	var b strings.Builder
	for i, p := range g.parts {
		if i > 0 {
			b.WriteByte('*')
		}
		b.WriteString(escapeWord(p, extra))
	}
	return wordString(b.String())
}

const star = -1

// tokens spells g as bytes with star for each wildcard.
func (g Glob) tokens() []int {
	var t []int
	for i, p := range g.parts {
		if i > 0 {
			t = append(t, star)
		}
		for j := 0; j < len(p); j++ {
			t = append(t, int(p[j]))
		}
	}
	return t
}

// wildcardMatch is the classic backtracking wildcard matcher over symbols:
// star in p matches any run of s (including stars of s); with one, a p
// symbol of value oneTok matches any single s symbol that is not a star
// (the '*' segment of a path pattern); any other symbol matches itself.
func wildcardMatch(p, s []int, one bool) bool {
	pi, si, starP, starS := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] != star && (p[pi] == s[si] || one && p[pi] == oneTok && s[si] != star):
			pi++
			si++
		case pi < len(p) && p[pi] == star:
			starP, starS = pi, si
			pi++
		case starP >= 0:
			starS++
			pi, si = starP+1, starS
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == star {
		pi++
	}
	return pi == len(p)
}

// oneTok stands for a path pattern's '*' segment in wildcardMatch.
const oneTok = -2
