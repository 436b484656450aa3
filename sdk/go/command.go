package maiden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Command is a node of a command tree: a tool that takes commands,
// options and positionals (like a CLI) instead of one JSON object.
// [Commands] turns the root into a [Tool]. Its Schema is the tree as a
// command description (docs/command-model.md, "maiden_command": 1), from
// which maiden derives the JSON Schema agents see, parses and validates
// every call (an error names the argument), renders the call for the
// agent's cards (`tool:invoke NAME add --tag=* -- *`: a card may allow
// one command and not another) and shows `maiden help NAME [COMMAND...]`.
//
//	maiden.Register(maiden.Commands(maiden.Command{
//		Name:    "notes",
//		Summary: "Formats notes.",
//		Commands: []maiden.Command{{
//			Name:        "show",
//			Options:     []maiden.Option{{Name: "id", Type: maiden.TypeInteger, Required: true}},
//			Run: func(ctx context.Context, call *maiden.Invocation) (any, error) {
//				return map[string]any{"id": call.Int("id")}, nil
//			},
//		}},
//	}))
//
// A command with subcommands is not called itself; every other command
// needs Run. Names are a letter or digit, then letters, digits, '-', '_'
// or '.'; option and positional names are unique among what a command
// sees (its own options, its ancestors' Global ones, its positionals), and
// "command" and "stdin" are reserved.
type Command struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"` // other names a call may use; cards see Name
	Summary     string   `json:"summary,omitempty"` // one line; the root's is the tool's description
	Description string   `json:"description,omitempty"`
	Options     []Option `json:"options,omitempty"`
	// Positionals come after the options, required ones first, at most
	// one Variadic, last. A command with subcommands has none.
	Positionals []Positional `json:"positionals,omitempty"`
	// Constraints over the names of this command's options and
	// positionals.
	Constraints []Constraint `json:"constraints,omitempty"`
	// Stdin declares a text the call may (or, if Required, must) attach
	// as "stdin"; the tool reads it as Invocation.Stdin.
	Stdin    *Stream   `json:"stdin,omitempty"`
	Commands []Command `json:"commands,omitempty"`
	// Run handles a call of this command. Its result is the call's
	// output: a string or []byte as is, anything else encoded as JSON
	// (without HTML escapes). A
	// non-nil error is the call's tool error, which the agent sees.
	Run func(ctx context.Context, call *Invocation) (any, error) `json:"-"`
}

// OptionKind is what an option takes.
type OptionKind string

// The kinds of option ("" is KindValue).
const (
	KindValue    OptionKind = "value"    // --name=V, once: Invocation.String or Int
	KindOptional OptionKind = "optional" // --name alone (its Implicit value) or --name=V
	KindList     OptionKind = "list"     // repeated, in order: Invocation.List
	KindMap      OptionKind = "map"      // --name=K=V, repeated, keys unique: Invocation.Map
	KindFlag     OptionKind = "bool"     // present or not: Invocation.Bool
	KindCount    OptionKind = "count"    // repeated (-vvv): Invocation.Int
)

// ValueType is the type of an option's or positional's values.
type ValueType string

// The value types ("" is TypeString).
const (
	TypeString  ValueType = "string"
	TypeInteger ValueType = "integer" // 64-bit; Minimum and Maximum apply
)

// Option is an option or flag of a command.
type Option struct {
	Name     string     `json:"name"`            // the long spelling without "--", and the name in Invocation
	Short    string     `json:"short,omitempty"` // one letter or digit, for help and argv-style calls
	Kind     OptionKind `json:"kind,omitempty"`
	Type     ValueType  `json:"type,omitempty"` // not for KindFlag and KindCount
	Summary  string     `json:"summary,omitempty"`
	Required bool       `json:"required,omitempty"`
	// Default is used (and rendered: the cards see it) when a call does
	// not give the option: a string, or an integer for Type Integer.
	Default any `json:"default,omitempty"`
	// Implicit is the value of a KindOptional option given alone.
	Implicit any      `json:"implicit,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	Minimum  *int64   `json:"minimum,omitempty"`
	Maximum  *int64   `json:"maximum,omitempty"`
	// Global options are inherited by every subcommand.
	Global bool `json:"global,omitempty"`
}

// Positional is a positional argument of a command.
type Positional struct {
	Name     string    `json:"name"`
	Summary  string    `json:"summary,omitempty"`
	Type     ValueType `json:"type,omitempty"`
	Required bool      `json:"required,omitempty"`
	Variadic bool      `json:"variadic,omitempty"` // takes the remaining values
	Enum     []string  `json:"enum,omitempty"`
	Minimum  *int64    `json:"minimum,omitempty"`
	Maximum  *int64    `json:"maximum,omitempty"`
}

// Constraint is a rule over names of a command's options and positionals:
// set exactly one of its fields, with at least two names.
type Constraint struct {
	OneOf     []string `json:"one_of,omitempty"`    // exactly one given
	Exclusive []string `json:"exclusive,omitempty"` // at most one
	AnyOf     []string `json:"any_of,omitempty"`    // at least one
}

// Stream is an attachment of a command (its stdin).
type Stream struct {
	MediaType string `json:"media_type"` // such as "text/plain"
	Summary   string `json:"summary,omitempty"`
	Required  bool   `json:"required,omitempty"`
}

// Invocation is one validated call of a command: maiden parsed and checked
// it against the tree before the tool runs, so every option and positional
// is of the declared kind and type, required ones are present, defaults
// are filled in, and nothing undeclared is there.
type Invocation struct {
	// Command is the path of the command called, by canonical names
	// (["remote", "add"]); empty for a tree without subcommands.
	Command []string
	// Positionals are the call's positionals in order (an integer one in
	// decimal).
	Positionals []string
	// Stdin is the attached text, if the command declares stdin and the
	// call gave one (HasStdin).
	Stdin    string
	HasStdin bool

	options map[string]json.RawMessage
}

// Has tells whether the call has the option (given, or by its default).
func (c *Invocation) Has(name string) bool {
	_, ok := c.options[name]
	return ok
}

// String is a value or optional option's value ("" when absent; an integer
// in decimal).
func (c *Invocation) String(name string) string { return scalarText(c.options[name]) }

// Int is an integer option's value or a count option's count (0 when
// absent).
func (c *Invocation) Int(name string) int64 {
	n, _ := strconv.ParseInt(scalarText(c.options[name]), 10, 64)
	return n
}

// Bool tells whether a KindFlag option was given.
func (c *Invocation) Bool(name string) bool {
	var b bool
	_ = json.Unmarshal(c.options[name], &b)
	return b
}

// List is a KindList option's values in order (integers in decimal).
func (c *Invocation) List(name string) []string {
	var raw []json.RawMessage
	_ = json.Unmarshal(c.options[name], &raw)
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		out = append(out, scalarText(r))
	}
	return out
}

// Map is a KindMap option's keys and values.
func (c *Invocation) Map(name string) map[string]string {
	m := map[string]string{}
	_ = json.Unmarshal(c.options[name], &m)
	return m
}

// DecodeOptions decodes the call's options, a JSON object keyed by option
// name, into v (usually a pointer to a struct with json tags). Keys match
// struct fields exactly: one that differs from a field's JSON name only in
// case is an error, as for Func's input.
func (c *Invocation) DecodeOptions(v any) error {
	b, err := json.Marshal(c.options)
	if err != nil {
		return err
	}
	return unmarshalExact(b, v)
}

func scalarText(r json.RawMessage) string {
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(r, &n) == nil {
		return n.String()
	}
	return ""
}

// Commands returns a Tool that takes the commands of the tree at root:
// Describe is root's Summary (and Description), Schema the command
// description, and Execute reads the call maiden built from the validated
// invocation and runs the command's Run.
func Commands(root Command) Tool { return &commandTool{root: root} }

type commandTool struct {
	root   Command
	schema string
}

func (t *commandTool) Describe() string {
	return strings.TrimSpace(t.root.Summary + "\n\n" + t.root.Description)
}

// description is the command description's JSON form: the tree with the
// format's version, and "--" as every command's end of options (a tool
// reads no argv, so a positional such as "-x" is data, never an option).
type description struct {
	Version int `json:"maiden_command"`
	*describedCommand
}

type describedCommand struct {
	Command
	EndOfOptions string              `json:"end_of_options,omitempty"`
	Commands     []*describedCommand `json:"commands,omitempty"`
}

func describeTree(c Command) *describedCommand {
	d := &describedCommand{Command: c}
	if len(c.Positionals) > 0 {
		d.EndOfOptions = "--"
	}
	for _, sub := range c.Commands {
		d.Commands = append(d.Commands, describeTree(sub))
	}
	return d
}

func (t *commandTool) Schema() string {
	if t.schema == "" {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(description{Version: 1, describedCommand: describeTree(t.root)}); err != nil {
			panic("maiden: the command tree cannot be encoded: " + err.Error()) // a Default or Implicit that JSON cannot hold
		}
		t.schema = strings.TrimSpace(b.String())
	}
	return t.schema
}

// commandCall is the JSON maiden gives a command tree's execute.
type commandCall struct {
	Command     []string                   `json:"command"`
	Options     map[string]json.RawMessage `json:"options"`
	Positionals []json.RawMessage          `json:"positionals"`
	Stdin       *string                    `json:"stdin"`
}

func (t *commandTool) Execute(ctx context.Context, input []byte) ([]byte, error) {
	var in commandCall
	d := json.NewDecoder(bytes.NewReader(input))
	d.UseNumber()
	if err := d.Decode(&in); err != nil {
		return nil, fmt.Errorf("invalid input: %w (a command tree's execute takes the call maiden validated: {\"command\": [...], \"options\": {...}, \"positionals\": [...]})", err)
	}
	c := &t.root
	for _, w := range in.Command {
		var next *Command
		for i := range c.Commands {
			if c.Commands[i].Name == w {
				next = &c.Commands[i]
				break
			}
		}
		if next == nil {
			return nil, fmt.Errorf("invalid input: %q has no command %q", strings.Join(append([]string{t.root.Name}, in.Command...), " "), w)
		}
		c = next
	}
	if c.Run == nil {
		return nil, fmt.Errorf("command %q has no Run", strings.TrimSpace(t.root.Name+" "+strings.Join(in.Command, " ")))
	}
	call := &Invocation{Command: in.Command, options: in.Options}
	if call.Command == nil {
		call.Command = []string{}
	}
	if call.options == nil {
		call.options = map[string]json.RawMessage{}
	}
	for _, p := range in.Positionals {
		call.Positionals = append(call.Positionals, scalarText(p))
	}
	if in.Stdin != nil {
		call.Stdin, call.HasStdin = *in.Stdin, true
	}
	out, err := c.Run(ctx, call)
	if err != nil {
		return nil, err
	}
	switch v := out.(type) {
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	case nil:
		return nil, errors.New("command " + strconv.Quote(strings.Join(in.Command, " ")) + " returned no result")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<" stays "<": the output is for agents, not HTML
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
