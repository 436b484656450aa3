package config

import (
	"net/url"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/internal/credential"
	"github.com/maiden-run/maiden/internal/hostpattern"
)

// credentialKind reads the kind of a [secrets.NAME] table and the kind's
// settings into d: a key of another kind, a missing required key or a
// setting the kind cannot use is an error naming the key and its line.
func (c *checker) credentialKind(v *tnode, path []string, d *SecretDestination) {
	key := func(k string) string { return formatKey(append(path[:2:2], k)) }
	d.Kind = string(credential.Bearer)
	kindLine := v.line
	if kn, ok := v.keys["kind"]; ok {
		s, line, ok := c.str(kn, key("kind"))
		if !ok {
			return
		}
		if _, known := kindKeys[s]; !known {
			c.errorf(line, key("kind"), "unknown kind %s: one of %s", quoteShort(s), kindList())
			return
		}
		d.Kind, kindLine = s, line
	}
	for _, k := range v.order {
		if k == "hosts" || k == "methods" || k == "path_prefixes" || k == "kind" || !slices.Contains(secretDestKeys, k) {
			continue
		}
		kv := v.keys[k]
		if !slices.Contains(kindKeys[d.Kind], k) {
			c.errorf(kv.line, key(k), "is a setting of kind %s, and this secret is kind %s", kindOf(k), quoteShort(d.Kind))
			continue
		}
		if k == "session_token" {
			d.SessionToken = c.boolKey(kv, key(k))
			continue
		}
		if k == "client_secret" {
			d.ClientSecret = c.boolKey(kv, key(k))
			continue
		}
		if k == "scopes" {
			d.Scopes = []string{}
			c.strElems(kv, key(k), func(_ int, ekey string, ev *tvalue) {
				if ev.text == "" || strings.ContainsAny(ev.text, " \"\\") || !credential.HeaderValue(ev.text) {
					c.errorf(ev.line, ekey, "invalid scope %s: one word, without spaces or quotes", quoteShort(ev.text))
					return
				}
				d.Scopes = append(d.Scopes, ev.text)
			})
			continue
		}
		if k == "template" && kv.kind == valueNode && kv.val.text == "" {
			c.errorf(kv.line, key(k), "must not be empty (remove it to send the value alone)")
			continue
		}
		s, line, ok := c.str(kv, key(k))
		if !ok {
			continue
		}
		if why := c.credentialSetting(k, s, line, key(k), d); why != "" {
			c.errorf(line, key(k), "%s", why)
		}
	}
	for _, k := range kindRequired[d.Kind] {
		if _, ok := v.keys[k]; !ok {
			c.errorf(kindLine, key(k), "required key is missing for kind %s", quoteShort(d.Kind))
		}
	}
	if kv, ok := v.keys["client_secret"]; ok && d.ClientSecret && d.Grant != credential.GrantRefreshToken {
		c.errorf(kv.line, key("client_secret"), "is for grant = %s: with client credentials the secret's value is the client secret", quoteShort(credential.GrantRefreshToken))
	}
}

// credentialSetting stores one string setting in d, or says what is wrong
// with it.
func (c *checker) credentialSetting(k, s string, line int, key string, d *SecretDestination) string {
	switch k {
	case "header", "signature_header", "timestamp_header":
		if why := credential.HeaderNameProblem(s); why != "" {
			return "header name " + why
		}
		switch k {
		case "header":
			d.Header = s
		case "signature_header":
			d.SignatureHeader = s
		default:
			d.TimestampHeader = s
		}
	case "template":
		if strings.Count(s, credential.Placeholder) != 1 {
			return "must hold " + credential.Placeholder + " exactly once, where the value goes (e.g. \"token {value}\")"
		}
		if !credential.HeaderValue(s) {
			return "holds a control character"
		}
		d.Template = s
	case "username":
		if strings.Contains(s, ":") || !credential.HeaderValue(s) {
			return "may not hold ':' or control characters (HTTP basic joins user:password)"
		}
		d.Username = s
	case "algorithm":
		if !slices.Contains(credential.HMACAlgorithms, s) {
			return "must be one of " + strings.Join(credential.HMACAlgorithms, ", ") + ", got " + quoteShort(s)
		}
		d.Algorithm = s
	case "access_key_id", "region", "service":
		if strings.ContainsAny(s, "/, \t") || !credential.HeaderValue(s) {
			return "must be one word, without '/', ',' or spaces, got " + quoteShort(s)
		}
		switch k {
		case "access_key_id":
			d.AccessKeyID = s
		case "region":
			d.Region = s
		default:
			d.Service = s
		}
	case "token_url":
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
			return "must be an https URL without user info or fragment, e.g. \"https://auth.example.com/oauth/token\""
		}
		h, why := hostpattern.Normalize(u.Hostname())
		if why != "" || !slices.ContainsFunc(d.Hosts, func(p string) bool { return hostpattern.Match(p, h) }) {
			return "host " + quoteShort(u.Hostname()) + " is not in this secret's hosts: the token endpoint must itself be a destination the secret may be sent to"
		}
		d.TokenURL = s
	case "grant":
		if !slices.Contains(credential.Grants, s) {
			return "must be one of " + strings.Join(credential.Grants, ", ") + ", got " + quoteShort(s)
		}
		d.Grant = s
	case "client_id":
		if !credential.HeaderValue(s) {
			return "holds a control character"
		}
		d.ClientID = s
	case "cert_file":
		p, ok := c.regularFile(line, key, s)
		if ok && c.checkCerts(line, key, s, p) {
			d.CertFile = p
		}
	}
	return ""
}

func kindOf(k string) string {
	for _, kind := range credential.Kinds {
		if slices.Contains(kindKeys[string(kind)], k) {
			return quoteShort(string(kind))
		}
	}
	return "?"
}

func kindList() string {
	q := make([]string, len(credential.Kinds))
	for i, k := range credential.Kinds {
		q[i] = quoteShort(string(k))
	}
	return strings.Join(q, ", ")
}

// ShownKind is d's kind as a tool's policy shows it: "" for a bearer
// token (so that a policy without kinds reads, and digests, as before).
func (d SecretDestination) ShownKind() string {
	if d.Kind == string(credential.Bearer) {
		return ""
	}
	return d.Kind
}

// KindSettings are d's kind settings by their agent.toml keys, those set
// only (nil for none): what a human approving a call is shown of how the
// secret is attached. They hold no value.
func (d SecretDestination) KindSettings() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{
		"header": d.Header, "template": d.Template, "username": d.Username, "algorithm": d.Algorithm,
		"signature_header": d.SignatureHeader, "timestamp_header": d.TimestampHeader,
		"access_key_id": d.AccessKeyID, "region": d.Region, "service": d.Service, "cert_file": d.CertFile,
		"token_url": d.TokenURL, "client_id": d.ClientID, "scopes": strings.Join(d.Scopes, " "), "grant": d.Grant,
	} {
		if v != "" {
			out[k] = v
		}
	}
	if d.SessionToken {
		out["session_token"] = "true"
	}
	if d.ClientSecret {
		out["client_secret"] = "true"
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
