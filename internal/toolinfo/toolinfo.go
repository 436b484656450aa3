// Package toolinfo is what maiden shows of a configured tool beside what
// the tool says of itself: its effective policy (PolicyOf, with the
// [secrets.NAME] destinations: WithDestinations), the MCP hints derived
// from it (HintsOf), and what in it will certainly fail or do nothing at
// call time (Warnings, for Check). Pure functions of config.Tool.
//
//	info := api.ToolInfo{Name: t.Name, Policy: toolinfo.WithDestinations(toolinfo.PolicyOf(t), cfg), Hints: toolinfo.HintsOf(t)}
package toolinfo

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/netguard"
)

// WithDestinations adds cfg's secret bindings for the policy's secrets.
func WithDestinations(p api.Policy, cfg *config.Config) api.Policy {
	for _, name := range p.Secrets {
		if d, ok := cfg.SecretDestination(name); ok {
			if p.SecretDestinations == nil {
				p.SecretDestinations = map[string]api.SecretDestination{}
			}
			p.SecretDestinations[name] = api.SecretDestination{Hosts: d.Hosts, Methods: d.Methods, PathPrefixes: d.PathPrefixes,
				Kind: d.ShownKind(), Settings: d.KindSettings()}
		}
	}
	return p
}

// HintsOf is t's MCP hints: derived from what its policy lets it do
// (api.Hints), then overridden by agent.toml's annotations table. A
// client may let a read-only tool run without asking, so a tool is
// read-only only when its policy leaves it no way to change anything:
// no hosts, and no files to write (a WebAssembly tool's fs = "write", a
// wrapped CLI's write_paths, or a CLI run without Landlock). An imported
// server's tools do whatever the server does, which maiden cannot see:
// MCP's own defaults (not read-only, destructive, open world).
func HintsOf(t config.Tool) api.Hints {
	network := len(t.HTTPAllow) > 0
	writes := t.FS == config.FSWrite // the session's directories, writable where the boundary allows
	switch {
	case t.CLI != nil:
		writes = len(t.CLI.WritePaths) > 0 || t.CLI.Unconfined
	case t.MCP != nil:
		network, writes = true, true
	}
	h := api.Hints{ReadOnly: !network && !writes, Destructive: network || writes, Idempotent: !network && !writes, OpenWorld: network}
	for _, o := range []struct {
		set *bool
		dst *bool
	}{
		{t.Annotations.ReadOnly, &h.ReadOnly},
		{t.Annotations.Destructive, &h.Destructive},
		{t.Annotations.Idempotent, &h.Idempotent},
		{t.Annotations.OpenWorld, &h.OpenWorld},
	} {
		if o.set != nil {
			*o.dst = *o.set
		}
	}
	return h
}

// PolicyOf is t's whole effective policy as maiden shows it (every list
// non-nil).
func PolicyOf(t config.Tool) api.Policy {
	p := api.Policy{
		Path:                 t.Path,
		TimeoutMS:            t.Timeout.Milliseconds(),
		MemoryMB:             t.MemoryBytes >> 20,
		HTTPAllow:            OrEmpty(t.HTTPAllow),
		HTTPPorts:            OrEmpty(t.HTTPPorts),
		HTTPAllowCIDRs:       []string{},
		HTTPCAFiles:          OrEmpty(t.HTTPCAFiles),
		HTTPMaxResponseBytes: t.HTTPMaxResponseBytes,
		Secrets:              OrEmpty(t.Secrets),
	}
	if p.HTTPMaxResponseBytes == 0 {
		p.HTTPMaxResponseBytes = egress.DefaultMaxResponseBytes
	}
	for _, c := range t.HTTPAllowCIDRs {
		p.HTTPAllowCIDRs = append(p.HTTPAllowCIDRs, c.String())
	}
	return p
}

// OrEmpty is l, or an empty list for nil (JSON [] rather than null).
func OrEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// Warnings finds what in t's policy will certainly fail or do nothing
// at call time. secret reports whether a secret has a value on this host.
func Warnings(t config.Tool, secret func(string) bool) []string {
	var w []string
	key := "tools." + t.Name + "."
	if len(t.HTTPAllow) == 0 {
		for _, k := range []struct {
			name string
			set  bool
		}{{"secrets", len(t.Secrets) > 0}, {"http_ports", len(t.HTTPPorts) > 0}, {"http_allow_cidrs", len(t.HTTPAllowCIDRs) > 0}, {"http_ca_files", len(t.HTTPCAFiles) > 0}} {
			if k.set {
				w = append(w, fmt.Sprintf("%s%s has no effect: the tool has no http_allow, so every http-fetch it makes is refused", key, k.name))
			}
		}
	}
	for _, name := range t.Secrets {
		if !secret(name) {
			w = append(w, fmt.Sprintf("%ssecrets: %s%s is not set here, so an http-fetch naming credential %s will be denied until it is", key, egress.SecretEnvPrefix, name, name))
		}
	}
	for _, host := range t.HTTPAllow {
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			addrs = []netip.Addr{a}
		} else if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			// Always loopback (RFC 6761), over either family.
			addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
		}
		var refused []netguard.Result
		for _, a := range addrs {
			if d := netguard.Check(a, t.HTTPAllowCIDRs); !d.Allow {
				refused = append(refused, d)
			}
		}
		if len(refused) > 0 && len(refused) == len(addrs) {
			w = append(w, fmt.Sprintf("%shttp_allow: %s will always be refused: %s; to allow it, add its range to http_allow_cidrs", key, host, refused[0].Reason))
		}
	}
	return w
}
