package inbox

import (
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/safetext"
)

// What the page shows of the text an agent supplied (a call's arguments, a
// boundary request's justification and paths) is what the CLI shows:
// safetext.Escape, so a line break, a carriage return, an escape sequence,
// a bidi override or a zero-width character is a visible escape (\n,
// \u202e) and cannot push an argument off the screen or make one read as
// another. A call's arguments are read back from the canonical rendering
// (grant.ParseRendering), one row each, name first; a long value is cut
// (with how many bytes are not shown) and shown whole, escaped, behind a
// "show all" disclosure.

// cutAt is how many bytes of escaped text a value shows before it is cut.
const cutAt = 240

// shown is one piece of agent text as the page shows it: Head (escaped,
// at most about cutAt bytes), More the bytes of the original not in Head,
// and Full the whole text escaped (set only when More > 0).
type shown struct {
	Head  string
	More  int
	Full  string
	Bytes int // the original's length
}

// show escapes s for the page, cut after about cutAt bytes.
func show(s string) shown {
	var b strings.Builder
	i := 0
	for i < len(s) && b.Len() < cutAt {
		i += safetext.AppendRune(&b, s[i:])
	}
	v := shown{Head: b.String(), More: len(s) - i, Bytes: len(s)}
	if v.More > 0 {
		v.Full = safetext.Escape(s)
	}
	return v
}

// argRow is one row of a call's arguments.
type argRow struct {
	Label string // "--name", "command", "positional 2" (never agent text unescaped)
	Name  shown  // an argument's name (escaped); empty for the others
	Value shown
	Note  string // "boolean", "empty string": said outside the value
}

// argRows are a rendering's rows: the command words, each argument, each
// positional; nil for no arguments. A rendering that does not read back
// (no real backend makes one) is one row with the whole of it escaped, so
// nothing is hidden either way.
func argRows(rendered string) []argRow {
	if strings.TrimSpace(rendered) == "" {
		return nil
	}
	c, err := grant.ParseRendering(rendered)
	if err != nil {
		return []argRow{{Label: "unparsed", Value: show(rendered), Note: "not a canonical rendering: shown whole"}}
	}
	var rows []argRow
	if len(c.Command) > 0 {
		rows = append(rows, argRow{Label: "command", Value: show(strings.Join(c.Command, " "))})
	}
	for _, a := range c.Args {
		r := argRow{Label: "--", Name: show(a.Name)}
		r.Name.Head = "--" + r.Name.Head
		if r.Name.Full != "" {
			r.Name.Full = "--" + r.Name.Full
		}
		switch a.Form {
		case grant.FormTrue:
			r.Value, r.Note = show("true"), "boolean"
		case grant.FormFalse:
			r.Value, r.Note = show("false"), "boolean"
		default:
			r.Value = show(a.Value)
			if a.Value == "" {
				r.Note = "empty string"
			}
		}
		rows = append(rows, r)
	}
	for i, p := range c.Positionals {
		r := argRow{Label: "positional " + strconv.Itoa(i+1), Value: show(p)}
		if p == "" {
			r.Note = "empty string"
		}
		rows = append(rows, r)
	}
	return rows
}

// renderingDigest is the SHA-256 of the exact rendering, in hex: what the
// page's arguments were read from (maiden pending ID prints the same).
func renderingDigest(rendered string) string { return grant.RenderingDigest(rendered) }
