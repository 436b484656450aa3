// Package textsafe escapes the characters of an upstream MCP server's text
// (titles, descriptions, schemas) that would act on a terminal or hide or
// reorder what a reader sees. Which characters are unsafe is
// internal/safetext's one definition (the CLI and the inbox use it for
// agents' arguments); this package adds the forms an upstream's text needs:
// multi-line text (Text) and JSON that stays the same JSON value (JSON).
package textsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/safetext"
)

// Terminal escapes what must not reach a terminal raw: C0 and C1 control
// characters (escape sequences, carriage returns that overwrite a line,
// tabs and newlines that break a layout), DEL, invalid UTF-8, and the
// Unicode controls that reorder or hide text (bidirectional embeddings,
// overrides and isolates, zero-width marks and joiners, the BOM, line and
// paragraph separators), each as a Go-style escape (\x1b, \u202e). A
// backslash stays as it is: the text is for reading, not for parsing back.
func Terminal(s string) string { return safetext.Escape(s) }

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
		if r, n := utf8.DecodeRuneInString(s[i:]); keepLines && (r == '\n' || r == '\t') {
			b.WriteRune(r)
			i += n
			continue
		}
		i += safetext.AppendRune(&b, s[i:])
	}
	return b.String()
}

// Unsafe reports whether r is escaped by Terminal: safetext.Unsafe.
func Unsafe(r rune) bool { return safetext.Unsafe(r) }

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
