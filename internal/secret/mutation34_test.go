package secret

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
)

// TestMutation34EveryRevealedValueStaysRedacted: a second reveal in a call
// adds its value to the redactor; the first value stays hidden.
func TestMutation34EveryRevealedValueStaysRedacted(t *testing.T) {
	values := map[string]string{"GH": "gh-value-5f3a9c1e", "OTHER": "other-value-77d2"}
	hs, doc, err := Issue(parse(t, `{"a":{"$secret":"GH"},"b":{"$secret":"OTHER"}}`), []string{"GH", "OTHER"})
	must(t, err)
	handles := hs.WithHandles(doc).(map[string]any)
	g, err := grant.Parse("secret:reveal *")
	must(t, err)
	r := Revealer{
		Handles: hs, Session: "s1",
		Basis: decide.Basis{
			Wallet:  cards.NewWallet("a", time.Now(), []cards.Card{{ID: "r", Spec: cards.Spec{LowerPos: cards.Any(g)}}}),
			Binding: decide.Binding{Tool: "vault", Secrets: []string{"GH", "OTHER"}, Reveal: []string{"GH", "OTHER"}},
		},
		Lookup: func(name string) (string, bool) { v, ok := values[name]; return v, ok },
		Record: func(*RevealRecord) error { return nil },
	}
	reveal := r.Func()
	for _, k := range []string{"a", "b"} {
		h, ok := handles[k].(string)
		if !ok {
			t.Fatalf("the tool's input at /%s is %v; want a handle", k, handles[k])
		}
		if _, err := reveal(context.Background(), h); err != nil {
			t.Fatalf("reveal %s: %v", k, err)
		}
	}
	out := hs.Redactor(nil)("first " + values["GH"] + " second " + values["OTHER"])
	if strings.Contains(out, values["GH"]) || strings.Contains(out, values["OTHER"]) {
		t.Errorf("after revealing GH then OTHER, the call's redactor left %q; want both hidden", out)
	}
}

// TestMutation34RedactorWithoutHandlesIsBase: a call without handles
// (nil *Handles) still redacts its tool's secret values: its redactor is
// base itself.
func TestMutation34RedactorWithoutHandlesIsBase(t *testing.T) {
	var hs *Handles
	base := func(s string) string { return strings.ReplaceAll(s, "base-secret", "[base]") }
	red := hs.Redactor(base)
	if red == nil {
		t.Fatal("a call without handles has no redactor; want base")
	}
	if got := red("echo base-secret"); got != "echo [base]" {
		t.Errorf("a call without handles redacted %q; want %q", got, "echo [base]")
	}
}

// TestMutation34EscapedKeyMayRefer: the key "$secret" spelt with a \u
// escape is a reference too, so MayRefer sends the input to Issue, which
// checks its name.
func TestMutation34EscapedKeyMayRefer(t *testing.T) {
	input := `{"a":{"\u0024secret":"OTHER"}}`
	if !MayRefer(input) {
		t.Fatalf("MayRefer(%s) = false; want true (the key is \"$secret\")", input)
	}
	if _, _, err := Issue(parse(t, input), []string{"GH"}); err == nil || !strings.Contains(err.Error(), "not a secret this tool may use") {
		t.Errorf("Issue(%s) = %v; want refused: not a secret this tool may use", input, err)
	}
}

// TestMutation34HandlesAre128RandomBits: a handle is the prefix and 32 hex
// digits (128 random bits), so another call cannot guess one.
func TestMutation34HandlesAre128RandomBits(t *testing.T) {
	seen := map[string]bool{}
	for range 8 {
		hs, doc, err := Issue(parse(t, `{"$secret":"GH"}`), []string{"GH"})
		must(t, err)
		h := hs.WithHandles(doc).(string)
		bits, ok := strings.CutPrefix(h, HandlePrefix)
		if b, err := hex.DecodeString(bits); !ok || err != nil || len(b) != 16 {
			t.Fatalf("handle %q: want %s and 32 hex digits", h, HandlePrefix)
		}
		if seen[h] {
			t.Fatalf("handle %q issued twice", h)
		}
		seen[h] = true
	}
}

// TestMutation34WithHandlesLeavesTheMarkedInput: the tool's copy gets the
// handles; the document the rest of the call decides on and records keeps
// the markers (a handle in the audit trail or an approval would be the
// tool's key to the secret, and would make the call another call).
func TestMutation34WithHandlesLeavesTheMarkedInput(t *testing.T) {
	hs, doc, err := Issue(parse(t, `{"a":{"$secret":"GH"},"b":["x",{"$secret":"GH"}]}`), []string{"GH"})
	must(t, err)
	run, err := Marshal(hs.WithHandles(doc))
	must(t, err)
	if !strings.Contains(run, HandlePrefix) {
		t.Fatalf("the tool's input %s has no handle", run)
	}
	marked, err := Marshal(doc)
	must(t, err)
	if marked != `{"a":"$secret:GH","b":["x","$secret:GH"]}` {
		t.Errorf("after WithHandles the marked input is %s; want the markers kept", marked)
	}
}
