package session

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/store"
)

// Materials resolves the secret material of each session's web_fetch
// calls, read from the host at every call (never stored, never returned
// to the agent), and records which sessions hold some: dropped when the
// session ends and when its boundary is downgraded (network disabled, or
// no longer managed).
type Materials struct {
	mu   sync.Mutex
	held map[string]bool // the sessions whose web_fetch resolved material
	// gen counts drops; dropped is the gen of each session's latest
	// drop, so that a web_fetch that read its session before a drop
	// (ResolveSince's mark) cannot resolve the material again from what
	// it read. Past maxDropped entries they are forgotten and floor
	// refuses every mark taken before.
	gen     uint64
	floor   uint64
	dropped map[string]uint64
}

// maxDropped bounds Materials.dropped.
const maxDropped = 4096

// Held reports whether session id holds resolved material (for the tests
// of its stripping).
func (ms *Materials) Held(id string) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.held[id]
}

// Drop forgets session's material.
func (ms *Materials) Drop(session string) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.held, session)
	ms.gen++
	if ms.dropped == nil || len(ms.dropped) >= maxDropped {
		ms.dropped, ms.floor = map[string]uint64{}, ms.gen
	}
	ms.dropped[session] = ms.gen
}

// Mark is taken before a web_fetch reads its session, for ResolveSince.
func (ms *Materials) Mark() uint64 {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.gen
}

// WebFetchRules are the egress rules of agent's web_fetch binding b: its
// hosts, ports, ranges and CA files, and the secret names of its material
// with their [secrets.NAME] destinations.
func WebFetchRules(cfg *config.Config, b config.Binding) egress.Rules {
	r := egress.Rules{Hosts: b.HTTPAllow, Ports: b.HTTPPorts, AllowCIDRs: b.HTTPAllowCIDRs, CAFiles: b.HTTPCAFiles}
	for _, name := range MaterialNames(b) {
		r.Secrets = append(r.Secrets, name)
		if d, ok := cfg.SecretDestination(name); ok {
			r.SecretDestinations = append(r.SecretDestinations, egress.SecretDestination{
				Secret: d.Name, Hosts: d.Hosts, Methods: d.Methods, PathPrefixes: d.PathPrefixes,
				Source:     fmt.Sprintf("[secrets.%s] (%s:%d)", d.Name, filepath.Base(cfg.File()), d.Line),
				Credential: callegress.Spec(d), // so a signing kind is signed, never sent as a header value
			})
		}
	}
	return r
}

// MaterialNames are the secret names b's material names, each once.
func MaterialNames(b config.Binding) []string {
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

// Resolve returns session s's material for binding b, read from the host
// at every web_fetch (a rotated secret is sent with its new value from the
// next call on) and held for the session while its boundary keeps the
// network (Held; dropped when it ends or is downgraded). A boundary without
// network (downgraded) drops it: web_fetch then fails before any of it is
// needed. A secret the binding names and the host cannot resolve is
// credential_not_configured (BOUNDARIES.md), before anything is sent.
func (ms *Materials) Resolve(s store.Session, b config.Binding, lookup func(string) (string, bool)) (hostfs.Material, *api.ToolError) {
	return ms.ResolveSince(ms.Mark(), s, b, lookup)
}

// ResolveSince is Resolve for a session read after mark (Mark): if its
// material was dropped since (the session ended or was downgraded while
// the web_fetch was starting), s is stale and nothing is resolved or kept.
func (ms *Materials) ResolveSince(mark uint64, s store.Session, b config.Binding, lookup func(string) (string, bool)) (hostfs.Material, *api.ToolError) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if mark < ms.floor || ms.dropped[s.ID] > mark {
		return hostfs.Material{}, BoundaryError(boundary.Refused(boundary.DomainNetwork, hostfs.ToolWebFetch, store.BoundaryReasonSessionEnded,
			"web_fetch: the session ended or its boundary changed while this call was starting; its secret material was dropped"))
	}
	if !s.Boundary.Network || s.Boundary.Kind != boundary.Managed && s.Boundary.Kind != boundary.Bypass {
		delete(ms.held, s.ID)
		return hostfs.Material{}, nil
	}
	// Every value is read again at every call, as an http-fetch's
	// credential is: a secret the operator rotated is sent with its new
	// value from the next call on (and one removed refuses the call),
	// not the value the session first resolved.
	values := map[string]string{}
	for _, name := range MaterialNames(b) {
		v, found := "", false
		if lookup != nil {
			v, found = lookup(name)
		}
		if !found || v == "" {
			delete(ms.held, s.ID)
			return hostfs.Material{}, BoundaryError(boundary.Refused(boundary.DomainNetwork, hostfs.ToolWebFetch, "credential_not_configured",
				fmt.Sprintf("web_fetch: the secret %s that this agent's web_fetch binding names is not configured on the host", name)))
		}
		values[name] = v
	}
	if ms.held == nil {
		ms.held = map[string]bool{}
	}
	ms.held[s.ID] = true
	var m hostfs.Material
	if b.Credential != "" {
		m.Connection = &hostfs.Credential{Name: b.Credential, Value: values[b.Credential]}
	}
	for _, hdr := range slices.Sorted(mapsKeys(b.SecretHeaders)) {
		name := b.SecretHeaders[hdr]
		m.Headers = append(m.Headers, hostfs.SecretHeader{Name: hdr, Secret: name, Value: values[name]})
	}
	if b.ProxySecret != "" {
		m.Proxy = &hostfs.ProxySecret{} // refused by web_fetch (proxy_not_supported) before anything is resolved or sent
	}
	return m, nil
}
