package mcpimport

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// MaxNameLen is the longest tool name maiden accepts after the NAME. prefix.
const MaxNameLen = 64

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidName reports whether s follows maiden's tool name rule,
// ^[a-z0-9][a-z0-9_-]{0,63}$, that every exposed name (after the NAME. prefix)
// must follow.
func ValidName(s string) bool { return validName.MatchString(s) }

// SanitizeName maps an upstream tool name to maiden's tool name rule: a
// lower-case letter following a lower-case letter or digit in camelCase gets
// an underscore before it ("getSum" → "get_sum"), ASCII letters are lowered,
// every other character outside [a-z0-9_-] becomes '_' (a run of them one
// '_'), leading '_' and '-' are dropped and the result is cut to 64 bytes. It
// returns "" when nothing usable is left (a name of only punctuation, or of
// only non-ASCII letters); such a tool cannot be exposed without an
// operator-given name. A name that already follows the rule is returned as
// it is.
func SanitizeName(upstream string) string {
	if ValidName(upstream) {
		return upstream
	}
	var b strings.Builder
	var prev rune
	replaced := false
	for _, r := range upstream {
		switch {
		case r >= 'A' && r <= 'Z':
			if (prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9') {
				b.WriteByte('_')
			}
			b.WriteRune(r + ('a' - 'A'))
			replaced = false
		case (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' || r == '-':
			b.WriteRune(r)
			replaced = false
		default:
			if !replaced {
				b.WriteByte('_')
			}
			replaced = true
		}
		prev = r
	}
	s := strings.TrimLeft(b.String(), "_-")
	if len(s) > MaxNameLen {
		s = s[:MaxNameLen]
	}
	if !ValidName(s) {
		return ""
	}
	return s
}

// NameError says why one upstream tool is not exposed.
type NameError struct {
	Upstream string // the upstream server's name for the tool
	Reason   string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("upstream tool %q is not exposed: %s", e.Upstream, e.Reason)
}

// ExposedNames decides the name under which each upstream tool is exposed
// (after the lead's NAME. prefix). rename maps an upstream name to an
// operator-given name, which must already follow the rule (it is not
// sanitised); every other tool gets SanitizeName of its name.
//
// Collisions are refused, never resolved by position: when two upstream tools
// would get the same exposed name, neither is exposed and each gets a NameError
// naming the other, so that the operator renames one. (A suffix such as "-2"
// would make a card's grant follow whichever tool the upstream happens to list
// first, and change meaning when the upstream adds a tool.) A tool whose name
// sanitises to nothing is refused the same way. The result maps exposed name →
// upstream name; errors are sorted by upstream name. A rename of a tool the
// upstream does not list is not an error here (the upstream may list it
// later); the caller may warn about it.
func ExposedNames(upstream []string, rename map[string]string) (map[string]string, []error) {
	byExposed := map[string][]string{}
	var errs []*NameError
	count := map[string]int{}
	for _, u := range upstream {
		count[u]++
	}
	for _, u := range upstream {
		switch n := count[u]; {
		case n == 0: // already reported
			continue
		case n > 1:
			errs = append(errs, &NameError{Upstream: u, Reason: fmt.Sprintf("the upstream lists it %d times", n)})
			count[u] = 0
			continue
		}
		name, ok := rename[u]
		if ok {
			if !ValidName(name) {
				errs = append(errs, &NameError{Upstream: u, Reason: fmt.Sprintf("its operator-given name %q does not match ^[a-z0-9][a-z0-9_-]{0,63}$", name)})
				continue
			}
		} else {
			name = SanitizeName(u)
			if name == "" {
				errs = append(errs, &NameError{Upstream: u, Reason: "nothing of its name fits ^[a-z0-9][a-z0-9_-]{0,63}$; give it a name"})
				continue
			}
		}
		byExposed[name] = append(byExposed[name], u)
	}
	out := make(map[string]string, len(byExposed))
	for name, us := range byExposed {
		if len(us) == 1 {
			out[name] = us[0]
			continue
		}
		sort.Strings(us)
		for _, u := range us {
			var others []string
			for _, o := range us {
				if o != u {
					others = append(others, fmt.Sprintf("%q", o))
				}
			}
			errs = append(errs, &NameError{Upstream: u, Reason: fmt.Sprintf("its name %q collides with upstream tool %s; give one of them a name", name, strings.Join(others, ", "))})
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Upstream < errs[j].Upstream })
	var res []error
	for _, e := range errs {
		res = append(res, e)
	}
	return out, res
}
