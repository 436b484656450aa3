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
//
// A wildcard never matches into a ".." path segment (".." between '/' or
// the value's ends): a value with one matches only where the pattern spells
// that segment's two dots itself, so "docs/*" does not match
// "docs/../secret" (a program resolving it leaves docs/) while
// "docs/../*" does, and "HEAD..main" (no such segment) is matched as
// before. A "." segment names the same directory, so it is not refused.
func (g Glob) Match(s string) bool {
	if len(g.parts) == 0 {
		return false // the zero Glob matches nothing (deny by default)
	}
	if len(g.parts) == 1 {
		return s == g.parts[0]
	}
	if hasDotDotSegment(s) {
		return g.matchAroundDotDot(s)
	}
	return plainMatch(g.parts[0], g.parts[1:len(g.parts)-1], g.parts[len(g.parts)-1], s)
}

// plainMatch reports whether first, the pieces of mid and last, with a
// wildcard between each two, match all of s: first and last anchored, the
// pieces between found leftmost first (exact with '*' the only wildcard).
func plainMatch(first string, mid []string, last, s string) bool {
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range mid {
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
//
// Match's ".." rule holds here too: a ".." segment in a value child
// matches is spelt by child's own dots (child's wildcards cannot make one),
// so g covers child only if g spells those dots too.
func (g Glob) Covers(child Glob) bool {
	if len(g.parts) == 0 || len(child.parts) == 0 {
		return len(child.parts) == 0 // the empty language is under everything
	}
	p, c := g.tokens(), child.tokens()
	if guard := dotDotTokens(c); guard != nil {
		return guardedMatch(p, c, guard)
	}
	return wildcardMatch(p, c, false)
}

// hasDotDotSegment reports whether s has a path segment "..".
func hasDotDotSegment(s string) bool { return nextDotDot(s, 0) >= 0 }

// matchAroundDotDot is Match for a value with a ".." segment. No wildcard
// may match a dot of such a segment, nor sit (matching nothing) between
// its two dots, so the two dots of each segment are matched by two
// adjacent dots the pattern spells, and the value between two segments by
// the pattern between those spellings, as Match matches any value. The
// search is over which spelling each segment's dots are: a pattern spells
// ".." a few times at most, so it is linear in the value (an agent's, up
// to the input limit, matched against every glob of a wallet), where the
// exact table over pattern × value (guardedMatch) cost ~25 ms a glob for
// a 1 MiB value. A pattern with more than maxDotDotSpellings of them (one
// no grant needs) takes the table.
func (g Glob) matchAroundDotDot(s string) bool {
	var spelt [][2]int // where the pattern spells "..": part, offset
	for a, p := range g.parts {
		for o := 0; o+1 < len(p); o++ {
			if p[o] == '.' && p[o+1] == '.' {
				spelt = append(spelt, [2]int{a, o})
			}
		}
	}
	if len(spelt) == 0 {
		return false
	}
	end := [2]int{len(g.parts) - 1, len(g.parts[len(g.parts)-1])}
	if len(spelt) > maxDotDotSpellings {
		if !g.span([2]int{}, end, s) {
			return false // the table only refuses more
		}
		v := make([]int, len(s))
		guard := make([]bool, len(s))
		for i := range len(s) {
			v[i] = int(s[i])
			if isDotDotAt(s, i) {
				guard[i], guard[i+1] = true, true
			}
		}
		return guardedMatch(g.tokens(), v, guard)
	}
	// at[x]: the segments so far can end with the last one's dots matched
	// by the spelling spelt[x]. The segments are found as the search goes
	// (nothing is kept per segment).
	at, next := make([]bool, len(spelt)), make([]bool, len(spelt))
	seg := nextDotDot(s, 0) // hasDotDotSegment: there is one
	for x, o := range spelt {
		at[x] = g.span([2]int{}, o, s[:seg])
	}
	for {
		after := nextDotDot(s, seg+2)
		if after < 0 {
			break
		}
		between := s[seg+2 : after]
		clear(next)
		moved := false
		for x, o := range spelt {
			if !at[x] {
				continue
			}
			from := [2]int{o[0], o[1] + 2}
			for y := x + 1; y < len(spelt); y++ {
				if to := spelt[y]; !next[y] && (to[0] > from[0] || to[1] >= from[1]) && g.span(from, to, between) {
					next[y], moved = true, true
				}
			}
		}
		if !moved {
			return false
		}
		at, next, seg = next, at, after
	}
	rest := s[seg+2:]
	for x, o := range spelt {
		if at[x] && g.span([2]int{o[0], o[1] + 2}, end, rest) {
			return true
		}
	}
	return false
}

// span reports whether the pattern from one place to another (part,
// offset; the parts between joined by wildcards) matches all of v.
func (g Glob) span(from, to [2]int, v string) bool {
	if from[0] == to[0] {
		return v == g.parts[from[0]][from[1]:to[1]]
	}
	return plainMatch(g.parts[from[0]][from[1]:], g.parts[from[0]+1:to[0]], g.parts[to[0]][:to[1]], v)
}

// isDotDotAt reports whether a ".." segment of s starts at i.
func isDotDotAt(s string, i int) bool {
	return i+1 < len(s) && s[i] == '.' && s[i+1] == '.' && (i == 0 || s[i-1] == '/') && (i+2 == len(s) || s[i+2] == '/')
}

// nextDotDot is where the first ".." segment of s at or after from
// starts, or -1.
func nextDotDot(s string, from int) int {
	for from < len(s) {
		i := strings.Index(s[from:], "..")
		if i < 0 {
			return -1
		}
		if isDotDotAt(s, from+i) {
			return from + i
		}
		from += i + 1
	}
	return -1
}

// maxDotDotSpellings bounds matchAroundDotDot's search (its work grows
// with the square of the spellings).
const maxDotDotSpellings = 8

// dotDotTokens marks the symbols of a pattern (tokens) that can be the dots
// of a ".." segment in a value it matches: two literal dots with a '/', an
// end or a wildcard on each side. It is nil when there are none.
func dotDotTokens(t []int) []bool {
	var guard []bool
	edge := func(i int) bool { return i < 0 || i >= len(t) || t[i] == '/' || t[i] == star }
	for i := 0; i+1 < len(t); i++ {
		if t[i] == '.' && t[i+1] == '.' && edge(i-1) && edge(i+2) {
			if guard == nil {
				guard = make([]bool, len(t))
			}
			guard[i], guard[i+1] = true, true
		}
	}
	return guard
}

// guardedMatch reports whether pattern p matches the symbols s (a star in
// p matches any run of s, stars of s included; any other symbol itself)
// where no star of p matches a guarded symbol of s or matches nothing
// between two guarded ones. It is exact (a table over p × s), for the rare
// values and patterns that have a ".." segment.
func guardedMatch(p, s []int, guard []bool) bool {
	// prev[j]: p[:i] matches s[:j]; cur: p[:i+1].
	prev, cur := make([]bool, len(s)+1), make([]bool, len(s)+1)
	prev[0] = true
	for i := range p {
		for j := 0; j <= len(s); j++ {
			if p[i] == star {
				between := j > 0 && j < len(s) && guard[j-1] && guard[j]
				cur[j] = prev[j] && !between || j > 0 && cur[j-1] && !guard[j-1]
			} else {
				cur[j] = j > 0 && prev[j-1] && s[j-1] != star && p[i] == s[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(s)]
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
