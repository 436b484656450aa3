package command

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzLoad: no description panics Load; a failure is a *SpecError with a
// path.
func FuzzLoad(f *testing.F) {
	b, err := os.ReadFile("../../examples/git/git.command.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add(`{"maiden_command":1,"name":"x","options":[{"name":"a","kind":"optional","implicit":"v","default":"w"}],"constraints":[{"any_of":["a","p"]}],"positionals":[{"name":"p","type":"integer","minimum":1}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Load([]byte(in))
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) || !strings.HasPrefix(se.Path, "$") {
				t.Fatalf("Load: bad error %v", err)
			}
			return
		}
		_ = s.Help()
		_ = s.JSONSchema()
	})
}

// FuzzParseArgv: no argv panics the parser; on a valid call, parse ∘ render
// is the identity through both forms (Words, JSON), and Argv never puts a
// word starting with '-' where git would read an option it was not given.
func FuzzParseArgv(f *testing.F) {
	s := loadGit(f)
	for _, a := range []string{
		"log -n5 --oneline -- a b", "--no-pager log --author x --author=-y -vv --color", "st -sb -- -x",
		"show --end-of-options", "show -- -x", "diff -U3 --cached x", "log --max-count --upload-pack=x",
	} {
		f.Add(strings.ReplaceAll(a, " ", "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		argv := strings.Split(in, "\x00")
		inv, err := s.ParseArgv(argv)
		if err != nil {
			var ae *ArgError
			if !errors.As(err, &ae) || ae.Index >= len(argv) {
				t.Fatalf("ParseArgv(%q): bad error %v", argv, err)
			}
			return
		}
		checkRoundTrip(t, s, inv)
	})
}

// FuzzParseJSON: no input panics ParseJSON; parse ∘ render is the identity
// on valid calls.
func FuzzParseJSON(f *testing.F) {
	s := loadGit(f)
	for _, in := range []string{
		`{"command":"log","max-count":5,"paths":["-x","a b"],"author":["*"],"color":"never","verbose":2}`,
		`{"command":"show","object":"HEAD","stat":true}`, `{"command":"status","short":true,"no-pager":true}`,
	} {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		inv, err := s.ParseJSON([]byte(in))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseJSON(%q): bad error %v", in, err)
			}
			return
		}
		checkRoundTrip(t, s, inv)
	})
}

func checkRoundTrip(t *testing.T, s *Spec, inv *Invocation) {
	t.Helper()
	a, err := s.ParseArgv(inv.Words())
	if err != nil || a.String() != inv.String() || !slices.Equal(a.Positionals(), inv.Positionals()) {
		t.Fatalf("Words %q: %v, %v; want %q", inv.Words(), a, err, inv.String())
	}
	j, err := s.ParseJSON(inv.JSON())
	if err != nil || j.String() != inv.String() {
		t.Fatalf("JSON %s: %v, %v; want %q", inv.JSON(), j, err, inv.String())
	}
	// Argv: the options are exactly the declared spellings; every
	// positional comes after the command's marker.
	argv := inv.Argv(StyleSeparate)
	marker := slices.Index(argv, inv.Command().EndOfOptions)
	for i, w := range argv {
		if marker >= 0 && i > marker || !strings.HasPrefix(w, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if w == inv.Command().EndOfOptions {
			continue
		}
		if inv.Command().option(name) == nil {
			t.Fatalf("Argv %q: word %q is no declared option", argv, w)
		}
	}
}
