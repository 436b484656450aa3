package grant

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// globOfPattern is the glob a value pattern written without escapes
// spells: every '*' a wildcard.
func globOfPattern(pat string) Glob { return Glob{parts: strings.Split(pat, "*")} }

// refMatch is the reference matcher Glob.Match is checked against: the
// textbook dynamic programme over (pattern position, value position),
// every '*' of pat a wildcard for any run of bytes, every other byte itself.
func refMatch(pat, s string) bool {
	// m[j] is whether pat[:i] matches s[:j], row by row.
	m := make([]bool, len(s)+1)
	m[0] = true
	for i := 0; i < len(pat); i++ {
		next := make([]bool, len(s)+1)
		if pat[i] == '*' {
			// '*' matches s[k:j] for any k <= j.
			seen := false
			for j := 0; j <= len(s); j++ {
				seen = seen || m[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(s); j++ {
				next[j] = m[j-1] && s[j-1] == pat[i]
			}
		}
		m = next
	}
	return m[len(s)]
}

// regexpMatch is a second reference: the pieces quoted and joined by
// "(?s:.*)", anchored. It answers only for valid UTF-8 (regexp reads
// runes; an invalid pattern byte is a compile error).
func regexpMatch(pat, s string) (match, ok bool) {
	if !utf8.ValidString(pat) || !utf8.ValidString(s) {
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
