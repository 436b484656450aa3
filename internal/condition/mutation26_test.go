package condition

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// The tests of this file hold promises of the package that the
// twenty-sixth mutation pass (docs/security-tests.md) found no test
// holding: its bounds at the limit and one past it, and what a call's
// input is read as.

// compileErr is Compile's *Error for expr, or nil when it compiles.
func compileErr(t *testing.T, expr string) *Error {
	t.Helper()
	_, err := Compile(expr)
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Compile(%.60q) = %v, not an *Error", expr, err)
	}
	return ce
}

// TestLengthAtTheLimit: an expression of MaxLen bytes compiles; one byte
// more is refused by the length check itself.
func TestLengthAtTheLimit(t *testing.T) {
	at := `tool == "` + strings.Repeat("a", MaxLen-10) + `"`
	if len(at) != MaxLen {
		t.Fatalf("len = %d", len(at))
	}
	if e := compileErr(t, at); e != nil {
		t.Errorf("an expression of MaxLen bytes: %v", e)
	}
	want := Error{Msg: "expression is 4097 bytes, longer than the limit of 4096"}
	if e := compileErr(t, at+" "); e == nil || *e != want {
		t.Errorf("an expression of MaxLen+1 bytes: %v; want %v", e, &want)
	}
}

// TestCostEstimateJustOverTheLimit: an estimate of exactly MaxCost
// compiles; one a few percent over it is refused (one element times a
// pass over an argument).
func TestCostEstimateJustOverTheLimit(t *testing.T) {
	// 5003 + 2000×47 for the pass, 101 per contains, 2 per comparison.
	at := `args.b.all(y, ` + strings.Repeat("y == 1 && ", 47) + `y == 1)` + strings.Repeat(` && tool.contains("x")`, 9) + strings.Repeat(` && tool == "x"`, 44)
	if e := compileErr(t, at); e != nil {
		t.Errorf("an estimate of exactly MaxCost: %v", e)
	}
	over := Error{Line: 1, Column: 1, Msg: "estimated cost 100002 exceeds the limit of 100000 (assuming inputs of at most 1000 elements or characters)"}
	if e := compileErr(t, at+` && tool == "x"`); e == nil || *e != over {
		t.Errorf("an estimate of MaxCost+2: %v; want %v", e, &over)
	}
	want := Error{Line: 1, Column: 1, Msg: "estimated cost 105017 exceeds the limit of 100000 (assuming inputs of at most 1000 elements or characters)"}
	if e := compileErr(t, `[1].all(x, args.b.all(y, x == y))`); e == nil || *e != want {
		t.Errorf("Compile = %v; want %v", e, &want)
	}
}

// TestNodeLimit: an expression of more than 2000 nodes is refused even
// under MaxLen bytes (an expression without a comprehension is bounded by
// its node count and evaluated without a timer).
func TestNodeLimit(t *testing.T) {
	expr := "[" + strings.Repeat("1,", 2030) + "1] == []"
	want := Error{Msg: "expression node count exceeds limit: count 2034, limit 2000"}
	if e := compileErr(t, expr); e == nil || *e != want {
		t.Errorf("Compile(%d bytes, 2034 nodes) = %v; want %v", len(expr), e, &want)
	}
}

// TestCrossTypeNumericStatic: cross-type numeric comparisons are on for
// statically typed operands too (size() is an int).
func TestCrossTypeNumericStatic(t *testing.T) {
	c, err := Compile(`size(tool) < 7.5`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Eval(Vars{Tool: "weather"}); !ok || err != nil {
		t.Errorf("size(\"weather\") < 7.5 = %v, %v; want true", ok, err)
	}
}

// TestEvalIntNonInt: a cost whose value is not an int at run time is an
// error, never 0 (a cost of 0 would spend nothing of a budget).
func TestEvalIntNonInt(t *testing.T) {
	c, err := CompileInt(`args.n`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.EvalInt(context.Background(), Vars{Args: mustArgs(t, `{"n":"5"}`)})
	if err == nil || err.Error() != `expression "args.n": the result is string, not int` {
		t.Errorf("EvalInt = %d, %v; want the result-type error", n, err)
	}
}

// TestNilArgsIsEmpty: Vars.Args nil is {} (documented), not an unknown
// variable.
func TestNilArgsIsEmpty(t *testing.T) {
	c, err := Compile(`size(args) == 0 && !has(args.city)`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Eval(Vars{}); !ok || err != nil {
		t.Errorf("with no args: %v, %v; want true", ok, err)
	}
}

// TestArgsBeyondInt64: a JSON number past int64 stays a double; it never
// wraps to a negative int (`args.amount <= 100` must not hold for 2^63).
func TestArgsBeyondInt64(t *testing.T) {
	c, err := Compile(`args.amount <= 100`)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{`{"amount":9223372036854775808}`, `{"amount":9223372036854775808.0}`, `{"amount":1e19}`} {
		a := mustArgs(t, in)
		if f, ok := a["amount"].(float64); !ok || f != math.Exp2(63) && f != 1e19 {
			t.Errorf("ArgsFromJSON(%s) amount = %T %v; want the float64", in, a["amount"], a["amount"])
		}
		if ok, err := c.Eval(Vars{Args: a}); ok || err != nil {
			t.Errorf("args.amount <= 100 on %s = %v, %v; want false", in, ok, err)
		}
	}
	if a := mustArgs(t, `{"n":-9223372036854775808}`); a["n"] != int64(math.MinInt64) {
		t.Errorf("-2^63 = %T %v; want int64", a["n"], a["n"])
	}
}

// TestRegexSizeAtTheLimit: a pattern of exactly MaxRegexInsts
// instructions (998 literal runes, with fail and match) is accepted, one
// more is refused, constant at Compile and computed at Eval.
func TestRegexSizeAtTheLimit(t *testing.T) {
	at, over := strings.Repeat("a", 998), strings.Repeat("a", 999)
	if e := compileErr(t, `args.s.matches("`+at+`")`); e != nil {
		t.Errorf("a constant pattern of 1000 instructions: %v", e)
	}
	want := Error{Line: 1, Column: 16, Msg: "regex program size 1001 exceeds limit of 1000"}
	if e := compileErr(t, `args.s.matches("`+over+`")`); e == nil || *e != want {
		t.Errorf("a constant pattern of 1001 instructions: %v; want %v", e, &want)
	}
	c, err := Compile(`args.s.matches(args.p)`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Eval(Vars{Args: map[string]any{"s": at, "p": at}}); !ok || err != nil {
		t.Errorf("a computed pattern of 1000 instructions: %v, %v; want true", ok, err)
	}
	ok, err := c.Eval(Vars{Args: map[string]any{"s": over, "p": over}})
	if wantErr := `condition "args.s.matches(args.p)": regex program size 1001 exceeds limit of 1000`; ok || err == nil || err.Error() != wantErr {
		t.Errorf("a computed pattern of 1001 instructions: %v, %v; want %s", ok, err, wantErr)
	}
}

// TestRegexRefusedBeforeCompiling: a pattern whose bound is over the
// limit is refused on the bound, without compiling it to count (the
// refusal reports the bound, MaxRegexInsts+1).
func TestRegexRefusedBeforeCompiling(t *testing.T) {
	if n, err := regexInsts(`\pL{1000}`); n != MaxRegexInsts+1 || err != nil {
		t.Errorf("regexInsts(\\pL{1000}) = %d, %v; want %d (the bound)", n, err, MaxRegexInsts+1)
	}
}

// TestRegexBytesAtTheLimit: a computed pattern of 4096 bytes (and few
// instructions) is parsed, one of 4097 is refused before it is. (A
// constant one cannot pass 4096 bytes: the expression holding it cannot.)
func TestRegexBytesAtTheLimit(t *testing.T) {
	at := strings.Repeat("[a-zA-Z0-9]", 372) + "bbbb"
	if len(at) != 4096 {
		t.Fatalf("len = %d", len(at))
	}
	c, err := Compile(`args.s.matches(args.p)`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Eval(Vars{Args: map[string]any{"s": "x", "p": at}}); ok || err != nil {
		t.Errorf("a pattern of 4096 bytes: %v, %v; want false", ok, err)
	}
	ok, err := c.Eval(Vars{Args: map[string]any{"s": "x", "p": at + "b"}})
	if want := `condition "args.s.matches(args.p)": regex of 4097 bytes, longer than the limit of 4096`; ok || err == nil || err.Error() != want {
		t.Errorf("a pattern of 4097 bytes: %v, %v; want %s", ok, err, want)
	}
}

// TestRegexWorkAtTheLimit: a{510} is 512 instructions, so a string of
// maxRegexWork/512 bytes is matched and one byte more is refused, for a
// constant and a computed pattern alike.
func TestRegexWorkAtTheLimit(t *testing.T) {
	if n, err := regexInsts("a{510}"); n != 512 || err != nil {
		t.Fatalf("regexInsts(a{510}) = %d, %v; want 512", n, err)
	}
	n := 8192 // maxRegexWork / 512
	for _, expr := range []string{`args.s.matches("a{510}")`, `args.s.matches(args.p)`} {
		c, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.Eval(Vars{Args: map[string]any{"s": strings.Repeat("b", n), "p": "a{510}"}}); ok || err != nil {
			t.Errorf("%s on %d bytes: %v, %v; want false", expr, n, ok, err)
		}
		ok, err := c.Eval(Vars{Args: map[string]any{"s": strings.Repeat("b", n+1), "p": "a{510}"}})
		if want := `condition "` + strings.ReplaceAll(expr, `"`, `\"`) + `": matches: a string of 8193 bytes is too long for a pattern of 512 instructions (at most 4194304 instructions × bytes)`; ok || err == nil || err.Error() != want {
			t.Errorf("%s on %d bytes: %v, %v; want %s", expr, n+1, ok, err, want)
		}
	}
}
