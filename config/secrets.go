package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// SecretDestination is one [secrets.NAME] table: where the value of the
// secret NAME may be sent. It binds the secret for every tool and agent
// (the implicit one too): http-fetch refuses to attach it to a request for
// any other host, method or path, before anything is sent.
//
//	[secrets.WEATHER_TOKEN]
//	hosts = ["api.weather.example"]   # required: normalised host patterns
//	methods = ["GET"]                 # optional: exact HTTP methods
//	path_prefixes = ["/v1/"]          # optional: "/v1/" covers /v1/...; "/v1" covers /v1 and /v1/..., not /v10
//	kind = "bearer"                   # optional: how the host attaches it (see docs/credentials.md)
type SecretDestination struct {
	Name         string
	Hosts        []string // normalised host patterns, at least one
	Methods      []string // nil: any method
	PathPrefixes []string // nil: any path
	Line         int

	// Kind is how the host attaches the secret: "bearer" (the default,
	// also when the key is absent), "header", "basic", "hmac", "sigv4" or
	// "mtls". The fields below are the kind's settings; each is only
	// accepted with its kind.
	Kind            string
	Header          string   // header: the header's name
	Template        string   // header: e.g. "token {value}"; "" is the value alone
	Username        string   // basic
	Algorithm       string   // hmac: sha256 or sha512
	SignatureHeader string   // hmac: default X-Signature
	TimestampHeader string   // hmac: default X-Timestamp
	AccessKeyID     string   // sigv4
	Region          string   // sigv4
	Service         string   // sigv4
	SessionToken    bool     // sigv4: send the secret NAME_SESSION_TOKEN as X-Amz-Security-Token
	CertFile        string   // mtls: PEM client certificate (absolute path); the value is its private key
	TokenURL        string   // oauth2: the token endpoint, on a host of Hosts
	ClientID        string   // oauth2
	Scopes          []string // oauth2: scopes asked for; nil asks for none
	Grant           string   // oauth2: "client_credentials" (default, also when absent) or "refresh_token"
	ClientSecret    bool     // oauth2 refresh_token: the client authenticates with the secret NAME_CLIENT_SECRET
}

func (d SecretDestination) clone() SecretDestination {
	d.Hosts = slices.Clone(d.Hosts)
	d.Methods = slices.Clone(d.Methods)
	d.PathPrefixes = slices.Clone(d.PathPrefixes)
	d.Scopes = slices.Clone(d.Scopes)
	return d
}

// SecretDestinations returns the [secrets.NAME] tables sorted by name
// (fresh copies).
func (c *Config) SecretDestinations() []SecretDestination {
	out := make([]SecretDestination, len(c.secretDests))
	for i, d := range c.secretDests {
		out[i] = d.clone()
	}
	return out
}

// SecretDestination returns the binding of the named secret, if agent.toml
// declares one.
func (c *Config) SecretDestination(name string) (SecretDestination, bool) {
	i, ok := slices.BinarySearchFunc(c.secretDests, name, func(d SecretDestination, name string) int { return strings.Compare(d.Name, name) })
	if !ok {
		return SecretDestination{}, false
	}
	return c.secretDests[i].clone(), true
}

var (
	secretDestKeys = []string{"hosts", "methods", "path_prefixes", "kind", "header", "template", "username", "algorithm",
		"signature_header", "timestamp_header", "access_key_id", "region", "service", "session_token", "cert_file",
		"token_url", "client_id", "scopes", "grant", "client_secret"}
	// kindKeys are the keys each kind takes besides the binding's own.
	kindKeys = map[string][]string{
		"bearer": nil,
		"header": {"header", "template"},
		"basic":  {"username"},
		"hmac":   {"algorithm", "signature_header", "timestamp_header"},
		"sigv4":  {"access_key_id", "region", "service", "session_token"},
		"mtls":   {"cert_file"},
		"oauth2": {"token_url", "client_id", "scopes", "grant", "client_secret"},
	}
	// kindRequired are the keys a kind cannot do without.
	kindRequired = map[string][]string{
		"header": {"header"},
		"basic":  {"username"},
		"hmac":   {"algorithm"},
		"sigv4":  {"access_key_id", "region", "service"},
		"mtls":   {"cert_file"},
	}
	// An HTTP method as servers spell the standard ones: upper case.
	methodRE = regexp.MustCompile(`^[A-Z][A-Z0-9_-]{0,31}$`)
)

// maxPathPrefixLen bounds one path prefix.
const maxPathPrefixLen = 1024

// secretDestinations checks the [secrets] table against the tools already
// read: every NAME must be a secret some tool lists, so that a typo in the
// table name cannot leave the real secret unbound.
func (c *checker) secretDestinations(n *tnode, tools []Tool) []SecretDestination {
	if n.kind != tableNode {
		c.errorf(n.line, "secrets", "must be a table of secrets ([secrets.NAME] with hosts = [...]), got %s", describe(n))
		return nil
	}
	used := map[string]bool{}
	for _, t := range tools {
		for _, s := range t.Secrets {
			used[s] = true
		}
		if t.MCP != nil && t.MCP.Credential != "" {
			// An import's credential is bound like a tool's secret
			// (importCredentials).
			used[t.MCP.Credential] = true
		}
	}
	var out []SecretDestination
	for _, name := range n.order {
		v := n.keys[name]
		path := []string{"secrets", name}
		key := formatKey(path)
		before := len(c.errs)
		if !secretNameRE.MatchString(name) {
			c.errorf(v.line, key, "invalid secret name %s: must be 1 to %d characters of A-Z, 0-9 and '_', starting with a letter",
				quoteShort(name), MaxSecretNameLen)
		} else if !used[name] && c.complete {
			c.errorf(v.line, key, "no tool lists secret %s in its secrets (a misspelt name here would leave the real secret unbound); declared secrets: %s",
				quoteShort(name), listOrNone(sortedKeys(used)))
		}
		if v.kind != tableNode {
			c.errorf(v.line, key, "must be a table (hosts = [...], and optionally methods = [...], path_prefixes = [...]), got %s", describe(v))
			continue
		}
		d := SecretDestination{Name: name, Line: v.line}
		for _, k := range v.order {
			kv := v.keys[k]
			kpath := append(path[:2:2], k)
			kkey := formatKey(kpath)
			switch k {
			case "hosts":
				d.Hosts = c.hostPatterns(kv, kkey)
				if len(d.Hosts) == 0 && len(c.errs) == before {
					c.errorf(kv.line, kkey, "must name at least one host: a secret bound to no host could never be sent (remove [secrets.%s] to let it go wherever its tools may)", name)
				}
			case "methods":
				d.Methods = c.methods(kv, kkey)
			case "path_prefixes":
				d.PathPrefixes = c.pathPrefixes(kv, kkey)
			default:
				if !slices.Contains(secretDestKeys, k) {
					c.unknownKey(kv, kpath, secretDestKeys)
				}
			}
		}
		c.credentialKind(v, path, &d)
		if _, ok := v.keys["hosts"]; !ok {
			c.errorf(v.line, formatKey(append(path[:2:2], "hosts")), "required key is missing: the hosts this secret may be sent to, e.g. hosts = [\"api.example.com\"]")
		}
		if len(c.errs) == before {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b SecretDestination) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (c *checker) methods(n *tnode, key string) []string {
	out := []string{}
	c.strElems(n, key, func(i int, ekey string, v *tvalue) {
		switch {
		case !methodRE.MatchString(v.text):
			c.errorf(v.line, ekey, "invalid method %s: write it in upper case, as sent (GET, POST, ...)", quoteShort(v.text))
		case v.text == "CONNECT":
			c.errorf(v.line, ekey, "CONNECT is never allowed by http-fetch")
		case slices.Contains(out, v.text):
			c.errorf(v.line, ekey, "duplicate entry %q", v.text)
		default:
			out = append(out, v.text)
		}
	})
	if len(out) == 0 && emptyArray(n) {
		c.errorf(n.line, key, "is empty, so the secret could never be sent; remove the key to allow any method")
	}
	return out
}

func (c *checker) pathPrefixes(n *tnode, key string) []string {
	out := []string{}
	c.strElems(n, key, func(i int, ekey string, v *tvalue) {
		if why := pathPrefixProblem(v.text); why != "" {
			c.errorf(v.line, ekey, "path prefix %s %s", quoteShort(v.text), why)
			return
		}
		if slices.Contains(out, v.text) {
			c.errorf(v.line, ekey, "duplicate entry %s", quoteShort(v.text))
			return
		}
		out = append(out, v.text)
	})
	if len(out) == 0 && emptyArray(n) {
		c.errorf(n.line, key, "is empty, so the secret could never be sent; remove the key to allow any path")
	}
	return out
}

// pathPrefixProblem is the rule internal/egress applies to a path prefix
// (kept in step by TestSecretDestinationsAgreeWithEgress in the root
// package): it starts with '/', holds only bytes a URL path may hold raw
// (no %XX escapes, so there is one spelling to compare), and has no "." or
// ".." segment.
func pathPrefixProblem(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "must start with '/'"
	}
	if len(p) > maxPathPrefixLen {
		return fmt.Sprintf("is longer than %d bytes", maxPathPrefixLen)
	}
	for i := 0; i < len(p); i++ {
		b := p[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@/", b) >= 0) {
			return fmt.Sprintf("has %s at byte %d: write the path as the server reads it, without %%XX escapes, query or fragment", quoteShort(p[i:i+1]), i)
		}
	}
	for _, seg := range strings.Split(p[1:], "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return "has a \".\" or \"..\" segment"
		}
	}
	return ""
}

func emptyArray(n *tnode) bool {
	return n.kind == valueNode && n.val.kind == unstable.Array && len(n.val.elems) == 0
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
