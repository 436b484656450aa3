package grant

import (
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// globOfPattern is the glob a value pattern written without escapes
// spells: every '*' a wildcard.
func globOfPattern(pat string) Glob { return Glob{parts: strings.Split(pat, "*")} }

// refMatch is the reference matcher Glob.Match is checked against: a
// memoised search over (pattern position, value position), every '*' of
// pat a wildcard for any run of bytes, every other byte itself, except
// that a '*' never matches a dot of a ".." path segment of s, nor nothing
// between its two dots (Match's ".." rule).
func refMatch(pat, s string) bool {
	guard := make([]bool, len(s))
	for _, seg := range dotDotSegments(s) {
		guard[seg], guard[seg+1] = true, true
	}
	memo := map[[2]int]bool{}
	var m func(i, j int) bool
	m = func(i, j int) bool {
		if i == len(pat) {
			return j == len(s)
		}
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		ok := false
		if pat[i] == '*' {
			for k := j; k <= len(s) && !ok; k++ {
				if k > j && guard[k-1] {
					break // the star would take a dot of ".."
				}
				if k == j && j > 0 && j < len(s) && guard[j-1] && guard[j] {
					continue // the star would sit between the dots
				}
				ok = m(i+1, k)
			}
		} else {
			ok = j < len(s) && s[j] == pat[i] && m(i+1, j+1)
		}
		memo[key] = ok
		return ok
	}
	return m(0, 0)
}

// dotDotSegments lists where each ".." segment of s starts.
func dotDotSegments(s string) []int {
	var out []int
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '/' {
			if s[start:i] == ".." {
				out = append(out, start)
			}
			start = i + 1
		}
	}
	return out
}

// regexpMatch is a second reference: the pieces quoted and joined by
// "(?s:.*)", anchored. It answers only for valid UTF-8 (regexp reads
// runes; an invalid pattern byte is a compile error).
func regexpMatch(pat, s string) (match, ok bool) {
	if !utf8.ValidString(pat) || !utf8.ValidString(s) || strings.Contains(pat, "*") && dotDotSegments(s) != nil {
		return false, false
	}
	parts := strings.Split(pat, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	re, err := regexp.Compile(`^(?s:` + strings.Join(parts, `.*`) + `)$`)
	if err != nil {
		return false, false
	}
	return re.MatchString(s), true
}

// TestGlobMatch: hand-picked patterns where a leftmost-first matcher goes
// wrong if a piece is found but not consumed, or pieces overlap the fixed
// prefix and suffix (CARDS.md A11, the glob extension).
func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"a*b*b*c", "abc", false}, // the middle b found once, used twice
		{"a*b*b*c", "abbc", true},
		{"a*b*b*c", "axbybzc", true},
		{"a*bb*c", "abxbc", false},
		{"*a*a*", "a", false},
		{"*a*a*", "aa", true},
		{"ab*ba", "aba", false}, // prefix and suffix overlap
		{"ab*ba", "abba", true},
		{"a*a", "a", false},
		{"*", "", true},
		{"**", "", true},
		{"", "", true},
		{"", "x", false},
		{"x*", "", false},
		{"*x*y*", "yx", false},
		{"*x*y*", "xy", true},
	} {
		if got := globOfPattern(tc.pat).Match(tc.s); got != tc.want {
			t.Errorf("glob %q matches %q = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
		if ref := refMatch(tc.pat, tc.s); ref != tc.want {
			t.Errorf("the reference matcher says %q matches %q = %v, want %v (the test is wrong)", tc.pat, tc.s, ref, tc.want)
		}
	}
}

// FuzzGlobMatch compares Glob.Match with two reference matchers (a dynamic
// programme and a regexp of the quoted pieces) on any pattern and value,
// and checks that a glob covers a literal exactly when it matches it
// (Covers, the attenuation check, agrees with Match on concrete values).
// Run it with: go test -run '^$' -fuzz FuzzGlobMatch -fuzztime 60s ./internal/grant/
func FuzzGlobMatch(f *testing.F) {
	for _, c := range [][2]string{
		{"a*b*b*c", "abc"}, {"a*b*b*c", "abbc"}, {"ab*ba", "aba"}, {"*a*a*", "a"}, {"*", ""}, {"", ""},
		{"x*y", "x*y"}, {"é*é", "é"}, {"\xff*\xfe", "\xff\xfe"}, {"a**b", "ab"},
		{"docs/*", "docs/../x"}, {".*.", ".."}, {"*..", "a/.."}, {"docs/../*", "docs/../x"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pat, s string) {
		if len(pat) > 256 || len(s) > 256 {
			return // the references are quadratic
		}
		checkGlob(t, pat, s)
		// The same bytes over the alphabet {a, b, *} and {a, b}: pieces
		// that repeat and overlap, where a leftmost-first matcher errs.
		checkGlob(t, fold(pat, "ab*"), fold(s, "ab"))
		// And over {., /, a, *}: ".." segments, which no wildcard matches.
		checkGlob(t, fold(pat, "./a*"), fold(s, "./a"))
	})
}

// fold spells each byte of s as one of alphabet's.
func fold(s, alphabet string) string {
	b := []byte(s)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func checkGlob(t *testing.T, pat, s string) {
	t.Helper()
	g := globOfPattern(pat)
	got := g.Match(s)
	if want := refMatch(pat, s); got != want {
		t.Fatalf("glob %q matches %q = %v, the reference says %v", pat, s, got, want)
	}
	if want, ok := regexpMatch(pat, s); ok && got != want {
		t.Fatalf("glob %q matches %q = %v, the regexp says %v", pat, s, got, want)
	}
	if c := g.Covers(Literal(s)); c != got {
		t.Fatalf("glob %q covers the literal %q = %v, matches it = %v", pat, s, c, got)
	}
	// Through the grant syntax: the pieces escaped, joined by '*',
	// as an argument's value pattern.
	pieces := strings.Split(pat, "*")
	for i := range pieces {
		pieces[i] = escapeWord(pieces[i], "")
	}
	gr, err := Parse("tool:invoke t " + wordString("--p="+strings.Join(pieces, "*")))
	if err != nil {
		return // invalid UTF-8, which grants refuse (not a matcher question)
	}
	if a := gr.Allows(ToolTarget("t", []Arg{{Name: "p", Value: s}})); a != got {
		t.Fatalf("grant %q allows --p=%q = %v, the glob %q matches it = %v", gr, s, a, pat, got)
	}
}

// TestGlobDotDotSegment: a wildcard never matches into a ".." path
// segment, in a value (CARDS.md A11, the glob extension) or a positional
// (docs/command-model.md), so `tool:invoke cat -- docs/*` does not allow
// `cat -- docs/../secret`; a pattern that spells the segment itself does,
// and ".." inside a segment (a git range) is not a segment. Covers, the
// attenuation check, agrees (A5: a child cannot reach what its parent
// cannot).
func TestGlobDotDotSegment(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"docs/*", "docs/../secret", false},
		{"docs/*", "docs/a/../../secret", false},
		{"docs/*", "docs/..", false},
		{"*", "..", false},
		{"*", "../x", false},
		{"*.md", "../x.md", false},
		{".*.", "..", false},         // the star would sit between the dots
		{"*.*", "..", false},         // either star takes a dot
		{"docs/*", "docs/./x", true}, // "." stays in docs/
		{"docs/*", "docs/a..b", true},
		{"*", "HEAD..main", true},
		{"docs/../*", "docs/../x", true}, // the pattern spells it
		{"*/../*", "a/../b", true},
		{"*..", "a/..", true},
		{"docs/..", "docs/..", true},
	} {
		g := globOfPattern(tc.pat)
		if got := g.Match(tc.s); got != tc.want {
			t.Errorf("glob %q matches %q = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
		if ref := refMatch(tc.pat, tc.s); ref != tc.want {
			t.Errorf("the reference says %q matches %q = %v, want %v (the test is wrong)", tc.pat, tc.s, ref, tc.want)
		}
		if c := g.Covers(Literal(tc.s)); c != tc.want {
			t.Errorf("glob %q covers the literal %q = %v, want %v", tc.pat, tc.s, c, tc.want)
		}
	}
	for _, tc := range []struct {
		grant, positional, arg string
		want                   bool
	}{
		{"tool:invoke cat -- docs/*", "docs/../secret", "", false},
		{"tool:invoke cat -- docs/*", "docs/report.txt", "", true},
		{"tool:invoke cat --path=docs/*", "", "docs/../secret", false},
		{"tool:invoke cat --path=docs/*", "", "docs/report.txt", true},
		{"tool:invoke cat -- ...", "docs/../secret", "", true}, // "any positionals" is any
	} {
		g, err := Parse(tc.grant)
		if err != nil {
			t.Fatal(err)
		}
		var args []Arg
		var pos []string
		if tc.arg != "" {
			args = []Arg{{Name: "path", Value: tc.arg}}
		} else {
			pos = []string{tc.positional}
		}
		if got := g.Allows(CommandTarget("cat", nil, args, pos)); got != tc.want {
			t.Errorf("%s allows %q%q = %v, want %v", tc.grant, tc.arg, tc.positional, got, tc.want)
		}
	}
	// Attenuation: a child naming the escape literally is not under a
	// parent whose wildcard would not match it.
	for _, tc := range []struct {
		parent, child string
		want          bool
	}{
		{"tool:invoke cat -- docs/*", "tool:invoke cat -- docs/../secret", false},
		{"tool:invoke cat -- docs/*", "tool:invoke cat -- docs/..*", false},
		{"tool:invoke cat -- docs/*", "tool:invoke cat -- docs/*.md", true},
		{"tool:invoke cat -- *", "tool:invoke cat -- */../*", false},
		{"tool:invoke cat -- */../*", "tool:invoke cat -- a/../b", true},
	} {
		p, err1 := Parse(tc.parent)
		c, err2 := Parse(tc.child)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := p.Covers(c); got != tc.want {
			t.Errorf("%s covers %s = %v, want %v", tc.parent, tc.child, got, tc.want)
		}
	}
}

// TestGlobDotDotValueLinear: matching a value with ".." segments does not
// build a table over pattern × value (review of conditions and schemas:
// 25 ms and ~11 bytes per value byte for each glob a 1 MiB value was
// matched against, for every glob of the wallet). The bytes allocated are
// counted, not the time: a table allocates at least a bool per value byte.
func TestGlobDotDotValueLinear(t *testing.T) {
	value := "docs/../" + strings.Repeat("a/../", 1<<18) + "x" // 1.25 MiB, 262,145 segments
	for _, tc := range []struct {
		pat  string
		want bool
	}{
		{"docs/*", false},
		{"docs/../*", false}, // the wildcard would take the later segments' dots
		{"*/../*", false},
		{"docs/../*/../x", false},
		{"docs/..*..*x", false},
		{"*", false},
	} {
		g := globOfPattern(tc.pat)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got := g.Match(value)
		runtime.ReadMemStats(&after)
		if got != tc.want {
			t.Errorf("glob %q matches the long value = %v, want %v", tc.pat, got, tc.want)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("glob %q on a %d-byte value allocated %d bytes: a table over the value", tc.pat, len(value), n)
		}
	}
	// A value with few segments allocates next to nothing.
	short := "docs/../" + strings.Repeat("a", 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if globOfPattern("docs/*").Match(short) || !globOfPattern("docs/../*").Match(short) {
		t.Errorf("docs/* and docs/../* on docs/../aaa…: want false, true")
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("two globs on a 1 MiB value with one segment allocated %d bytes, want a few: a table over the value", n)
	}
}
