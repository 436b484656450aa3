package condition

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

const (
	// MaxLen bounds the length of an expression in bytes.
	MaxLen = 4096
	// MaxCost bounds both the estimated (compile time) and the actual (run
	// time) cost of an evaluation, in CEL cost units.
	MaxCost = 100_000
	// SizeHint is the size the compile-time estimate assumes for any
	// string, list or map read from a variable.
	SizeHint = 1000
	// MaxDuration bounds the wall-clock time of one evaluation. The cost
	// limit alone does not bound time: cel-go v0.31's run-time cost tracker
	// is quadratic in the iterations of some comprehensions (its stack of
	// values is searched linearly), so 100,000 units can take half a second.
	MaxDuration = 10 * time.Millisecond
)

// Vars are the values of one evaluation.
type Vars struct {
	Tool     string
	Args     map[string]any // nil means {}
	Rendered string
	Agent    string
	Session  string
}

// Condition is a compiled, type-checked expression with a bool result
// (Compile) or an int result (CompileInt).
type Condition struct {
	src  string
	prg  cel.Program
	loop bool // has a comprehension: evaluated under MaxDuration
}

// Error is a compile error: where in the expression and what was wrong.
type Error struct {
	Line, Column int    // 1-based, within the expression; 0 when unknown
	Msg          string // CEL's message
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "condition: " + e.Msg
	}
	return fmt.Sprintf("condition: %d:%d: %s", e.Line, e.Column, e.Msg)
}

var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("rendered", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("session", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxLen),
		cel.ParserRecursionLimit(100),
		cel.ExpressionNodeLimit(2000),
		// Not cel.RegexProgramSizeLimit: it panics on "^[0-9]{4}$"
		// (regex.go: MaxRegexInsts, checkRegexConstants, limitRegex).
	)
	if err != nil {
		panic("condition: environment: " + err.Error())
	}
	return e
}()

// Compile parses and checks expr, whose result must be bool. Errors are
// *Error values.
func Compile(expr string) (*Condition, error) { return compile(expr, types.BoolType) }

// CompileInt parses and checks expr, whose result must be an int (a cost:
// EvalInt). Errors are *Error values.
func CompileInt(expr string) (*Condition, error) { return compile(expr, types.IntType) }

func compile(expr string, want *types.Type) (*Condition, error) {
	if len(expr) > MaxLen {
		return nil, &Error{Msg: fmt.Sprintf("expression is %d bytes, longer than the limit of %d", len(expr), MaxLen)}
	}
	if !utf8.ValidString(expr) {
		return nil, &Error{Msg: "expression is not valid UTF-8"}
	}
	if strings.TrimSpace(expr) == "" {
		return nil, &Error{Msg: "expression is empty"}
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) == 0 {
			return nil, &Error{Msg: iss.Err().Error()}
		}
		e := errs[0]
		ce := &Error{Msg: e.Message}
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			ce.Line, ce.Column = loc.Line(), loc.Column()+1
		}
		return nil, ce
	}
	if t := ast.OutputType(); !t.IsExactType(want) && !t.IsExactType(types.DynType) {
		what := "a condition must be bool"
		if want == types.IntType {
			what = "a cost must be an int"
		}
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("the result is %s, %s", t, what)}
	}
	if e := checkRegexConstants(ast.NativeRep()); e != nil {
		return nil, e
	}
	est, err := env.EstimateCost(ast, sizeHint{})
	if err != nil {
		return nil, &Error{Msg: "cost estimate: " + err.Error()}
	}
	if est.Max > MaxCost {
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("estimated cost %s exceeds the limit of %d (assuming inputs of at most %d elements or characters)", costString(est.Max), MaxCost, SizeHint)}
	}
	prg, err := env.Program(ast, cel.CostLimit(MaxCost), cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(64), cel.CustomDecoratorV2(limitRegex))
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	loop := len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), celast.KindMatcher(celast.ComprehensionKind))) > 0
	return &Condition{src: expr, prg: prg, loop: loop}, nil
}

func costString(c uint64) string {
	if c == math.MaxUint64 {
		return "unbounded"
	}
	return strconv.FormatUint(c, 10)
}

// String is the expression as compiled.
func (c *Condition) String() string { return c.src }

// Eval evaluates the condition. Any error (missing key, type mismatch,
// non-bool result, cost limit) must be treated as a denial.
func (c *Condition) Eval(v Vars) (bool, error) {
	return c.EvalContext(context.Background(), v)
}

// EvalContext is Eval that also stops when ctx is done, and in any case
// after MaxDuration. Only a comprehension (all, exists, map, filter...)
// can run long; an expression without one is bounded by its node count
// and evaluated without a timer (which costs about as much as the
// evaluation itself).
func (c *Condition) EvalContext(ctx context.Context, v Vars) (bool, error) {
	out, err := c.eval(ctx, &v)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("condition %q: the result is %s, not bool", c.src, out.Type().TypeName())
	}
	return b, nil
}

// EvalInt evaluates an expression compiled with CompileInt, as
// EvalContext does.
func (c *Condition) EvalInt(ctx context.Context, v Vars) (int64, error) {
	out, err := c.eval(ctx, &v)
	if err != nil {
		return 0, err
	}
	n, ok := out.Value().(int64)
	if !ok {
		return 0, fmt.Errorf("expression %q: the result is %s, not int", c.src, out.Type().TypeName())
	}
	return n, nil
}

func (c *Condition) eval(ctx context.Context, v *Vars) (ref.Val, error) {
	var (
		out ref.Val
		err error
	)
	if c.loop {
		ctx, cancel := context.WithTimeout(ctx, MaxDuration)
		defer cancel()
		out, _, err = c.prg.ContextEval(ctx, &activation{v: v})
	} else {
		out, _, err = c.prg.Eval(&activation{v: v})
	}
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", c.src, err)
	}
	return out, nil
}

type activation struct{ v *Vars }

var emptyArgs = map[string]any{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return a.v.Tool, true
	case "args":
		if a.v.Args == nil {
			return emptyArgs, true
		}
		return a.v.Args, true
	case "rendered":
		return a.v.Rendered, true
	case "agent":
		return a.v.Agent, true
	case "session":
		return a.v.Session, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// sizeHint bounds what the estimator does not know: every string or
// collection reached from a variable.
type sizeHint struct{}

func (sizeHint) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if len(n.Path()) > 0 {
		return &checker.SizeEstimate{Min: 0, Max: SizeHint}
	}
	return nil
}

func (sizeHint) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// ArgsFromJSON parses a call's input (a JSON object) into the value of
// `args`: objects are map[string]any, arrays []any, integral numbers that
// fit an int64 are int64, other numbers float64.
func ArgsFromJSON(input []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(input))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("condition: args: %w", err)
	}
	if d.More() {
		return nil, errors.New("condition: args: trailing data after the JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("condition: args: the input is not a JSON object")
	}
	return convert(m).(map[string]any), nil
}

func convert(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = convert(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = convert(e)
		}
		return x
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil { // out of range: ±Inf, as JSON readers do not agree
			return f
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return int64(f)
		}
		return f
	}
	return v
}
