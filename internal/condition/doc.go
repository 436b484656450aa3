// Package condition compiles and evaluates the CEL conditions of the
// middleware chain (`when = '...'` of an [[middleware]] entry, and the
// constraints of `validate`). It is pure: it knows no config, agent or
// store; the caller gives it the expression and, per call, the variables.
//
//	c, err := condition.Compile(`tool == "weather" && args.city != "Paris"`)
//	args, err := condition.ArgsFromJSON(input)
//	ok, err := c.Eval(condition.Vars{Tool: "weather", Args: args, Rendered: "weather --city=Rome"})
//
// # Variables
//
// Exactly five names are declared, nothing else is reachable:
//
//	tool      string             the tool's name
//	args      map(string, dyn)   the call's parsed JSON input (ArgsFromJSON)
//	rendered  string             the canonical rendering of internal/grant
//	                             (`weather --city=Paris`)
//	agent     string             the calling agent's name
//	session   string             the MCP session ID
//
// The environment is CEL's standard library (operators, size, contains,
// startsWith, endsWith, matches (RE2), the has/all/exists/exists_one/map/
// filter macros, int/double/string conversions, timestamp/duration parsing
// of literals) with cross-type numeric comparisons on, so `args.amount <=
// 100` works whether the JSON had 100 or 100.5. No extension library is
// loaded: no function reads a clock, the environment, a file or the network,
// and an unknown identifier (`env`, `request`) is a compile error.
// A pattern of matches compiles to at most MaxRegexInsts instructions of
// Go's matcher: a constant one over it is a compile error, one computed
// from the call (`args.s.matches(args.p)`) a run-time error (regex.go;
// cel-go's own limit panics on a counted repetition, `[0-9]{4}`). A
// matches whose instructions × string bytes pass 4 M is a run-time error
// before it runs: Go's matcher cannot be interrupted and the cost limit
// is charged only after a call returns.
// ArgsFromJSON gives integral JSON numbers that fit an int64 as int, other
// numbers as double, so `args.count + 1` works.
//
// # Compile errors
//
// A condition that does not parse, does not type-check, has a result type
// other than bool, exceeds MaxLen bytes, or whose estimated cost exceeds
// MaxCost is refused at Compile with an *Error that gives the line and
// column (1-based, within the expression) and CEL's message, so config can
// report file:line:col. Type `dyn` results (`args.flag`) are accepted: a
// non-bool value at run time is a run-time error.
//
// # Cost
//
// Cost is CEL's abstract unit (about one per operation, string operations
// per ten characters). At compile time the estimated worst case must stay
// under MaxCost, assuming every string and collection the expression reads
// from a variable holds at most SizeHint elements or characters; that
// refuses literal bombs (`[1,2,...].map(x, [1,2,...].map(...))`) and nested
// comprehensions over args before anything runs. At run time the actual
// cost is tracked and evaluation stops with an error as soon as it exceeds
// MaxCost, whatever the real sizes (an input bigger than the hint).
//
// # Run-time errors deny
//
// Eval returns an error for anything that goes wrong while evaluating: a
// missing key (`args.city` when the input has no city), a type mismatch
// (`args.city > 3` on a string), a non-bool result, a division by zero,
// the cost limit. The caller must treat an error as "deny": a condition
// that fails at run time denies. Note `||` and `&&` are commutative in CEL
// (error || true is true), so `!has(args.city) || args.city != "Paris"` is
// the way to make an absent key harmless.
//
// A *Condition is immutable and safe for concurrent use.
package condition
