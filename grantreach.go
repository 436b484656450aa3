package maiden

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/maiden-run/maiden/internal/grant"
)

// ToolReach is what a tool grant reaches of one tool, as the tool's input
// schema tells. A grant matches a call argument by argument (docs/cards.md),
// prohibiting grants as much as allowing ones, so a grant can name a tool
// and still match none of its calls: -deny 'tool:invoke greet' forbids only
// a call of greet without arguments, which greet's schema may refuse. The
// operator's CLI checks a prohibition with it before installing it.
type ToolReach struct {
	// Tool is the tool's name.
	Tool string
	// Command is set for a typed command (a wrapped CLI, or a WebAssembly
	// tool whose schema() is a command description): a grant matches its
	// command words exactly, its options, and its positionals after "--".
	Command bool
	// Never says why no call of Tool that its input schema accepts matches
	// the grant; "" when some may, or when the schema does not tell (a tool
	// that cannot be loaded, a typed command).
	Never string
	// Escapes describes an argument the schema accepts that the grant
	// neither names nor allows with "--..." ("--force", or "any argument
	// its input schema does not list"): a call that adds it is not
	// matched. "" when there is none or the grant ends with "--...".
	Escapes string
}

// GrantReach reports, for the tool grant text (`tool:invoke greet
// --message=hi`), what it reaches of each tool bound to agent whose name it
// matches (none: the agent has no such tool now). A text that is not a grant
// is an error naming the column.
func (h *Host) GrantReach(ctx context.Context, agent string, text string) ([]ToolReach, error) {
	g, err := grant.Parse(text)
	if err != nil {
		return nil, err
	}
	infos, err := h.ToolsFor(ctx, agent)
	if err != nil {
		return nil, err
	}
	k := h.kindsOf(h.cfg.Load())
	var out []ToolReach
	for _, info := range infos {
		if !g.NamesTool(info.Name) {
			continue
		}
		r := ToolReach{Tool: info.Name}
		r.Command = k.of(info.Name).typedCommands(info)
		// A typed command's calls are its command words, options and
		// positionals, not its schema's properties: the schema does not
		// tell which calls a grant matches.
		if info.Error == nil && !r.Command && !g.IsCommand() {
			r.Never, r.Escapes = schemaReach(g, info.InputSchema)
		}
		out = append(out, r)
	}
	return out, nil
}

// schemaReach reads a JSON tool's input schema (its top level only, which
// every accepted call satisfies) for what tool grant g can match: why no
// accepted call matches it, and an accepted argument that escapes it.
func schemaReach(g grant.Grant, schema string) (never, escapes string) {
	var s struct {
		Properties        map[string]json.RawMessage `json:"properties"`
		PatternProperties map[string]json.RawMessage `json:"patternProperties"`
		Required          []string                   `json:"required"`
		Additional        json.RawMessage            `json:"additionalProperties"`
	}
	if json.Unmarshal([]byte(schema), &s) != nil {
		return "", ""
	}
	names, rest := g.ToolArgs()
	closed := bytes.Equal(bytes.TrimSpace(s.Additional), []byte("false")) && len(s.PatternProperties) == 0
	if !rest {
		for _, r := range s.Required {
			if !slices.Contains(names, r) {
				return fmt.Sprintf("its input schema requires the argument %q, which the grant does not name (without --... a grant matches only calls whose arguments it all names)", r), ""
			}
		}
	}
	for _, n := range names {
		if _, ok := s.Properties[n]; !ok && closed {
			return fmt.Sprintf("its input schema accepts no argument %q", n), ""
		}
	}
	if rest {
		return "", ""
	}
	props := make([]string, 0, len(s.Properties))
	for p := range s.Properties {
		props = append(props, p)
	}
	slices.Sort(props)
	for _, p := range props {
		if !slices.Contains(names, p) {
			return "", "--" + p
		}
	}
	if !closed {
		return "", "any argument its input schema does not list"
	}
	return "", ""
}
