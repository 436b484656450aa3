package wit

import (
	"regexp"
	"strings"
	"testing"
)

// code is a WIT document without comments and blank lines.
func code(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(regexp.MustCompile(`//.*$`).ReplaceAllString(l, ""))
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestV030IsV020PlusReveal: maiden:tool@0.3.0 is 0.2.0 with one more host
// function and nothing else changed, so a 0.2.0 tool's meaning is the same
// under either, and the contracts list it newest first.
func TestV030IsV020PlusReveal(t *testing.T) {
	v3, v2 := code(V030.Text), code(V020.Text)
	reveal := "reveal: func(handle: string) -> result<string, string>;"
	if !strings.Contains(v3, reveal) || strings.Contains(v2, "reveal") {
		t.Fatal("reveal is not (only) in 0.3.0")
	}
	v3 = strings.Replace(v3, reveal+"\n", "", 1)
	v3 = strings.Replace(v3, "package maiden:tool@0.3.0;", "package maiden:tool@0.2.0;", 1)
	if v3 != v2 {
		t.Errorf("0.3.0 differs from 0.2.0 by more than reveal:\n%s\n---\n%s", v3, v2)
	}
	if len(Contracts) != 3 || Contracts[0].Version != "0.3.0" || !Contracts[0].Reveal || Contracts[1].Reveal || Contracts[2].Reveal {
		t.Errorf("Contracts = %+v", Contracts)
	}
	if !strings.Contains(V030.Text, "package "+V030.Package+";") || !strings.HasPrefix(V030.HostInterface, "maiden:tool/host@0.3.0") {
		t.Error("V030's names do not match its text")
	}
}
