package jsonparse

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestFoldRuneIsEqualFold: foldRune maps every rune to a member of its own
// simple case-folding orbit, the same member for the whole orbit, so two
// keys fold alike exactly when strings.EqualFold (and Go's encoding/json,
// which matches keys to struct fields with it) holds them equal.
func TestFoldRuneIsEqualFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		f := foldRune(r)
		if !strings.EqualFold(string(r), string(f)) {
			t.Fatalf("foldRune(%U) = %U, not in its orbit", r, f)
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if foldRune(o) != f {
				t.Fatalf("foldRune(%U) = %U but foldRune(%U) = %U: one orbit", r, f, o, foldRune(o))
			}
		}
	}
	for _, c := range []struct{ a, b string }{
		{"city", "CITY"}, {"kind", "\u212aind"}, {"s", "\u017f"}, {"é", "É"}, {"straße", "STRASSE"}, {"a", "b"},
	} {
		if got, want := foldKey(c.a) == foldKey(c.b), strings.EqualFold(c.a, c.b); got != want {
			t.Errorf("foldKey(%q) == foldKey(%q) is %v, EqualFold says %v", c.a, c.b, got, want)
		}
	}
}

// TestScanRefusesKeysDifferingOnlyInCase: the refusal names the second key
// as written, at its offset, nested objects and objects in arrays included.
func TestScanRefusesKeysDifferingOnlyInCase(t *testing.T) {
	for _, c := range []struct {
		in  string
		key string
		at  int
	}{
		{`{"city":"Paris","CITY":"Berlin"}`, `CITY`, 16},
		{`{"a":{"kind":1,"\u212aind":2}}`, `\u212aind`, 15},
		{`{"a":[{"Amount":1,"amount":2}]}`, `amount`, 18},
	} {
		_, err := Scan(c.in, Limits{})
		se, ok := err.(*SyntaxError)
		if !ok || se.Offset != c.at || !strings.Contains(se.msg, "differs from an earlier key of the object only in case") {
			t.Errorf("Scan(%s): %v, want the key at %d refused as differing only in case", c.in, err, c.at)
		}
	}
	if _, err := Scan(`{"City":1,"cities":2,"CITY_ID":3,"é":4,"e":5}`, Limits{}); err != nil {
		t.Errorf("look-alike keys refused: %v", err)
	}
}
