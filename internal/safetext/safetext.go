// Package safetext makes untrusted text safe to show a human or an agent:
// the one escaping the CLI (maiden pending, approve, sessions, audit, tools)
// and the inbox page (/ui) share, so that both show the same characters for
// the same call, and the forms an imported MCP server's text needs (Text
// keeps a description's lines; JSON keeps a schema the same JSON value).
//
// What an agent sends can try to make a human read something other than
// what runs: a line break that pushes the real argument off the screen, a
// carriage return or an escape sequence that rewrites the line, a
// right-to-left override (U+202E) that shows "mallory" as "yrollam", a
// zero-width space that makes two different names look the same. Escape
// writes every such character as a visible Go-style escape (\n, \x1b,
// \u202e) and leaves everything else as it is.
package safetext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every character Unsafe reports, and every byte of
// invalid UTF-8, written as a Go-style escape (\n, \t, \x1b, \u0085, \u202e,
// \U000e0041; an invalid byte as \xff). A backslash stays as it is: the
// text is for reading, not for parsing back.
func Escape(s string) string {
	if !strings.ContainsFunc(s, Unsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		n := AppendRune(&b, s[i:])
		i += n
	}
	return b.String()
}

// AppendRune writes the first character of s to b as Escape would and
// returns how many bytes of s it took (1 for an invalid byte). s must not
// be empty.
func AppendRune(b *strings.Builder, s string) int {
	r, n := utf8.DecodeRuneInString(s)
	switch {
	case r == utf8.RuneError && n == 1:
		const hex = "0123456789abcdef"
		b.WriteString(`\x`)
		b.WriteByte(hex[s[0]>>4])
		b.WriteByte(hex[s[0]&15])
	case Unsafe(r):
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	default:
		b.WriteString(s[:n])
	}
	return n
}

// Unsafe reports whether r must not be shown raw: C0 and C1 control
// characters and DEL (line breaks, carriage returns, tabs, escape
// sequences), every Unicode format character (category Cf: the
// bidirectional embeddings, overrides, isolates and marks, zero-width
// spaces and joiners, the word joiner, invisible operators, the BOM, the
// soft hyphen, tag characters), the line and paragraph separators
// (U+2028, U+2029), and other characters that show as nothing: variation
// selectors, the Hangul fillers, the combining grapheme joiner, the
// Mongolian vowel separator and the Braille blank.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r < 0xa0:
		return false
	case r == 0x2028, r == 0x2029,
		r == 0x034f,              // combining grapheme joiner
		r == 0x115f, r == 0x1160, // Hangul choseong and jungseong fillers
		r == 0x3164, r == 0xffa0, // Hangul filler, halfwidth Hangul filler
		r == 0x180e,                  // Mongolian vowel separator
		r == 0x2800,                  // Braille pattern blank
		r >= 0xfe00 && r <= 0xfe0f,   // variation selectors
		r >= 0xe0100 && r <= 0xe01ef, // variation selectors supplement
		r >= 0x180b && r <= 0x180f:   // Mongolian free variation selectors
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// Text is Escape keeping newlines and tabs: for a multi-line text (an
// upstream tool's description) shown to a reader, or served to an agent.
func Text(s string) string {
	keep := func(r rune) bool { return r == '\n' || r == '\t' }
	if !strings.ContainsFunc(s, func(r rune) bool { return Unsafe(r) && !keep(r) }) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if r, n := utf8.DecodeRuneInString(s[i:]); keep(r) {
			b.WriteRune(r)
			i += n
			continue
		}
		i += AppendRune(&b, s[i:])
	}
	return b.String()
}

// JSON rewrites the unsafe characters of a JSON text that are not ASCII
// (bidirectional and zero-width controls, C1 controls) and invalid UTF-8 as
// JSON \u escapes: the same JSON value, which no longer reorders or hides
// anything where it is shown. Control characters below 0x80 cannot appear
// raw in a valid JSON string (outside one they are whitespace) and are left
// alone.
func JSON(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= 0x80 && Unsafe(r) }) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r >= 0x80 && Unsafe(r) || r == utf8.RuneError {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// MaxLogValue is how much of a client-supplied value Clip keeps.
const MaxLogValue = 256

// Clip is a value a client sent (a header, a path) as a log line may carry
// it: its first MaxLogValue bytes, cut on a character boundary, and its
// length. A client that is refused before it authenticates still chooses
// what its refusal logs; whole, an Origin or a path of a megabyte (what
// net/http reads of a request's head) made each refused request a
// megabyte of the operator's log, a disk filled from outside.
func Clip(s string) string {
	if len(s) <= MaxLogValue {
		return s
	}
	cut := MaxLogValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}
