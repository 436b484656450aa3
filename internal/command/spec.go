package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/internal/grant"
)

// Version is the description format this package reads ("maiden_command").
const Version = 1

// Errors of this package; test with errors.Is.
var (
	// ErrSpec is wrapped by every *SpecError: the description is malformed.
	ErrSpec = errors.New("malformed command description")
	// ErrInvalid is wrapped by every *ArgError: a call does not fit the
	// description.
	ErrInvalid = errors.New("invalid call")
)

// SpecError says where a description is malformed: Path is a JSON path
// ("$.commands[1].options[0].kind").
type SpecError struct {
	Path string
	Why  string
}

func (e *SpecError) Error() string { return "command description: " + e.Path + ": " + e.Why }

// Unwrap makes errors.Is(err, ErrSpec) true.
func (e *SpecError) Unwrap() error { return ErrSpec }

// Kind is what an option takes.
type Kind string

// The kinds of option.
const (
	KindValue    Kind = "value"    // --name=V, once
	KindOptional Kind = "optional" // --name (its implicit value) or --name=V
	KindList     Kind = "list"     // --name=V, repeated, in order
	KindMap      Kind = "map"      // --name=K=V, repeated, keys unique
	KindBool     Kind = "bool"     // --name
	KindCount    Kind = "count"    // --name repeated (-vvv), rendered --name=N
)

// Type is the type of a value.
type Type string

// The value types.
const (
	TypeString  Type = "string"
	TypeInteger Type = "integer"
)

// Spec is a loaded, validated command description. It is immutable.
type Spec struct {
	Name string   // the tool's (or CLI's) own name, for help
	Root *Command // the top command; its Path is empty

	env func(string) (string, bool)
	// program: the description is a program's, whose calls become argv
	// (LoadProgram): positionals of the shapes programs read as more
	// than data are refused (refusedShape).
	program bool
}

// Command is one node of the tree.
type Command struct {
	Name         string
	Aliases      []string
	Summary      string
	Description  string
	Options      []*Option // declared here (global ones are inherited by subcommands)
	Positionals  []*Positional
	Constraints  []Constraint
	Commands     []*Command
	EndOfOptions string // "--", "--end-of-options", or "" when the CLI has no such marker
	Stdin        *Stream
	Stdout       *Stream
	Stderr       *Stream
	Result       json.RawMessage // JSON Schema of the structured result, or nil
	Errors       []DeclaredError

	parent *Command
	path   []string
}

// Path is the command's path of canonical names (empty for the root).
func (c *Command) Path() []string { return slices.Clone(c.path) }

// Option is one option or flag.
type Option struct {
	Name      string // the long spelling without "--", the JSON property and the grant argument
	Short     string // one character, or ""
	ShortOnly bool   // the CLI knows only -S: Argv spells it so
	Kind      Kind
	Type      Type
	Summary   string
	Required  bool
	Default   string // canonical; HasDefault says whether there is one
	HasDef    bool
	Implicit  string // KindOptional: the value of a bare --name
	Env       string // wrapped CLIs: the variable the CLI reads when the option is absent
	Enum      []string
	Min, Max  *int64
	Global    bool
	Accept    []Shape `json:",omitempty"` // ShapeAt, when a program reads a value starting with '@' as data (omitted: a wrapped CLI's identity digest is unchanged without it)

	owner *Command
}

// Positional is one positional argument.
type Positional struct {
	Name     string
	Summary  string
	Type     Type
	Required bool
	Variadic bool
	Enum     []string
	Min, Max *int64
	Accept   []Shape `json:",omitempty"` // the shapes refused by default that this positional may take (omitted: a wrapped CLI's identity digest is unchanged without it)
}

// Shape is a form of positional value that programs read as something
// other than data, although it does not start with '-'. A value of such a
// shape is refused unless its positional lists the shape in "accept": the
// description's author says the program reads it as data.
type Shape string

// The shapes refused by default.
const (
	// ShapePlus: starts with '+', which less, more and vim read as a
	// command to run (less +!sh).
	ShapePlus Shape = "plus"
	// ShapeAt: starts with '@', which many programs read as a file of
	// further arguments (gcc, javac, java: @FILE) or of data (curl).
	ShapeAt Shape = "at"
	// ShapeAssignment: an '=' before any '/', which make and env read as
	// a variable assignment (NAME=VALUE) and dd as an operand (of=FILE).
	ShapeAssignment Shape = "assignment"
	// ShapeFirstWord: the program's first argument (a top-level command
	// without an end-of-options marker, no option before it), which tar
	// and ar read as bundled options (tar xf).
	ShapeFirstWord Shape = "first-word"
)

var shapes = []Shape{ShapePlus, ShapeAt, ShapeAssignment, ShapeFirstWord}

// Constraint is one rule over the names of a command's options and
// positionals: exactly one (one_of), at most one (exclusive) or at least
// one (any_of) of them given.
type Constraint struct {
	Rule  string // "one_of", "exclusive", "any_of"
	Names []string
}

// Stream is an attachment: stdin, stdout or stderr, with a media type.
type Stream struct {
	MediaType string
	Summary   string
	Required  bool // stdin only
}

// DeclaredError is an error the command declares: a name, the exit code
// that means it, and the JSON Schema of its payload.
type DeclaredError struct {
	Name     string
	ExitCode int
	Summary  string
	Payload  json.RawMessage
}

// WithEnv returns a copy of s whose calls take an absent option with an
// "env" key from lookup (a wrapped CLI's configured environment). The value
// is then part of the call like a given one: validated, rendered (so grants
// see it) and passed in argv; the runtime must remove those variables from
// the CLI's environment (EnvNames) so the CLI never reads a value the grant
// did not see.
func (s *Spec) WithEnv(lookup func(string) (string, bool)) *Spec {
	c := *s
	c.env = lookup
	return &c
}

// EnvNames lists the environment variables the description's options name.
func (s *Spec) EnvNames() []string {
	var out []string
	s.walk(func(c *Command) {
		for _, o := range c.Options {
			if o.Env != "" && !slices.Contains(out, o.Env) {
				out = append(out, o.Env)
			}
		}
	})
	slices.Sort(out)
	return out
}

func (s *Spec) walk(f func(*Command)) {
	var rec func(*Command)
	rec = func(c *Command) {
		f(c)
		for _, sub := range c.Commands {
			rec(sub)
		}
	}
	rec(s.Root)
}

// Commands lists the commands a call can name (those without
// subcommands), in the description's order.
func (s *Spec) Commands() []*Command {
	var out []*Command
	s.walk(func(c *Command) {
		if len(c.Commands) == 0 {
			out = append(out, c)
		}
	})
	return out
}

// Lookup finds a command by its path of names or aliases.
func (s *Spec) Lookup(path ...string) (*Command, bool) {
	c := s.Root
	for _, w := range path {
		sub := c.sub(w)
		if sub == nil {
			return nil, false
		}
		c = sub
	}
	return c, true
}

func (c *Command) sub(w string) *Command {
	for _, s := range c.Commands {
		if s.Name == w || slices.Contains(s.Aliases, w) {
			return s
		}
	}
	return nil
}

// visible lists the options a call of c may give: c's own and the global
// options of its ancestors, root first.
func (c *Command) visible() []*Option {
	var chain []*Command
	for n := c; n != nil; n = n.parent {
		chain = append(chain, n)
	}
	var out []*Option
	for i := len(chain) - 1; i >= 0; i-- {
		for _, o := range chain[i].Options {
			if i == 0 || o.Global {
				out = append(out, o)
			}
		}
	}
	return out
}

func (c *Command) option(name string) *Option {
	for _, o := range c.visible() {
		if o.Name == name {
			return o
		}
	}
	return nil
}

func (c *Command) short(ch string) *Option {
	for _, o := range c.visible() {
		if o.Short == ch {
			return o
		}
	}
	return nil
}

func (c *Command) positional(name string) (*Positional, int) {
	for i, p := range c.Positionals {
		if p.Name == name {
			return p, i
		}
	}
	return nil, -1
}

func (c *Command) display(spec string) string {
	return strings.TrimSpace(spec + " " + strings.Join(c.path, " "))
}

// argName is the grant argument an option renders as: a bool flag named
// no-X renders --no-X, the boolean false of X.
func (o *Option) argName() string {
	if o.Kind == KindBool {
		if x, ok := strings.CutPrefix(o.Name, "no-"); ok {
			return x
		}
	}
	return o.Name
}

// --- Load ---------------------------------------------------------------

// reserved are JSON properties of the projection that no option or
// positional may be named.
var reserved = []string{"command", "stdin"}

// LoadProgram is Load for a program's description (a wrapped CLI's),
// whose calls become argv: a string positional whose value a program
// reads as more than data (+CMD, @FILE, NAME=VALUE, bundled options as the
// first word) is refused unless the positional's "accept" lists its shape,
// and so is an option's value that starts with '@' (curl -d @FILE) unless
// the option's "accept" lists "at".
// A WebAssembly tool's description (Load) gets its positionals as JSON
// values, which no program parses, so the shapes are not refused there.
func LoadProgram(b []byte) (*Spec, error) {
	s, err := Load(b)
	if err != nil {
		return nil, err
	}
	s.program = true
	return s, nil
}

// Load reads a description. Every error is a *SpecError naming the JSON
// path of the problem.
func Load(b []byte) (*Spec, error) {
	// The same strictness as a call's input: no duplicate keys at any
	// depth, valid UTF-8, no lone surrogates.
	if _, err := grant.Render(b); err != nil {
		return nil, &SpecError{Path: "$", Why: strings.TrimPrefix(err.Error(), grant.ErrRender.Error()+": ")}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var top map[string]any
	if err := d.Decode(&top); err != nil {
		return nil, &SpecError{Path: "$", Why: err.Error()}
	}
	o := &obj{m: top, path: "$"}
	v, err := o.num("maiden_command", true)
	if err != nil {
		return nil, err
	}
	if v != Version {
		return nil, &SpecError{Path: "$.maiden_command", Why: fmt.Sprintf("version %d is not supported (this maiden reads %d)", v, Version)}
	}
	s := &Spec{}
	root, err := loadCommand(o, nil, true)
	if err != nil {
		return nil, err
	}
	s.Name, root.Name = root.Name, ""
	s.Root = root
	return s, nil
}

func loadCommand(o *obj, parent *Command, isRoot bool) (*Command, error) {
	c := &Command{parent: parent}
	var err error
	if c.Name, err = o.str("name", true); err != nil {
		return nil, err
	}
	if !grant.IsCommandWord(c.Name) {
		return nil, o.errAt("name", "must be a letter or digit, then letters, digits, '-', '_' or '.'; got "+strconv.Quote(c.Name))
	}
	if parent != nil {
		c.path = append(slices.Clone(parent.path), c.Name)
	}
	if c.Aliases, err = o.strs("aliases"); err != nil {
		return nil, err
	}
	if isRoot && len(c.Aliases) > 0 {
		return nil, o.errAt("aliases", "the top command has no aliases")
	}
	for i, a := range c.Aliases {
		if !grant.IsCommandWord(a) {
			return nil, &SpecError{Path: fmt.Sprintf("%s.aliases[%d]", o.path, i), Why: "must be a letter or digit, then letters, digits, '-', '_' or '.'"}
		}
	}
	if c.Summary, err = o.str("summary", false); err != nil {
		return nil, err
	}
	if c.Description, err = o.str("description", false); err != nil {
		return nil, err
	}
	if c.EndOfOptions, err = o.str("end_of_options", false); err != nil {
		return nil, err
	}
	if c.EndOfOptions != "" && c.EndOfOptions != "--" && c.EndOfOptions != "--end-of-options" {
		return nil, o.errAt("end_of_options", `must be "--" or "--end-of-options" (or absent: the CLI has no such marker)`)
	}
	for _, st := range []struct {
		key string
		dst **Stream
	}{{"stdin", &c.Stdin}, {"stdout", &c.Stdout}, {"stderr", &c.Stderr}} {
		so, err := o.object(st.key)
		if err != nil || so == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		s := &Stream{}
		if s.MediaType, err = so.str("media_type", true); err != nil {
			return nil, err
		}
		if !strings.Contains(s.MediaType, "/") {
			return nil, so.errAt("media_type", "must be a media type such as text/plain")
		}
		if s.Summary, err = so.str("summary", false); err != nil {
			return nil, err
		}
		if st.key == "stdin" {
			if s.Required, err = so.boolean("required"); err != nil {
				return nil, err
			}
		}
		if err := so.done(); err != nil {
			return nil, err
		}
		*st.dst = s
	}
	if r, ok := o.m["result"]; ok {
		if _, isObj := r.(map[string]any); !isObj {
			return nil, o.errAt("result", "must be a JSON Schema object")
		}
		c.Result, _ = json.Marshal(r)
		o.seen("result")
	}
	errs, err := o.objects("errors")
	if err != nil {
		return nil, err
	}
	for _, eo := range errs {
		var de DeclaredError
		if de.Name, err = eo.str("name", true); err != nil {
			return nil, err
		}
		code, err := eo.num("exit_code", true)
		if err != nil {
			return nil, err
		}
		if code < 1 || code > 255 {
			return nil, eo.errAt("exit_code", "must be 1..255")
		}
		de.ExitCode = int(code)
		for _, prev := range c.Errors {
			if prev.Name == de.Name || prev.ExitCode == de.ExitCode {
				return nil, eo.errAt("name", "another error has the same name or exit code")
			}
		}
		if de.Summary, err = eo.str("summary", false); err != nil {
			return nil, err
		}
		if p, ok := eo.m["payload"]; ok {
			if _, isObj := p.(map[string]any); !isObj {
				return nil, eo.errAt("payload", "must be a JSON Schema object")
			}
			de.Payload, _ = json.Marshal(p)
			eo.seen("payload")
		}
		if err := eo.done(); err != nil {
			return nil, err
		}
		c.Errors = append(c.Errors, de)
	}
	opts, err := o.objects("options")
	if err != nil {
		return nil, err
	}
	for _, oo := range opts {
		opt, err := loadOption(oo)
		if err != nil {
			return nil, err
		}
		opt.owner = c
		c.Options = append(c.Options, opt)
	}
	poss, err := o.objects("positionals")
	if err != nil {
		return nil, err
	}
	for i, po := range poss {
		p, err := loadPositional(po)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			prev := c.Positionals[i-1]
			if prev.Variadic {
				return nil, po.errAt("name", "a variadic positional must be the last")
			}
			if p.Required && !prev.Required {
				return nil, po.errAt("required", "a required positional cannot follow an optional one")
			}
		}
		c.Positionals = append(c.Positionals, p)
	}
	if err := checkNames(o, c); err != nil {
		return nil, err
	}
	cons, err := o.objects("constraints")
	if err != nil {
		return nil, err
	}
	for _, co := range cons {
		var k Constraint
		for _, rule := range []string{"one_of", "exclusive", "any_of"} {
			if _, ok := co.m[rule]; !ok {
				continue
			}
			if k.Rule != "" {
				return nil, co.errAt(rule, "a constraint has exactly one of one_of, exclusive, any_of")
			}
			k.Rule = rule
			if k.Names, err = co.strs(rule); err != nil {
				return nil, err
			}
			if len(k.Names) < 2 {
				return nil, co.errAt(rule, "must name at least two options or positionals")
			}
			for i, n := range k.Names {
				opt := c.option(n)
				pos, _ := c.positional(n)
				if opt == nil && pos == nil {
					return nil, &SpecError{Path: fmt.Sprintf("%s.%s[%d]", co.path, rule, i), Why: fmt.Sprintf("%q is not an option or positional of this command", n)}
				}
				if rule != "any_of" && (opt != nil && opt.HasDef) {
					return nil, &SpecError{Path: fmt.Sprintf("%s.%s[%d]", co.path, rule, i), Why: fmt.Sprintf("%q has a default, so it is always given", n)}
				}
			}
		}
		if k.Rule == "" {
			return nil, &SpecError{Path: co.path, Why: "a constraint needs one_of, exclusive or any_of"}
		}
		if err := co.done(); err != nil {
			return nil, err
		}
		c.Constraints = append(c.Constraints, k)
	}
	subs, err := o.objects("commands")
	if err != nil {
		return nil, err
	}
	for _, so := range subs {
		sub, err := loadCommand(so, c, false)
		if err != nil {
			return nil, err
		}
		for _, w := range append([]string{sub.Name}, sub.Aliases...) {
			if c.sub(w) != nil {
				return nil, so.errAt("name", fmt.Sprintf("%q names another command of %q too", w, c.display("")))
			}
		}
		c.Commands = append(c.Commands, sub)
	}
	if len(c.Commands) > 0 && len(c.Positionals) > 0 {
		return nil, o.errAt("positionals", "a command with subcommands cannot have positionals (a word would be ambiguous)")
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	return c, nil
}

func checkNames(o *obj, c *Command) error {
	seen := map[string]string{}
	for _, r := range reserved {
		seen[r] = "reserved for the JSON projection"
	}
	shorts := map[string]bool{}
	args := map[string]bool{}
	for _, opt := range c.visible() {
		where := "an option"
		if opt.owner != c {
			where = "a global option of " + strconv.Quote(opt.owner.display(""))
		}
		if why, dup := seen[opt.Name]; dup {
			return o.errAt("options", fmt.Sprintf("option %q: the name is %s", opt.Name, why))
		}
		seen[opt.Name] = "taken by " + where
		if slices.Contains(reserved, opt.argName()) {
			return o.errAt("options", fmt.Sprintf("option %q renders as --%s, which is reserved for the JSON projection", opt.Name, opt.argName()))
		}
		if args[opt.argName()] {
			return o.errAt("options", fmt.Sprintf("option %q renders as --%s or --no-%s, as another option does", opt.Name, opt.argName(), opt.argName()))
		}
		args[opt.argName()] = true
		if opt.Short != "" {
			if shorts[opt.Short] {
				return o.errAt("options", fmt.Sprintf("option %q: -%s is another option's", opt.Name, opt.Short))
			}
			shorts[opt.Short] = true
		}
	}
	for _, p := range c.Positionals {
		if why, dup := seen[p.Name]; dup {
			return o.errAt("positionals", fmt.Sprintf("positional %q: the name is %s", p.Name, why))
		}
		seen[p.Name] = "taken by a positional"
	}
	return nil
}

func loadOption(o *obj) (*Option, error) {
	opt := &Option{}
	var err error
	if opt.Name, err = o.str("name", true); err != nil {
		return nil, err
	}
	if !grant.IsCommandWord(opt.Name) {
		return nil, o.errAt("name", "must be a letter or digit, then letters, digits, '-', '_' or '.'; got "+strconv.Quote(opt.Name))
	}
	if opt.Short, err = o.str("short", false); err != nil {
		return nil, err
	}
	if opt.Short != "" && (len(opt.Short) != 1 || !grant.IsCommandWord(opt.Short)) {
		return nil, o.errAt("short", "must be one ASCII letter or digit")
	}
	if opt.ShortOnly, err = o.boolean("short_only"); err != nil {
		return nil, err
	}
	if opt.ShortOnly && opt.Short == "" {
		return nil, o.errAt("short_only", "needs a short spelling")
	}
	k, err := o.str("kind", false)
	if err != nil {
		return nil, err
	}
	opt.Kind = Kind(k)
	switch opt.Kind {
	case "":
		opt.Kind = KindValue
	case KindValue, KindOptional, KindList, KindMap, KindBool, KindCount:
	default:
		return nil, o.errAt("kind", "must be value, optional, list, map, bool or count; got "+strconv.Quote(k))
	}
	if opt.ShortOnly && opt.Kind == KindOptional {
		return nil, o.errAt("short_only", "an optional option's value cannot be told from the next word after -"+opt.Short+" alone")
	}
	flag := opt.Kind == KindBool || opt.Kind == KindCount
	if opt.Type, err = loadType(o, !flag); err != nil {
		return nil, err
	}
	if opt.Kind == KindMap && opt.Type != TypeString {
		return nil, o.errAt("type", "a map's values are strings")
	}
	if opt.Summary, err = o.str("summary", false); err != nil {
		return nil, err
	}
	if opt.Required, err = o.boolean("required"); err != nil {
		return nil, err
	}
	if opt.Required && flag {
		return nil, o.errAt("required", "a bool or count flag cannot be required")
	}
	if opt.Global, err = o.boolean("global"); err != nil {
		return nil, err
	}
	if opt.Enum, err = loadEnum(o, opt.Type); err != nil {
		return nil, err
	}
	if opt.Min, opt.Max, err = loadRange(o, opt.Type); err != nil {
		return nil, err
	}
	if opt.Env, err = o.str("env", false); err != nil {
		return nil, err
	}
	if opt.Env != "" && opt.Kind != KindValue {
		return nil, o.errAt("env", "only a value option can fall back to an environment variable")
	}
	if opt.Env != "" && strings.ContainsAny(opt.Env, "=\x00") {
		return nil, o.errAt("env", "not a variable name")
	}
	acc, err := o.strs("accept")
	if err != nil {
		return nil, err
	}
	for i, a := range acc {
		if Shape(a) != ShapeAt {
			return nil, &SpecError{Path: fmt.Sprintf("%s.accept[%d]", o.path, i), Why: fmt.Sprintf("an option's value is refused for one shape only, so its accept can list only \"at\"; got %q", a)}
		}
		if opt.Kind == KindBool || opt.Kind == KindCount {
			return nil, o.errAt("accept", "a bool or count flag takes no value")
		}
		if slices.Contains(opt.Accept, ShapeAt) {
			return nil, &SpecError{Path: fmt.Sprintf("%s.accept[%d]", o.path, i), Why: fmt.Sprintf("%q is listed twice", a)}
		}
		opt.Accept = append(opt.Accept, ShapeAt)
	}
	check := func(key, v string) error {
		if why := checkValue(v, opt.Type, opt.Enum, opt.Min, opt.Max); why != "" {
			return o.errAt(key, why)
		}
		return nil
	}
	if raw, ok := o.m["default"]; ok {
		o.seen("default")
		if opt.Kind != KindValue && opt.Kind != KindOptional {
			return nil, o.errAt("default", "only a value or optional option has a default")
		}
		if opt.Required {
			return nil, o.errAt("default", "a required option has no default")
		}
		v, why := scalar(raw, opt.Type)
		if why != "" {
			return nil, o.errAt("default", why)
		}
		if err := check("default", v); err != nil {
			return nil, err
		}
		opt.Default, opt.HasDef = canonical(v, opt.Type), true
	}
	if raw, ok := o.m["implicit"]; ok {
		o.seen("implicit")
		if opt.Kind != KindOptional {
			return nil, o.errAt("implicit", "only an optional option has an implicit value")
		}
		v, why := scalar(raw, opt.Type)
		if why != "" {
			return nil, o.errAt("implicit", why)
		}
		if err := check("implicit", v); err != nil {
			return nil, err
		}
		opt.Implicit = canonical(v, opt.Type)
	} else if opt.Kind == KindOptional {
		return nil, o.errAt("implicit", "an optional option needs the value a bare --"+opt.Name+" means")
	}
	if err := o.done(); err != nil {
		return nil, err
	}
	return opt, nil
}

func loadPositional(o *obj) (*Positional, error) {
	p := &Positional{}
	var err error
	if p.Name, err = o.str("name", true); err != nil {
		return nil, err
	}
	if !grant.IsCommandWord(p.Name) {
		return nil, o.errAt("name", "must be a letter or digit, then letters, digits, '-', '_' or '.'")
	}
	if p.Summary, err = o.str("summary", false); err != nil {
		return nil, err
	}
	if p.Type, err = loadType(o, true); err != nil {
		return nil, err
	}
	if p.Required, err = o.boolean("required"); err != nil {
		return nil, err
	}
	if p.Variadic, err = o.boolean("variadic"); err != nil {
		return nil, err
	}
	if p.Enum, err = loadEnum(o, p.Type); err != nil {
		return nil, err
	}
	if p.Min, p.Max, err = loadRange(o, p.Type); err != nil {
		return nil, err
	}
	acc, err := o.strs("accept")
	if err != nil {
		return nil, err
	}
	for i, a := range acc {
		sh := Shape(a)
		if !slices.Contains(shapes, sh) {
			return nil, &SpecError{Path: fmt.Sprintf("%s.accept[%d]", o.path, i), Why: fmt.Sprintf("must be plus, at, assignment or first-word; got %q", a)}
		}
		if slices.Contains(p.Accept, sh) {
			return nil, &SpecError{Path: fmt.Sprintf("%s.accept[%d]", o.path, i), Why: fmt.Sprintf("%q is listed twice", a)}
		}
		p.Accept = append(p.Accept, sh)
	}
	return p, o.done()
}

func loadType(o *obj, allowed bool) (Type, error) {
	t, err := o.str("type", false)
	if err != nil {
		return "", err
	}
	switch {
	case t == "":
		return TypeString, nil
	case !allowed:
		return "", o.errAt("type", "a bool or count flag has no value type")
	case t == string(TypeString) || t == string(TypeInteger):
		return Type(t), nil
	}
	return "", o.errAt("type", "must be string or integer; got "+strconv.Quote(t))
}

func loadEnum(o *obj, t Type) ([]string, error) {
	e, err := o.strs("enum")
	if err != nil || e == nil {
		return nil, err
	}
	if t != TypeString {
		return nil, o.errAt("enum", "only string values have an enum")
	}
	if len(e) == 0 {
		return nil, o.errAt("enum", "must list at least one value")
	}
	return e, nil
}

func loadRange(o *obj, t Type) (*int64, *int64, error) {
	var out [2]*int64
	for i, key := range []string{"minimum", "maximum"} {
		if _, ok := o.m[key]; !ok {
			continue
		}
		if t != TypeInteger {
			return nil, nil, o.errAt(key, "only integer values have a range")
		}
		v, err := o.num(key, true)
		if err != nil {
			return nil, nil, err
		}
		out[i] = &v
	}
	if out[0] != nil && out[1] != nil && *out[0] > *out[1] {
		return nil, nil, o.errAt("maximum", "is below minimum")
	}
	return out[0], out[1], nil
}

// scalar reads a JSON value of type t as its text: a string for
// TypeString, an integer (no fraction, no exponent) for TypeInteger.
func scalar(raw any, t Type) (string, string) {
	switch v := raw.(type) {
	case string:
		if t == TypeString {
			return v, ""
		}
	case json.Number:
		if t == TypeInteger {
			if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
				return "", "want an integer (no fraction or exponent, 64 bits), got " + string(v)
			}
			return string(v), ""
		}
	}
	return "", "want " + describeType(t) + ", got " + describeJSON(raw)
}

func describeType(t Type) string {
	if t == TypeInteger {
		return "an integer"
	}
	return "a string"
}

func describeJSON(v any) string {
	switch v := v.(type) {
	case string:
		return "the string " + strconv.Quote(v)
	case json.Number:
		return "the number " + string(v)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

// checkValue checks one value's text against its type, enum and range,
// and returns why it does not fit ("" if it does).
func checkValue(v string, t Type, enum []string, lo, hi *int64) string {
	if t == TypeInteger {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Sprintf("want an integer, got %q", v)
		}
		if lo != nil && n < *lo {
			return fmt.Sprintf("%d is below the minimum %d", n, *lo)
		}
		if hi != nil && n > *hi {
			return fmt.Sprintf("%d is above the maximum %d", n, *hi)
		}
		return ""
	}
	if enum != nil && !slices.Contains(enum, v) {
		return fmt.Sprintf("%q is not one of %s", v, strings.Join(enum, ", "))
	}
	return ""
}

// canonical writes a checked value in its one form (integers in decimal,
// without sign '+' or leading zeros).
func canonical(v string, t Type) string {
	if t == TypeInteger {
		n, _ := strconv.ParseInt(v, 10, 64)
		return strconv.FormatInt(n, 10)
	}
	return v
}

// --- a JSON object reader that names paths ---------------------------------

type obj struct {
	m    map[string]any
	path string
	used map[string]bool
}

func (o *obj) seen(k string) {
	if o.used == nil {
		o.used = map[string]bool{}
	}
	o.used[k] = true
}

func (o *obj) errAt(k, why string) error { return &SpecError{Path: o.path + "." + k, Why: why} }

func (o *obj) str(k string, required bool) (string, error) {
	o.seen(k)
	v, ok := o.m[k]
	if !ok {
		if required {
			return "", o.errAt(k, "missing")
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.errAt(k, "want a string, got "+describeJSON(v))
	}
	if required && s == "" {
		return "", o.errAt(k, "must not be empty")
	}
	return s, nil
}

func (o *obj) num(k string, required bool) (int64, error) {
	o.seen(k)
	v, ok := o.m[k]
	if !ok {
		if required {
			return 0, o.errAt(k, "missing")
		}
		return 0, nil
	}
	n, isNum := v.(json.Number)
	i, err := strconv.ParseInt(string(n), 10, 64)
	if !isNum || err != nil {
		return 0, o.errAt(k, "want an integer, got "+describeJSON(v))
	}
	return i, nil
}

func (o *obj) boolean(k string) (bool, error) {
	o.seen(k)
	v, ok := o.m[k]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, o.errAt(k, "want true or false, got "+describeJSON(v))
	}
	return b, nil
}

func (o *obj) strs(k string) ([]string, error) {
	o.seen(k)
	v, ok := o.m[k]
	if !ok {
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, o.errAt(k, "want an array of strings, got "+describeJSON(v))
	}
	out := []string{}
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, &SpecError{Path: fmt.Sprintf("%s.%s[%d]", o.path, k, i), Why: "want a string, got " + describeJSON(e)}
		}
		out = append(out, s)
	}
	return out, nil
}

func (o *obj) object(k string) (*obj, error) {
	o.seen(k)
	v, ok := o.m[k]
	if !ok {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, o.errAt(k, "want an object, got "+describeJSON(v))
	}
	return &obj{m: m, path: o.path + "." + k}, nil
}

func (o *obj) objects(k string) ([]*obj, error) {
	o.seen(k)
	v, ok := o.m[k]
	if !ok {
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, o.errAt(k, "want an array of objects, got "+describeJSON(v))
	}
	var out []*obj
	for i, e := range a {
		m, ok := e.(map[string]any)
		p := fmt.Sprintf("%s.%s[%d]", o.path, k, i)
		if !ok {
			return nil, &SpecError{Path: p, Why: "want an object, got " + describeJSON(e)}
		}
		out = append(out, &obj{m: m, path: p})
	}
	return out, nil
}

// done refuses keys nobody read: a misspelt key is an error, not ignored.
func (o *obj) done() error {
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !o.used[k] {
			return o.errAt(k, "unknown key")
		}
	}
	return nil
}
