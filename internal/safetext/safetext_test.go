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
