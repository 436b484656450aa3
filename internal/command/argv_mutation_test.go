package command

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// loadProgram loads a program's description or stops the test.
func loadProgram(t *testing.T, desc string) *Spec {
	t.Helper()
	s, err := LoadProgram([]byte(desc))
	if err != nil {
		t.Fatalf("description refused: %v", err)
	}
	return s
}

// refusedWith parses the JSON call in and says what went wrong unless it
// was refused as invalid with why in its message ("" if it was).
func refusedWith(s *Spec, in, why string) string {
	inv, err := s.ParseJSON([]byte(in))
	switch {
	case err == nil:
		argv := inv.Argv(StyleEquals)
		shown := strings.Join(quoteAll(argv[:min(len(argv), 4)]), " ")
		if len(argv) > 4 {
			shown += fmt.Sprintf(" … (%d words)", len(argv))
		}
		return "accepted, argv " + shown + ", rendering " + inv.String()
	case !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), why):
		return "refused with " + err.Error()
	}
	return ""
}

func quoteAll(w []string) []string {
	out := make([]string, len(w))
	for i, s := range w {
		out[i] = `"` + s + `"`
	}
	return out
}

// TestPositionalValueIsChecked: a positional's value is held to its
// enum and its range as an option's is: the description's author may
// leave the choice to the agent only among the values listed, and the
// program is never given another.
func TestPositionalValueIsChecked(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"svc","end_of_options":"--","positionals":[
		{"name":"action","enum":["status","list"],"required":true},
		{"name":"count","type":"integer","minimum":1,"maximum":10}]}`)
	for in, why := range map[string]string{
		`{"action":"stop"}`:              `"stop" is not one of status, list`,
		`{"action":"status","count":0}`:  "0 is below the minimum 1",
		`{"action":"status","count":11}`: "11 is above the maximum 10",
	} {
		if got := refusedWith(s, in, why); got != "" {
			t.Errorf("%s: %s; want it refused: %s", in, got, why)
		}
	}
	inv, err := s.ParseJSON([]byte(`{"action":"list","count":10}`))
	if err != nil {
		t.Fatalf("a positional within its enum and range: %v", err)
	}
	if got, want := inv.Argv(StyleEquals), []string{"--", "list", "10"}; !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
}

// TestRequiredPartsOfACall: a call without a required positional, a
// required option or a required stdin is refused, naming what is missing;
// the program never runs without them.
func TestRequiredPartsOfACall(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"put","end_of_options":"--",
		"options":[{"name":"bucket","required":true}],
		"positionals":[{"name":"key","required":true}],
		"stdin":{"media_type":"text/plain","required":true}}`)
	for in, why := range map[string]string{
		`{"bucket":"b","stdin":"x"}`: `positional "key": missing (required)`,
		`{"key":"k","stdin":"x"}`:    "--bucket: missing (required)",
		`{"bucket":"b","key":"k"}`:   `property "stdin": missing (required)`,
	} {
		if got := refusedWith(s, in, why); got != "" {
			t.Errorf("%s: %s; want it refused: %s", in, got, why)
		}
	}
}

// TestCountIsBounded: a count flag is given at most 1000 times, so an
// agent cannot make argv a million words long; 1000 is written as 1000
// words.
func TestCountIsBounded(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[{"name":"verbose","short":"v","kind":"count"}]}`)
	inv, err := s.ParseJSON([]byte(`{"verbose":1000}`))
	if err != nil {
		t.Fatalf("a count of 1000: %v", err)
	}
	if n := len(inv.Argv(StyleEquals)); n != 1000 {
		t.Errorf("a count of 1000 written as %d words, want 1000", n)
	}
	if got := refusedWith(s, `{"verbose":1001}`, "counted more than 1000 times"); got != "" {
		t.Errorf(`{"verbose":1001}: %s; want it refused as counted more than 1000 times`, got)
	}
	words := slices.Repeat([]string{"-v"}, 1001)
	if inv, err := s.ParseArgv(words); err == nil || !strings.Contains(err.Error(), "counted more than 1000 times") {
		t.Errorf("-v given 1001 times: %v, %v; want it refused as counted more than 1000 times", inv, err)
	}
}

// TestSeparateStyleNeverSplitsWhatItCannot: with option_style separate, a
// value is its own word only when no parser can read that word otherwise:
// an optional option's value stays attached (--color always would be a
// bare --color and a positional "always" the cards never saw), and so do
// an empty value and one starting with '-'.
func TestSeparateStyleNeverSplitsWhatItCannot(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"x","options":[
		{"name":"color","kind":"optional","implicit":"auto"},
		{"name":"msg"}]}`)
	for in, want := range map[string][]string{
		`{"color":"always"}`: {"--color=always"},
		`{"msg":""}`:         {"--msg="},
		`{"msg":"-rf"}`:      {"--msg=-rf"},
		`{"msg":"hi"}`:       {"--msg", "hi"},
	} {
		inv, err := s.ParseJSON([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := inv.Argv(StyleSeparate); !slices.Equal(got, want) {
			t.Errorf("%s: separate-style argv %q, want %q (rendering %q)", in, got, want, inv.String())
		}
	}
}

// TestWordsAfterTheMarkerArePositionals: Words reads back to the same
// invocation when a positional looks like an option: after "--" nothing
// is an option.
func TestWordsAfterTheMarkerArePositionals(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"rm","end_of_options":"--",
		"options":[{"name":"force","kind":"bool"}],
		"positionals":[{"name":"files","variadic":true}]}`)
	inv, err := s.ParseJSON([]byte(`{"files":["--force","a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	words := inv.Words()
	back, err := s.ParseArgv(words)
	if err != nil {
		t.Fatalf("ParseArgv(%q): %v", words, err)
	}
	if got, want := back.String(), inv.String(); got != want {
		t.Errorf("ParseArgv(%q) = %q, want %q (the file named --force read as the flag)", words, got, want)
	}
}

// TestProjectionNamesAreReserved: no option or positional is named like
// the JSON projection's own properties, "command" and "stdin": a
// positional named stdin could never be given, and the call's stdin would
// be taken for it.
func TestProjectionNamesAreReserved(t *testing.T) {
	for _, name := range []string{"stdin", "command"} {
		desc := `{"maiden_command":1,"name":"x","stdin":{"media_type":"text/plain"},"positionals":[{"name":"` + name + `"}]}`
		_, err := Load([]byte(desc))
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "reserved for the JSON projection") {
			t.Errorf("a positional named %s: %v; want the description refused, the name reserved for the JSON projection", name, err)
		}
	}
}

// TestAssignmentWithAnEmptyName: a positional starting with '=' is an
// assignment too: env consumes it (it sets the variable of empty name)
// and runs the next word as the command.
func TestAssignmentWithAnEmptyName(t *testing.T) {
	s := loadProgram(t, `{"maiden_command":1,"name":"env","end_of_options":"--","positionals":[{"name":"args","variadic":true}]}`)
	const why = "has an '=' before any '/', which make and env read as a variable assignment"
	if got := refusedWith(s, `{"args":["=x","sh"]}`, why); got != "" {
		t.Errorf(`{"args":["=x","sh"]}: %s; want "=x" refused: %s`, got, why)
	}
}
