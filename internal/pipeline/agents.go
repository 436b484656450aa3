package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/toolinfo"
)

// This file is exposure: which agent is calling, which tools exist for it,
// and each tool's policy as that agent's binding narrows it. Authority (the
// agent's cards) is decided after this, on the narrowed tool.

// ErrUnknownAgent is returned for a call whose agent the configuration does
// not declare (or, with no [agents], for any agent but DefaultAgent).
var ErrUnknownAgent = errors.New("no agent")

// DefaultAgent is the agent of every call when agent.toml declares no
// [agents]: bound to every tool, allowed everything.
const DefaultAgent = config.DefaultAgent

// exposure is what one call may see: the tool as its agent's binding
// narrows it.
type exposure struct {
	agent   string
	tool    config.Tool     // the binding applied
	binding *config.Binding // nil for the implicit agent
}

// expose resolves agent and tool in cfg. A tool that is not bound to the
// agent is ErrUnknownTool, worded exactly as for a tool that does not exist,
// so a caller cannot learn what other agents may use.
func expose(cfg *config.Config, agent, tool string) (exposure, error) {
	if cfg.Implicit() {
		if agent != "" && agent != DefaultAgent {
			return exposure{}, fmt.Errorf("%w %q: %s declares no [agents], so every call runs as %q", ErrUnknownAgent, agent, cfg.File(), DefaultAgent)
		}
		t, ok := cfg.Tool(tool)
		if !ok || t.MCP != nil {
			if it, isImport := importTool(cfg, tool); isImport {
				return exposure{agent: DefaultAgent, tool: it}, nil
			}
			return exposure{}, fmt.Errorf("%w %q in %s (%s)", ErrUnknownTool, tool, cfg.File(), toolNames(cfg))
		}
		return exposure{agent: DefaultAgent, tool: t}, nil
	}
	bindName := tool
	if imp, _, ok := config.ImportOf(tool); ok {
		bindName = imp // an import is bound by its [mcp.NAME]
	}
	b, agentOK, bound := cfg.AgentBinding(agent, bindName)
	if !agentOK {
		if agent == "" {
			return exposure{}, fmt.Errorf("%w: a call needs an agent, since %s declares agents (%s)", ErrUnknownAgent, cfg.File(), agentNames(cfg))
		}
		return exposure{}, fmt.Errorf("%w %q in %s (%s)", ErrUnknownAgent, agent, cfg.File(), agentNames(cfg))
	}
	t, defined := cfg.Tool(tool)
	if bindName != tool {
		t, defined = importTool(cfg, tool)
	} else if t.MCP != nil {
		defined = false // the import itself is not a tool; NAME.TOOL are
	}
	if !bound || !defined {
		// A bound built-in is served by maiden itself, not by this path.
		a, _ := cfg.Agent(agent)
		return exposure{}, fmt.Errorf("%w %q for agent %q (%s)", ErrUnknownTool, tool, agent, boundNames(a))
	}
	return exposure{agent: agent, tool: t.Narrowed(b), binding: &b}, nil
}

// narrowsEgress reports whether b changes what http-fetch may do, so the
// call needs its own compiled egress policy.
func narrowsEgress(b *config.Binding) bool {
	return b != nil && (b.HTTPAllow != nil || b.Secrets != nil)
}

// policy returns the compiled egress policy for an exposure: the tool's
// own, or one compiled once per configuration for a binding that narrows
// it.
func (e exposure) policy(set *callegress.Set) (*egress.Policy, error) {
	return set.Policy(e.agent, e.tool, narrowsEgress(e.binding))
}

// ToolsFor is Tools as agent sees them: only the tools bound to it, each
// with its policy and hints as the binding narrows them. With no [agents]
// in the configuration, agent must be "" or DefaultAgent and sees every
// tool. Built-in tools are not listed here.
func (h *Host) ToolsFor(ctx context.Context, agent string) ([]ToolInfo, error) {
	cfg := h.cfg.Load()
	if cfg.Implicit() {
		if agent != "" && agent != DefaultAgent {
			return nil, fmt.Errorf("%w %q: %s declares no [agents]", ErrUnknownAgent, agent, cfg.File())
		}
		return h.Tools(ctx)
	}
	a, ok := cfg.Agent(agent)
	if !ok {
		return nil, fmt.Errorf("%w %q in %s (%s)", ErrUnknownAgent, agent, cfg.File(), agentNames(cfg))
	}
	all, err := h.Tools(ctx)
	if err != nil {
		return nil, err
	}
	var out []ToolInfo
	for _, info := range all {
		name := info.Name
		if imp, _, isImport := config.ImportOf(name); isImport {
			name = imp
		}
		b, ok := a.Binding(name)
		t, defined := cfg.Tool(name)
		if !ok || !defined {
			continue
		}
		t = t.Narrowed(b)
		info.Policy, info.Hints = toolinfo.WithDestinations(toolinfo.PolicyOf(t), cfg), toolinfo.HintsOf(t)
		out = append(out, info)
	}
	return out, nil
}

func agentNames(cfg *config.Config) string {
	var names []string
	for _, a := range cfg.Agents() {
		names = append(names, a.Name)
	}
	return "agents: " + strings.Join(names, ", ")
}

func boundNames(a config.Agent) string {
	var names []string
	for _, b := range a.Bindings {
		names = append(names, b.Tool)
	}
	if len(names) == 0 {
		return "it has no tools"
	}
	return "its tools: " + strings.Join(names, ", ")
}
