package command

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/internal/grant"
)

// Render is the call's options as canonical grant arguments (sorted by
// name): a value option --name=V, a list one --name=V per element in
// order, a map one --name=K=V per key in key order, a bool flag --name (a
// flag named no-X: --no-X, the boolean false of X), a count flag --name=N;
// and the call's stdin, when it has one, --stdin=TEXT (the JSON
// projection's property, as a JSON-input tool's renders; no option may be
// named stdin). Defaults and environment fallbacks are included: a grant
// sees every value the program will be given.
func (inv *Invocation) Render() []grant.Arg {
	args := slices.Clone(inv.args)
	if inv.stdin != nil {
		args = append(args, grant.Arg{Name: "stdin", Value: *inv.stdin})
		grant.SortArgs(args)
	}
	return args
}

// Path is the called command's path of canonical names.
func (inv *Invocation) Path() []string { return inv.cmd.Path() }

// Positionals are the call's positionals in order.
func (inv *Invocation) Positionals() []string { return slices.Clone(inv.pos) }

// Target is what a card grant is matched against for a call of tool.
func (inv *Invocation) Target(tool string) grant.Target {
	return grant.CommandTarget(tool, inv.cmd.path, inv.Render(), inv.pos)
}

// String is the canonical rendering without the tool's name
// ("log --max-count=5 -- README.md"), as approvals show it.
func (inv *Invocation) String() string {
	return grant.CommandRendering(inv.cmd.path, inv.Render(), inv.pos)
}

// Words is the canonical rendering as argv words ParseArgv reads back to
// the same invocation: the command path, each argument as --name=V, --name
// or --no-name, then "--" and the positionals. (Argv, not Words, is what a
// wrapped CLI is given.)
func (inv *Invocation) Words() []string {
	w := slices.Clone(inv.cmd.path)
	for _, a := range inv.args {
		w = append(w, argWord(a))
	}
	if len(inv.pos) > 0 {
		w = append(w, "--")
		w = append(w, inv.pos...)
	}
	return w
}

func argWord(a grant.Arg) string {
	switch a.Form {
	case grant.FormTrue:
		return "--" + a.Name
	case grant.FormFalse:
		return "--no-" + a.Name
	}
	return "--" + a.Name + "=" + a.Value
}

// JSON is the call in the JSON projection ParseJSON reads back to the same
// invocation (properties sorted, as encoding/json writes maps).
func (inv *Invocation) JSON() []byte {
	m := map[string]any{}
	if len(inv.cmd.path) > 0 {
		m["command"] = strings.Join(inv.cmd.path, " ")
	}
	if inv.stdin != nil {
		m["stdin"] = *inv.stdin
	}
	for _, a := range inv.args {
		opt := inv.optionOf(a)
		switch opt.Kind {
		case KindBool:
			m[opt.Name] = true
		case KindCount:
			m[opt.Name] = json.Number(a.Value)
		case KindList:
			l, _ := m[opt.Name].([]any)
			m[opt.Name] = append(l, typed(a.Value, opt.Type))
		case KindMap:
			mm, _ := m[opt.Name].(map[string]any)
			if mm == nil {
				mm = map[string]any{}
			}
			k, v, _ := strings.Cut(a.Value, "=")
			mm[k] = v
			m[opt.Name] = mm
		default:
			m[opt.Name] = typed(a.Value, opt.Type)
		}
	}
	for i, v := range inv.pos {
		p := inv.cmd.Positionals[min(i, len(inv.cmd.Positionals)-1)]
		if p.Variadic {
			l, _ := m[p.Name].([]any)
			m[p.Name] = append(l, typed(v, p.Type))
		} else {
			m[p.Name] = typed(v, p.Type)
		}
	}
	b, _ := json.Marshal(m)
	return b
}

func typed(v string, t Type) any {
	if t == TypeInteger {
		return json.Number(v)
	}
	return v
}

// optionOf finds the option a rendered argument came from.
func (inv *Invocation) optionOf(a grant.Arg) *Option {
	for _, o := range inv.cmd.visible() {
		if o.argName() == a.Name {
			return o
		}
	}
	panic("command: an invocation's argument has no option: " + a.Name) // built by finish from these options
}

// Style is how Argv spells an option's value.
type Style int

const (
	// StyleEquals writes --name=V (and -sV for a short-only option): the
	// value can never be read as another option. The default.
	StyleEquals Style = iota
	// StyleSeparate writes --name V, for programs that do not read
	// --name=V; a value that starts with '-' or is empty is still written
	// --name=V, so that no parser can take it for an option.
	StyleSeparate
)

// Argv builds a wrapped CLI's arguments (after the program's name) from
// the canonical rendering only, never from the text the call came as:
// each command word, with the options its level declares right after it
// (a global option of the top command comes before the first command word,
// where programs like git read theirs), then the command's end-of-options
// marker and the positionals. A positional that starts with '-' was refused
// at validation unless the command has a marker.
func (inv *Invocation) Argv(style Style) []string {
	var out []string
	levels := []*Command{}
	for n := inv.cmd; n != nil; n = n.parent {
		levels = append([]*Command{n}, levels...)
	}
	for li, lv := range levels {
		if li > 0 {
			out = append(out, lv.Name)
		}
		for _, a := range inv.args {
			opt := inv.optionOf(a)
			if opt.owner != lv {
				continue
			}
			out = appendOption(out, opt, a, style)
		}
	}
	if len(inv.pos) > 0 {
		if inv.cmd.EndOfOptions != "" {
			out = append(out, inv.cmd.EndOfOptions)
		}
		out = append(out, inv.pos...)
	}
	return out
}

func appendOption(out []string, opt *Option, a grant.Arg, style Style) []string {
	flag := "--" + opt.Name
	if opt.ShortOnly {
		flag = "-" + opt.Short
	}
	switch opt.Kind {
	case KindBool:
		return append(out, flag)
	case KindCount:
		n, _ := strconv.Atoi(a.Value)
		for range n {
			out = append(out, flag)
		}
		return out
	}
	v := a.Value
	if opt.ShortOnly {
		if v == "" {
			return append(out, flag, "")
		}
		return append(out, flag+v) // attached: never read as an option
	}
	if style == StyleSeparate && opt.Kind != KindOptional && v != "" && !strings.HasPrefix(v, "-") {
		return append(out, flag, v)
	}
	return append(out, flag+"="+v)
}
