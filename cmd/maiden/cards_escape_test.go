package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/grant"
)

// TestCardsEscapeAgentText: a card's grants can hold what an agent wrote
// (an always-card is the approved call's rendering, a derived card the
// grant text the agent's cards_derive gave), and the rendering quotes a
// value's control characters without escaping them. cards ls and cards
// show print them as pending does, escaped: an agent must not be able to
// clear the operator's screen, retitle the terminal or reverse the text
// of the card listing that says what it may do.
func TestCardsEscapeAgentText(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	args, err := grant.Render([]byte(`{"message": "hi\u001b[2J\u001b]0;pwned\u0007\rNOTHING \u202eyreve\u009b"}`))
	if err != nil {
		t.Fatal(err)
	}
	evil := grant.Rendering(args)
	a := request(t, state, "research", evil, "middleware[1]")
	op(t, exitOK, cfg, "approve", a.ID, "-always")
	ls := op(t, exitOK, cfg, "cards", "ls", "-agent", "research").stdout
	id, _, _ := strings.Cut(ls, " ")
	show := op(t, exitOK, cfg, "cards", "show", id).stdout
	for name, text := range map[string]string{"cards ls": ls, "cards show": show} {
		for _, raw := range []string{"\x1b", "\x07", "\r", "\u202e", "\u009b"} {
			if strings.Contains(text, raw) {
				t.Errorf("%s passes %q raw:\n%q", name, raw, text)
			}
		}
		for _, esc := range []string{`\x1b[2J`, `\x1b]0;pwned\a`, `\rNOTHING`, `\u202eyreve`, `\u009b`} {
			if !strings.Contains(text, esc) {
				t.Errorf("%s lacks %q:\n%s", name, esc, text)
			}
		}
	}
}

// TestAdminJSONEscapesBidiAndC1: the -json answers of the operator's
// commands carry what agents wrote exactly, as JSON values, but in bytes
// no terminal acts on: encoding/json escapes the C0 controls and leaves a
// bidirectional override or a C1 control (U+009B is CSI to a terminal
// that reads C1 in UTF-8) raw, so an operator reading maiden pending ID
// -json would see the call reordered. They are \u escapes instead: the
// same JSON value.
func TestAdminJSONEscapesBidiAndC1(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	args, err := grant.Render([]byte(`{"message": "pay \u202e0001\u202c to \u009b2Jbob\u200b"}`))
	if err != nil {
		t.Fatal(err)
	}
	evil := grant.Rendering(args)
	a := request(t, state, "research", evil, "middleware[1]")
	outs := map[string]string{
		"pending -json":    op(t, exitOK, cfg, "pending", "-json").stdout,
		"pending ID -json": op(t, exitOK, cfg, "pending", a.ID, "-json").stdout,
	}
	op(t, exitOK, cfg, "approve", a.ID, "-always")
	outs["cards ls -json"] = op(t, exitOK, cfg, "cards", "ls", "-agent", "research", "-json").stdout
	for name, out := range outs {
		for _, raw := range []string{"\u202e", "\u202c", "\u009b", "\u200b"} {
			if strings.Contains(out, raw) {
				t.Errorf("%s passes %q raw:\n%s", name, raw, out)
			}
		}
		if !strings.Contains(out, `\u202e0001\u202c`) {
			t.Errorf("%s lacks the \\u escapes:\n%s", name, out)
		}
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(outs["pending -json"]), &got); err != nil || len(got) != 1 || got[0]["rendered"] != evil {
		t.Fatalf("pending -json must carry the rendering exactly: %v %v", got, err)
	}
}
