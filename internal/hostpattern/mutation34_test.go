package hostpattern

import (
	"strings"
	"testing"
)

// TestMutation34EveryCharacterOfEveryLabel: a label's first character is
// checked like the others, so a host the gate would refuse ("_x", "!x")
// is never a pattern or a host that a wildcard matches.
func TestMutation34EveryCharacterOfEveryLabel(t *testing.T) {
	for _, s := range []string{"_x.example.com", "api._x.example.com", "!x.example.com", "*._x.example.com", "x.example.co=", "a.~b"} {
		if p, why := Normalize(s); why == "" || !strings.Contains(why, "invalid character") {
			t.Errorf("Normalize(%q) = %q, %q; want refused: invalid character", s, p, why)
		}
	}
}

// TestMutation34HexPrefixAloneIsNumeric: "0x" alone is the number 0 to the
// WHATWG URL parser and inet_aton ("127.0x" is 127.0.0.0), so a name whose
// last label is "0x" is refused like "127.1".
func TestMutation34HexPrefixAloneIsNumeric(t *testing.T) {
	for _, s := range []string{"127.0x", "example.0x", "*.a.0x"} {
		if p, why := Normalize(s); !strings.Contains(why, "looks like an IPv4 address") {
			t.Errorf("Normalize(%q) = %q, %q; want refused: looks like an IPv4 address", s, p, why)
		}
	}
	if p, why := Normalize("example.0xg"); why != "" || p != "example.0xg" {
		t.Errorf(`Normalize("example.0xg") = %q, %q; want a name ("0xg" is no number)`, p, why)
	}
}
