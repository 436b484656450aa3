package command

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Help is the help text of the command at path (names or aliases; none:
// the top command): usage, summary, subcommands, options (own and
// inherited), positionals, attachments and declared errors. An unknown
// path gives the closest known command's help, with a first line saying so.
func (s *Spec) Help(path ...string) string {
	c, rest := s.Root, path
	var b strings.Builder
	for len(rest) > 0 {
		sub := c.sub(rest[0])
		if sub == nil {
			fmt.Fprintf(&b, "%s has no command %q.\n\n", quoteCmd(s, c), rest[0])
			break
		}
		c, rest = sub, rest[1:]
	}
	usage := c.display(s.Name)
	if len(c.Commands) > 0 {
		usage += " COMMAND"
	}
	if len(c.visible()) > 0 {
		usage += " [OPTIONS]"
	}
	if len(c.Positionals) > 0 && c.EndOfOptions != "" {
		usage += " [" + c.EndOfOptions + "]"
	}
	for _, p := range c.Positionals {
		w := strings.ToUpper(p.Name)
		if p.Variadic {
			w += "..."
		}
		if !p.Required {
			w = "[" + w + "]"
		}
		usage += " " + w
	}
	fmt.Fprintf(&b, "Usage: %s\n", usage)
	if c.Summary != "" {
		fmt.Fprintf(&b, "\n%s\n", c.Summary)
	}
	if c.Description != "" {
		fmt.Fprintf(&b, "\n%s\n", c.Description)
	}
	if len(c.Commands) > 0 {
		b.WriteString("\nCommands:\n")
		for _, sub := range c.Commands {
			name := sub.Name
			if len(sub.Aliases) > 0 {
				name += " (" + strings.Join(sub.Aliases, ", ") + ")"
			}
			fmt.Fprintf(&b, "  %-24s %s\n", name, sub.Summary)
		}
	}
	if len(c.Positionals) > 0 {
		b.WriteString("\nPositionals:\n")
		for _, p := range c.Positionals {
			fmt.Fprintf(&b, "  %-24s %s%s%s\n", strings.ToUpper(p.Name), p.Summary, valueNotes(p.Type, p.Enum, p.Required, "", false), s.acceptNote(p.Accept))
		}
	}
	if opts := c.visible(); len(opts) > 0 {
		b.WriteString("\nOptions:\n")
		for _, o := range opts {
			spell := "--" + o.Name
			if o.Short != "" {
				spell = "-" + o.Short + ", " + spell
			}
			switch o.Kind {
			case KindValue, KindList:
				spell += "=" + strings.ToUpper(string(o.Type))
			case KindOptional:
				spell += "[=" + strings.ToUpper(string(o.Type)) + "]"
			case KindMap:
				spell += "=KEY=VALUE"
			}
			notes := valueNotes(o.Type, o.Enum, o.Required, o.Default, o.HasDef)
			switch o.Kind {
			case KindList, KindMap:
				notes += " (repeatable)"
			case KindCount:
				notes += " (repeatable: counts)"
			case KindOptional:
				notes += fmt.Sprintf(" (alone: %s)", o.Implicit)
			}
			if o.Env != "" {
				notes += " [env " + o.Env + "]"
			}
			notes += s.acceptNote(o.Accept)
			if o.owner != c {
				notes += " (global)"
			}
			fmt.Fprintf(&b, "  %-24s %s%s\n", spell, o.Summary, notes)
		}
	}
	if c.Stdin != nil || c.Stdout != nil || c.Stderr != nil {
		b.WriteString("\nAttachments:\n")
	}
	for _, st := range []struct {
		name string
		s    *Stream
	}{{"stdin", c.Stdin}, {"stdout", c.Stdout}, {"stderr", c.Stderr}} {
		if st.s != nil {
			req := ""
			if st.s.Required {
				req = " (required)"
			}
			fmt.Fprintf(&b, "  %-24s %s%s\n", st.name+" "+st.s.MediaType, st.s.Summary, req)
		}
	}
	if len(c.Errors) > 0 {
		b.WriteString("\nErrors:\n")
		for _, e := range c.Errors {
			fmt.Fprintf(&b, "  %-24s exit %d  %s\n", e.Name, e.ExitCode, e.Summary)
		}
	}
	return b.String()
}

func valueNotes(t Type, enum []string, required bool, def string, hasDef bool) string {
	var n []string
	if len(enum) > 0 {
		n = append(n, "one of "+strings.Join(enum, ", "))
	}
	if required {
		n = append(n, "required")
	}
	if hasDef {
		n = append(n, "default "+def)
	}
	if len(n) == 0 {
		return ""
	}
	return " (" + strings.Join(n, "; ") + ")"
}

// JSONSchema is the JSON Schema (draft 2020-12) of the JSON projection, for
// MCP tools/list: an object whose "command" property names the command
// path (canonical names joined by spaces) and, one branch per command
// (oneOf), that command's options, flags and positionals by name, with
// additionalProperties false. A description without subcommands has no
// "command" property.
func (s *Spec) JSONSchema() string {
	var branches []any
	var names []any
	for _, c := range s.Commands() {
		branches = append(branches, commandSchema(c))
		if len(c.path) > 0 {
			names = append(names, strings.Join(c.path, " "))
		}
	}
	var out map[string]any
	if len(names) == 0 {
		out = branches[0].(map[string]any)
	} else {
		out = map[string]any{
			"type":       "object",
			"properties": map[string]any{"command": map[string]any{"type": "string", "enum": names}},
			"required":   []any{"command"},
			"oneOf":      branches,
		}
	}
	out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	b, _ := json.Marshal(out)
	return string(b)
}

func commandSchema(c *Command) map[string]any {
	props := map[string]any{}
	required := []any{}
	if len(c.path) > 0 {
		props["command"] = map[string]any{"const": strings.Join(c.path, " ")}
		required = append(required, "command")
	}
	if c.Stdin != nil {
		props["stdin"] = map[string]any{"type": "string", "contentMediaType": c.Stdin.MediaType, "description": c.Stdin.Summary}
		if c.Stdin.Required {
			required = append(required, "stdin")
		}
	}
	for _, o := range c.visible() {
		var p map[string]any
		switch o.Kind {
		case KindBool:
			p = map[string]any{"type": "boolean"}
		case KindCount:
			p = map[string]any{"type": "integer", "minimum": 0, "maximum": 1000}
		case KindList:
			p = map[string]any{"type": "array", "items": valueSchema(o.Type, o.Enum, o.Min, o.Max)}
		case KindMap:
			p = map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
		default:
			p = valueSchema(o.Type, o.Enum, o.Min, o.Max)
			if o.HasDef {
				p["default"] = typed(o.Default, o.Type)
			}
		}
		if o.Summary != "" {
			p["description"] = o.Summary
		}
		props[o.Name] = p
		if o.Required {
			required = append(required, o.Name)
		}
	}
	for _, ps := range c.Positionals {
		p := valueSchema(ps.Type, ps.Enum, ps.Min, ps.Max)
		if ps.Variadic {
			p = map[string]any{"type": "array", "items": p}
			if ps.Required {
				p["minItems"] = 1
			}
		}
		if ps.Summary != "" {
			p["description"] = ps.Summary
		}
		props[ps.Name] = p
		if ps.Required {
			required = append(required, ps.Name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	if c.Summary != "" {
		out["description"] = c.Summary
	}
	return out
}

func valueSchema(t Type, enum []string, lo, hi *int64) map[string]any {
	p := map[string]any{"type": string(t)}
	if len(enum) > 0 {
		p["enum"] = enum
	}
	if lo != nil {
		p["minimum"] = *lo
	}
	if hi != nil {
		p["maximum"] = *hi
	}
	return p
}

// OutputSchema is the JSON Schema of the command's structured result, or
// nil when it declares none.
func (c *Command) OutputSchema() json.RawMessage { return c.Result }

// ErrorFor returns the declared error an exit code means, if any.
func (c *Command) ErrorFor(exitCode int) (DeclaredError, bool) {
	for _, e := range c.Errors {
		if e.ExitCode == exitCode {
			return e, true
		}
	}
	return DeclaredError{}, false
}

// acceptNote names the shapes a program's positional or option takes
// although programs read them as more than data ("" when none, and for a
// WebAssembly tool, which refuses none): a caller reading help learns which
// values are refused before it sends one.
func (s *Spec) acceptNote(acc []Shape) string {
	if !s.program || len(acc) == 0 {
		return ""
	}
	names := make([]string, len(acc))
	for i, a := range acc {
		names[i] = string(a)
	}
	return " [accepts: " + strings.Join(names, ", ") + "]"
}
