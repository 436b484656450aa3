package maiden

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/store"
)

// This file wires the web_fetch built-in (internal/builtin.WebFetch) into
// the host: its policy is the agent's web_fetch binding (there is no
// [tools] entry: the binding is the whole policy, and without http_allow it
// reaches nothing), every request goes through the same egress gate as
// http-fetch with the agent's network and secret cards, and the session's
// secret material (the binding's credential and secret headers) is
// resolved on the host, used only inside web_fetch, and dropped when the
// session ends or its boundary is downgraded.

func init() {
	builtins[hostfs.ToolWebFetch] = builtin{
		session: true,
		description: "Fetch a URL over HTTPS through maiden's egress gate (the hosts this agent's web_fetch binding allows; no redirects followed; the body capped). " +
			"Needs network enabled in this session's sandbox boundary: otherwise it fails with sandbox_boundary_required and the requiredExpansion to ask for.",
		input: hostfs.WebFetchInputSchema, output: hostfs.WebFetchOutputSchema,
		readOnly: false, idempotent: false,
		runInv: (*Host).builtinWebFetch,
	}
}

// webFetchRules are the egress rules of agent's web_fetch binding b: its
// hosts, ports, ranges and CA files, and the secret names of its material
// with their [secrets.NAME] destinations.
func webFetchRules(cfg *config.Config, b config.Binding) egress.Rules {
	r := egress.Rules{Hosts: b.HTTPAllow, Ports: b.HTTPPorts, AllowCIDRs: b.HTTPAllowCIDRs, CAFiles: b.HTTPCAFiles}
	for _, name := range materialNames(b) {
		r.Secrets = append(r.Secrets, name)
		if d, ok := cfg.SecretDestination(name); ok {
			r.SecretDestinations = append(r.SecretDestinations, egress.SecretDestination{
				Secret: d.Name, Hosts: d.Hosts, Methods: d.Methods, PathPrefixes: d.PathPrefixes,
				Source: fmt.Sprintf("[secrets.%s] (%s:%d)", d.Name, filepath.Base(cfg.File()), d.Line),
			})
		}
	}
	return r
}

// materialNames are the secret names b's material names, each once.
func materialNames(b config.Binding) []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	add(b.Credential)
	for _, h := range slices.Sorted(mapsKeys(b.SecretHeaders)) {
		add(b.SecretHeaders[h])
	}
	return names
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (h *Host) builtinWebFetch(ctx context.Context, inv *invocation, _ store.Store) (any, *ToolError, error) {
	s, terr, err := h.session(ctx, inv)
	if err != nil || terr != nil {
		return nil, terr, err
	}
	b, _, _ := inv.cfg.AgentBinding(inv.agent, hostfs.ToolWebFetch)
	m, terr := h.material.resolve(s, b, h.opts.LookupSecret)
	if terr != nil {
		return nil, terr, nil
	}
	pol, err := egress.NewPolicy(hostfs.ToolWebFetch, webFetchRules(inv.cfg, b))
	if err != nil {
		return nil, &ToolError{Kind: KindConfig, Message: "web_fetch's policy: " + err.Error()}, nil
	}
	authz := walletAuthorizer(inv.wallet)
	fetch := func(ctx context.Context, r egress.Request) (*egress.Response, *egress.FetchError) {
		r.Authorize, r.Caller = authz, inv.agent
		resp, ferr := h.gate.Fetch(ctx, pol, r)
		if h.opts.Observer != nil {
			ev := FetchEvent{Tool: hostfs.ToolWebFetch, Allowed: true, Rule: egress.RuleAllowed}
			if ferr != nil {
				ev.Allowed, ev.Rule = ferr.Kind != egress.FetchDenied, ferr.Rule
			}
			h.opts.Observer.Fetch(ev)
		}
		return resp, ferr
	}
	out, err := hostfs.WebFetch(ctx, s.Boundary, []byte(inv.call.Input), fetch, m)
	if err != nil {
		return nil, builtinFailure(err), nil
	}
	return out, nil, nil
}

// resolve returns session s's material for binding b, resolving it on the
// session's first web_fetch and keeping it while the session's boundary
// keeps the network at the same or a later revision. A boundary without
// network (downgraded) drops it: web_fetch then fails before any of it is
// needed. A secret the binding names and the host cannot resolve is
// credential_not_configured (BOUNDARIES.md), before anything is sent.
func (ms *materials) resolve(s store.Session, b config.Binding, lookup func(string) (string, bool)) (hostfs.Material, *ToolError) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[string]sessionMaterial{}
	}
	if !s.Boundary.Network || s.Boundary.Kind != boundary.Managed && s.Boundary.Kind != boundary.Bypass {
		delete(ms.m, s.ID)
		return hostfs.Material{}, nil
	}
	cur, ok := ms.m[s.ID]
	if !ok || !sameNames(cur.names, materialNames(b)) {
		cur = sessionMaterial{names: materialNames(b), values: map[string]string{}}
		for _, name := range cur.names {
			v, found := "", false
			if lookup != nil {
				v, found = lookup(name)
			}
			if !found || v == "" {
				return hostfs.Material{}, boundaryError(boundary.Refused(boundary.DomainNetwork, hostfs.ToolWebFetch, "credential_not_configured",
					fmt.Sprintf("web_fetch: the secret %s that this agent's web_fetch binding names is not configured on the host", name)))
			}
			cur.values[name] = v
		}
		ms.m[s.ID] = cur
	}
	cur.revision = s.Boundary.Revision
	ms.m[s.ID] = cur
	var m hostfs.Material
	if b.Credential != "" {
		m.Connection = &hostfs.Credential{Name: b.Credential, Value: cur.values[b.Credential]}
	}
	for _, hdr := range slices.Sorted(mapsKeys(b.SecretHeaders)) {
		name := b.SecretHeaders[hdr]
		m.Headers = append(m.Headers, hostfs.SecretHeader{Name: hdr, Secret: name, Value: cur.values[name]})
	}
	if b.ProxySecret != "" {
		m.Proxy = &hostfs.ProxySecret{} // refused by web_fetch (proxy_not_supported) before anything is resolved or sent
	}
	return m, nil
}

func sameNames(a, b []string) bool { return slices.Equal(a, b) }
