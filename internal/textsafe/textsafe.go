// Package textsafe escapes the characters of untrusted text (an agent's
// arguments, an upstream MCP server's descriptions) that would act on a
// terminal or hide or reorder what a reader sees, so that they are shown as
// visible escapes instead. It imports only the standard library.
package textsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Terminal escapes what must not reach a terminal raw: C0 and C1 control
// characters (escape sequences, carriage returns that overwrite a line,
// tabs and newlines that break a layout), DEL, invalid UTF-8, and the
// Unicode controls that reorder or hide text (bidirectional embeddings,
// overrides and isolates, zero-width marks and joiners, the BOM, line and
// paragraph separators), each as a Go-style escape (\x1b, \u202e). A
// backslash stays as it is: the text is for reading, not for parsing back.
func Terminal(s string) string { return escape(s, false) }

// Text is Terminal keeping newlines and tabs: for a multi-line text (a
// description) shown to a reader, or served to an agent.
func Text(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	unsafe := func(r rune) bool { return Unsafe(r) && !(keepLines && (r == '\n' || r == '\t')) }
	if !strings.ContainsFunc(s, unsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafe(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Unsafe reports whether r is escaped by Terminal.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x200b && r <= 0x200f, // zero-width space, non-joiner, joiner; LRM, RLM
		r >= 0x202a && r <= 0x202e, // embeddings and overrides
		r >= 0x2066 && r <= 0x2069, // isolates
		r == 0x2060,                // word joiner
		r == 0x061c, r == 0xfeff, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// JSON rewrites the unsafe characters of a JSON text that are not ASCII
// (bidirectional and zero-width controls, C1 controls) as JSON \u escapes:
// the same JSON value, which no longer reorders or hides anything where it
// is shown. Control characters below 0x80 cannot appear raw in a valid
// JSON string (outside one they are whitespace) and are left alone.
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
