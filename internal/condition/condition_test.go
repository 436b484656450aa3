package condition

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustArgs(t testing.TB, s string) map[string]any {
	t.Helper()
	a, err := ArgsFromJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestEval(t *testing.T) {
	vars := Vars{Tool: "weather", Rendered: "weather --city=Rome --days=3", Agent: "ops", Session: "s1"}
	tests := []struct {
		expr, args string
		want       bool
	}{
		{`tool == "weather" && args.city != "Paris"`, `{"city":"Rome"}`, true},
		{`tool == "weather" && args.city != "Paris"`, `{"city":"Paris"}`, false},
		{`args.amount <= 100`, `{"amount":100}`, true},
		{`args.amount <= 100`, `{"amount":100.5}`, false},
		{`args.amount == 100`, `{"amount":100.0}`, true},
		{`args.count + 1 == 4`, `{"count":3}`, true},
		{`rendered.startsWith("weather ") && rendered.contains("--city=Rome")`, `{}`, true},
		{`agent == "ops" && session == "s1"`, `{}`, true},
		{`!has(args.city) || args.city != "Paris"`, `{}`, true},
		{`has(args.city)`, `{}`, false},
		{`args.tags.exists(t, t == "urgent")`, `{"tags":["a","urgent"]}`, true},
		{`args.tags.all(t, t.size() < 5)`, `{"tags":["a","urgent"]}`, false},
		{`size(args.tags) == 2`, `{"tags":["a","b"]}`, true},
		{`args.opt.nested.deep == true`, `{"opt":{"nested":{"deep":true}}}`, true},
		{`args.city.matches("^[A-Z][a-z]+$")`, `{"city":"Rome"}`, true},
		{`args.city.matches("^[A-Z][a-z]+$")`, `{"city":"rome"}`, false},
		{`args.flag`, `{"flag":true}`, true},
		{`"city" in args`, `{"city":"x"}`, true},
		{`args.big > 9007199254740992`, `{"big":9007199254740993}`, true},
		{`args.n == null`, `{"n":null}`, true},
	}
	for _, tt := range tests {
		c, err := Compile(tt.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		v := vars
		v.Args = mustArgs(t, tt.args)
		got, err := c.Eval(v)
		if err != nil || got != tt.want {
			t.Errorf("%q on %s = %v, %v; want %v", tt.expr, tt.args, got, err, tt.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		expr      string
		line, col int
		msg       string
	}{
		{`tool == `, 1, 9, "Syntax error"},
		{`tool = "x"`, 1, 6, "Syntax error"},
		{"tool == \"a\" &&\n  nosuch == 1", 2, 3, "undeclared reference to 'nosuch'"},
		{`env.HOME == "x"`, 1, 1, "undeclared reference to 'env'"},
		{`request.auth == "x"`, 1, 1, "undeclared reference"},
		{`now() > timestamp("2020-01-01T00:00:00Z")`, 1, 4, "undeclared reference to 'now'"},
		{`tool.size() > "x"`, 1, 13, "no matching overload"},
		{`tool`, 1, 1, "a condition must be bool"},
		{`1 + 2`, 1, 1, "a condition must be bool"},
		{`args`, 1, 1, "a condition must be bool"},
		{`[true]`, 1, 1, "a condition must be bool"},
		{`tool.repeat(3) == ""`, 1, 12, "undeclared reference to 'repeat'"},
		{`"a".format([1]) == ""`, 1, 11, "undeclared reference to 'format'"},
		{``, 0, 0, "empty"},
		{"   \n ", 0, 0, "empty"},
		{"tool == \"\xff\"", 0, 0, "UTF-8"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.expr)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("Compile(%q) = %v, want *Error", tt.expr, err)
			continue
		}
		if ce.Line != tt.line || ce.Column != tt.col || !strings.Contains(ce.Msg, tt.msg) {
			t.Errorf("Compile(%q) = %d:%d %q; want %d:%d containing %q", tt.expr, ce.Line, ce.Column, ce.Msg, tt.line, tt.col, tt.msg)
		}
	}
}

func TestLength(t *testing.T) {
	ok := `tool == "` + strings.Repeat("a", MaxLen-20) + `"`
	if _, err := Compile(ok); err != nil {
		t.Errorf("a %d-byte expression: %v", len(ok), err)
	}
	long := `tool == "` + strings.Repeat("a", MaxLen) + `"`
	if _, err := Compile(long); err == nil || !strings.Contains(err.Error(), "longer than the limit") {
		t.Errorf("a %d-byte expression: %v, want refused", len(long), err)
	}
	deep := strings.Repeat("(", 500) + "true" + strings.Repeat(")", 500)
	if _, err := Compile(deep); err == nil {
		t.Error("500 nested parentheses compiled")
	}
}

// Cost attacks refused at compile time: the estimate knows literal sizes
// and assumes SizeHint for the variables.
func TestCostEstimateRefuses(t *testing.T) {
	list := "[" + strings.Repeat("1,", 99) + "1]"
	for _, expr := range []string{
		list + `.all(x, ` + list + `.all(y, ` + list + `.all(z, x + y + z > 0)))`,
		`args.a.all(x, args.b.all(y, args.c.all(z, x == y)))`,
		`args.items.all(x, args.items.all(y, x != y || true))`,
		list + `.map(x, ` + list + `.map(y, ` + list + `.map(z, rendered + rendered))).size() > 0`,
	} {
		_, err := Compile(expr)
		if err == nil || !strings.Contains(err.Error(), "estimated cost") {
			t.Errorf("Compile(%.80q...) = %v, want an estimated cost error", expr, err)
		}
	}
	// One pass over a list of the hinted size is fine.
	if _, err := Compile(`args.items.all(x, x > 0)`); err != nil {
		t.Errorf("a single comprehension over args: %v", err)
	}
}

// Cost attacks that pass the estimate (inputs bigger than the hint) are
// stopped at run time.
func TestCostLimitAtRunTime(t *testing.T) {
	c, err := Compile(`args.items.all(x, x.size() >= 0 && x.startsWith("") && x.endsWith("") && x.contains(""))`)
	if err != nil {
		t.Fatal(err)
	}
	small := make([]any, 10)
	for i := range small {
		small[i] = "x"
	}
	if ok, err := c.Eval(Vars{Args: map[string]any{"items": small}}); !ok || err != nil {
		t.Fatalf("10 items: %v, %v", ok, err)
	}
	huge := make([]any, 200_000)
	for i := range huge {
		huge[i] = "x"
	}
	ok, err := c.Eval(Vars{Args: map[string]any{"items": huge}})
	// Whichever comes first (under -race the clock may win).
	if ok || err == nil || !strings.Contains(err.Error(), "cost limit") && !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("200000 items: %v, %v; want a cost limit error", ok, err)
	}
	// String growth: concatenation of a big input.
	c, err = Compile(`(rendered + rendered + rendered + rendered + rendered).size() == 1`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Eval(Vars{Rendered: "small"}); ok || err != nil {
		t.Fatalf("small: %v, %v", ok, err)
	}
	ok, err = c.Eval(Vars{Rendered: strings.Repeat("r", 1<<20)})
	if ok || err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("string growth: %v, %v; want a cost limit error", ok, err)
	}
}

func TestRunTimeErrorsDeny(t *testing.T) {
	tests := []struct{ expr, args, msg string }{
		{`args.city != "Paris"`, `{}`, "no such key"},
		{`args.city > 3`, `{"city":"Rome"}`, "no such overload"},
		{`args.flag`, `{"flag":"yes"}`, "not bool"},
		{`args.n / args.d == 1`, `{"n":1,"d":0}`, "division by zero"},
		{`args.a.b == 1`, `{"a":"str"}`, ""},
		{`args.x[5] == 1`, `{"x":[1]}`, "index"},
	}
	for _, tt := range tests {
		c, err := Compile(tt.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		ok, err := c.Eval(Vars{Args: mustArgs(t, tt.args)})
		if ok || err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q on %s = %v, %v; want false and an error containing %q", tt.expr, tt.args, ok, err, tt.msg)
		}
	}
	// nil Args is {} (a missing key, not a panic).
	c, _ := Compile(`args.city == "x"`)
	if ok, err := c.Eval(Vars{}); ok || err == nil {
		t.Errorf("nil args: %v, %v", ok, err)
	}
}

func TestArgsFromJSON(t *testing.T) {
	for _, bad := range []string{``, `[]`, `"x"`, `1`, `{`, `{} {}`, `null`} {
		if _, err := ArgsFromJSON([]byte(bad)); err == nil {
			t.Errorf("ArgsFromJSON(%q) accepted", bad)
		}
	}
	a := mustArgs(t, `{"i":3,"f":1.5,"e":1e2,"big":1e300,"l":[1,2.5],"o":{"k":-0}}`)
	if a["i"] != int64(3) || a["f"] != 1.5 || a["e"] != int64(100) || a["big"] != 1e300 {
		t.Errorf("numbers: %#v", a)
	}
	if l := a["l"].([]any); l[0] != int64(1) || l[1] != 2.5 {
		t.Errorf("list: %#v", l)
	}
}

func TestConcurrent(t *testing.T) {
	c, err := Compile(`tool == "weather" && args.city != "Paris"`)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for i := range 8 {
		go func() {
			city := "Paris"
			if i%2 == 0 {
				city = "Rome"
			}
			for range 500 {
				ok, err := c.Eval(Vars{Tool: "weather", Args: map[string]any{"city": city}})
				if err != nil || ok != (city == "Rome") {
					done <- errors.New("wrong result under concurrency")
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`tool == "weather" && args.city != "Paris"`, `args.items.all(x, x > 0)`, `has(args.a.b)`,
		`[1,2,3].map(x, x * 2)[0] == 2`, `rendered.matches("a+b")`, `{"a": 1}.a == 1`, `dyn(1) == 1.0`,
		`args.x.exists_one(y, y == 1)`, `timestamp("2020-01-01T00:00:00Z") < timestamp("2021-01-01T00:00:00Z")`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := Compile(expr)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q) error %T is not *Error", expr, err)
			}
			return
		}
		c.Eval(Vars{Tool: "t", Args: map[string]any{"x": []any{int64(1), "a"}, "a": map[string]any{"b": 1.5}}, Rendered: "t --x=1"})
	})
}

func BenchmarkEval(b *testing.B) {
	c, err := Compile(`tool == "weather" && args.city != "Paris"`)
	if err != nil {
		b.Fatal(err)
	}
	v := Vars{Tool: "weather", Args: map[string]any{"city": "Rome"}, Rendered: "weather --city=Rome", Agent: "a", Session: "s"}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := c.Eval(v); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkArgsFromJSON is the parse a caller pays once per call to give
// conditions their args (not needed when no condition reads args).
func BenchmarkArgsFromJSON(b *testing.B) {
	in := []byte(`{"city":"Rome","days":3}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ArgsFromJSON(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineStringCompare is the Go equivalent of the condition, the
// floor the CEL evaluation is compared against.
func BenchmarkBaselineStringCompare(b *testing.B) {
	v := Vars{Tool: "weather", Args: map[string]any{"city": "Rome"}}
	n := 0
	for b.Loop() {
		if v.Tool == "weather" && v.Args["city"] != "Paris" {
			n++
		}
	}
	if n == 0 {
		b.Fatal("never true")
	}
}

// A comprehension whose run-time cost tracking is quadratic (cel-go v0.31)
// is stopped by MaxDuration before the cost limit.
func TestDurationLimit(t *testing.T) {
	c, err := Compile(`args.items.all(x, x == 1 && x == 1 && x == 1)`)
	if err != nil {
		t.Fatal(err)
	}
	huge := make([]any, 200_000)
	for i := range huge {
		huge[i] = int64(1)
	}
	start := time.Now()
	ok, err := c.Eval(Vars{Args: map[string]any{"items": huge}})
	if d := time.Since(start); ok || err == nil || d > 20*MaxDuration {
		t.Fatalf("= %v, %v after %v; want an error within about %v", ok, err, d, MaxDuration)
	}
	t.Logf("stopped after %v: %v", time.Since(start), err)
	// A cancelled context stops it too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := c.EvalContext(ctx, Vars{Args: map[string]any{"items": huge}}); ok || err == nil {
		t.Fatalf("cancelled: %v, %v", ok, err)
	}
}

func BenchmarkEvalComprehension(b *testing.B) {
	c, err := Compile(`tool == "weather" && args.tags.exists(t, t == "urgent")`)
	if err != nil {
		b.Fatal(err)
	}
	v := Vars{Tool: "weather", Args: map[string]any{"tags": []any{"a", "urgent"}}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := c.Eval(v); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func TestCompileInt(t *testing.T) {
	c, err := CompileInt(`args.n * 2 + 1`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.EvalInt(context.Background(), Vars{Args: map[string]any{"n": int64(3)}})
	if err != nil || n != 7 {
		t.Fatalf("EvalInt = %d, %v; want 7", n, err)
	}
	if _, err := CompileInt(`tool == "x"`); err == nil || !strings.Contains(err.Error(), "a cost must be an int") {
		t.Fatalf("bool expression as cost: err = %v", err)
	}
	if _, err := Compile(`1 + 2`); err == nil || !strings.Contains(err.Error(), "a condition must be bool") {
		t.Fatalf("int expression as condition: err = %v", err)
	}
	if _, err := c.EvalInt(context.Background(), Vars{Args: map[string]any{"n": "x"}}); err == nil {
		t.Fatal("EvalInt of a string operand: no error")
	}
}
