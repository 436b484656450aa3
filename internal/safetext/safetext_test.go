package safetext

import (
	"fmt"
	"strings"
	"testing"
)

// TestEscape: every character that hides, moves or reorders text is shown
// as an escape; ordinary text, accents and scripts are left alone.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"notes.txt":                   "notes.txt",
		"a\nb":                        `a\nb`,
		"a\r\nb\tc":                   `a\r\nb\tc`,
		"\x1b[2J\x1b]0;title\a":       `\x1b[2J\x1b]0;title\a`,
		"to=\u202emallory":            `to=\u202emallory`,
		"\u202d\u2066x\u2069\u2067":   `\u202d\u2066x\u2069\u2067`,
		"a\u200bb\u200dc\u200e\ufeff": `a\u200bb\u200dc\u200e\ufeff`,
		"line\u2028sep\u2029":         `line\u2028sep\u2029`,
		"\u0085\u009b":                `\u0085\u009b`,
		"soft\u00adhyphen\u2060":      `soft\u00adhyphen\u2060`,
		"tag\U000e0041":               `tag\U000e0041`,
		"vs\ufe0f\u3164":              `vs\ufe0f\u3164`,
		"bad\xffutf8":                 `bad\xffutf8`,
		`back\slash`:                  `back\slash`,
		"Zürich 東京 مرحبا":             "Zürich 東京 مرحبا",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if strings.ContainsFunc(Escape(in), Unsafe) {
			t.Errorf("Escape(%q) still holds an unsafe character", in)
		}
	}
}

// TestText: Text escapes as Escape does but keeps line breaks and tabs (an
// upstream's multi-line description); a carriage return is still escaped.
func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x1b[31mred\x1b[0m", `a\x1b[31mred\x1b[0m`},
		{"pay \u202eevil", `pay \u202eevil`},
		{"zero\u200bwidth\u2060", `zero\u200bwidth\u2060`},
		{"line\nnext\ttab\r", "line\nnext\ttab\\r"},
		{"c1 \u009b", `c1 \u009b`},
		{"bad \xff", `bad \xff`},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestJSON: bidi and zero-width controls in a JSON text become \u escapes
// (the same JSON value); other non-ASCII text is left alone.
func TestJSON(t *testing.T) {
	in := "{\"d\":\"pay \u202eevil\u200b\",\n\"x\":\"\u00e9\"}"
	want := "{\"d\":\"pay \\u202eevil\\u200b\",\n\"x\":\"\u00e9\"}"
	if got := JSON(in); got != want {
		t.Errorf("JSON(%q) = %q, want %q", in, got, want)
	}
}

// TestClip: a long value keeps its first MaxLogValue bytes, cut on a
// character boundary, and says its length; a short one is unchanged.
func TestClip(t *testing.T) {
	short := strings.Repeat("a", MaxLogValue)
	if got := Clip(short); got != short {
		t.Errorf("Clip of %d bytes changed it: %q", len(short), got)
	}
	long := strings.Repeat("a", MaxLogValue-1) + "é" + strings.Repeat("b", 1<<20)
	got := Clip(long)
	want := strings.Repeat("a", MaxLogValue-1) + fmt.Sprintf("... (%d bytes)", len(long))
	if got != want {
		t.Errorf("Clip = %.80q...; want %.80q...", got, want)
	}
}

// TestUnsafeAtItsEdges: every character Unsafe's doc names is escaped by
// Escape, Text and (when not ASCII) JSON, through the ends of each range:
// all of C0 but the two Text keeps, DEL, all of C1, the combining grapheme
// joiner, the Hangul fillers, the Mongolian separator and selectors, the
// Braille blank and both blocks of variation selectors. The characters
// just outside the ranges are shown as they are.
func TestUnsafeAtItsEdges(t *testing.T) {
	var unsafe []rune
	for r := rune(0); r < 0x20; r++ {
		unsafe = append(unsafe, r)
	}
	unsafe = append(unsafe, 0x7f)
	for r := rune(0x80); r < 0xa0; r++ {
		unsafe = append(unsafe, r)
	}
	unsafe = append(unsafe, 0x034f, 0x115f, 0x1160, 0x3164, 0xffa0, 0x180b, 0x180c, 0x180d, 0x180e, 0x180f, 0x2800,
		0x2028, 0x2029, 0xfe00, 0xfe0f, 0xe0100, 0xe01ef, 0x202e, 0x200b)
	for _, r := range unsafe {
		s := "a" + string(r) + "b"
		if got := Escape(s); strings.ContainsRune(got, r) {
			t.Errorf("Escape(%q) = %q: U+%04X shown raw", s, got, r)
		}
		if got := Text(s); strings.ContainsRune(got, r) && r != '\n' && r != '\t' {
			t.Errorf("Text(%q) = %q: U+%04X shown raw", s, got, r)
		}
		if got := JSON(s); strings.ContainsRune(got, r) && r >= 0x80 {
			t.Errorf("JSON(%q) = %q: U+%04X shown raw", s, got, r)
		}
	}
	for _, r := range []rune{' ', '~', 0xa0, 0x034e, 0x0350, 0x115e, 0x1161, 0x180a, 0x1810, 0x27ff, 0x2801, 0xfdff, 0xfe10, 0xe00ff, 0xe01f0} {
		if s := "a" + string(r) + "b"; Escape(s) != s {
			t.Errorf("Escape(%q) = %q: U+%04X is not hidden, want it as it is", s, Escape(s), r)
		}
	}
}

// TestJSONInvalidUTF8: a JSON text holding invalid UTF-8 (and nothing else
// unsafe) comes back valid, each bad byte as \ufffd, the value any reader
// decodes from it.
func TestJSONInvalidUTF8(t *testing.T) {
	in := "{\"d\":\"bad \xff\xfe byte\"}"
	want := `{"d":"bad \ufffd\ufffd byte"}`
	if got := JSON(in); got != want {
		t.Errorf("JSON(%q) = %q, want %q", in, got, want)
	}
}

// TestClipBound: what Clip keeps of a value of a megabyte is at most 256
// bytes and the length it says: a log line's worth, whatever the value.
func TestClipBound(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	got := Clip(long)
	if want := strings.Repeat("a", 256) + "... (1048576 bytes)"; got != want {
		t.Errorf("Clip of 1 MiB kept %d bytes: %.40q...; want 256 and the length", len(got), got)
	}
}

// TestEscapeKeepsTheReplacementCharacter: a U+FFFD written as it is
// (EF BF BD, valid UTF-8) is shown as it is, and an invalid byte as \x..:
// the two never look alike, whatever else in the text is escaped.
func TestEscapeKeepsTheReplacementCharacter(t *testing.T) {
	for in, want := range map[string]string{
		"\n\ufffd":         `\n` + "\ufffd",
		"\n\xef":           `\n\xef`,
		"\n\xef\xbf":       `\n\xef\xbf`,
		"\x1b\ufffd\xef\n": `\x1b` + "\ufffd" + `\xef\n`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if got := Text(in); got != strings.ReplaceAll(want, `\n`, "\n") {
			t.Errorf("Text(%q) = %q, want %q", in, got, strings.ReplaceAll(want, `\n`, "\n"))
		}
	}
}
