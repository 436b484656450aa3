package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/mcpimport"
)

// This file is the pinning of imported MCP tools (issue 22): an upstream
// can change a tool whenever it likes (notifications/tools/list_changed, a
// restart), so maiden serves an imported tool only as an operator accepted
// it. The pin of a tool is the digest of its title, description and input
// schema in canonical form (mcpimport.PinOf); the accepted definitions are
// kept in maiden-pins.json next to agent.toml (Options.MCPPinsPath), written
// by `maiden mcp accept NAME` (Host.AcceptImport). A tool whose definition
// differs from its pin is refused (kind denied, naming what changed) and
// agents keep seeing the accepted definition; a tool never accepted is
// refused and not served, unless its import says accept_new_tools = true
// (then it is pinned on first sight).

// PinsFileName is the pin file's name next to agent.toml.
const PinsFileName = "maiden-pins.json"

// importPins are the accepted definitions of imported tools: the pin file
// (read again when it changes) at Options.MCPPinsPath (explicit), else
// next to the agent.toml in force (cfg).
type importPins struct {
	file     mcpimport.PinFile
	explicit string
	cfg      *atomic.Pointer[config.Config] // the Host's configuration in force
	log      *slog.Logger
}

// path is the pin file's path now.
func (p *importPins) path() string {
	if p.explicit != "" {
		return p.explicit
	}
	if d := p.cfg.Load().Dir(); d != "" {
		return filepath.Join(d, PinsFileName)
	}
	return ""
}

// get returns the accepted pin of tool full (NAME.TOOL).
func (p *importPins) get(full string) (mcpimport.AcceptedPin, bool, error) {
	return p.file.Get(p.path(), full)
}

// save adds pins (by NAME.TOOL) to the pin file.
func (p *importPins) save(pins map[string]mcpimport.Pin) error {
	return p.file.Save(p.path(), pins)
}

// ImportedDefinition and ImportReview are api's (the root names them
// maiden.ImportedDefinition and maiden.ImportReview).
type (
	ImportedDefinition = api.ImportedDefinition
	ImportReview       = api.ImportReview
)

func definitionOf(p mcpimport.Pin) ImportedDefinition {
	return ImportedDefinition{Title: p.Title, Description: p.Description, InputSchema: string(p.InputSchema), Digest: p.Digest}
}

// ReviewImport starts import name (an [mcp.NAME] of agent.toml) if need be
// and returns each of its tools as the upstream offers it now, against what
// was accepted. An upstream that is not up is an error.
func (h *Host) ReviewImport(ctx context.Context, name string) ([]ImportReview, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	cfg := h.cfg.Load()
	t, ok := cfg.Tool(name)
	if _, isImport := h.kindsOf(cfg).imports[name]; !ok || !isImport {
		return nil, fmt.Errorf("%s has no [mcp.%s]", h.cfg.Load().File(), name)
	}
	up, err := h.imports.upstream(ctx, name, t.MCP)
	if err != nil {
		return nil, err
	}
	if !up.Available() {
		return nil, fmt.Errorf("the MCP server %q is not up (see the log); nothing to review", name)
	}
	tools := exposedTools(name, up.Tools(), h.log)
	out := make([]ImportReview, 0, len(tools))
	for _, x := range tools {
		now := mcpimport.PinOf(x.Tool)
		r := ImportReview{Tool: x.Full, State: "new", Offered: definitionOf(now), UpstreamName: now.Name}
		old, ok, err := h.pins.get(x.Full)
		if err != nil {
			ok = false // an unreadable pin file: everything is reviewed as new
		}
		if ok {
			def := definitionOf(old.Pin)
			r.Accepted = &def
			r.State = "accepted"
			if ch := old.Changes(now); ch != nil {
				r.State, r.Changes = "changed", ch
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// AcceptImport pins the definitions of reviews (from ReviewImport): what
// the operator was shown is what is accepted, even if the upstream has
// changed since. The pin is built again from the review's Offered and
// must come to its Digest: a definition edited after the review (by the
// embedder's code, or a review that did not come from ReviewImport) is
// refused, not pinned.
func (h *Host) AcceptImport(reviews []ImportReview) error {
	pins := map[string]mcpimport.Pin{}
	for _, r := range reviews {
		if r.UpstreamName == "" || r.Offered.Digest == "" {
			return fmt.Errorf("%s: not a review from ReviewImport", r.Tool)
		}
		pin := mcpimport.PinOf(mcpimport.Tool{
			Name: r.UpstreamName, Title: r.Offered.Title, Description: r.Offered.Description,
			InputSchema: json.RawMessage(r.Offered.InputSchema),
		})
		if pin.Digest != r.Offered.Digest {
			return fmt.Errorf("%s: the offered definition does not match its digest %s (changed after the review?); review it again", r.Tool, r.Offered.Digest)
		}
		pins[r.Tool] = pin
	}
	if err := h.pins.save(pins); err != nil {
		return err
	}
	f := h.hub().Changed()
	if f != nil {
		go f()
	}
	return nil
}

// check decides whether imported tool x (exposed as full) may be served
// as the upstream offers it now (mcpimport.PinFile.Decide against the pin
// file in force).
func (p *importPins) check(imp string, mcp *config.MCPImport, full string, x mcpimport.Tool) (mcpimport.Pin, *ToolError) {
	return p.file.Decide(p.path(), imp, mcp.AcceptNewTools, full, x, p.log)
}

// MCPPinsPath is the file the accepted definitions of imported tools are
// kept in ("" when they are kept in memory only).
func (h *Host) MCPPinsPath() string { return h.pins.path() }
