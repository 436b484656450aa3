// Package hostpattern is the one definition of a host pattern, as an
// http_allow entry (agent.toml) and egress.Rules.Hosts (the gate) hold it:
// its canonical form and how it matches a host. It is pure and imports
// nothing of maiden, so config and egress share it without depending on
// each other.
//
//	p, why := hostpattern.Normalize("*.Example.COM.") // "*.example.com", ""
//	hostpattern.Match(p, "a.example.com")             // true
package hostpattern

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Normalize returns the canonical form of a host pattern, or why s is not
// one ("" when it is). The entry is lowercased and one trailing dot
// removed; it must then be an LDH host name (labels of 1..63 of a-z, 0-9,
// '-', not starting or ending with '-', at most 253 characters, last label
// not numeric), "*." followed by such a name of at least two labels, or an
// IP address (IPv6 with or without brackets), returned in netip's form.
func Normalize(s string) (string, string) {
	if s == "" {
		return "", "empty"
	}
	for i := 0; i < len(s); i++ {
		// Checked before lowercasing: strings.ToLower maps some non-ASCII
		// runes (the Kelvin sign) onto ASCII letters.
		if s[i] >= 0x80 {
			return "", `non-ASCII characters are not allowed; write internationalised names in punycode ("xn--...")`
		}
	}
	h := strings.ToLower(s)
	switch {
	case strings.Contains(h, "://"):
		return "", "must be a host name, not a URL"
	case strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", "must not contain spaces or control characters"
	case strings.Contains(h, "@"):
		return "", "must not contain user info ('@')"
	case strings.ContainsAny(h, "/?#"):
		return "", "must not contain a path, query or fragment"
	case strings.Contains(h, "%") && strings.Contains(h, ":"):
		return "", "IPv6 zones are not allowed"
	case strings.Contains(h, "%"):
		return "", "must not contain percent-escapes"
	}
	h = strings.TrimSuffix(h, ".")

	if strings.HasPrefix(h, "[") {
		inner, ok := strings.CutSuffix(h[1:], "]")
		if !ok {
			if strings.Contains(h, "]:") {
				return "", "must not contain a port"
			}
			return "", "unbalanced '['"
		}
		a, err := netip.ParseAddr(inner)
		if err != nil || !a.Is6() {
			return "", "brackets must enclose an IPv6 address"
		}
		return a.String(), ""
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err == nil && a.Is6() {
			return a.String(), ""
		}
		if strings.Count(h, ":") == 1 {
			return "", "must not contain a port"
		}
		return "", "invalid IPv6 address"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String(), ""
	}

	name, wildcard := strings.CutPrefix(h, "*.")
	switch {
	case h == "*":
		return "", "a bare '*' would allow every host"
	case strings.Contains(name, "*"):
		return "", `'*' is only allowed as the whole first label, as in "*.example.com"`
	}
	if reason := checkHostName(name); reason != "" {
		return "", reason
	}
	if wildcard && !strings.Contains(name, ".") {
		return "", `a wildcard must be followed by at least two labels, as in "*.example.com"`
	}
	return h, ""
}

// checkHostName reports why name is not a valid LDH host name, or "".
func checkHostName(name string) string {
	if name == "" {
		return "empty host name"
	}
	if len(name) > 253 {
		return fmt.Sprintf("host name is %d characters long, the maximum is 253", len(name))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		switch {
		case l == "":
			return "empty label (two dots in a row, or a leading dot)"
		case len(l) > 63:
			return fmt.Sprintf("label %s is %d characters long, the maximum is 63", quoteShort(l), len(l))
		case l[0] == '-' || l[len(l)-1] == '-':
			return fmt.Sprintf("label %q must not start or end with '-'", l)
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Sprintf("invalid character %q; host names are made of letters, digits, '-' and '.'", c)
			}
		}
	}
	if looksNumeric(labels[len(labels)-1]) {
		return "looks like an IPv4 address but is not a valid one"
	}
	return ""
}

// looksNumeric follows the WHATWG URL rule for names that end in a number:
// browsers and inet_aton treat such names as IPv4 addresses ("127.1",
// "0x7f.1"), so allowing them would let a pattern mean an address.
func looksNumeric(label string) bool {
	digits := label
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	if rest, ok := strings.CutPrefix(label, "0x"); ok {
		digits = rest
		isDigit = func(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
	}
	for i := 0; i < len(digits); i++ {
		if !isDigit(digits[i]) {
			return false
		}
	}
	return true
}

// Match reports whether host is allowed by pattern. Both must already be
// normalised (Normalize for the pattern; lowercase, no trailing dot,
// canonical IP form for the host), because comparing raw strings here would
// be a policy bypass waiting to happen. A pattern matches its exact host; a
// wildcard "*.example.com" matches exactly one extra label: a.example.com, but
// neither example.com nor a.b.example.com.
func Match(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok && strings.HasPrefix(suffix, ".") {
		label, ok := strings.CutSuffix(host, suffix)
		return ok && label != "" && !strings.Contains(label, ".")
	}
	return pattern == host
}

// quoteShort quotes s for a message, cut at 64 runes.
func quoteShort(s string) string {
	const maxRunes = 64
	if utf8.RuneCountInString(s) <= maxRunes {
		return strconv.Quote(s)
	}
	r := []rune(s)
	return strconv.Quote(string(r[:maxRunes])) + "..."
}
