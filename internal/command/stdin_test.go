package command

import (
	"slices"
	"testing"

	"github.com/maiden-run/maiden/internal/grant"
)

// TestStdinIsRendered: a call's stdin is part of its canonical rendering
// (--stdin=TEXT), so grants, conditions, approvals and the audit trail see
// every value the program gets; it is not an argument of the program.
func TestStdinIsRendered(t *testing.T) {
	s, err := Load([]byte(`{"maiden_command":1,"name":"t","options":[{"name":"x"}],"stdin":{"media_type":"text/plain"}}`))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := s.ParseJSON([]byte(`{"x":"1","stdin":"DROP TABLE users;"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := inv.String(), `"--stdin=DROP TABLE users;" --x=1`; got != want {
		t.Fatalf("rendering %q, want %q", got, want)
	}
	for g, want := range map[string]bool{
		`tool:invoke t --x=1`:                 false,
		`tool:invoke t --x=1 --stdin=SELECT*`: false,
		`tool:invoke t --x=1 --stdin=DROP*`:   true,
		`tool:invoke t --x=1 --...`:           true,
	} {
		gr, err := grant.Parse(g)
		if err != nil {
			t.Fatal(err)
		}
		if got := gr.Allows(inv.Target("t")); got != want {
			t.Errorf("%s allows the call: %v, want %v", g, got, want)
		}
	}
	exact, err := grant.Parse(inv.Target("t").String())
	if err != nil || !exact.Allows(inv.Target("t")) {
		t.Fatalf("the grant printed for the call, %q, does not allow it: %v", inv.Target("t").String(), err)
	}
	if got := inv.Argv(StyleEquals); !slices.Equal(got, []string{"--x=1"}) {
		t.Fatalf("Argv %q: stdin is not an argument", got)
	}
	if s, ok := inv.Stdin(); !ok || s != "DROP TABLE users;" {
		t.Fatalf("Stdin %q %v", s, ok)
	}
	if _, err := Load([]byte(`{"maiden_command":1,"name":"t","options":[{"name":"no-stdin","kind":"bool"}]}`)); err == nil {
		t.Fatal("a flag rendering as --no-stdin accepted")
	}
}
