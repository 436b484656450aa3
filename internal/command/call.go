package command

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/grant"
)

// ArgError says which argument of a call is wrong and why. Index is the
// argv index (-1 for a JSON call or a missing argument); Name is the
// option's, positional's or JSON property's name when known.
type ArgError struct {
	Index int
	Arg   string // the argv word, when Index >= 0
	Name  string
	Why   string
}

func (e *ArgError) Error() string {
	switch {
	case e.Index >= 0:
		return fmt.Sprintf("argument %d (%q): %s", e.Index, e.Arg, e.Why)
	case e.Name != "":
		return fmt.Sprintf("%s: %s", e.Name, e.Why)
	}
	return e.Why
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ArgError) Unwrap() error { return ErrInvalid }

// Invocation is a validated call: the command, its options as canonical
// grant arguments and its positionals. It is built only by ParseArgv and
// ParseJSON; everything else (Render, Words, JSON, Argv) is derived from
// the canonical rendering it holds.
type Invocation struct {
	spec  *Spec
	cmd   *Command
	args  []grant.Arg // canonical order
	pos   []string
	stdin *string
}

// Command is the command called.
func (inv *Invocation) Command() *Command { return inv.cmd }

// Stdin is the call's stdin (from the JSON projection's "stdin"), if any.
func (inv *Invocation) Stdin() (string, bool) {
	if inv.stdin == nil {
		return "", false
	}
	return *inv.stdin, true
}

// given collects a call's values before validation.
type given struct {
	cmd    *Command
	vals   map[*Option][]string
	at     map[*Option]int // argv index of the option's first occurrence (-1 JSON)
	atWord map[*Option]string
	pos    []string
	posAt  []int
	stdin  *string
	isJSON bool
}

func (g *given) fail(opt *Option, why string, idx int, arg string) error {
	name := ""
	if opt != nil {
		name = "--" + opt.Name
		if g.isJSON {
			name = "property " + strconv.Quote(opt.Name)
		}
	}
	return &ArgError{Index: idx, Arg: arg, Name: name, Why: why}
}

// add records one occurrence of opt with value v.
func (g *given) add(opt *Option, v string, idx int, arg string) error {
	cur := g.vals[opt]
	switch opt.Kind {
	case KindValue, KindOptional, KindBool:
		if len(cur) > 0 {
			return g.fail(opt, "given more than once", idx, arg)
		}
	case KindMap:
		k, _, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return g.fail(opt, fmt.Sprintf("want KEY=VALUE, got %q", v), idx, arg)
		}
		for _, c := range cur {
			if ck, _, _ := strings.Cut(c, "="); ck == k {
				return g.fail(opt, fmt.Sprintf("key %q given more than once", k), idx, arg)
			}
		}
	case KindCount:
		n := 1
		if v != "" {
			c, err := strconv.Atoi(v)
			if err != nil || c < 0 || strconv.Itoa(c) != v {
				return g.fail(opt, fmt.Sprintf("a count is a non-negative integer, got %q", v), idx, arg)
			}
			n = c
		}
		total := n
		if len(cur) > 0 {
			p, _ := strconv.Atoi(cur[0])
			total += p
		}
		if total > 1000 {
			return g.fail(opt, "counted more than 1000 times", idx, arg)
		}
		if _, seen := g.at[opt]; !seen {
			g.at[opt], g.atWord[opt] = idx, arg
		}
		if total == 0 {
			delete(g.vals, opt) // a count of 0 is the flag absent
			return nil
		}
		g.vals[opt] = []string{strconv.Itoa(total)}
		return nil
	}
	if _, seen := g.at[opt]; !seen {
		g.at[opt], g.atWord[opt] = idx, arg
	}
	g.vals[opt] = append(cur, v)
	return nil
}

// ParseArgv parses argv-like words (after the program's name): command
// words, then options (--name=V, --name V, -s V, -sV, clustered -abc for
// flags), "--" and positionals. No word is ever expanded. Errors are
// *ArgError values naming the word's index.
func (s *Spec) ParseArgv(argv []string) (*Invocation, error) {
	g := &given{cmd: s.Root, vals: map[*Option][]string{}, at: map[*Option]int{}, atWord: map[*Option]string{}}
	end := false
	for i, a := range argv {
		if !utf8.ValidString(a) || strings.IndexByte(a, 0) >= 0 {
			return nil, &ArgError{Index: i, Arg: a, Why: "not valid UTF-8 text without NUL bytes"}
		}
	}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case !end && a == "--":
			end = true
		case !end && strings.HasPrefix(a, "--"):
			name, v, hasEq := strings.Cut(a[2:], "=")
			opt := g.cmd.option(name)
			if opt == nil {
				return nil, &ArgError{Index: i, Arg: a, Why: fmt.Sprintf("%s has no option --%s", quoteCmd(s, g.cmd), name)}
			}
			switch opt.Kind {
			case KindBool:
				if hasEq {
					return nil, &ArgError{Index: i, Arg: a, Name: "--" + name, Why: "a flag takes no value"}
				}
				v = "true"
			case KindCount:
				if !hasEq {
					v = ""
				}
			case KindOptional:
				if !hasEq {
					v = opt.Implicit
				}
			default:
				if !hasEq {
					if i+1 >= len(argv) {
						return nil, &ArgError{Index: i, Arg: a, Name: "--" + name, Why: "needs a value"}
					}
					i++
					v = argv[i]
				}
			}
			if err := g.add(opt, v, i, a); err != nil {
				return nil, err
			}
		case !end && len(a) > 1 && a[0] == '-':
			at := i
			for j := 1; j < len(a); j++ {
				ch := a[j : j+1]
				opt := g.cmd.short(ch)
				if opt == nil {
					return nil, &ArgError{Index: at, Arg: a, Why: fmt.Sprintf("%s has no option -%s", quoteCmd(s, g.cmd), ch)}
				}
				v := ""
				switch opt.Kind {
				case KindBool:
					v = "true"
				case KindCount:
				case KindOptional:
					v = a[j+1:]
					if v == "" {
						v = opt.Implicit
					}
					j = len(a)
				default:
					v = a[j+1:]
					if v == "" {
						if i+1 >= len(argv) {
							return nil, &ArgError{Index: at, Arg: a, Name: "-" + ch, Why: "needs a value"}
						}
						i++
						v = argv[i]
					}
					j = len(a)
				}
				if err := g.add(opt, v, at, a); err != nil {
					return nil, err
				}
			}
		case !end && len(g.cmd.Commands) > 0:
			sub := g.cmd.sub(a)
			if sub == nil {
				return nil, &ArgError{Index: i, Arg: a, Why: fmt.Sprintf("%s has no command %q (its commands: %s)", quoteCmd(s, g.cmd), a, subNames(g.cmd))}
			}
			g.cmd = sub
		default:
			g.pos = append(g.pos, a)
			g.posAt = append(g.posAt, i)
		}
	}
	return s.finish(g)
}

func quoteCmd(s *Spec, c *Command) string { return strconv.Quote(c.display(s.Name)) }

func subNames(c *Command) string {
	var n []string
	for _, s := range c.Commands {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}

// ParseJSON parses the JSON projection's arguments object (see
// JSONSchema): "command" names the command path (canonical names joined by
// spaces), the other properties its options and positionals by name, and
// "stdin" the stdin text of a command that declares one. It is as strict
// as grant.Render (no duplicate keys, valid UTF-8).
func (s *Spec) ParseJSON(b []byte) (*Invocation, error) {
	if _, err := grant.Render(b); err != nil {
		return nil, &ArgError{Index: -1, Why: err.Error()}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, &ArgError{Index: -1, Why: err.Error()}
	}
	return s.parseObject(m)
}

// ParseValue is ParseJSON of a call already decoded, strictly (no
// duplicate key, invalid UTF-8 or lone surrogate escape: what
// jsonparse.ParseStrict accepts), into the values of encoding/json with
// UseNumber: the same Invocation ParseJSON makes of the text, or an error
// where it refuses it (grant.RenderValue checks what grant.Render checks).
// It is how a call decoded once is read as a command without reading its
// text again.
func (s *Spec) ParseValue(v any) (*Invocation, error) {
	if _, err := grant.RenderValue(v); err != nil {
		return nil, &ArgError{Index: -1, Why: err.Error()}
	}
	return s.parseObject(v.(map[string]any)) // RenderValue refuses all else
}

// parseObject reads a call's JSON object, checked by grant's rendering.
func (s *Spec) parseObject(m map[string]any) (*Invocation, error) {
	g := &given{cmd: s.Root, vals: map[*Option][]string{}, at: map[*Option]int{}, atWord: map[*Option]string{}, isJSON: true}
	prop := func(k string) string { return "property " + strconv.Quote(k) }
	if c, ok := m["command"]; ok {
		cs, isStr := c.(string)
		if !isStr {
			return nil, &ArgError{Index: -1, Name: prop("command"), Why: "want a string, got " + describeJSON(c)}
		}
		if cs != "" {
			for _, w := range strings.Split(cs, " ") {
				var sub *Command
				for _, x := range g.cmd.Commands {
					if x.Name == w {
						sub = x
					}
				}
				if sub == nil {
					return nil, &ArgError{Index: -1, Name: prop("command"), Why: fmt.Sprintf("%s has no command %q (its commands: %s)", quoteCmd(s, g.cmd), w, subNames(g.cmd))}
				}
				g.cmd = sub
			}
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	pos := make([][]string, len(g.cmd.Positionals))
	for _, k := range keys {
		v := m[k]
		switch k {
		case "command":
			continue
		case "stdin":
			str, isStr := v.(string)
			if g.cmd.Stdin == nil || !isStr {
				why := "want a string"
				if g.cmd.Stdin == nil {
					why = quoteCmd(s, g.cmd) + " reads no stdin"
				}
				return nil, &ArgError{Index: -1, Name: prop(k), Why: why}
			}
			g.stdin = &str
			continue
		}
		if p, i := g.cmd.positional(k); p != nil {
			if p.Variadic {
				arr, isArr := v.([]any)
				if !isArr {
					return nil, &ArgError{Index: -1, Name: prop(k), Why: "want an array, got " + describeJSON(v)}
				}
				for _, e := range arr {
					t, why := scalar(e, p.Type)
					if why != "" {
						return nil, &ArgError{Index: -1, Name: prop(k), Why: why}
					}
					pos[i] = append(pos[i], t)
				}
				continue
			}
			t, why := scalar(v, p.Type)
			if why != "" {
				return nil, &ArgError{Index: -1, Name: prop(k), Why: why}
			}
			pos[i] = []string{t}
			continue
		}
		opt := g.cmd.option(k)
		if opt == nil {
			return nil, &ArgError{Index: -1, Name: prop(k), Why: fmt.Sprintf("%s has no option or positional %q", quoteCmd(s, g.cmd), k)}
		}
		fail := func(why string) error { return &ArgError{Index: -1, Name: prop(k), Why: why} }
		switch opt.Kind {
		case KindBool:
			bv, isBool := v.(bool)
			if !isBool {
				return nil, fail("want true or false, got " + describeJSON(v))
			}
			if bv {
				_ = g.add(opt, "true", -1, "")
			}
		case KindCount:
			n, isNum := v.(json.Number)
			c, err := strconv.Atoi(string(n))
			if !isNum || err != nil || c < 0 {
				return nil, fail("want a non-negative integer, got " + describeJSON(v))
			}
			if c > 0 {
				if err := g.add(opt, strconv.Itoa(c), -1, ""); err != nil {
					return nil, err
				}
			}
		case KindList:
			arr, isArr := v.([]any)
			if !isArr {
				return nil, fail("want an array, got " + describeJSON(v))
			}
			for _, e := range arr {
				t, why := scalar(e, opt.Type)
				if why != "" {
					return nil, fail(why)
				}
				_ = g.add(opt, t, -1, "")
			}
		case KindMap:
			mo, isObj := v.(map[string]any)
			if !isObj {
				return nil, fail("want an object of strings, got " + describeJSON(v))
			}
			mk := make([]string, 0, len(mo))
			for x := range mo {
				mk = append(mk, x)
			}
			slices.Sort(mk)
			for _, x := range mk {
				t, isStr := mo[x].(string)
				if !isStr {
					return nil, fail(fmt.Sprintf("key %q: want a string, got %s", x, describeJSON(mo[x])))
				}
				if x == "" || strings.Contains(x, "=") {
					return nil, fail(fmt.Sprintf("key %q: a key is not empty and has no '='", x))
				}
				_ = g.add(opt, x+"="+t, -1, "")
			}
		default:
			t, why := scalar(v, opt.Type)
			if why != "" {
				return nil, fail(why)
			}
			_ = g.add(opt, t, -1, "")
		}
	}
	for _, p := range pos {
		for _, v := range p {
			g.pos = append(g.pos, v)
			g.posAt = append(g.posAt, -1)
		}
	}
	// A gap (an optional positional absent before a given one) cannot be
	// written in argv: refuse it rather than shift values.
	for i := 1; i < len(pos); i++ {
		if len(pos[i]) > 0 && len(pos[i-1]) == 0 {
			return nil, &ArgError{Index: -1, Name: prop(g.cmd.Positionals[i].Name), Why: fmt.Sprintf("given without %q before it", g.cmd.Positionals[i-1].Name)}
		}
	}
	return s.finish(g)
}

// finish validates what was given and builds the canonical invocation.
func (s *Spec) finish(g *given) (*Invocation, error) {
	c := g.cmd
	if len(c.Commands) > 0 {
		return nil, &ArgError{Index: -1, Name: "command", Why: fmt.Sprintf("%s needs a command: %s", quoteCmd(s, c), subNames(c))}
	}
	visible := c.visible()
	order := make([]*Option, 0, len(g.vals))
	for opt := range g.vals {
		order = append(order, opt)
	}
	// The first wrong argument is reported, whatever the map's order.
	slices.SortFunc(order, func(a, b *Option) int { return cmp.Or(cmp.Compare(g.at[a], g.at[b]), strings.Compare(a.Name, b.Name)) })
	for _, opt := range order {
		vals := g.vals[opt]
		if !slices.Contains(visible, opt) {
			return nil, g.fail(opt, fmt.Sprintf("belongs to %s, not %s (only global options are inherited)", quoteCmd(s, opt.owner), quoteCmd(s, c)), g.at[opt], g.atWord[opt])
		}
		for _, v := range vals {
			if opt.Kind == KindBool || opt.Kind == KindCount {
				continue
			}
			val := v
			if opt.Kind == KindMap {
				_, val, _ = strings.Cut(v, "=")
			}
			if why := checkValue(val, opt.Type, opt.Enum, opt.Min, opt.Max); why != "" {
				return nil, g.fail(opt, why, g.at[opt], g.atWord[opt])
			}
			if strings.IndexByte(v, 0) >= 0 {
				return nil, g.fail(opt, "a NUL byte cannot be passed as an argument", g.at[opt], g.atWord[opt])
			}
			if s.program && strings.HasPrefix(v, "@") && !slices.Contains(opt.Accept, ShapeAt) {
				return nil, g.fail(opt, fmt.Sprintf("starts with '@', which many programs read as a file to take the value from (curl -d @FILE, -H @FILE, --json @FILE); refused unless the description lists %q in the option's \"accept\"", ShapeAt), g.at[opt], g.atWord[opt])
			}
		}
	}
	// Environment fallbacks count as given (the grant sees them).
	if s.env != nil {
		for _, opt := range visible {
			if opt.Env == "" || len(g.vals[opt]) > 0 {
				continue
			}
			if v, ok := s.env(opt.Env); ok {
				if why := checkValue(v, opt.Type, opt.Enum, opt.Min, opt.Max); why != "" {
					return nil, &ArgError{Index: -1, Name: "--" + opt.Name, Why: fmt.Sprintf("from environment variable %s: %s", opt.Env, why)}
				}
				g.vals[opt] = []string{v}
				g.at[opt] = -1
			}
		}
	}
	// Positionals: count, type, and the '-' rule.
	need := 0
	for _, p := range c.Positionals {
		if p.Required {
			need++
		}
	}
	max := len(c.Positionals)
	if max > 0 && c.Positionals[max-1].Variadic {
		max = -1
	}
	if max >= 0 && len(g.pos) > max {
		return nil, &ArgError{Index: g.posAt[max], Arg: g.pos[max], Why: fmt.Sprintf("%s takes at most %d positionals", quoteCmd(s, c), max)}
	}
	// The first positional is a program's first argument when argv has
	// nothing before it: a top-level command, no end-of-options marker, no
	// option given or defaulted (Argv writes the top command's options
	// first).
	firstWord := s.program && c.parent == nil && c.EndOfOptions == "" && len(g.vals) == 0
	for _, opt := range visible {
		firstWord = firstWord && !opt.HasDef
	}
	givenNames := map[string]bool{}
	for i, v := range g.pos {
		pi := min(i, len(c.Positionals)-1)
		p := c.Positionals[pi]
		givenNames[p.Name] = true
		fail := func(why string) error {
			return &ArgError{Index: g.posAt[i], Arg: v, Name: "positional " + strconv.Quote(p.Name), Why: why}
		}
		if why := checkValue(v, p.Type, p.Enum, p.Min, p.Max); why != "" {
			return nil, fail(why)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fail("a NUL byte cannot be passed as an argument")
		}
		if strings.HasPrefix(v, "-") && c.EndOfOptions == "" {
			return nil, fail(fmt.Sprintf("starts with '-' and %s has no end-of-options marker, so the program would read it as an option", quoteCmd(s, c)))
		}
		if s.program {
			if why := refusedShape(v, p, i == 0 && firstWord, quoteCmd(s, c)); why != "" {
				return nil, fail(why)
			}
		}
		g.pos[i] = canonical(v, p.Type)
	}
	for i, p := range c.Positionals {
		if p.Required && (len(g.pos) <= i) {
			return nil, &ArgError{Index: -1, Name: "positional " + strconv.Quote(p.Name), Why: "missing (required)"}
		}
	}
	for opt := range g.vals {
		givenNames[opt.Name] = true
	}
	for _, opt := range visible {
		if opt.Required && !givenNames[opt.Name] {
			return nil, &ArgError{Index: -1, Name: "--" + opt.Name, Why: "missing (required)"}
		}
	}
	for _, k := range c.Constraints {
		var hit []string
		for _, n := range k.Names {
			if givenNames[n] {
				hit = append(hit, n)
			}
		}
		list := strings.Join(k.Names, ", ")
		switch {
		case k.Rule == "one_of" && len(hit) != 1:
			return nil, &ArgError{Index: -1, Name: strings.Join(hit, ", "), Why: "exactly one of " + list + " must be given"}
		case k.Rule == "exclusive" && len(hit) > 1:
			return nil, &ArgError{Index: -1, Name: strings.Join(hit, ", "), Why: "at most one of " + list + " may be given"}
		case k.Rule == "any_of" && len(hit) == 0:
			return nil, &ArgError{Index: -1, Why: "at least one of " + list + " must be given"}
		}
	}
	if c.Stdin != nil && c.Stdin.Required && g.stdin == nil && g.isJSON {
		return nil, &ArgError{Index: -1, Name: "property \"stdin\"", Why: "missing (required)"}
	}
	for _, opt := range visible {
		if opt.HasDef && len(g.vals[opt]) == 0 {
			g.vals[opt] = []string{opt.Default}
		}
	}
	inv := &Invocation{spec: s, cmd: c, pos: g.pos, stdin: g.stdin}
	for _, opt := range visible {
		vals := g.vals[opt]
		if len(vals) == 0 {
			continue
		}
		switch opt.Kind {
		case KindBool:
			f := grant.FormTrue
			if opt.argName() != opt.Name {
				f = grant.FormFalse
			}
			inv.args = append(inv.args, grant.Arg{Name: opt.argName(), Form: f})
		case KindMap:
			vs := slices.Clone(vals)
			slices.SortFunc(vs, func(a, b string) int {
				ka, _, _ := strings.Cut(a, "=")
				kb, _, _ := strings.Cut(b, "=")
				return strings.Compare(ka, kb)
			})
			for _, v := range vs {
				inv.args = append(inv.args, grant.Arg{Name: opt.Name, Value: v})
			}
		default:
			for _, v := range vals {
				inv.args = append(inv.args, grant.Arg{Name: opt.Name, Value: canonical(v, opt.Type)})
			}
		}
	}
	grant.SortArgs(inv.args)
	return inv, nil
}

// refusedShape says why positional value v of p is refused for its shape
// ("" if it is not): a word that does not start with '-' but that
// programs read as a command, a file of arguments, an assignment or
// bundled options. An end-of-options marker does not help: make and env
// read assignments after "--", and response files are expanded before
// any option is parsed. An integer's canonical form has none of these
// shapes.
func refusedShape(v string, p *Positional, first bool, cmd string) string {
	if p.Type == TypeInteger {
		return ""
	}
	optIn := func(sh Shape) string {
		return fmt.Sprintf("; refused unless the description lists %q in the positional's \"accept\"", sh)
	}
	switch {
	case strings.HasPrefix(v, "+") && !slices.Contains(p.Accept, ShapePlus):
		return "starts with '+', which less, more and vim read as a command to run (+CMD)" + optIn(ShapePlus)
	case strings.HasPrefix(v, "@") && !slices.Contains(p.Accept, ShapeAt):
		return "starts with '@', which many programs read as a file of further arguments (gcc, javac, java: @FILE) or of data (curl)" + optIn(ShapeAt)
	case isAssignment(v) && !slices.Contains(p.Accept, ShapeAssignment):
		return "has an '=' before any '/', which make and env read as a variable assignment (NAME=VALUE) and dd as an operand" + optIn(ShapeAssignment) + " (a file of that name can be written ./NAME=VALUE)"
	case first && !slices.Contains(p.Accept, ShapeFirstWord):
		return fmt.Sprintf("would be the program's first argument and %s has no end-of-options marker, so tar and ar would read it as bundled options (tar xf); declare the command's end_of_options, or list %q in the positional's \"accept\"", cmd, ShapeFirstWord)
	}
	return ""
}

// isAssignment: an '=' with no '/' before it (NAME=VALUE, of=FILE; not
// ./a=b, a path).
func isAssignment(v string) bool {
	eq := strings.IndexByte(v, '=')
	return eq >= 0 && !strings.Contains(v[:eq], "/")
}
