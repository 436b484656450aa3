package pipeline

import (
	"context"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/grant"
)

// ToolReach is what a tool grant reaches of one tool (api.ToolReach).
type ToolReach = api.ToolReach

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
			r.Never, r.Escapes = grant.SchemaReach(g, info.InputSchema)
		}
		out = append(out, r)
	}
	return out, nil
}
