package condition

import (
	"fmt"
	"regexp/syntax"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// MaxRegexInsts bounds the program Go's matcher runs for a pattern of
// matches(): a constant one is refused at Compile, one computed from the
// call (args.x.matches(args.p)) is an evaluation error.
//
// cel-go's own limit (cel.RegexProgramSizeLimit) compiles the pattern
// without simplifying it first, which panics on any counted repetition
// ("^[0-9]{4}$"): at Compile for a constant, so maiden did not start.
const MaxRegexInsts = 1000

// maxRegexBytes bounds a pattern computed from the call before it is
// parsed: Go's parser takes up to ~6 µs and ~2 KB per byte.
const maxRegexBytes = 4096

// regexInsts is the size of the program Go's matcher runs for p.
func regexInsts(p string) (int, error) {
	if len(p) > maxRegexBytes {
		return 0, fmt.Errorf("regex of %d bytes, longer than the limit of %d", len(p), maxRegexBytes)
	}
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0, err
	}
	if n := instsBound(re, MaxRegexInsts); n > MaxRegexInsts {
		return n, nil
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	return len(prog.Inst), nil
}

// instsBound is at least the instructions re compiles to once simplified,
// or any number past limit once it is past (Go accepts \pL{1000}, 9
// bytes and a million instructions: compiling it to count them would be
// the cost the limit is there to refuse).
func instsBound(re *syntax.Regexp, limit int) int {
	n := 2 // the program's fail and match
	var walk func(re *syntax.Regexp) int
	walk = func(re *syntax.Regexp) int {
		switch re.Op {
		case syntax.OpLiteral:
			return max(len(re.Rune), 1)
		case syntax.OpCapture:
			return walk(re.Sub[0]) + 2
		case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
			return walk(re.Sub[0]) + 1
		case syntax.OpConcat, syntax.OpAlternate:
			s := len(re.Sub) + 1 // an alternation's branches; an empty concatenation's nop
			for _, sub := range re.Sub {
				if s += walk(sub); s > limit {
					return limit + 1
				}
			}
			return s
		case syntax.OpRepeat:
			// x{n} is n copies; x{n,} n-1 and x+; x{n,m} n copies and
			// m-n nested (x)?.
			sub := walk(re.Sub[0])
			if sub > limit {
				return limit + 1
			}
			switch {
			case re.Max == re.Min:
				return max(re.Min*sub, 1)
			case re.Max < 0:
				return (re.Min + 1) * (sub + 1)
			}
			return re.Max * (sub + 1)
		}
		return 1
	}
	return min(n+walk(re), limit+1)
}

// checkRegexConstants refuses a constant pattern of matches() over
// MaxRegexInsts (an invalid one is refused by cel-go's checker).
func checkRegexConstants(a *celast.AST) *Error {
	for _, call := range celast.MatchDescendants(celast.NavigateAST(a), celast.KindMatcher(celast.CallKind)) {
		c := call.AsCall()
		if c.FunctionName() != "matches" {
			continue
		}
		i := 1
		if c.IsMemberFunction() {
			i = 0
		}
		if len(c.Args()) <= i || c.Args()[i].Kind() != celast.LiteralKind {
			continue
		}
		p, ok := c.Args()[i].AsLiteral().Value().(string)
		if !ok {
			continue
		}
		n, err := regexInsts(p)
		if err == nil && n <= MaxRegexInsts {
			continue
		}
		e := &Error{Msg: fmt.Sprintf("regex program size %d exceeds limit of %d", n, MaxRegexInsts)}
		if err != nil {
			e.Msg = "invalid regex: " + err.Error()
		}
		if loc := a.SourceInfo().GetStartLocation(c.Args()[i].ID()); loc.Line() > 0 {
			e.Line, e.Column = loc.Line(), loc.Column()+1
		}
		return e
	}
	return nil
}

// maxRegexWork bounds one matches() call in instructions × bytes of the
// string, checked before it runs: Go's matcher costs up to ~27 ns per
// instruction per byte and cannot be interrupted, and the cost limit
// is charged only once the call has returned (a pattern of ~900
// instructions over 256 KiB took 2 s, then exceeded it). 4 M is at most
// ~0.1 s; a 50-instruction pattern over 80 KiB.
const maxRegexWork = 4 << 20

// limitRegex wraps each matches() in a check of its pattern's size (when
// computed from the call) and of its work, before it runs. With a
// constant pattern the check is on the string argument: cel-go's regex
// optimization, planned after this, rebuilds the call from its Args().
func limitRegex(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || call.Function() != "matches" || len(call.Args()) != 2 {
		return i, nil
	}
	if c, ok := call.Args()[1].(interpreter.InterpretableConst); ok {
		p, ok := c.Value().(types.String)
		if !ok {
			return i, nil
		}
		n, err := regexInsts(string(p))
		if err != nil {
			return i, nil // refused by the checker already
		}
		return regexLimitCall{InterpretableCall: call, str: checkedString{InterpretableV2: call.Args()[0], insts: n}}, nil
	}
	return regexLimitCall{InterpretableCall: call, str: call.Args()[0]}, nil
}

// regexLimitCall is a matches() whose first argument is str and whose
// pattern is checked at each call unless str does it.
type regexLimitCall struct {
	interpreter.InterpretableCall
	str interpreter.InterpretableV2
}

func (r regexLimitCall) Args() []interpreter.InterpretableV2 {
	return []interpreter.InterpretableV2{r.str, r.InterpretableCall.Args()[1]}
}

func (r regexLimitCall) Exec(f *interpreter.ExecutionFrame) ref.Val {
	if _, ok := r.str.(checkedString); !ok {
		if err := checkWork(r.str.Exec(f), r.Args()[1].Exec(f), 0); err != nil {
			return err
		}
	}
	return r.InterpretableCall.Exec(f)
}

func (r regexLimitCall) Eval(a interpreter.Activation) ref.Val {
	if _, ok := r.str.(checkedString); !ok {
		if err := checkWork(r.str.Eval(a), r.Args()[1].Eval(a), 0); err != nil {
			return err
		}
	}
	return r.InterpretableCall.Eval(a)
}

// checkedString is the string argument of a matches() with a constant
// pattern of insts instructions: an error when too long for it.
type checkedString struct {
	interpreter.InterpretableV2
	insts int
}

func (c checkedString) Exec(f *interpreter.ExecutionFrame) ref.Val {
	return c.check(c.InterpretableV2.Exec(f))
}

func (c checkedString) Eval(a interpreter.Activation) ref.Val {
	return c.check(c.InterpretableV2.Eval(a))
}

func (c checkedString) check(v ref.Val) ref.Val {
	if err := checkWork(v, nil, c.insts); err != nil {
		return err
	}
	return v
}

// checkWork is the error for a matches() over the limits, or nil: insts
// is the pattern's size, or 0 to compute it from pv. An argument that is
// an error or not a string is left for the call to report.
func checkWork(sv, pv ref.Val, insts int) ref.Val {
	s, ok := sv.(types.String)
	if !ok {
		return nil
	}
	if insts == 0 {
		p, ok := pv.(types.String)
		if !ok {
			return nil
		}
		var err error
		if insts, err = regexInsts(string(p)); err != nil {
			return types.WrapErr(err)
		}
		if insts > MaxRegexInsts {
			return types.WrapErr(fmt.Errorf("regex program size %d exceeds limit of %d", insts, MaxRegexInsts))
		}
	}
	if len(s) > maxRegexWork/insts {
		return types.WrapErr(fmt.Errorf("matches: a string of %d bytes is too long for a pattern of %d instructions (at most %d instructions × bytes)", len(s), insts, maxRegexWork))
	}
	return nil
}
