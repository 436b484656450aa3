package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/toolinfo"
)

// An approval is bound to more than the call's input, agent and cards: to
// the tool as it was when the human was asked. A human who approved a
// tool with no network did not approve the component that replaced it
// (a reload, SetConfig, a restart, a rebuilt file) with http_allow and a
// secret, even for the same name and input. So every request records the
// tool's code identity and the effective policy shown to the human
// (store.Binding); the approve layer asks again when either changed, the
// store releases an approval only under its own binding
// (ConsumeAndStart), and an approve:always card minted from a request
// carries the same binding (cards.Spec.Bound) and counts only for it.

// approvalPolicy is the effective policy of inv's tool, as its backend
// sees it (a wrapped CLI's paths, an import's upstream, a built-in's
// binding: backend.approvalPolicy).
func approvalPolicy(inv *invocation) ApprovalPolicy { return inv.backend.approvalPolicy(inv) }

// basePolicy is the part of an approval's policy every kind has: t's
// network, secrets and their destinations, limits, reveal and fs.
func basePolicy(cfg *config.Config, t config.Tool) ApprovalPolicy {
	p := toolinfo.WithDestinations(toolinfo.PolicyOf(t), cfg)
	out := ApprovalPolicy{
		Network: len(p.HTTPAllow) > 0, Hosts: p.HTTPAllow, Ports: p.HTTPPorts, CIDRs: p.HTTPAllowCIDRs, CAFiles: p.HTTPCAFiles,
		MaxResponseBytes: p.HTTPMaxResponseBytes, Secrets: p.Secrets,
		Reveal: toolinfo.OrEmpty(t.Reveal), TimeoutMS: p.TimeoutMS, MemoryMB: p.MemoryMB, FS: t.FS,
	}
	if p.SecretDestinations != nil {
		// The same JSON as the tool's policy shows (an approval is bound
		// to its digest).
		out.SecretDestinations = make(map[string]api.ApprovalSecretDestination, len(p.SecretDestinations))
		for name, d := range p.SecretDestinations {
			out.SecretDestinations[name] = api.ApprovalSecretDestination(d)
		}
	}
	return out
}

// envNames are the names of env entries ("NAME" or "NAME=value"): the
// human sees which variables a program gets, not their values.
func envNames(env []string) []string {
	var out []string
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		out = append(out, name)
	}
	return out
}

// toolIdentity is the code identity of inv's tool as it will run: the
// SHA-256 of the WebAssembly component it opened; for a wrapped CLI, of
// its program path and command configuration (the command description,
// working directory, environment, option style); for an imported tool, of
// its upstream (command, environment, directory, URL) and the digest of
// the input schema the upstream reports for it; a built-in's name.
func toolIdentity(inv *invocation) string { return inv.backend.identity(inv) }

func digestOf(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// approvalBinding is what a request for inv records and what an approval
// must match to release it.
func approvalBinding(inv *invocation) store.Binding {
	p, _ := json.Marshal(approvalPolicy(inv))
	return store.Binding{ToolDigest: toolIdentity(inv), Policy: string(p)}
}

// boundKey is the binding as an always-card carries it (cards.Spec.Bound):
// the tool's identity and a digest of the policy.
func boundKey(b store.Binding) string { return b.Key() }

// bindingChange says what differs between binding was (a request's) and
// now (the call's), "" if nothing.
func bindingChange(was, now store.Binding) string {
	switch {
	case was.ToolDigest != now.ToolDigest:
		return "the tool's code changed (" + orNoneRecorded(was.ToolDigest) + ", now " + now.ToolDigest + ")"
	case was.Policy != now.Policy:
		return "the tool's policy changed (hosts, secrets, limits or paths; now " + now.Policy + ")"
	}
	return ""
}

func orNoneRecorded(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}
