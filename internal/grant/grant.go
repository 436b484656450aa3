package grant

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Errors of this package; test with errors.Is.
var (
	// ErrSyntax is wrapped by every *ParseError.
	ErrSyntax = errors.New("malformed grant")
	// ErrRender is wrapped by every error of Render: the input cannot be
	// rendered as arguments, so no grant can allow it.
	ErrRender = errors.New("cannot render the input as arguments")
	// ErrNotObject: the input is not a JSON object (an array, a string...),
	// which no tool's arguments are. errors.Is finds ErrRender too.
	ErrNotObject = errors.New("input must be a JSON object")
	// ErrTarget is returned for a target that is not well formed (a
	// relative or unclean path, a port out of range, ...).
	ErrTarget = errors.New("malformed target")
)

// ParseError says where a grant is malformed and what was expected there.
type ParseError struct {
	Input    string
	Pos      int // byte offset into Input
	Expected string
	Found    string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("grant %q: at column %d: expected %s, found %s", e.Input, e.Pos+1, e.Expected, e.Found)
}

// Unwrap makes errors.Is(err, ErrSyntax) true.
func (e *ParseError) Unwrap() error { return ErrSyntax }

// Class is a grant's class.
type Class string

// The classes.
const (
	Tool    Class = "tool"
	Network Class = "network"
	Secret  Class = "secret"
	FS      Class = "fs"
	Card    Class = "card"
	// Approve is a human's standing approval of tool calls: a card with
	// approve:always TOOL ARGS lets such calls skip the approve middleware
	// (minted by "maiden approve -always"). Its resource is a tool's.
	Approve Class = "approve"
)

// verbs lists each class's verbs in the order the error messages give them.
var verbs = map[Class][]string{
	Tool:    {"invoke"},
	Network: {"connect"},
	Secret:  {"use", "reveal"},
	FS:      {"read", "write"},
	Card:    {"derive", "revoke", "transfer", "inspect", "install"},
	Approve: {"always"},
}

// Verbs returns the verbs of class c (nil for an unknown class).
func Verbs(c Class) []string { return slices.Clone(verbs[c]) }

// Grant is a parsed grant: a class, a verb ("" for any verb of the class)
// and a resource pattern. The zero Grant allows nothing. Grants are
// immutable values; build them with Parse.
type Grant struct {
	Class Class
	Verb  string // "" = any verb of the class

	name glob // tool name, secret name, card ID, network host ("*" = any)
	port int  // network: 0 = any port
	args []argPattern
	rest bool  // tool: a trailing "--..." allows arguments the grant does not mention
	path []seg // fs

	// component is the digest a tool grant's calls must run
	// ("sha256:HEX", component.go); "" = any component.
	component string

	// tool, a typed command's call (command.go): the command words after
	// the name (literal), and the positionals after "--" (globs), with
	// posRest for a final "..." that allows any further positionals.
	cmd     []string
	pos     []Glob
	posRest bool
}

type glob = Glob

// argPattern is one "--name=value-glob", "--name" or "--no-name" of a tool grant.
type argPattern struct {
	name  string
	form  Form
	value Glob // FormValue only
}

// Parse parses one grant. The syntax is in the package documentation; an
// error is a *ParseError with the position and what was expected.
func Parse(s string) (Grant, error) {
	words, err := lexWords(s)
	if err != nil {
		return Grant{}, err
	}
	if len(words) == 0 {
		return Grant{}, &ParseError{Input: s, Pos: 0, Expected: "class:verb resource, as in 'tool:invoke weather'", Found: "nothing"}
	}
	head := words[0]
	for i, e := range head.esc {
		if e {
			return Grant{}, &ParseError{Input: s, Pos: head.off[i], Expected: "a class without escapes", Found: "'\\'"}
		}
	}
	cls, verb, hasVerb := strings.Cut(head.String(), ":")
	var g Grant
	g.Class = Class(cls)
	vs, ok := verbs[g.Class]
	if !ok {
		return Grant{}, &ParseError{Input: s, Pos: head.pos, Expected: "a class (tool, network, secret, fs, card or approve)", Found: strconv.Quote(cls)}
	}
	if hasVerb && verb != "*" {
		if !slices.Contains(vs, verb) {
			return Grant{}, &ParseError{Input: s, Pos: head.pos + len(cls) + 1,
				Expected: fmt.Sprintf("a verb of class %s (%s, or * for any)", cls, strings.Join(vs, ", ")), Found: strconv.Quote(verb)}
		}
		g.Verb = verb
	}
	if len(words) == 1 {
		return Grant{}, &ParseError{Input: s, Pos: len(s), Expected: "a resource after " + strconv.Quote(head.String()) + resourceHint(g.Class), Found: "the end"}
	}
	res := words[1:]
	switch g.Class {
	case Tool, Approve:
		err = g.parseTool(s, res)
	case Network:
		err = g.parseNetwork(s, res)
	case FS:
		err = g.parsePath(s, res)
	default: // Secret, Card: one name, '*' a wildcard
		err = g.parseName(s, res)
	}
	if err != nil {
		return Grant{}, err
	}
	return g, nil
}

func resourceHint(c Class) string {
	switch c {
	case Tool, Approve:
		return " (a tool name, then --name=value arguments)"
	case Network:
		return " (a host pattern with an optional :port, or *)"
	case Secret:
		return " (a secret name)"
	case FS:
		return " (an absolute path pattern)"
	default:
		return " (a card ID or *)"
	}
}

func onlyOne(s string, res []word) error {
	if len(res) > 1 {
		return &ParseError{Input: s, Pos: res[1].pos, Expected: "the end of the grant (quote a resource that holds spaces)", Found: strconv.Quote(res[1].String())}
	}
	return nil
}

func (g *Grant) parseName(s string, res []word) error {
	if err := onlyOne(s, res); err != nil {
		return err
	}
	w := res[0]
	if len(w.b) == 0 {
		return &ParseError{Input: s, Pos: w.pos, Expected: "a name", Found: "an empty word"}
	}
	g.name = globOf(w.b, w.esc)
	return nil
}

func (g *Grant) parseTool(s string, res []word) error {
	w := res[0]
	if len(w.b) == 0 || w.b[0] == '-' && !w.esc[0] {
		return &ParseError{Input: s, Pos: w.pos, Expected: "a tool name before the arguments", Found: strconv.Quote(w.String())}
	}
	if at := unescapedAt(w); at >= 0 {
		switch {
		case g.Class == Approve:
			// An always-card minted from an approval is bound to the
			// tool's code by the approval itself (cards.Spec.Bound).
			return &ParseError{Input: s, Pos: w.off[at], Expected: `an approve:always tool name without a component digest (a digest belongs in a tool:invoke grant; write \@ for a literal '@')`, Found: "'@'"}
		case at == 0:
			return &ParseError{Input: s, Pos: w.pos, Expected: "a tool name before '@'", Found: "'@'"}
		}
		d, err := parseComponent(s, w, at)
		if err != nil {
			return err
		}
		g.component = d
		w = word{pos: w.pos, b: w.b[:at], esc: w.esc[:at], off: w.off[:at]}
	}
	g.name = globOf(w.b, w.esc)
	words := res[1:]
	for len(words) > 0 && isCommandWord(words[0]) {
		g.cmd = append(g.cmd, words[0].String())
		words = words[1:]
	}
	for k, a := range words {
		if a.plain("--") {
			if err := g.parsePositionals(s, words[k+1:]); err != nil {
				return err
			}
			break
		}
		if a.plain("--...") {
			if k+1 < len(words) && !words[k+1].plain("--") {
				n := words[k+1]
				return &ParseError{Input: s, Pos: n.pos, Expected: "the end of the grant after --... (or -- and positionals)", Found: strconv.Quote(n.String())}
			}
			g.rest = true
			continue
		}
		p, err := parseArg(s, a)
		if err != nil {
			return err
		}
		g.args = append(g.args, p)
	}
	slices.SortStableFunc(g.args, func(a, b argPattern) int { return strings.Compare(a.name, b.name) })
	return nil
}

// parseArg parses "--name=value", "--name" or "--no-name".
func parseArg(s string, a word) (argPattern, error) {
	if len(a.b) < 2 || a.b[0] != '-' || a.b[1] != '-' || a.esc[0] || a.esc[1] {
		return argPattern{}, &ParseError{Input: s, Pos: a.pos, Expected: "an argument --name=value, --name, --no-name or a final --...", Found: strconv.Quote(a.String())}
	}
	b, esc := a.b[2:], a.esc[2:]
	eq := -1
	for i := range b {
		if b[i] == '=' && !esc[i] {
			eq = i
			break
		}
		if b[i] == '*' && !esc[i] {
			return argPattern{}, &ParseError{Input: s, Pos: a.off[i+2], Expected: `an argument name without '*' (write \* for a literal one; '*' is a wildcard only in values)`, Found: "'*'"}
		}
	}
	nameEnd := len(b)
	if eq >= 0 {
		nameEnd = eq
	}
	if nameEnd == 0 {
		return argPattern{}, &ParseError{Input: s, Pos: a.pos + 2, Expected: "an argument name after --", Found: describe(s[min(a.pos+2, len(s)):])}
	}
	name := string(b[:nameEnd])
	if eq >= 0 {
		return argPattern{name: name, form: FormValue, value: globOf(b[eq+1:], esc[eq+1:])}, nil
	}
	if strings.HasPrefix(name, "no-") && !esc[0] && !esc[1] && !esc[2] && len(name) > 3 {
		return argPattern{name: name[3:], form: FormFalse}, nil
	}
	return argPattern{name: name, form: FormTrue}, nil
}

// String renders g in the canonical grant syntax; Parse(g.String()) == g.
func (g Grant) String() string {
	if len(g.name.parts) == 0 && g.path == nil {
		return "" // the zero Grant
	}
	var b strings.Builder
	b.WriteString(string(g.Class))
	b.WriteByte(':')
	if g.Verb == "" {
		b.WriteByte('*')
	} else {
		b.WriteString(g.Verb)
	}
	b.WriteByte(' ')
	switch g.Class {
	case FS:
		b.WriteString(pathString(g.path))
	case Network:
		if h := g.hostString(); strings.Contains(h, ":") {
			b.WriteString("[" + h + "]")
		} else {
			b.WriteString(h)
		}
		if g.port != 0 {
			b.WriteString(":" + strconv.Itoa(g.port))
		}
	case Tool, Approve:
		b.WriteString(leadingDash(g.name.word("@")))
		if g.component != "" {
			b.WriteString("@" + g.component)
		}
		for _, c := range g.cmd {
			b.WriteByte(' ')
			b.WriteString(c)
		}
		for _, a := range g.args {
			b.WriteByte(' ')
			b.WriteString(a.String())
		}
		if g.rest {
			b.WriteString(" --...")
		}
		g.writePositionals(&b)
	default:
		b.WriteString(g.name.String())
	}
	return b.String()
}

// Allows reports whether g allows target t. A target's verb is always
// concrete; g allows it if g names that verb or any verb.
func (g Grant) Allows(t Target) bool { return g.AllowsRef(&t) }

// AllowsRef is Allows without copying the grant and the target, for a
// caller that matches one target against many grants (a wallet).
func (g *Grant) AllowsRef(t *Target) bool {
	if g.Class != t.Class || (g.Verb != "" && g.Verb != t.Verb) {
		return false
	}
	switch g.Class {
	case Tool, Approve:
		return g.name.Match(t.Name) && (g.component == "" || sameComponent(g.component, t.Component)) &&
			slices.Equal(g.cmd, t.Command) && matchArgs(g.args, g.rest, t.Args) && matchPositionals(g.pos, g.posRest, t.Positionals)
	case Network:
		return g.matchHost(t.Name) && (g.port == 0 || g.port == t.Port)
	case FS:
		return matchPath(g.path, t.segs)
	default:
		return g.name.Match(t.Name)
	}
}

// ForbidsRef reports whether g, as a prohibition (a card's lower-negative
// exception or upper-negative grant), forbids t: whenever it allows t, and
// also when a JSON reader that folds case (Go's encoding/json) reads t's
// arguments as a call g allows (forbidArgs). A tool grant's name, command
// words, positionals and component are matched as AllowsRef matches them.
// Allowing grants and ceilings use AllowsRef, which refuses such variants.
// Covers stays sound for prohibitions: a grant covering another names no
// name the other does not, so it forbids every reading the other forbids.
func (g *Grant) ForbidsRef(t *Target) bool {
	if g.AllowsRef(t) {
		return true
	}
	if g.Class != Tool && g.Class != Approve || len(g.args) == 0 || g.Class != t.Class || (g.Verb != "" && g.Verb != t.Verb) {
		return false
	}
	return g.name.Match(t.Name) && (g.component == "" || sameComponent(g.component, t.Component)) &&
		slices.Equal(g.cmd, t.Command) && matchPositionals(g.pos, g.posRest, t.Positionals) && forbidArgs(g.args, g.rest, t.Args)
}

// Covers reports whether every target child allows, g allows too: the
// attenuation check of derivation. It is sound (true only when the
// inclusion holds) and may be false for a few exotic glob pairs whose
// inclusion holds; that only makes a derivation stricter.
func (g Grant) Covers(child Grant) bool {
	if g.Class != child.Class || (g.Verb != "" && g.Verb != child.Verb) {
		return false
	}
	switch g.Class {
	case Tool, Approve:
		// A grant naming a component covers only grants naming the same
		// one; a grant naming none covers any.
		return g.name.Covers(child.name) && (g.component == "" || g.component == child.component) &&
			slices.Equal(g.cmd, child.cmd) && coverArgs(g.args, g.rest, child.args, child.rest) &&
			coverPositionals(g.pos, g.posRest, child.pos, child.posRest)
	case Network:
		return g.coverHost(child) && (g.port == 0 || g.port == child.port)
	case FS:
		return coverPath(g.path, child.path)
	default:
		return g.name.Covers(child.name)
	}
}

// Equal reports whether a and b are the same grant.
func (a Grant) Equal(b Grant) bool { return a.String() == b.String() }

// leadingDash escapes a tool name's leading '-', which would read as an
// argument.
func leadingDash(w string) string {
	if strings.HasPrefix(w, "-") {
		return `\` + w
	}
	return w
}

// MarshalText writes g's canonical form (for JSON and the store).
func (g Grant) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText parses a grant written by MarshalText (or by a person).
func (g *Grant) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*g = p
	return nil
}

// LiteralName returns the name a tool, secret or card grant is restricted
// to when it has no wildcard (so a wallet can index its grants by it).
func (g Grant) LiteralName() (string, bool) {
	switch g.Class {
	case Tool, Secret, Card, Approve:
		if g.name.IsLiteral() {
			return g.name.parts[0], true
		}
	}
	return "", false
}

// ToolArgs returns the names of the arguments a tool grant names, in
// canonical order (a name named twice listed twice), and whether the grant
// ends with "--..." (any further arguments). A grant without "--..." matches
// only calls whose arguments are all named, the prohibiting grants of a
// card as much as the allowing ones (CARDS.md: one "covers" for all four
// lists).
func (g Grant) ToolArgs() (names []string, rest bool) {
	for _, a := range g.args {
		names = append(names, a.name)
	}
	return names, g.rest
}

// NamesTool reports whether the tool-name pattern of tool grant g matches
// tool (whatever the arguments).
func (g Grant) NamesTool(tool string) bool {
	return (g.Class == Tool || g.Class == Approve) && g.name.Match(tool)
}

// IsCommand reports whether tool grant g names command words or
// positionals (a typed command's call, command.go).
func (g Grant) IsCommand() bool { return len(g.cmd) > 0 || len(g.pos) > 0 || g.posRest }

// WithRest returns g with a final "--..." (any further arguments): the
// form that forbids, or allows, every call g names whatever else it passes.
func (g Grant) WithRest() Grant {
	g.rest = true
	return g
}
