package whatif

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/hostpattern"
)

// This file is a change of agent.toml (maiden audit whatif -config-after
// FILE): the agents, their bindings and their system grants of another
// file, as the replay's "after" side. The caller (admin) reads the file
// into Config; nothing here reads a file.

// Config is what of an agent.toml the replay decides on: the declared
// agents, the tools each is bound to with the part of the binding's
// policy a recorded decision depends on, and each agent's system grants.
type Config struct {
	// File names the configuration in the reasons of the refusals it
	// makes ("agent.toml.new").
	File string
	// Agents are the declared agents by name. An agent the store knows
	// that is not here cannot call anything with the change.
	Agents map[string]ConfigAgent
}

// ConfigAgent is one [agents.NAME] as a replay needs it.
type ConfigAgent struct {
	// System are the agent's system cards as the configuration installs
	// them (one per grant; admin.Sync's specs).
	System []cards.Spec
	// Tools are the tools bound to the agent, by binding name (an
	// import's [mcp.NAME] for its NAME.TOOL), each as the binding narrows
	// it.
	Tools map[string]ConfigTool
}

// ConfigTool is the part of a tool's effective policy (the tool's own,
// as the agent's binding narrows it) that a recorded decision depends on
// besides the cards.
type ConfigTool struct {
	// Secrets and Reveal are the tool's secrets and reveal.
	Secrets, Reveal []string
	// HTTPAllow are the host patterns (normalised), Ports the destination
	// ports besides 443, CIDRs the address ranges opened explicitly.
	HTTPAllow []string
	Ports     []int
	CIDRs     []netip.Prefix
	// Component is the digest of the component the file runs the tool
	// as (an oci:// tool's pinned manifest digest, a local file's
	// "sha256:" of its bytes as they are now, as a call's record names
	// them); "" for a tool with none (a wrapped CLI, an import, a
	// built-in).
	Component string
}

// PolicyConfig is the Policy of a refusal by the proposed configuration
// (cards.Decision.Policy, so api.Decision.Rule), before its file's key.
const PolicyConfig = "agent.toml"

// systemKey is a system card's identity as the store's sync compares it:
// its spec's JSON.
func systemKey(s cards.Spec) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// applyConfig adds to r the system cards cfg installs and removes (with
// their descendants, as a sync revokes them), and marks every agent
// touched: the configuration may refuse any agent's calls. It runs after
// the change's revocations: a system card the change revokes is revoked
// for the sync too, which installs the grant anew if cfg still declares
// it.
func (r *Replay) applyConfig(cfg *Config, agents []string, revoke func(id string), touched map[string]bool) {
	r.cfg = cfg
	for _, a := range agents {
		touched[a] = true
		want := map[string]cards.Spec{}
		for _, s := range cfg.Agents[a].System {
			want[systemKey(s)] = s
		}
		for _, c := range r.held[a] {
			if !c.System || !c.Revoked.IsZero() || r.gone[c.ID] {
				continue
			}
			k := systemKey(c.Spec)
			if _, ok := want[k]; ok {
				delete(want, k)
				continue
			}
			revoke(c.ID)
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			r.added[a] = append(r.added[a], cards.Card{ID: fmt.Sprintf("(system card %d of %s in %s)", i+1, a, cfg.File),
				Holder: a, Spec: want[k], Manager: "system", System: true, Created: r.now})
		}
	}
}

// configTool is the proposed configuration's policy of agent's tool, or a
// refusal when the agent is not declared or the tool not bound there.
func (r *Replay) configTool(agent, tool string) (ConfigTool, *cards.Decision) {
	a, ok := r.cfg.Agents[agent]
	if !ok {
		return ConfigTool{}, &cards.Decision{Policy: PolicyConfig, Reason: fmt.Sprintf("agent %q is not declared in %s", agent, r.cfg.File)}
	}
	t, ok := a.Tools[tool]
	if !ok {
		if imp, _, isImport := strings.Cut(tool, "."); isImport {
			t, ok = a.Tools[imp]
		}
	}
	if !ok {
		return ConfigTool{}, &cards.Decision{Policy: PolicyConfig, Reason: fmt.Sprintf("tool %q is not bound to agent %q in %s (agents.%s.tools)", tool, agent, r.cfg.File, agent)}
	}
	return t, nil
}

// decideAfter decides u with the change on aw (decideUnit, into out),
// and, with a proposed configuration, as that file's binding of the tool
// would: the tool bound at all, the reveal's secret in its secrets and
// reveal, the fetch's destination in its http_allow and ports and its
// credential in its secrets (egress's own rules, which the gate asks
// before the cards). A refusal of the file's is the one decision.
func (r *Replay) decideAfter(aw *cards.Wallet, rec api.AuditRecord, u *unit, out []cards.Decision) ([]cards.Decision, int) {
	if r.cfg == nil {
		return decideUnit(aw, u, out)
	}
	t, refused := r.configTool(rec.Agent, rec.Tool)
	if refused != nil {
		return append(out, *refused), 1
	}
	uu := *u
	switch rec.Kind {
	case KindCallAdmitted, KindCallRefused:
		// A call's questions name the component it ran; the file may run
		// the tool as another (an oci:// digest pinned anew, another local
		// file, one rebuilt since), which a grant naming a digest decides
		// on: asked as the file would run it. A record naming none (a tool
		// with none, or made before records named it) is asked as it was.
		if c := u.q[0].Target.Component; c != "" && c != t.Component {
			uu.q[0] = withComponent(u.q[0], t.Component)
			uu.pre = make([]decide.Question, len(u.pre))
			for i, q := range u.pre {
				uu.pre[i] = withComponent(q, t.Component)
			}
		}
	case KindReveal:
		uu.binding = decide.Binding{Tool: rec.Tool, Secrets: t.Secrets, Reveal: t.Reveal}
	case KindFetch:
		q := u.q[0]
		if !t.allows(q.Host, q.Port) {
			return append(out, cards.Decision{Policy: PolicyConfig, Reason: fmt.Sprintf("%s:%d is not in tools.%s.http_allow (or its ports) as %s binds it to agent %q", q.Host, q.Port, rec.Tool, r.cfg.File, rec.Agent)}), 1
		}
		if u.n == 2 && !slices.Contains(t.Secrets, u.q[1].Secret) {
			// The tool may not hold the credential at all: egress refuses
			// it before any card is asked.
			return append(out, cards.Decision{Policy: PolicyConfig, Reason: fmt.Sprintf("secret %s is not in tools.%s.secrets as %s binds it to agent %q", u.q[1].Secret, rec.Tool, r.cfg.File, rec.Agent)}), 1
		}
	}
	return decideUnit(aw, &uu, out)
}

// withComponent is q, a tool:invoke question, asked about component c
// (another question as it is).
func withComponent(q decide.Question, c string) decide.Question {
	if q.Kind == decide.Tool {
		q.Target.Component = c
	}
	return q
}

// allows reports whether the policy lets http-fetch reach host:port, as
// egress's rules read it: a host pattern matching the host (or a range
// opened for an address), on 443 or a listed port.
func (t ConfigTool) allows(host string, port int) bool {
	if port != 443 && !slices.Contains(t.Ports, port) {
		return false
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		for _, p := range t.CIDRs {
			if p.Contains(addr) {
				return true
			}
		}
	}
	for _, p := range t.HTTPAllow {
		if hostpattern.Match(p, host) {
			return true
		}
	}
	return false
}

// addRefusedReveal replays, with a proposed configuration, a reveal the
// tool's binding refused before the cards were asked: the file's binding
// may let it through to the cards.
func (r *Replay) addRefusedReveal(rec api.AuditRecord) bool {
	var b revealBody
	if json.Unmarshal(rec.Body, &b) != nil || b.Decision == nil || b.Decision.Allow || b.Secret == "" ||
		b.Decision.Rule != "tools."+rec.Tool+".reveal" {
		return false
	}
	r.rep.Replayed++
	u := unit{n: 1, recorded: []api.Decision{*b.Decision}}
	u.q[0] = decide.Reveal(b.Secret)
	before := cards.Decision{Policy: b.Decision.Rule, Reason: b.Decision.Reason, Target: b.Decision.Target}
	ds, m := r.decideAfter(r.after[rec.Agent], rec, &u, nil)
	if after := ds[m-1]; after.Allow {
		r.flip(rec, u.recorded, before, after)
	}
	return true
}
