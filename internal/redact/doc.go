// Package redact is the `redact` middleware's pattern-based redaction of a
// tool's output and logs: built-in detectors for common credential formats
// and the operator's regular expressions, each match replaced by a named
// marker such as [REDACTED:github-token]. It runs after, and does not
// repeat, internal/egress's redaction of the secret values the host knows
// (which hides exact values and their encodings); this package finds
// credentials nobody declared, by their shape. Markers already present
// ([REDACTED:...]) are never redacted again, so the two compose and Redact
// is idempotent.
//
//	r, err := redact.New([]redact.Pattern{{Name: "employee-id", Expr: `\bEMP-[0-9]{6}\b`}}, true)
//	out := r.Redact(toolOutput)
//
// # Built-in detectors (Builtins)
//
//	aws-access-key-id  AKIA/ASIA/ABIA/ACCA + 16 upper-case letters or digits, as a word
//	aws-secret-key     40 base64 characters assigned to a key named aws…secret/private or
//	                   SecretAccessKey (only the value is replaced)
//	github-token       ghp_ gho_ ghu_ ghs_ ghr_ + 36 or more alphanumerics; github_pat_ + 22 + _ + 59
//	slack-token        xoxa- xoxb- xoxp- xoxo- xoxs- xoxr- followed by two dash-separated parts
//	stripe-key         sk_live_ / rk_live_ + 20 or more alphanumerics (sk_test_ is not a secret)
//	google-api-key     AIza + 35 characters of [0-9A-Za-z_-]
//	jwt                eyJ….eyJ….signature (a JSON header and payload, base64url)
//	private-key        a PEM block BEGIN … PRIVATE KEY … END, or from BEGIN to the end of a
//	                   truncated text (public keys and certificates are left)
//	password           the value assigned to password, passwd, pwd, passphrase, secret,
//	                   client_secret, api_key, access_token, auth_token, private_key (any
//	                   prefix: DB_PASSWORD) with = or :, quoted (3+ characters up to the
//	                   closing quote, escapes allowed) or bare (4+ characters up to a
//	                   separator), of any length; null/true/false are left
//
// Each has a fake fixture that must be redacted and near-misses that must
// not (redact_test.go). Detectors are a balance: an operator who needs
// stricter or looser rules adds patterns; the built-ins can be turned off.
//
// # Operator patterns
//
// RE2 syntax (Go's regexp), compiled once by New: at most MaxPatterns
// patterns of at most MaxPatternLen bytes and MaxPatternInsts compiled
// instructions each; a pattern that matches the empty string is refused.
// If a pattern has groups named "secret", only the group that matched is
// replaced ((?P<secret>…) in `token=(?P<secret>\w+)` keeps "token=").
// Errors are *Error values naming the pattern's position and name.
//
// # JSON-escaped text
//
// A tool's output is often JSON, and a secret inside a JSON string may be
// written with escapes (`gh\u0070_…`, `\/` in a base64 secret, a whole
// JSON document serialised into a string field). Besides the raw text,
// every JSON string literal that contains a backslash is decoded, redacted
// recursively (up to four levels of JSON inside JSON) and, only if
// something was found, replaced by the re-encoded redacted value, so valid
// JSON stays valid JSON and clean text is left byte for byte. Quotes are
// paired left to right and each scan stops at the next unescaped quote, so
// the pass is linear; in text that is not JSON a mispaired quote only
// means a decoded segment that holds nothing.
//
// # Streams (Writer)
//
// NewWriter redacts a stream written in pieces (a log, output copied as
// it arrives): it holds back the last StreamWindow (16 KiB) bytes, cuts
// after a newline when it can, never inside a match or an open JSON string,
// and carries the quote pairing across cuts, so a secret split across
// writes, raw or escaped, is found as in one Redact of the whole (a test
// writes 100 KiB of fixtures in random pieces and compares). Limits: a JSON
// string or PEM block longer than 256 KiB is cut anyway, and an escaped
// secret straddling that forced cut is not decoded; a password value is
// replaced whole when its key and value fit in StreamWindow (a bare one up
// to about 240 KiB), beyond that it may be written in part or whole
// (Writer).
//
// # Cost
//
// Linear time: RE2 has no backtracking, each built-in first looks for a
// literal it cannot match without (ghp_, AKIA, eyJ, PRIVATE KEY…) with a
// vectorised search; the two case-insensitive ones (aws-secret-key,
// password) run anchored only where one of their keywords occurs in an
// ASCII-lower-cased copy, aws-secret-key on at most 1200 bytes each (Go's
// regexp has no fast path for a case-folded alternation: this made 64 KiB
// of log 19× faster), password's key on the text (its whitespace has no
// bound; a key reads its own) and its value, of any length, scanned by
// hand rather than by the expression's NFA (a test holding the scan to the
// expression): a bare value's scan is not repeated from the
// keywords inside it (find resumes at its last few bytes), and the scans
// of quoted values, which stop at the next unescaped quote of their kind,
// read disjoint text per kind of quote, so each byte is read a bounded
// number of times (find's comment); and the JSON pass touches each byte
// a bounded number of times per nesting level. TestLinearTime checks adversarial inputs
// (quote and backslash runs, unterminated PEM headers, repeated prefixes)
// grow linearly.
package redact
