package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	lib "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// report renders a bounded explanation of verr: its leaves, the first
// maxProblems by location then message, and how many more there were.
func report(verr *lib.ValidationError) string {
	var r reporter
	r.walk(verr)
	var b strings.Builder
	b.WriteString("input does not match the tool's schema:")
	shown := 0
	for _, p := range r.best {
		line := "\n  " + p.line
		if b.Len()+len(line) > maxReportBytes-100 { // room for the count
			break
		}
		b.WriteString(line)
		shown++
	}
	if shown == 0 { // no leaves: cannot happen, but say something bounded
		b.WriteString("\n  at /: " + problem(verr.ErrorKind))
		shown = 1
	}
	if more := r.total - shown; more > 0 {
		fmt.Fprintf(&b, "\n  … and %d more problems", more)
	}
	return b.String()
}

type reporter struct {
	best  []located // in order, at most maxProblems
	total int
}

type located struct {
	path []string // the instance location's tokens
	line string
}

func (r *reporter) walk(e *lib.ValidationError) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			r.walk(c)
		}
		return
	}
	r.total++
	if len(r.best) == maxProblems && comparePaths(e.InstanceLocation, r.best[maxProblems-1].path) > 0 {
		return // cannot be among the first: skip the message
	}
	loc := "/"
	if len(e.InstanceLocation) > 0 {
		var b strings.Builder
		for _, t := range e.InstanceLocation {
			b.WriteString("/" + escapePointer(t))
		}
		loc = truncate(b.String(), 120)
	}
	p := located{e.InstanceLocation, truncate("at "+loc+": "+problem(e.ErrorKind), maxProblemBytes)}
	i := len(r.best)
	for i > 0 && p.less(r.best[i-1]) {
		i--
	}
	if i == maxProblems {
		return
	}
	r.best = append(r.best, located{})
	copy(r.best[i+1:], r.best[i:])
	r.best[i] = p
	if len(r.best) > maxProblems {
		r.best = r.best[:maxProblems]
	}
}

func (p located) less(q located) bool {
	if c := comparePaths(p.path, q.path); c != 0 {
		return c < 0
	}
	return p.line < q.line
}

// comparePaths orders locations as a reader expects: by token, array
// indexes by number (so /a/2 comes before /a/10), a parent before its parts.
func comparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if isIndex(x) && isIndex(y) && len(x) != len(y) {
			return len(x) - len(y)
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func isIndex(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return false
		}
	}
	return true
}

var printer = message.NewPrinter(language.English)

// problem says what is wrong in one line, quoting values only in excerpt:
// the library's own messages list every enum value and the whole string.
func problem(k lib.ErrorKind) string {
	var early *earlyError
	if f, ok := k.(*kind.Format); ok && errors.As(f.Err, &early) {
		k = early.kind
	}
	switch k := k.(type) {
	case *kind.Enum:
		if len(k.Want) <= maxListed {
			return fmt.Sprintf("%s is not one of %s", excerptValue(k.Got), listValues(k.Want))
		}
		return fmt.Sprintf("%s is not one of the %d allowed values", excerptValue(k.Got), len(k.Want))
	case *kind.Const:
		return fmt.Sprintf("%s must be %s", excerptValue(k.Got), excerptValue(k.Want))
	case *kind.Pattern:
		return fmt.Sprintf("%s does not match pattern %s", excerptValue(k.Got), excerpt(k.Want))
	case *kind.Format:
		return fmt.Sprintf("%s is not a valid %s", excerptValue(k.Got), excerpt(k.Want))
	case *kind.PropertyNames:
		return fmt.Sprintf("property name %s is not valid", excerptValue(k.Property))
	case *kind.AdditionalProperties:
		return "additional properties not allowed: " + listNames(k.Properties)
	case *kind.Required:
		return "missing properties: " + listNames(k.Missing)
	case *kind.Dependency:
		return fmt.Sprintf("properties %s required by %s are missing", listNames(k.Missing), excerptValue(k.Prop))
	case *kind.DependentRequired:
		return fmt.Sprintf("properties %s required by %s are missing", listNames(k.Missing), excerptValue(k.Prop))
	case *kind.MinContains:
		return fmt.Sprintf("at least %d items must match contains, %d do", k.Want, len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf("at most %d items may match contains, %d do", k.Want, len(k.Got))
	case *kind.InvalidJsonValue:
		return "not a JSON value"
	}
	// The rest quote only numbers (bounded by checkNumber) and the schema's
	// own short words.
	return truncate(k.LocalizedString(printer), maxProblemBytes)
}

func listValues(vs []any) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, excerptValue(v))
	}
	return strings.Join(parts, ", ")
}

func listNames(names []string) string {
	var parts []string
	for i, n := range names {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-maxListed))
			break
		}
		parts = append(parts, excerptValue(n))
	}
	return strings.Join(parts, ", ")
}

// excerptValue quotes a value briefly: a string in quotes, an object or array
// by its kind and size, anything else as JSON; cut at maxExcerptRunes.
func excerptValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(truncate(v, maxExcerptRunes))
	case map[string]any:
		return fmt.Sprintf("an object of %d properties", len(v))
	case []any:
		return fmt.Sprintf("an array of %d items", len(v))
	}
	return excerpt(jsonText(v))
}

func excerpt(s string) string { return truncate(s, maxExcerptRunes) }

// truncate cuts s to at most n runes (bytes for a long string, so the cost
// is bounded), ending in … when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := 0
	for i := 0; i < n && cut < len(s); i++ {
		_, w := utf8.DecodeRuneInString(s[cut:])
		cut += w
	}
	if cut >= len(s) {
		return s
	}
	return s[:cut] + "…"
}

func escapePointer(t string) string {
	t = strings.ReplaceAll(t, "~", "~0")
	return strings.ReplaceAll(t, "/", "~1")
}

func where(at string) string {
	if at == "" {
		return "/"
	}
	return truncate(at, 120)
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func jsonText(v any) string {
	if v == nil {
		return "none"
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}
