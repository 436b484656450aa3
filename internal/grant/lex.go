package grant

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// A word is one whitespace-separated token of a grant after quotes and
// escapes were removed. Each byte remembers whether it was escaped
// (preceded by '\' or inside double quotes' escaped form) so that the
// parser can tell the wildcard '*' from a literal '\*', and '=' from '\='.
type word struct {
	pos int // byte offset of the word in the grant
	b   []byte
	esc []bool
	off []int // byte offset in the grant of each byte of b (for errors)
}

func (w word) String() string { return string(w.b) }

// plain reports whether w is exactly s with nothing escaped.
func (w word) plain(s string) bool {
	if string(w.b) != s {
		return false
	}
	for _, e := range w.esc {
		if e {
			return false
		}
	}
	return true
}

// lexWords splits s into words. Outside double quotes, space and tab
// separate words; inside them they are literal. A backslash escapes the
// next character anywhere. Quotes are removed; escaping is kept per byte.
func lexWords(s string) ([]word, error) {
	var words []word
	var cur *word
	quoteAt, quoted := -1, false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return nil, &ParseError{Input: s, Pos: i, Expected: "valid UTF-8", Found: "an invalid byte"}
		}
		if quoteAt < 0 && (r == ' ' || r == '\t') {
			cur, quoted = nil, false
			i += size
			continue
		}
		if (r < 0x20 || r == 0x7f) && quoteAt < 0 {
			return nil, &ParseError{Input: s, Pos: i, Expected: "a printable character (quote control characters)", Found: describe(s[i:])}
		}
		start := cur == nil
		if start {
			words = append(words, word{pos: i})
			cur = &words[len(words)-1]
		}
		switch {
		case r == '"' && start && !quoted:
			// Only a word's first character opens quotes, so that the
			// quotes of a JSON value (--o={"k":"v"}) stay literal.
			quoteAt, quoted = i, true
			i += size
			continue
		case r == '"' && quoteAt >= 0:
			quoteAt = -1
			i += size
			continue
		case r == '\\':
			if i+1 >= len(s) {
				return nil, &ParseError{Input: s, Pos: i, Expected: "a character after '\\'", Found: "the end"}
			}
			r2, size2 := utf8.DecodeRuneInString(s[i+1:])
			if r2 == utf8.RuneError && size2 == 1 {
				return nil, &ParseError{Input: s, Pos: i + 1, Expected: "valid UTF-8", Found: "an invalid byte"}
			}
			for k := 0; k < size2; k++ {
				cur.b = append(cur.b, s[i+1+k])
				cur.esc = append(cur.esc, true)
				cur.off = append(cur.off, i)
			}
			i += 1 + size2
			continue
		}
		for k := 0; k < size; k++ {
			cur.b = append(cur.b, s[i+k])
			cur.esc = append(cur.esc, false)
			cur.off = append(cur.off, i)
		}
		i += size
	}
	if quoteAt >= 0 {
		return nil, &ParseError{Input: s, Pos: quoteAt, Expected: `a closing '"'`, Found: "the end"}
	}
	return words, nil
}

// globOf turns bytes b (with their escape marks) into a Glob: an unescaped
// '*' is a wildcard, everything else literal.
func globOf(b []byte, esc []bool) Glob {
	var parts []string
	var piece []byte
	for i := range b {
		if b[i] == '*' && !esc[i] {
			parts = append(parts, string(piece))
			piece = piece[:0]
			continue
		}
		piece = append(piece, b[i])
	}
	parts = append(parts, string(piece))
	return Glob{parts: parts}
}

// escapeWord escapes s so that lexWords reads it back as literal bytes
// inside a word: '\' and '*' always, and the characters in extra.
func escapeWord(s, extra string) string {
	if !strings.ContainsAny(s, "\\*"+extra) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' || c == '*' || strings.IndexByte(extra, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// wordString makes one word of w (escaped by escapeWord): quoted when it
// holds whitespace or control characters or is empty (its own '"' then
// escaped), and a leading '"' escaped otherwise.
func wordString(w string) string {
	if w != "" && !strings.ContainsFunc(w, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		if strings.HasPrefix(w, `"`) {
			return `\` + w
		}
		return w
	}
	return `"` + strings.ReplaceAll(w, `"`, `\"`) + `"`
}

// describe names what was found at the start of rest, for an error.
func describe(rest string) string {
	if rest == "" {
		return "the end"
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return strconv.QuoteRune(r)
}
