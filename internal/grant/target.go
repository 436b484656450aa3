package grant

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/internal/hostpattern"
)

// Target is one concrete thing a caller wants to do: a class, a verb and a
// resource. Build it with the constructors, which normalise the resource
// the way grants are normalised.
type Target struct {
	Class Class
	Verb  string
	Name  string // tool, secret, card ID; network: the host; fs: the path
	Port  int    // network
	Args  []Arg  // tool: in canonical order
	segs  []string

	// Component is the digest of the component the call runs (tool:
	// "sha256:" and 64 lower-case hex digits; "" when not known): a tool
	// grant naming a digest allows only a call carrying the same one
	// (component.go). Set by the caller, which knows what will run.
	Component string

	// A typed command's call (CommandTarget): its command path and its
	// positionals in order; both empty for a JSON tool.
	Command     []string
	Positionals []string
}

// ToolTarget is a call of tool with rendered arguments (from Render, or
// from a typed command model). args is copied and put in canonical order.
func ToolTarget(tool string, args []Arg) Target {
	a := slices.Clone(args)
	SortArgs(a)
	return Target{Class: Tool, Verb: "invoke", Name: tool, Args: a}
}

// AlwaysTarget is the standing approval a call of tool with rendered args
// would need to skip the approve middleware.
func AlwaysTarget(tool string, args []Arg) Target {
	t := ToolTarget(tool, args)
	t.Class, t.Verb = Approve, "always"
	return t
}

// Rendering is args in the canonical rendering grants match, joined by
// spaces: what approvals show and an approve:always grant repeats.
func Rendering(args []Arg) string {
	a := args
	if !slices.IsSortedFunc(a, func(x, y Arg) int { return strings.Compare(x.Name, y.Name) }) {
		a = slices.Clone(args) // Render's output is sorted already
		SortArgs(a)
	}
	var b strings.Builder
	for i, x := range a {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(x.String())
	}
	return b.String()
}

// NetworkTarget is a connection to host:port. host must be a concrete host
// name or IP address (normalised here as agent.toml's patterns are).
func NetworkTarget(host string, port int) (Target, error) {
	h, why := hostpattern.Normalize(host)
	if why != "" || strings.HasPrefix(h, "*") {
		if why == "" {
			why = "a wildcard is not a host"
		}
		return Target{}, fmt.Errorf("%w: host %q: %s", ErrTarget, host, why)
	}
	if port < 1 || port > 65535 {
		return Target{}, fmt.Errorf("%w: port %d: must be 1..65535", ErrTarget, port)
	}
	return Target{Class: Network, Verb: "connect", Name: h, Port: port}, nil
}

// SecretTarget is verb ("use" or "reveal") of the secret name.
func SecretTarget(verb, name string) Target {
	return Target{Class: Secret, Verb: verb, Name: name}
}

// CardTarget is verb (derive, revoke, transfer, inspect, install) on card id.
func CardTarget(verb, id string) Target {
	return Target{Class: Card, Verb: verb, Name: id}
}

// FSTarget is verb ("read" or "write") of an absolute, clean path: no
// empty, "." or ".." segments (a path that needs cleaning is refused, not
// cleaned, because the caller's view of it would differ from ours).
func FSTarget(verb, path string) (Target, error) {
	if !strings.HasPrefix(path, "/") {
		return Target{}, fmt.Errorf("%w: path %q: must be absolute", ErrTarget, path)
	}
	var segs []string
	if path != "/" {
		segs = strings.Split(path[1:], "/")
		for _, s := range segs {
			if s == "" || s == "." || s == ".." {
				return Target{}, fmt.Errorf("%w: path %q: must be clean (no empty, \".\" or \"..\" segments)", ErrTarget, path)
			}
		}
	}
	return Target{Class: FS, Verb: verb, Name: path, segs: segs}, nil
}

// String renders t as the grant that allows exactly t (and nothing else),
// the form a denial shows for an operator to paste. A tool call's
// component is left out (the grant then allows the call whatever
// component runs it): PinnedString writes it.
func (t Target) String() string {
	var b strings.Builder
	b.WriteString(string(t.Class) + ":" + t.Verb + " ")
	switch t.Class {
	case Tool, Approve:
		b.WriteString(t.nameWord())
		if r := CommandRendering(t.Command, t.Args, t.Positionals); r != "" {
			b.WriteByte(' ')
			b.WriteString(r)
		}
	case Network:
		if strings.Contains(t.Name, ":") {
			b.WriteString("[" + t.Name + "]")
		} else {
			b.WriteString(t.Name)
		}
		b.WriteString(":" + strconv.Itoa(t.Port))
	case FS:
		b.WriteString(wordString(escapeWord(t.Name, "")))
	default:
		b.WriteString(wordString(escapeWord(t.Name, "")))
	}
	return b.String()
}

// nameWord is a tool target's name as one word of a grant: '@' escaped,
// which would start a component digest.
func (t Target) nameWord() string { return leadingDash(wordString(escapeWord(t.Name, "@"))) }

// --- network ---------------------------------------------------------------

// parseNetwork reads "*", "*:port", "host", "host:port", "[v6]:port" or a
// bare IPv6 address; ":*" is an explicit any port.
func (g *Grant) parseNetwork(s string, res []word) error {
	if err := onlyOne(s, res); err != nil {
		return err
	}
	w := res[0]
	for i, e := range w.esc {
		if e {
			return &ParseError{Input: s, Pos: w.off[i], Expected: "a host pattern without escapes", Found: "'\\'"}
		}
	}
	text := w.String()
	host, port := text, ""
	switch {
	case strings.HasPrefix(text, "["):
		end := strings.Index(text, "]")
		if end < 0 {
			return &ParseError{Input: s, Pos: w.pos, Expected: "']' after an IPv6 address", Found: "the end"}
		}
		host = text[:end+1]
		if rest := text[end+1:]; rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return &ParseError{Input: s, Pos: w.pos + end + 1, Expected: "':' and a port after ']'", Found: strconv.Quote(rest)}
			}
			port = p
		}
	case strings.Contains(text, "/"):
		// not a host; Normalize says why
	case strings.Count(text, ":") == 1:
		host, port, _ = strings.Cut(text, ":")
	}
	if host == "*" {
		g.name = Glob{parts: []string{"", ""}}
	} else {
		h, why := hostpattern.Normalize(host)
		if why != "" {
			return &ParseError{Input: s, Pos: w.pos, Expected: "a host pattern (host, *.domain, IP address or *)", Found: strconv.Quote(host) + " (" + why + ")"}
		}
		g.name = Literal(h)
	}
	if port != "" && port != "*" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' || port[0] == '+' {
			return &ParseError{Input: s, Pos: w.pos + len(text) - len(port), Expected: "a port 1..65535 or *", Found: strconv.Quote(port)}
		}
		g.port = n
	}
	return nil
}

func (g Grant) hostString() string {
	if g.anyHost() {
		return "*"
	}
	return g.name.parts[0]
}

// anyHost reports whether g's host is the bare "*".
func (g *Grant) anyHost() bool {
	return len(g.name.parts) == 2 && g.name.parts[0] == "" && g.name.parts[1] == ""
}

func (g *Grant) matchHost(host string) bool {
	if g.anyHost() {
		return true
	}
	return len(g.name.parts) == 1 && hostpattern.Match(g.name.parts[0], host)
}

func (g Grant) coverHost(child Grant) bool {
	switch {
	case g.anyHost():
		return true
	case child.anyHost():
		return false
	}
	// A pattern covers itself; a wildcard covers the concrete hosts it
	// matches; a concrete host covers only itself.
	p, c := g.name.parts[0], child.name.parts[0]
	return p == c || !strings.HasPrefix(c, "*") && hostpattern.Match(p, c)
}

// --- fs --------------------------------------------------------------------

// seg is one segment of a path pattern: a literal, '*' (one segment) or
// '**' (any number of segments).
type seg struct {
	kind segKind
	lit  string
}

type segKind uint8

const (
	segLit segKind = iota
	segOne
	segMany
)

func (g *Grant) parsePath(s string, res []word) error {
	if err := onlyOne(s, res); err != nil {
		return err
	}
	w := res[0]
	if len(w.b) == 0 || w.b[0] != '/' {
		return &ParseError{Input: s, Pos: w.pos, Expected: "an absolute path pattern starting with '/'", Found: strconv.Quote(w.String())}
	}
	g.path = []seg{}
	if len(w.b) == 1 {
		return nil
	}
	start := 1
	for i := 1; i <= len(w.b); i++ {
		if i < len(w.b) && !(w.b[i] == '/' && !w.esc[i]) {
			continue
		}
		b, esc := w.b[start:i], w.esc[start:i]
		pos := w.off[start-1] + 1 // just after the '/'
		sg, err := parseSeg(s, pos, b, esc)
		if err != nil {
			return err
		}
		g.path = append(g.path, sg)
		start = i + 1
	}
	return nil
}

func parseSeg(s string, pos int, b []byte, esc []bool) (seg, error) {
	plain := !slices.Contains(esc, true)
	switch {
	case len(b) == 0:
		return seg{}, &ParseError{Input: s, Pos: pos, Expected: "a path segment (no '//' and no trailing '/')", Found: "an empty segment"}
	case plain && string(b) == "*":
		return seg{kind: segOne}, nil
	case plain && string(b) == "**":
		return seg{kind: segMany}, nil
	case plain && (string(b) == "." || string(b) == ".."):
		return seg{}, &ParseError{Input: s, Pos: pos, Expected: "a clean path (no '.' or '..' segments)", Found: strconv.Quote(string(b))}
	}
	for i := range b {
		if b[i] == '*' && !esc[i] {
			return seg{}, &ParseError{Input: s, Pos: pos + i, Expected: `'*' or '**' as a whole segment (write \* for a literal one)`, Found: strconv.Quote(string(b))}
		}
	}
	return seg{kind: segLit, lit: string(b)}, nil
}

func pathString(p []seg) string {
	if len(p) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, sg := range p {
		b.WriteByte('/')
		switch sg.kind {
		case segOne:
			b.WriteByte('*')
		case segMany:
			b.WriteString("**")
		default:
			e := escapeWord(sg.lit, "/")
			if e == "." || e == ".." {
				e = `\` + e
			}
			b.WriteString(e)
		}
	}
	return wordString(b.String())
}

// matchPath matches a clean path's segments against a pattern with the
// backtracking wildcard algorithm ('**' the star, '*' any one segment).
func matchPath(p []seg, segs []string) bool {
	if p == nil {
		return false
	}
	pi, si, starP, starS := 0, 0, -1, 0
	for si < len(segs) {
		switch {
		case pi < len(p) && (p[pi].kind == segOne || p[pi].kind == segLit && p[pi].lit == segs[si]):
			pi++
			si++
		case pi < len(p) && p[pi].kind == segMany:
			starP, starS = pi, si
			pi++
		case starP >= 0:
			starS++
			pi, si = starP+1, starS
		default:
			return false
		}
	}
	for pi < len(p) && p[pi].kind == segMany {
		pi++
	}
	return pi == len(p)
}

// coverPath reports whether every path child matches, parent matches:
// symbolic matching where a child '**' is consumed only by a parent '**'
// and a child '*' only by a parent '*' or '**'.
func coverPath(parent, child []seg) bool {
	if parent == nil || child == nil {
		return child == nil
	}
	ids := map[string]int{}
	tok := func(p []seg) []int {
		t := make([]int, len(p))
		for i, sg := range p {
			switch sg.kind {
			case segMany:
				t[i] = star
			case segOne:
				t[i] = oneTok
			default:
				id, ok := ids[sg.lit]
				if !ok {
					id = len(ids)
					ids[sg.lit] = id
				}
				t[i] = id
			}
		}
		return t
	}
	return wildcardMatch(tok(parent), tok(child), true)
}

// FSSubtree is the grant fs:VERB DIR/** (verb "" for any verb): everything
// beneath the directory dir, absolute and clean (FSTarget's rules), each of
// whose segments is taken literally whatever bytes it holds (a space, a
// '\', a '*'). It is built from the segments, never by parsing dir as grant
// syntax, so the directory it names is the directory given.
func FSSubtree(verb, dir string) (Grant, error) {
	t, err := FSTarget(verb, dir)
	if err != nil {
		return Grant{}, err
	}
	if verb != "" && !slices.Contains(verbs[FS], verb) {
		return Grant{}, fmt.Errorf("%w: verb %q is not a verb of class fs", ErrTarget, verb)
	}
	p := make([]seg, 0, len(t.segs)+1)
	for _, s := range t.segs {
		p = append(p, seg{kind: segLit, lit: s})
	}
	return Grant{Class: FS, Verb: verb, path: append(p, seg{kind: segMany})}, nil
}

// LiteralPathPrefix is the path of fs grant g up to its first wildcard
// segment, its literal segments joined by '/' as they are ("/srv/work" for
// fs:read /srv/work/*/key, "/" when the first segment is a wildcard), and
// ok false for a grant of another class.
func (g Grant) LiteralPathPrefix() (prefix string, ok bool) {
	if g.Class != FS || g.path == nil {
		return "", false
	}
	var b strings.Builder
	for _, s := range g.path {
		if s.kind != segLit {
			break
		}
		b.WriteByte('/')
		b.WriteString(s.lit)
	}
	if b.Len() == 0 {
		return "/", true
	}
	return b.String(), true
}
