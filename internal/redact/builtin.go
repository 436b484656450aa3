package redact

import (
	"regexp"
	"unicode/utf8"
)

// builtin are the credential detectors of Builtins. Every expression is
// RE2 (linear time). Hints are literal substrings without which the
// expression cannot match, so most text skips most detectors with one
// vectorised search each.
var builtin = []detector{
	det("aws-access-key-id", `\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`, "AKIA", "ASIA", "ABIA", "ACCA"),
	detStarts([]string{"aws", "secret"}, nil, "aws-secret-key", `(?i)(?:aws[A-Za-z_.-]{0,20}?(?:secret|private)[A-Za-z_.-]{0,20}|secret_?access_?key)["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`),
	det("github-token", `\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b`, "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
	det("slack-token", `\bxox[abposr]-[0-9A-Za-z]{6,}-[0-9A-Za-z-]{6,}`, "xox"),
	det("stripe-key", `\b[sr]k_live_[0-9A-Za-z]{20,247}\b`, "k_live_"),
	det("google-api-key", `\bAIza[0-9A-Za-z_\-]{35}`, "AIza"),
	det("jwt", `\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,}`, "eyJ"),
	det("private-key", `-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$)`, "PRIVATE KEY"),
	detValue([]string{"pass", "pwd", "secret", "client", "api", "access", "auth", "private"}, notValue, "password", passwordKey, passwordValue, scanPasswordValue),
}

// The password detector is a keyword and a separator (passwordKey), then
// the value (passwordValue): a quoted string of 3 or more characters (up
// to its closing quote) or a bare word of 4 or more (up to the first
// character that ends one), of any length, so a long secret (a JWT, a
// base64 service-account key) is replaced whole. The expression is the
// definition; scanPasswordValue matches the value part by hand (see
// detValue).
const (
	passwordKey   = `(?i)(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|private[_-]?key)["']?\s*[:=]\s*`
	passwordValue = `(?:"(?P<secret>(?:[^"\\]|\\.){3,})"|'(?P<secret>(?:[^'\\]|\\.){3,})'|(?P<secret>[^\s"'&,;<>{}\[\]\\]{4,}))`
	// keywordSlack bounds, in bytes, one of passwordKey's keywords plus
	// one byte (a ':' or '=' ending a bare value): 13 characters
	// (client_secret) of at most 3 bytes each under (?i) (K, U+212A, folds
	// to k). find resumes this far before the end of a bare value it
	// replaced (see valueNext); a test derives the bound from passwordKey.
	keywordSlack = 40
)

// notValue skips what is a JSON or YAML literal, not a secret
// (`"password": null`).
func notValue(v string) bool {
	switch v {
	case "null", "true", "false", "None", "none", "undefined":
		return true
	}
	return false
}

// detStarts is a case-insensitive detector whose matches start with one
// of starts (lower case): the expression runs anchored at each occurrence,
// on at most startWindow bytes, instead of at every position of the text
// (Go's regexp has no fast path for a case-folded alternation).
//
// Only the anchored expression is compiled: find never runs the whole one
// over the text, and `^(?:…)` adds no group, so the secret groups are
// numbered alike.
func detStarts(starts []string, skip func(string) bool, name, expr string) detector {
	anchored := regexp.MustCompile(`^(?:` + expr + `)`)
	return detector{name: name, expr: expr, groups: secretGroups(anchored), marker: "[REDACTED:" + name + "]",
		skip: skip, starts: starts, anchored: anchored}
}

// startWindow bounds an anchored match of a detStarts detector; not a
// detValue's, whose key and value are matched on the text (see
// matchStart).
const startWindow = 1200

// detValue is a detStarts detector for key + value whose value part is
// matched by scan instead of by the expression: a value has no length
// bound, and the expression, run from every keyword of text that repeats
// it (password=password=...), would read the same long value again from
// each; scan says where the value ends, so find can resume past it (see
// valueNext). (With the former bound, {4,512}, Go's regexp ran an NFA over
// 512 copies of the class: about 50 µs per keyword.) key runs anchored as
// before; scan must match exactly what value matches at the same place,
// with the secret group's bounds (a test compares the two on generated and
// fuzzed text).
//
// The whole expression is not compiled here: nothing but that test runs
// it (compiling it with the former counted repetitions was most of what
// every maiden process compiled at start).
func detValue(starts []string, skip func(string) bool, name, key, value string, scan func(string) (int, int, bool)) detector {
	return detector{name: name, expr: key + value, marker: "[REDACTED:" + name + "]",
		skip: skip, starts: starts, key: regexp.MustCompile(`^(?:` + key + `)`), scan: scan}
}

// scanPasswordValue matches passwordValue at the start of v and returns
// the secret group's bounds. It counts characters (for the minimums) as
// Go's regexp does: a valid UTF-8 sequence is one, each byte of an invalid
// one is one. A quoted scan stops at the first unescaped quote of its kind
// (or fails at a backslash-newline or the end of v); a bare one at the
// first byte of notBare: the cost is the value's length, and find keeps
// the sum of these linear (see valueNext).
func scanPasswordValue(v string) (int, int, bool) {
	if v == "" {
		return 0, 0, false
	}
	switch q := v[0]; q {
	case '"', '\'':
		// q((?:[^q\\]|\\.){3,})q, where . is anything but a newline.
		i, n := 1, 0
		for ; ; n++ {
			if i >= len(v) {
				return 0, 0, false
			}
			c, w := utf8.DecodeRuneInString(v[i:])
			if c == rune(q) {
				break
			}
			if c == '\\' {
				if i+1 >= len(v) {
					return 0, 0, false
				}
				c2, w2 := utf8.DecodeRuneInString(v[i+1:])
				if c2 == '\n' {
					return 0, 0, false
				}
				w = 1 + w2
			}
			i += w
		}
		if n < 3 || i >= len(v) || v[i] != q {
			return 0, 0, false
		}
		return 1, i, true
	default:
		// [^\s"'&,;<>{}\[\]\\]{4,}, greedy.
		i, n := 0, 0
		for ; i < len(v); n++ {
			if c := v[i]; c < utf8.RuneSelf {
				if notBare[c] {
					break
				}
				i++
				continue
			}
			_, w := utf8.DecodeRuneInString(v[i:])
			i += w
		}
		if n < 4 {
			return 0, 0, false
		}
		return 0, i, true
	}
}

// notBare is what ends a bare password value: \s (Go's: \t \n \f \r
// space) and the characters passwordValue's bare class excludes.
var notBare = func() (t [utf8.RuneSelf]bool) {
	for _, c := range []byte("\t\n\f\r \"'&,;<>{}[]\\") {
		t[c] = true
	}
	return t
}()

func det(name, expr string, hints ...string) detector {
	re := regexp.MustCompile(expr)
	d := detector{name: name, expr: expr, re: re, hints: hints, marker: "[REDACTED:" + name + "]"}
	d.groups = secretGroups(re)
	return d
}

// Builtins lists the names of the built-in detectors, in the order they
// run.
func Builtins() []string {
	names := make([]string, len(builtin))
	for i, d := range builtin {
		names[i] = d.name
	}
	return names
}
