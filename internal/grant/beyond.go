package grant

import (
	"strconv"
	"strings"
)

// This file says in words what a grant allows beyond others (what an
// operator or a human approving "always" is about to add to a wallet):
// "tool:invoke pay with any --to= (today only --to=alice)". It compares
// grants the way Covers does, so "nothing new" is exactly "covered".

// maxToday bounds the grants of today a line names.
const maxToday = 3

// Beyond says in words what g allows beyond held, the grants it would join
// (each allowing by itself), and partial, grants that allow only some of
// what they say (a card's own exceptions carve into them): said beside g,
// never taken to cover it. When one of held covers g, g allows nothing
// new: redundant is true and words names the grant that covers it.
func Beyond(g Grant, held, partial []Grant) (words string, redundant bool) {
	for _, h := range held {
		if h.Covers(g) {
			return "nothing new: " + g.String() + " is covered by " + h.String(), true
		}
	}
	var related []Grant
	for _, h := range append(held[:len(held):len(held)], partial...) {
		if g.related(h) {
			related = append(related, h)
		}
	}
	switch g.Class {
	case Tool, Approve:
		return g.toolBeyond(related), false
	case FS:
		return g.fsBeyond(related), false
	}
	return g.String() + " (" + today(related, g.Class) + ")", false
}

// related reports whether h may allow some of what g allows (the same
// class, a verb both may have, and resources that overlap as far as one
// pattern of the two can tell), so that what g adds is said against it.
func (g Grant) related(h Grant) bool {
	if g.Class != h.Class {
		return false
	}
	if g.Class != FS && g.Verb != "" && h.Verb != "" && g.Verb != h.Verb {
		return false // (another fs verb on the same path is worth naming: "today read only")
	}
	switch g.Class {
	case Tool, Approve:
		// Grants naming two different components allow disjoint calls.
		sameComp := g.component == "" || h.component == "" || g.component == h.component
		return sameComp && (g.name.Covers(h.name) || h.name.Covers(g.name)) && equalWords(g.cmd, h.cmd)
	case FS:
		return coverPath(g.path, h.path) || coverPath(h.path, g.path)
	case Network:
		return true // any connection is worth naming beside a new one
	}
	return g.name.Covers(h.name) || h.name.Covers(g.name)
}

func equalWords(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// today names the related grants of today ("today no secret grant",
// "today only secret:use A, secret:use B").
func today(related []Grant, c Class) string {
	if len(related) == 0 {
		return "today no " + string(c) + " grant of it"
	}
	names := make([]string, 0, maxToday)
	for i, h := range related {
		if i == maxToday {
			names = append(names, "and "+strconv.Itoa(len(related)-maxToday)+" more")
			break
		}
		names = append(names, h.String())
	}
	return "today only " + strings.Join(names, ", ")
}

// toolBeyond says what a tool or approve:always grant adds, argument by
// argument against the related grants of the same tool.
func (g Grant) toolBeyond(related []Grant) string {
	name := leadingDash(g.name.word("@"))
	head := string(g.Class) + ":" + orAny(g.Verb) + " " + name
	if g.component != "" {
		// Said in the grant's own syntax: the digest is what the
		// approver must compare with the component they reviewed.
		head += "@" + g.component
	}
	for _, c := range g.cmd {
		head += " " + c
	}
	if len(related) == 0 {
		what := " (today nothing of " + name + ")"
		if g.component != "" {
			what = " (today nothing of " + name + "; only while its component is the one named)"
		}
		return head + " with " + g.argsWords() + what
	}
	var parts []string
	if g.component == "" {
		// What today's grants allow only for named components, g allows
		// for any: the widening is the component before any argument.
		var comps []string
		for _, h := range related {
			if h.component == "" {
				comps = nil
				break
			}
			comps = appendNew(comps, h.component)
		}
		if len(comps) > 0 {
			parts = append(parts, "any component (today only "+strings.Join(comps, ", ")+")")
		}
	}
	for _, p := range g.args {
		var todays []string
		covered := false
		for _, h := range related {
			named := false
			for _, q := range h.args {
				named = named || q.name == p.name
				if q.name != p.name {
					continue
				}
				if q.form == p.form && (p.form != FormValue || q.value.Covers(p.value)) {
					covered = true
				}
				todays = appendNew(todays, q.String())
			}
			if h.rest && !named {
				covered = true // any value, under its "--..."
			}
		}
		if covered {
			continue
		}
		switch {
		case len(todays) == 0:
			parts = append(parts, argWords(p)+" (today never --"+p.name+")")
		default:
			parts = append(parts, argWords(p)+" (today only "+strings.Join(todays, ", ")+")")
		}
	}
	if g.rest && !anyRest(related) {
		parts = append(parts, "any further arguments (today only the arguments named)")
	}
	if len(g.pos) > 0 || g.posRest {
		if s := g.posWords(); s != "" {
			parts = append(parts, "positionals "+s)
		}
	}
	if !g.name.IsLiteral() {
		parts = append([]string{"tools named " + g.name.word("@")}, parts...)
	}
	if len(parts) == 0 {
		// Every argument is allowed today somewhere, but not together (or
		// a required argument may be left out): name the grants instead.
		return g.String() + " (" + today(related, g.Class) + ")"
	}
	return head + " with " + strings.Join(parts, ", ")
}

func orAny(verb string) string {
	if verb == "" {
		return "*"
	}
	return verb
}

func appendNew(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

func anyRest(gs []Grant) bool {
	for _, g := range gs {
		if g.rest {
			return true
		}
	}
	return false
}

// argsWords says which arguments g allows: "any arguments", "no
// arguments", "any --to=, --memo=hi and any further arguments".
func (g Grant) argsWords() string {
	if len(g.args) == 0 {
		if g.rest {
			return "any arguments"
		}
		return "no arguments"
	}
	ws := make([]string, len(g.args))
	for i, p := range g.args {
		ws[i] = argWords(p)
	}
	s := strings.Join(ws, ", ")
	if g.rest {
		s += " and any further arguments"
	}
	return s
}

// argWords is one argument pattern: "any --to=" for a bare '*', else its
// grant syntax.
func argWords(p argPattern) string {
	if p.form == FormValue && len(p.value.parts) == 2 && p.value.parts[0] == "" && p.value.parts[1] == "" {
		return "any --" + p.name + "="
	}
	return p.String()
}

func (g Grant) posWords() string {
	var b strings.Builder
	g.writePositionals(&b)
	return strings.TrimSpace(b.String())
}

// fsBeyond says what an fs grant adds: "write under /srv/app/** (today
// read only)".
func (g Grant) fsBeyond(related []Grant) string {
	what := fsWords(g.Verb, g.path)
	var same, other []string // related grants reaching g's path with the same verb, or with another
	for _, h := range related {
		if h.Verb == g.Verb || h.Verb == "" {
			same = appendNew(same, fsWords(h.Verb, h.path))
		} else {
			other = appendNew(other, h.Verb)
		}
	}
	switch {
	case len(same) > 0:
		if len(same) > maxToday {
			same = append(same[:maxToday], "and "+strconv.Itoa(len(same)-maxToday)+" more")
		}
		return what + " (today only " + strings.Join(same, ", ") + ")"
	case len(other) > 0:
		return what + " (today " + strings.Join(other, " and ") + " only)"
	}
	return what + " (today nothing there)"
}

func fsWords(verb string, path []seg) string {
	v := verb
	if v == "" {
		v = "read and write"
	}
	p := pathString(path)
	if strings.HasSuffix(p, "/**") {
		return v + " under " + p
	}
	return v + " " + p
}
