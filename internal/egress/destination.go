package egress

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/internal/credential"
)

// SecretDestination binds a secret to the requests it may be attached to:
// a credential meant for one API never reaches another host the tool may
// otherwise call. Hosts is required; Methods and PathPrefixes narrow
// further when not empty. The gate refuses a request that attaches Secret
// anywhere else (rule "credential-destination") before anything is
// resolved or sent.
type SecretDestination struct {
	Secret string
	// Hosts are normalised host patterns (as Rules.Hosts).
	Hosts []string
	// Methods are HTTP methods, compared exactly ("GET" allows "GET", not
	// "get"); the empty method of a request is GET.
	Methods []string
	// PathPrefixes are paths starting with '/', without escapes, query or
	// dot segments. "/v1/" allows "/v1/" and everything under it; "/v1"
	// allows "/v1" and "/v1/..." but not "/v10". They are matched against
	// the request's path decoded once; a path with a dot segment ("..",
	// "%2e%2e", "..;") or an escaped '/', '\\' or '.' left after decoding
	// is refused outright, since servers resolve those differently.
	PathPrefixes []string
	// Source names where the binding was declared, for refusals (e.g.
	// "[secrets.WEATHER_TOKEN] at agent.toml:12"): the key to edit.
	Source string
	// Credential is how the secret is attached (its kind and the kind's
	// settings); the zero value is a bearer token. When two bindings of
	// one secret meet (Rules.Intersect), the first non-bearer one decides.
	Credential credential.Spec
}

func (d SecretDestination) clone() SecretDestination {
	d.Hosts = slices.Clone(d.Hosts)
	d.Methods = slices.Clone(d.Methods)
	d.PathPrefixes = slices.Clone(d.PathPrefixes)
	return d
}

// check validates d for NewPolicy: a binding that silently matched nothing
// (or everything) would be worse than an error.
func (d SecretDestination) check() error {
	if d.Secret == "" {
		return errors.New("secret destination without a secret name")
	}
	if len(d.Hosts) == 0 {
		return fmt.Errorf("secret %s: a destination needs at least one host", quote(d.Secret))
	}
	for _, h := range d.Hosts {
		if n, why := normalizeHostPattern(h); why != "" || n != h {
			return fmt.Errorf("secret %s: host pattern %s is not a normalised host pattern", quote(d.Secret), quote(h))
		}
	}
	for _, m := range d.Methods {
		if _, dec := checkMethod(m); !dec.Allow || m == "" {
			return fmt.Errorf("secret %s: method %s is not an HTTP method", quote(d.Secret), quote(m))
		}
	}
	for _, p := range d.PathPrefixes {
		if why := PathPrefixProblem(p); why != "" {
			return fmt.Errorf("secret %s: path prefix %s: %s", quote(d.Secret), quote(p), why)
		}
	}
	if err := d.Credential.Check(); err != nil {
		return fmt.Errorf("secret %s: %v", quote(d.Secret), err)
	}
	return nil
}

// PathPrefixProblem says what is wrong with a path prefix of a
// SecretDestination, or "" if nothing is: it must start with '/', hold
// only bytes that may appear raw in a URL path (no '%' escapes, so there
// is one spelling to compare), and have no "." or ".." segment.
func PathPrefixProblem(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "must start with '/'"
	}
	if len(p) > 1024 {
		return "is longer than 1024 bytes"
	}
	for i := 0; i < len(p); i++ {
		if !pathByteOK(p[i]) {
			return fmt.Sprintf("byte %d (%s) may not appear in a prefix: use the path's characters as the server reads them, without %%XX escapes, query or fragment", i, quote(p[i:i+1]))
		}
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if dotSegment(seg) {
			return "has a \".\" or \"..\" segment"
		}
	}
	return ""
}

// checkDestination applies the bindings of secret to a request for t with
// method. It runs before the credential is resolved and attached.
func (p *Policy) checkDestination(secret string, t target, method string) Ruling {
	for i := range p.dests {
		d := &p.dests[i]
		if d.Secret != secret {
			continue
		}
		if !slices.ContainsFunc(d.Hosts, func(h string) bool { return matchHost(h, t.host) }) {
			return deny(RuleCredentialDestination, "credential %s may not be sent to host %s: its binding %s allows hosts = %s",
				quote(secret), quote(t.host), d.Source, list(d.Hosts))
		}
		if len(d.Methods) > 0 && !slices.Contains(d.Methods, method) {
			return deny(RuleCredentialDestination, "credential %s may not be sent with method %s: its binding %s allows methods = %s",
				quote(secret), quote(method), d.Source, list(d.Methods))
		}
		if len(d.PathPrefixes) > 0 {
			path, why := decodedPath(t.path)
			if why != "" {
				return deny(RuleCredentialDestination, "credential %s may not be sent to path %s: %s, and its binding %s allows only path_prefixes = %s",
					quote(secret), quote(t.path), why, d.Source, list(d.PathPrefixes))
			}
			if !slices.ContainsFunc(d.PathPrefixes, func(pre string) bool { return UnderPathPrefix(path, pre) }) {
				return deny(RuleCredentialDestination, "credential %s may not be sent to path %s: its binding %s allows path_prefixes = %s",
					quote(secret), quote(t.path), d.Source, list(d.PathPrefixes))
			}
		}
	}
	return allowed
}

// overrideHeaders are the request headers by which common servers run
// another method (Google's APIs, Express's and Symfony's method override:
// X-HTTP-Method-Override and its spellings) or route another path (IIS
// URL Rewrite, Symfony: X-Original-URL, X-Rewrite-URL) than the request
// line's, each with what it overrides.
var overrideHeaders = map[string]string{
	"X-Http-Method-Override": "methods", "X-Http-Method": "methods", "X-Method-Override": "methods",
	"X-Original-Url": "path_prefixes", "X-Rewrite-Url": "path_prefixes",
}

// noOverride refuses, for a request carrying secret whose bindings narrow
// methods or path_prefixes, what would have such servers run another
// method or path than the one checked: the headers above, and a _method
// parameter (Rails, Laravel, Symfony, Express) in the query or in a form
// body. A _method a server reads from a JSON or multipart body is not
// seen: a binding that must hold against such a server should not allow
// the methods that carry bodies (docs/credentials.md).
func (p *Policy) noOverride(secret string, header http.Header, query string, body []byte) Ruling {
	var methods, paths bool
	var source string
	for i := range p.dests {
		if d := &p.dests[i]; d.Secret == secret {
			methods, paths, source = methods || len(d.Methods) > 0, paths || len(d.PathPrefixes) > 0, d.Source
		}
	}
	if !methods && !paths {
		return allowed
	}
	for _, k := range slices.Sorted(maps.Keys(header)) {
		// '_' is '-' to CGI-style servers, as in checkHeaders.
		if what, ok := overrideHeaders[textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-"))]; ok && (what == "methods" && methods || what == "path_prefixes" && paths) {
			return deny(RuleCredentialDestination, "header %s may not be sent with credential %s: servers that honour it would run another request than the one its binding %s checks (%s)",
				quote(k), quote(secret), source, what)
		}
	}
	if !methods {
		return allowed
	}
	form := ""
	if ct, _, _ := strings.Cut(header.Get("Content-Type"), ";"); strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded") {
		form = string(body)
	}
	for _, in := range [...]struct{ where, raw string }{{"query", query}, {"form body", form}} {
		where, raw := in.where, in.raw
		for _, part := range strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' }) {
			k, _, _ := strings.Cut(part, "=")
			if k, err := url.QueryUnescape(k); err != nil || strings.EqualFold(strings.TrimSpace(k), "_method") {
				return deny(RuleCredentialDestination, "a _method parameter (or an escape that does not decode) in the %s may not be sent with credential %s: servers that honour it would run another method than its binding %s checks (methods)",
					where, quote(secret), source)
			}
		}
	}
	return allowed
}

// decodedPath is the escaped path p decoded once, or why it cannot be
// compared with a prefix: a dot segment (a server would resolve it to
// another path), or an escape for '/', '\\' or '.' still there after
// decoding (a server that decodes twice would read a different path), or
// a backslash (some servers read it as '/').
func decodedPath(p string) (string, string) {
	s, err := url.PathUnescape(p)
	if err != nil {
		return "", "its escapes do not decode"
	}
	if strings.Contains(s, `\`) {
		return "", "it holds a backslash"
	}
	lower := strings.ToLower(s)
	for _, esc := range []string{"%2e", "%2f", "%5c"} {
		if strings.Contains(lower, esc) {
			return "", "it is escaped twice"
		}
	}
	for _, seg := range strings.Split(s, "/") {
		if dotSegment(seg) {
			return "", "it has a \".\" or \"..\" segment"
		}
	}
	return s, ""
}

// dotSegment reports whether seg is "." or "..", ignoring ";parameters"
// (servlet containers read "..;x" as "..").
func dotSegment(seg string) bool {
	seg, _, _ = strings.Cut(seg, ";")
	return seg == "." || seg == ".."
}

// UnderPathPrefix reports whether path is pre or under it: a prefix ending
// in '/' is a plain prefix; any other stops at a segment boundary, so "/v1"
// covers "/v1" and "/v1/x" but not "/v10". config holds an import's
// credential to its binding by the same rule.
func UnderPathPrefix(path, pre string) bool {
	if strings.HasSuffix(pre, "/") {
		return strings.HasPrefix(path, pre)
	}
	return path == pre || strings.HasPrefix(path, pre+"/")
}

// list renders names for a message, as TOML would: ["a", "b"].
func list(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
