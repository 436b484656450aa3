package config

import (
	"fmt"

	"github.com/maiden-run/maiden/internal/hostpattern"
)

const expectedHostPattern = `expected a host name like "api.example.com", a wildcard like "*.example.com", or an IP address`

// NormalizeHostPattern validates one http_allow entry and returns its
// canonical form, which is what MatchHost expects.
//
// The entry is lowercased and one trailing dot is removed. It must then be
//   - a host name: dot-separated labels of a-z, 0-9 and '-' (1..63 characters,
//     not starting or ending with '-'), at most 253 characters in all;
//   - a wildcard "*." followed by such a name of at least two labels, which
//     matches exactly one more label ("*.example.com" matches a.example.com,
//     not example.com nor a.b.example.com); or
//   - an IP address, IPv6 with or without brackets, returned in netip's
//     canonical form without brackets.
//
// URLs, ports, paths, user info, spaces, percent-escapes and non-ASCII names
// are rejected rather than cleaned up: an allowlist entry the operator did not
// write exactly is a policy the operator did not choose. A name whose last
// label is numeric (such as "127.1") is rejected too, because some resolvers
// would read it as an IPv4 address. Internationalised names must be written in
// punycode ("xn--...").
//
// Errors wrap ErrInvalidHostPattern and say what was expected.
func NormalizeHostPattern(s string) (string, error) {
	p, reason := hostpattern.Normalize(s)
	if reason != "" {
		return "", fmt.Errorf("%w %s: %s; %s", ErrInvalidHostPattern, quoteShort(s), reason, expectedHostPattern)
	}
	return p, nil
}

// MatchHost reports whether host is allowed by pattern. Both must already be
// normalised (NormalizeHostPattern for the pattern; lowercase, no trailing dot,
// canonical IP form for the host). A pattern matches its exact host; a
// wildcard "*.example.com" matches exactly one extra label: a.example.com, but
// neither example.com nor a.b.example.com.
func MatchHost(pattern, host string) bool { return hostpattern.Match(pattern, host) }
