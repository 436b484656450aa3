package grant

import (
	"slices"
	"strings"
)

// Form is how an argument is spelt.
type Form uint8

// The forms of an argument.
const (
	FormValue Form = iota // --name=value
	FormTrue              // --name      (the boolean true)
	FormFalse             // --no-name   (the boolean false)
)

// Arg is one rendered argument of a call: what Render makes of a top-level
// property of the input, and what a typed command model hands the matcher.
type Arg struct {
	Name  string
	Form  Form
	Value string // FormValue only
}

// String renders a in grant syntax, escaped so that a grant made of it
// matches exactly this argument ('*' becomes '\*').
func (a Arg) String() string {
	return argString(a.Name, a.Form, escapeWord(a.Value, ""))
}

func (p argPattern) String() string {
	if p.form != FormValue {
		return argString(p.name, p.form, "")
	}
	// The value's own String quotes it; we quote the whole word instead.
	var b strings.Builder
	for i, part := range p.value.parts {
		if i > 0 {
			b.WriteByte('*')
		}
		b.WriteString(escapeWord(part, ""))
	}
	return argString(p.name, p.form, b.String())
}

func argString(name string, form Form, escValue string) string {
	n := escapeWord(name, "=")
	if n == "..." {
		n = `\...` // a property named "..." is not the rest marker
	}
	var w string
	switch form {
	case FormTrue:
		if strings.HasPrefix(n, "no-") {
			n = `no\-` + n[3:] // "--no-x" would read as x=false
		}
		w = "--" + n
	case FormFalse:
		w = "--no-" + n
	default:
		w = "--" + n + "=" + escValue
	}
	return wordString(w)
}

// SortArgs sorts args into canonical order in place: by name (bytewise),
// keeping the order of arguments of the same name (an array's elements).
func SortArgs(args []Arg) {
	slices.SortStableFunc(args, func(a, b Arg) int { return strings.Compare(a.Name, b.Name) })
}

// matchArgs matches call arguments (in canonical order) against a grant's
// argument patterns (also sorted), name by name: every name the grant
// mentions must occur in the call exactly as often, each occurrence in
// order with the same form and a matching value; a name the grant does not
// mention is allowed only with rest. It allocates nothing.
func matchArgs(pats []argPattern, rest bool, args []Arg) bool {
	i, j := 0, 0
	for j < len(args) {
		name := args[j].Name
		j2 := j + 1
		for j2 < len(args) && args[j2].Name == name {
			j2++
		}
		if i < len(pats) && pats[i].name < name {
			return false // the grant names an argument the call lacks
		}
		if i < len(pats) && pats[i].name == name {
			i2 := i + 1
			for i2 < len(pats) && pats[i2].name == name {
				i2++
			}
			if i2-i != j2-j {
				return false
			}
			for k := 0; k < j2-j; k++ {
				p, a := pats[i+k], args[j+k]
				if p.form != a.Form || p.form == FormValue && !p.value.Match(a.Value) {
					return false
				}
			}
			i = i2
		} else if !rest || foldsOnto(pats, name) {
			return false
		}
		j = j2
	}
	return i == len(pats)
}

// foldsOnto reports whether name, which no pattern names exactly, equals
// a pattern's name case-insensitively. Such an argument is refused even
// under "--...": Go's encoding/json fills a struct field from any key that
// matches its name case-insensitively (the last one wins), so with
// {"city":"Paris","CITY":"Berlin"} a Go tool would get Berlin although the
// grant pinned --city=Paris.
func foldsOnto(pats []argPattern, name string) bool {
	for i := range pats {
		if strings.EqualFold(pats[i].name, name) {
			return true
		}
	}
	return false
}

// coverArgs reports whether every argument list the child patterns allow,
// the parent patterns allow. Names the parent mentions must be mentioned by
// the child with as many occurrences, the same forms and values under the
// parent's; a name only the child mentions, or a child rest, needs a parent
// rest.
func coverArgs(parent []argPattern, prest bool, child []argPattern, crest bool) bool {
	if crest && !prest {
		return false
	}
	i, j := 0, 0
	for i < len(parent) || j < len(child) {
		switch {
		case j >= len(child) || i < len(parent) && parent[i].name < child[j].name:
			return false // the child allows calls without this parent-required name
		case i >= len(parent) || child[j].name < parent[i].name:
			// A name only the child names is allowed by the parent's
			// "--..." unless it is a case variant of a name the parent
			// names, which the parent refuses (foldsOnto).
			if !prest || foldsOnto(parent, child[j].name) {
				return false
			}
			j++
		default:
			name := parent[i].name
			i2, j2 := i, j
			for i2 < len(parent) && parent[i2].name == name {
				i2++
			}
			for j2 < len(child) && child[j2].name == name {
				j2++
			}
			if i2-i != j2-j {
				return false
			}
			for k := 0; k < i2-i; k++ {
				p, c := parent[i+k], child[j+k]
				if p.form != c.form || p.form == FormValue && !p.value.Covers(c.value) {
					return false
				}
			}
			i, j = i2, j2
		}
	}
	return true
}

// forbidArgs reports whether a prohibiting grant's patterns (a card's
// lower-negative or upper-negative grant) forbid args: when they match
// args, and when they match what a JSON reader that folds case reads of
// them. Go's encoding/json fills a field from any case variant of its
// name, the last key winning, so {"MESSAGE":"hello"} and {"message":"hi",
// "MESSAGE":"hello"} reach a Go tool as message=hello: for each name the
// patterns name, any one of the call's arguments whose name folds onto it
// may be the one the tool reads (the others are then read by nobody), and
// if some such reading matches, the call is forbidden. A call with no case
// variant of a named name costs nothing more than matchArgs.
func forbidArgs(pats []argPattern, rest bool, args []Arg) bool {
	if matchArgs(pats, rest, args) {
		return true
	}
	variant := false
	for j := range args {
		if foldsOnto(pats, args[j].Name) && !namedExactly(pats, args[j].Name) {
			variant = true
			break
		}
	}
	if !variant {
		return false
	}
	// Each group of patterns of one name must be matched by the group of
	// arguments of some name folding onto it; arguments folding onto no
	// named name need rest.
	for i := 0; i < len(pats); {
		name := pats[i].name
		i2 := i + 1
		for i2 < len(pats) && pats[i2].name == name {
			i2++
		}
		for k := range pats {
			if pats[k].name != name && strings.EqualFold(pats[k].name, name) {
				// The grant names two case variants itself: which one a
				// folding reader fills is not known; forbid.
				return true
			}
		}
		found := false
		for j := 0; j < len(args) && !found; {
			j2 := j + 1
			for j2 < len(args) && args[j2].Name == args[j].Name {
				j2++
			}
			if strings.EqualFold(args[j].Name, name) && groupMatches(pats[i:i2], args[j:j2]) {
				found = true
			}
			j = j2
		}
		if !found {
			return false
		}
		i = i2
	}
	if !rest {
		for j := range args {
			if !foldsOnto(pats, args[j].Name) {
				return false
			}
		}
	}
	return true
}

// groupMatches: the arguments of one name match the patterns of one name,
// as many, in order, each with the same form and a matching value.
func groupMatches(pats []argPattern, args []Arg) bool {
	if len(pats) != len(args) {
		return false
	}
	for k := range pats {
		if pats[k].form != args[k].Form || pats[k].form == FormValue && !pats[k].value.Match(args[k].Value) {
			return false
		}
	}
	return true
}

// namedExactly reports whether a pattern names name exactly.
func namedExactly(pats []argPattern, name string) bool {
	for i := range pats {
		if pats[i].name == name {
			return true
		}
	}
	return false
}
