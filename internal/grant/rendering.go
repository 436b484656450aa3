package grant

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// RenderingDigest is the SHA-256 of a rendering's exact bytes, in hex: what
// the inbox page and maiden pending ID both print, so a human can tell that
// both show the same call.
func RenderingDigest(rendered string) string {
	sum := sha256.Sum256([]byte(rendered))
	return hex.EncodeToString(sum[:])
}

// Call is a canonical rendering read back (ParseRendering): the command
// words, the arguments in canonical order and the positionals, exactly
// the values CommandRendering (or Rendering) wrote.
type Call struct {
	Command     []string
	Args        []Arg
	Positionals []string
}

// ParseRendering reads back a call's canonical rendering, as
// CommandRendering and Rendering write it (what an approval request shows
// and its always-card matches): each argument with its exact value, which
// may hold spaces, line breaks or anything else, since the rendering
// quotes and escapes it. It is how a page shows a call argument by
// argument without guessing where one ends. A string no rendering could be
// (a wildcard, a trailing "--...", a syntax error) is an error.
func ParseRendering(s string) (Call, error) {
	var c Call
	if strings.TrimLeft(s, " \t") == "" {
		return c, nil
	}
	g, err := Parse("tool:invoke x " + s)
	if err != nil {
		return Call{}, fmt.Errorf("not a canonical rendering: %w", err)
	}
	if g.rest || g.posRest {
		return Call{}, fmt.Errorf("not a canonical rendering: it allows further arguments")
	}
	c.Command = g.cmd
	for _, p := range g.args {
		a := Arg{Name: p.name, Form: p.form}
		if p.form == FormValue {
			if len(p.value.parts) != 1 {
				return Call{}, fmt.Errorf("not a canonical rendering: argument %q has a wildcard", p.name)
			}
			a.Value = p.value.parts[0]
		}
		c.Args = append(c.Args, a)
	}
	for _, p := range g.pos {
		if len(p.parts) != 1 {
			return Call{}, fmt.Errorf("not a canonical rendering: a positional has a wildcard")
		}
		c.Positionals = append(c.Positionals, p.parts[0])
	}
	return c, nil
}
