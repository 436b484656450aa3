package textsafe

import "testing"

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, term, text string }{
		{"plain", "plain", "plain"},
		{"a\x1b[31mred\x1b[0m", `a\x1b[31mred\x1b[0m`, `a\x1b[31mred\x1b[0m`},
		{"pay \u202eevil", `pay \u202eevil`, `pay \u202eevil`},
		{"zero\u200bwidth\u2060", `zero\u200bwidth\u2060`, `zero\u200bwidth\u2060`},
		{"line\nnext\ttab\r", `line\nnext\ttab\r`, "line\nnext\ttab\\r"},
		{"c1 \u009b", `c1 \u009b`, `c1 \u009b`},
		{"bad \xff", `bad \xff`, `bad \xff`},
	} {
		if got := Terminal(c.in); got != c.term {
			t.Errorf("Terminal(%q) = %q, want %q", c.in, got, c.term)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}

func TestJSON(t *testing.T) {
	in := "{\"d\":\"pay \u202eevil\u200b\",\n\"x\":\"\u00e9\"}"
	want := "{\"d\":\"pay \\u202eevil\\u200b\",\n\"x\":\"\u00e9\"}"
	if got := JSON(in); got != want {
		t.Errorf("JSON(%q) = %q, want %q", in, got, want)
	}
}
