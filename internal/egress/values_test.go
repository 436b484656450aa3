package egress

import (
	"strings"
	"testing"
)

// TestValueRedactor: a value handed in (not looked up by the gate) is
// redacted raw and in its encodings, under its name.
func TestValueRedactor(t *testing.T) {
	r := ValueRedactor(map[string]string{"SIGNING_KEY": "k3y/with+chars&more"})
	for _, in := range []string{
		"raw k3y/with+chars&more end",
		`json "k3y\/with+chars\u0026more"`,
		"url k3y%2Fwith%2Bchars%26more",
	} {
		out := r(in)
		if strings.Contains(out, "k3y") || !strings.Contains(out, "[REDACTED:SIGNING_KEY]") {
			t.Errorf("%q → %q", in, out)
		}
	}
	if got := ValueRedactor(nil)("nothing to hide"); got != "nothing to hide" {
		t.Errorf("empty: %q", got)
	}
}
