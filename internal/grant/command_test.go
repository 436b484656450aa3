package grant

import (
	"errors"
	"strings"
	"testing"
)

// The command grammar (command words, "--", positionals) as CARDS.md's A10
// and A11 for commands: what a grant allows is exactly what it names.
func TestAllowsCommand(t *testing.T) {
	type call struct {
		cmd  []string
		args []Arg
		pos  []string
	}
	log5 := call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, nil}
	for _, tc := range []struct {
		grant string
		call  call
		want  bool
	}{
		{"tool:invoke git log --max-count=*", log5, true},
		{"tool:invoke git log --max-count=5", log5, true},
		{"tool:invoke git log --max-count=6", log5, false},
		{"tool:invoke git log --max-count=\\*", log5, false}, // A11: an escaped '*' is literal
		{"tool:invoke git log --max-count=*", call{[]string{"push"}, nil, nil}, false},
		{"tool:invoke git log --max-count=*", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}, {Name: "upload-pack", Value: "x"}}, nil}, false},
		{"tool:invoke git log --max-count=* --...", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}, {Name: "oneline", Form: FormTrue}}, nil}, true},
		{"tool:invoke git log --max-count=*", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, []string{"secret"}}, false},
		{"tool:invoke git log --max-count=* -- *.md", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, []string{"README.md"}}, true},
		{"tool:invoke git log --max-count=* -- *.md", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, []string{"README.md", "x.md"}}, false},
		{"tool:invoke git log --max-count=* -- *.md ...", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, []string{"README.md", "x"}}, true},
		{"tool:invoke git log --max-count=* -- *.md *.txt", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, []string{"README.md"}}, false},
		{"tool:invoke git log --max-count=* -- *.md *.txt ...", call{[]string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, nil}, false},
		{"tool:invoke git log --... -- ...", log5, true},
		{"tool:invoke git log --... -- ...", call{[]string{"show"}, nil, nil}, false},
		{"tool:invoke git --...", log5, false},          // no command words: only the bare tool
		{"tool:invoke git log show --...", log5, false}, // a longer path is another command
		{"tool:invoke git remote --...", call{[]string{"remote", "add"}, nil, nil}, false},
		{`tool:invoke git show -- \...`, call{[]string{"show"}, nil, []string{"..."}}, true},
		{`tool:invoke git show -- \...`, call{[]string{"show"}, nil, []string{"x"}}, false},
		{`tool:invoke git show -- "a b"`, call{[]string{"show"}, nil, []string{"a b"}}, true},
		{`tool:invoke git show -- --`, call{[]string{"show"}, nil, []string{"--"}}, true},
		{"tool:invoke g* log --...", log5, true},
		{"approve:always git log --max-count=5", log5, false}, // another class
	} {
		t.Run(tc.grant, func(t *testing.T) {
			g := mustParse(t, tc.grant)
			target := CommandTarget("git", tc.call.cmd, tc.call.args, tc.call.pos)
			if got := g.Allows(target); got != tc.want {
				t.Fatalf("%q allows %q: %v, want %v", tc.grant, target.String(), got, tc.want)
			}
			// The grant printed for a target allows it, and only it.
			exact := mustParse(t, target.String())
			if !exact.Allows(target) {
				t.Fatalf("%q does not allow the call it was printed for", target.String())
			}
			if exact.String() != target.String() {
				t.Fatalf("target %q reparses as %q", target.String(), exact.String())
			}
		})
	}
}

func TestCommandGrantCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"tool:invoke git log --max-count=5":              "tool:invoke git log --max-count=5",
		"tool:invoke git log --b=1 --a=2 -- x y":         "tool:invoke git log --a=2 --b=1 -- x y",
		"tool:invoke git log --":                         "tool:invoke git log",
		"tool:invoke git log -- ...":                     "tool:invoke git log -- ...",
		"tool:invoke git log --... -- * \\*":             "tool:invoke git log --... -- * \\*",
		`tool:invoke git show -- "a b" \... ""`:          `tool:invoke git show -- "a b" \... ""`,
		"tool:invoke git show -- -x --":                  "tool:invoke git show -- -x --",
		"approve:always git log --max-count=* -- a":      "approve:always git log --max-count=* -- a",
		"tool:invoke weather --city=Paris":               "tool:invoke weather --city=Paris",
		"tool:invoke git \"log\" --max-count=5":          "tool:invoke git log --max-count=5",
		"tool:invoke git remote add --name=x -- o":       "tool:invoke git remote add --name=x -- o",
		"tool:invoke git v1.2 --x":                       "tool:invoke git v1.2 --x",
		"tool:invoke git log --max-count=* -- \"\\\"x\"": "tool:invoke git log --max-count=* -- \\\"x",
	} {
		g := mustParse(t, in)
		if g.String() != want {
			t.Errorf("Parse(%q).String() = %q, want %q", in, g.String(), want)
		}
		if again := mustParse(t, g.String()); again.String() != g.String() {
			t.Errorf("%q: canonical form not a fixed point: %q", in, again.String())
		}
	}
}

func TestCommandGrantErrors(t *testing.T) {
	for _, tc := range []struct {
		in       string
		col      int
		expected string
	}{
		{"tool:invoke git --x=1 log", 23, "an argument --name=value"},           // command words come first
		{"tool:invoke git l*g", 17, "an argument --name=value"},                 // command words are literal
		{"tool:invoke git log --... x", 27, "the end of the grant after --..."}, // only "--" may follow
		{"tool:invoke git log -- ... x", 28, `the end of the grant after the positionals' "..."`},
		{`tool:invoke git \log`, 17, "an argument --name=value"}, // an escaped word is not a command word
	} {
		_, err := Parse(tc.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("Parse(%q) = %v, want a *ParseError", tc.in, err)
		}
		if pe.Pos+1 != tc.col || !strings.Contains(pe.Expected, tc.expected) {
			t.Errorf("Parse(%q): column %d, expected %q; want column %d, %q", tc.in, pe.Pos+1, pe.Expected, tc.col, tc.expected)
		}
	}
}

func TestCoversCommand(t *testing.T) {
	for _, tc := range []struct {
		parent, child string
		want          bool
	}{
		{"tool:invoke git log --max-count=*", "tool:invoke git log --max-count=5", true},
		{"tool:invoke git log --max-count=5", "tool:invoke git log --max-count=*", false},
		{"tool:invoke git log --max-count=*", "tool:invoke git show --max-count=5", false},
		{"tool:invoke git log --...", "tool:invoke git log --x -- a", false}, // positionals are not options
		{"tool:invoke git log --... -- ...", "tool:invoke git log --x -- a", true},
		{"tool:invoke git log -- * ...", "tool:invoke git log -- a b", true},
		{"tool:invoke git log -- * ...", "tool:invoke git log", false},
		{"tool:invoke git log -- a", "tool:invoke git log -- a ...", false},
		{"tool:invoke git log -- a*", "tool:invoke git log -- ab*", true},
		{"tool:invoke git log -- ab*", "tool:invoke git log -- a*", false},
		{"tool:invoke git --...", "tool:invoke git log --...", false},
	} {
		p, c := mustParse(t, tc.parent), mustParse(t, tc.child)
		if got := p.Covers(c); got != tc.want {
			t.Errorf("%q covers %q: %v, want %v", tc.parent, tc.child, got, tc.want)
		}
	}
}

func TestCommandRendering(t *testing.T) {
	got := CommandRendering([]string{"log"}, []Arg{{Name: "z", Form: FormTrue}, {Name: "a", Value: "1 2"}}, []string{"...", "x*"})
	if want := `log "--a=1 2" --z -- \... x\*`; got != want {
		t.Fatalf("CommandRendering = %q, want %q", got, want)
	}
	if got := CommandRendering(nil, []Arg{{Name: "city", Value: "Paris"}}, nil); got != Rendering([]Arg{{Name: "city", Value: "Paris"}}) {
		t.Fatalf("a JSON tool's command rendering %q differs from Rendering", got)
	}
}

// FuzzCoversCommand: attenuation stays sound with command words and
// positionals: whenever parent covers child, every call child allows,
// parent allows.
func FuzzCoversCommand(f *testing.F) {
	f.Add([]byte("\x01\x02ab*\x00a\x03\x01b"))
	f.Add([]byte("\x00\x05*a*\x00\x00\x04"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &byteReader{b: b}
		gen := func() string {
			s := "tool:invoke git"
			if r.next()%4 != 0 {
				s += " log"
			}
			if r.next()%3 == 0 {
				s += " --x=" + genValue(r, true)
			}
			if r.next()%2 == 0 {
				s += " --..."
			}
			s += " --"
			for range r.next() % 3 {
				s += " " + positionalWord(genValue(r, true))
			}
			if r.next()%2 == 0 {
				s += " ..."
			}
			return s
		}
		ps, cs := gen(), gen()
		p, err1 := Parse(ps)
		c, err2 := Parse(cs)
		if err1 != nil || err2 != nil {
			t.Fatalf("generated grants do not parse: %q %v, %q %v", ps, err1, cs, err2)
		}
		if !p.Covers(c) {
			return
		}
		for range 8 {
			var cmd []string
			if r.next()%4 != 0 {
				cmd = []string{"log"}
			}
			var args []Arg
			if r.next()%2 == 0 {
				args = append(args, Arg{Name: "x", Value: genValue(r, false)})
			}
			if r.next()%3 == 0 {
				args = append(args, Arg{Name: "y", Form: FormTrue})
			}
			var pos []string
			for range r.next() % 4 {
				pos = append(pos, genValue(r, false))
			}
			tg := CommandTarget("git", cmd, args, pos)
			if c.Allows(tg) && !p.Allows(tg) {
				t.Fatalf("%q covers %q, yet %q is allowed by the child only", ps, cs, tg.String())
			}
		}
	})
}
