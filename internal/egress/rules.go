package egress

import (
	"fmt"
	"strconv"
)

// Rule names. They are stable: operators grep audit logs for them and tools
// see them in denial messages. Address denials use netguard's rule names
// ("loopback", "private-range", "metadata", ...) unchanged.
const (
	RuleURL                  = "url"
	RuleUserinfo             = "userinfo"
	RuleHostSyntax           = "host-syntax"
	RuleAllowlist            = "allowlist"
	RuleIPLiteral            = "ip-literal"
	RuleHTTPSRequired        = "https-required"
	RulePort                 = "port"
	RuleMethod               = "method"
	RuleHeaderInvalid        = "header-invalid"
	RuleHeaderRefused        = "header-refused"
	RuleCredentialUndeclared = "credential-undeclared"
	RuleCredentialMissing    = "credential-missing"
	RuleCredentialInvalid    = "credential-invalid"
	// RuleRangeWithSecret: a byte-range request that carries a secret.
	// Redaction sees one response at a time, so ranges could hand an
	// echoed secret back in pieces too short for any form it matches.
	RuleRangeWithSecret = "range-with-secret"
	// A credential asked for a destination (host, method or path) its
	// secret is not bound to (Rules.SecretDestinations).
	RuleCredentialDestination = "credential-destination"
	// A request's Authorizer refused it without naming a rule of its own.
	RuleAuthority = "authority"

	// Outcomes of requests the policy allowed.
	RuleAllowed         = "allowed"
	RuleTimeout         = "timeout"
	RuleTooLarge        = "too-large"
	RuleContentEncoding = "content-encoding"
	RuleUpgrade         = "upgrade"         // a 1xx (101 Switching Protocols) as the final answer
	RuleHeaderEncoding  = "header-encoding" // a response header value that is not UTF-8
	RuleResolve         = "resolve"
	RuleFailed          = "failed"
)

// Ruling is the outcome of one policy check. Reason is one sentence an
// operator (and the tool) can act on; a denial's Reason ends with
// "(rule: <Rule>)".
type Ruling struct {
	Allow  bool
	Rule   string
	Reason string
}

var allowed = Ruling{Allow: true, Rule: RuleAllowed}

// deny builds a denial whose reason names its rule.
func deny(rule, format string, args ...any) Ruling {
	return Ruling{Rule: rule, Reason: fmt.Sprintf(format, args...) + " (rule: " + rule + ")"}
}

// quote quotes tool-supplied text for a message: escaped to ASCII, so
// CR/LF and control bytes cannot forge lines and a look-alike shows as what
// it is ("\u0430pi.example.com"), and shortened so a hostile tool cannot
// make the message (or the audit log) huge.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.QuoteToASCII(s[:max]) + "..."
	}
	return strconv.QuoteToASCII(s)
}
