package safetext

import (
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
