package condition

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"
)

// TestRegexCountedRepetition: a constant pattern with a counted
// repetition compiles and matches (cel-go's own size limit panicked on
// it, at Compile: maiden did not start with such a condition).
func TestRegexCountedRepetition(t *testing.T) {
	for _, tt := range []struct {
		expr, args string
		want       bool
	}{
		{`args.zip.matches("^[0-9]{5}$")`, `{"zip":"75001"}`, true},
		{`args.zip.matches("^[0-9]{5}$")`, `{"zip":"7500"}`, false},
		{`matches(args.zip, "^[0-9]{2,5}$")`, `{"zip":"75"}`, true},
		{`args.s.matches(args.p)`, `{"s":"aaaa","p":"^a{4}$"}`, true},
		{`args.s.matches(args.p)`, `{"s":"aaa","p":"^a{4,}$"}`, false},
	} {
		c, err := Compile(tt.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		if got, err := c.Eval(Vars{Args: mustArgs(t, tt.args)}); got != tt.want || err != nil {
			t.Errorf("%q on %s = %v, %v; want %v", tt.expr, tt.args, got, err, tt.want)
		}
	}
}

// TestRegexSizeLimit: a pattern whose program is over MaxRegexInsts is
// refused at Compile when constant, and denies when it comes from the
// call, without being compiled (\pL{1000} is 9 bytes and a million
// instructions).
func TestRegexSizeLimit(t *testing.T) {
	for _, tt := range []struct {
		expr      string
		line, col int
	}{
		{`args.s.matches("` + strings.Repeat("a", 1001) + `")`, 1, 16},
		{"tool == \"x\" ||\n  matches(args.s, \"\\\\pL{1000}\")", 2, 19},
		{`args.s.matches("(?:x{40}){25}")`, 1, 16},
	} {
		_, err := Compile(tt.expr)
		var ce *Error
		if !errors.As(err, &ce) || ce.Line != tt.line || ce.Column != tt.col || !strings.Contains(ce.Msg, "regex program size") {
			t.Errorf("Compile(%.40q) = %v; want %d:%d regex program size", tt.expr, err, tt.line, tt.col)
		}
	}
	if _, err := Compile(`args.s.matches("(?:x{30}){30}")`); err != nil {
		t.Errorf("a pattern of ~930 instructions: %v", err)
	}
	c, err := Compile(`args.s.matches(args.p)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`\\pL{1000}`, strings.Repeat("a", 5000), `(`} {
		ok, err := c.Eval(Vars{Args: mustArgs(t, `{"s":"x","p":"`+p+`"}`)})
		if ok || err == nil {
			t.Errorf("pattern %.20q: %v, %v; want an error", p, ok, err)
		}
	}
}

// TestRegexInstsBound: the bound the size check trusts before compiling
// is never below the count. The second line's patterns (pass 26) hold
// that it counts every rune of a literal and the split of every loop.
func TestRegexInstsBound(t *testing.T) {
	for _, p := range []string{``, `a`, `a{0}`, `a{3}`, `a{2,}`, `a{0,}`, `a{2,5}`, `(?:ab|c){3,7}`, `(a)*b+c?`, `(?i)[a-z]{1,3}x`,
		`^\b$`, `(?:(?:a{2}){3}){4}`, `(?:x{30}){30}`, `\pL{10}`, `(?:a|b|)`, `(|)`, `.{3,}`, `[^\x00-\x{10FFFF}]`,
		`abcdefghij`, `(?:ab)*`, `(?:ab)+c`, `(?:ab)?c`, `x(?:ab|cd)`, `a.b`, `(?:ab){2,}`, `(?:ab){1,3}`, `(?:abc){3}`} {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if b := instsBound(re, MaxRegexInsts); b < len(prog.Inst) {
			t.Errorf("%q: bound %d, %d instructions", p, b, len(prog.Inst))
		}
	}
}

// TestRegexWorkLimit: a matches() whose work (instructions × bytes) is
// over maxRegexWork denies before it runs: Go's matcher cannot be
// interrupted, and CEL's cost limit is charged only once it returned.
func TestRegexWorkLimit(t *testing.T) {
	long := strings.Repeat("a", 64<<10)
	for _, expr := range []string{`args.s.matches("(?:[a-y]?){450}z")`, `args.s.matches(args.p)`} {
		c, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := c.Eval(Vars{Args: map[string]any{"s": long, "p": "(?:[a-y]?){450}z"}})
		if ok || err == nil || !strings.Contains(err.Error(), "matches: a string of 65536 bytes is too long for a pattern of 903 instructions") {
			t.Errorf("%s: %v, %v; want the work limit", expr, ok, err)
		}
		if ok, err := c.Eval(Vars{Args: map[string]any{"s": strings.Repeat("a", 4000) + "z", "p": "(?:[a-y]?){450}z"}}); !ok || err != nil {
			t.Errorf("%s on 4 KB: %v, %v; want true", expr, ok, err)
		}
	}
}
