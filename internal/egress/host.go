package egress

import (
	"fmt"

	"github.com/maiden-run/maiden/internal/hostpattern"
)

// Host patterns, as http_allow entries and Rules.Hosts hold them, are
// defined once, in internal/hostpattern, which config uses too: egress
// depends on no configuration format (rules can come from agent.toml, from
// a caller's permission cards, or from an embedder), and both sides agree
// by construction.

func normalizeHostPattern(s string) (string, string) { return hostpattern.Normalize(s) }

func matchHost(pattern, host string) bool { return hostpattern.Match(pattern, host) }

// NormalizeHostPattern returns the canonical form of a host pattern (what
// Rules.Hosts must hold), or an error saying what is wrong with it.
func NormalizeHostPattern(s string) (string, error) {
	p, why := hostpattern.Normalize(s)
	if why != "" {
		return "", fmt.Errorf("host pattern %s: %s", quote(s), why)
	}
	return p, nil
}
