package grant

import (
	"strconv"
	"strings"
)

// A typed command's call (internal/command) is rendered in the same
// grammar as a JSON tool's, with two additions around the arguments:
//
//	tool:invoke git log --max-count=5 -- README.md
//	            │   │   │             │  └ positionals, in order (globs)
//	            │   │   │             └ "--" starts the positionals
//	            │   │   └ arguments, as Render's (sorted by name)
//	            │   └ command words (literal)
//	            └ the tool's name
//
// A JSON tool has no command words and no positionals, so its grants and
// renderings are unchanged.

// CommandTarget is a call of a typed command: tool, the command path
// (canonical command names), the rendered options (copied and put in
// canonical order) and the positionals in order.
func CommandTarget(tool string, command []string, args []Arg, positionals []string) Target {
	t := ToolTarget(tool, args)
	t.Command = append([]string(nil), command...)
	t.Positionals = append([]string(nil), positionals...)
	return t
}

// AlwaysCommandTarget is the standing approval a command call needs to skip
// the approve middleware.
func AlwaysCommandTarget(tool string, command []string, args []Arg, positionals []string) Target {
	t := CommandTarget(tool, command, args, positionals)
	t.Class, t.Verb = Approve, "always"
	return t
}

// CommandRendering is a command call's canonical rendering without the
// tool's name: command words, the arguments (sorted as Rendering sorts
// them), then "--" and the positionals when there are any. It is what
// approvals show; for a call without command words and positionals it is
// Rendering(args).
func CommandRendering(command []string, args []Arg, positionals []string) string {
	var b strings.Builder
	for _, c := range command {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c)
	}
	if r := Rendering(args); r != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r)
	}
	if len(positionals) > 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("--")
		for _, p := range positionals {
			b.WriteByte(' ')
			b.WriteString(PositionalString(p))
		}
	}
	return b.String()
}

// IsCommandWord reports whether s can be a command word of a grant: a
// letter or digit, then letters, digits, '-', '_' or '.'. The command model
// holds command names and aliases to the same rule.
func IsCommandWord(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isCommandWord: a word with nothing escaped that IsCommandWord accepts.
func isCommandWord(w word) bool {
	for _, e := range w.esc {
		if e {
			return false
		}
	}
	return IsCommandWord(string(w.b))
}

// PositionalString renders one positional value as a grant word that
// matches exactly it: escaped like an argument's value, quoted when it
// holds spaces, and "..." (the rest marker) escaped.
func PositionalString(v string) string {
	return positionalWord(escapeWord(v, ""))
}

func positionalWord(esc string) string {
	if esc == "..." {
		return `\...`
	}
	return wordString(esc)
}

// parsePositionals reads the words after "--": one glob per positional, and
// a final plain "..." that allows any further positionals.
func (g *Grant) parsePositionals(s string, words []word) error {
	g.pos = []Glob{}
	for k, w := range words {
		if w.plain("...") {
			if k+1 < len(words) {
				n := words[k+1]
				return &ParseError{Input: s, Pos: n.pos, Expected: `the end of the grant after the positionals' "..." (write \... for a literal one)`, Found: strconv.Quote(n.String())}
			}
			g.posRest = true
			break
		}
		g.pos = append(g.pos, globOf(w.b, w.esc))
	}
	if len(g.pos) == 0 {
		g.pos = nil
	}
	return nil
}

func (g *Grant) writePositionals(b *strings.Builder) {
	if len(g.pos) == 0 && !g.posRest {
		return
	}
	b.WriteString(" --")
	for _, p := range g.pos {
		b.WriteByte(' ')
		var e strings.Builder
		for i, part := range p.parts {
			if i > 0 {
				e.WriteByte('*')
			}
			e.WriteString(escapeWord(part, ""))
		}
		b.WriteString(positionalWord(e.String()))
	}
	if g.posRest {
		b.WriteString(" ...")
	}
}

// matchPositionals: as many positionals as globs (at least as many with
// rest), each matching its glob.
func matchPositionals(pats []Glob, rest bool, vals []string) bool {
	if len(vals) < len(pats) || len(vals) > len(pats) && !rest {
		return false
	}
	for i := range pats {
		if !pats[i].Match(vals[i]) {
			return false
		}
	}
	return true
}

// coverPositionals: every positional list the child allows, the parent
// allows. The child's lists have len(child) elements (or more with crest);
// the parent must accept those lengths and cover each glob it names.
func coverPositionals(parent []Glob, prest bool, child []Glob, crest bool) bool {
	switch {
	case crest && !prest:
		return false
	case len(child) < len(parent):
		return false
	case len(child) > len(parent) && !prest:
		return false
	}
	for i := range parent {
		if !parent[i].Covers(child[i]) {
			return false
		}
	}
	return true
}
