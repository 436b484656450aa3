package redact

import "regexp"

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
	detStarts([]string{"pass", "pwd", "secret", "client", "api", "access", "auth", "private"}, notValue, "password", `(?i)(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|private[_-]?key)["']?\s*[:=]\s*(?:"(?P<secret>(?:[^"\\]|\\.){3,512})"|'(?P<secret>(?:[^'\\]|\\.){3,512})'|(?P<secret>[^\s"'&,;<>{}\[\]\\]{4,512}))`),
}

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
func detStarts(starts []string, skip func(string) bool, name, expr string) detector {
	d := det(name, expr)
	d.skip = skip
	d.starts = starts
	d.anchored = regexp.MustCompile(`^(?:` + expr + `)`)
	return d
}

// startWindow bounds an anchored match of a detStarts detector.
const startWindow = 1200

func det(name, expr string, hints ...string) detector {
	re := regexp.MustCompile(expr)
	d := detector{name: name, re: re, hints: hints, marker: "[REDACTED:" + name + "]"}
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
