package config

import (
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/pelletier/go-toml/v2/unstable"
)

// This file is [agents.NAME.boundary]: the initial ExecutionBoundary of every
// session of an agent (../shared/BOUNDARIES.md, docs/boundaries.md), and the
// web_fetch binding's secret material.

// boundaryKeys are the keys of [agents.NAME.boundary].
var boundaryKeys = []string{"network", "fs", "deny", "protected"}

// fsEntryKeys are the keys of one entry of [agents.NAME.boundary] fs.
var fsEntryKeys = []string{"path", "access", "match"}

// DefaultBoundary is the initial boundary of an agent without a
// [agents.NAME.boundary] table: managed (a human can widen it), no
// filesystem entries, and network enabled, so that a configuration written
// before boundaries keeps working (its tools' http allowlists and the
// agent's network cards still govern every request).
func DefaultBoundary() boundary.Boundary {
	return boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Entries: []boundary.Entry{}, Deny: []string{}, Protected: []string{}, Network: true}.Normalize()
}

// agentBoundary reads [agents.NAME.boundary]. Inside the table network is
// off unless it says network = true: declaring a boundary is asking for a
// narrow one.
func (c *checker) agentBoundary(n *tnode, kpath []string) (boundary.Boundary, bool) {
	key := formatKey(kpath)
	b := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Entries: []boundary.Entry{}, Deny: []string{}, Protected: []string{}}
	if n.kind != tableNode {
		c.errorf(n.line, key, "must be a table (network, fs, deny, protected), got %s", describe(n))
		return b, false
	}
	before := len(c.errs)
	for _, k := range n.order {
		v := n.keys[k]
		kk := key + "." + k
		switch k {
		case "network":
			b.Network = c.boolKey(v, kk)
		case "fs":
			elems, ok := c.list(v, kk, "tables { path, access, match }")
			if !ok {
				continue
			}
			for i, e := range elems {
				if ent, ok := c.fsEntry(e, kk, i); ok {
					b.Entries = append(b.Entries, ent)
				}
			}
		case "deny":
			c.strElems(v, kk, func(_ int, ekey string, e *tvalue) {
				if p, ok := c.boundaryPath(e, ekey); ok && !slices.Contains(b.Deny, p) {
					b.Deny = append(b.Deny, p)
				}
			})
		case "protected":
			c.strElems(v, kk, func(_ int, ekey string, e *tvalue) {
				name := e.text
				if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
					c.errorf(e.line, ekey, "protected %s must be one path component (a name such as .git), not a path", quoteShort(name))
					return
				}
				if !slices.Contains(b.Protected, name) {
					b.Protected = append(b.Protected, name)
				}
			})
		default:
			c.unknownKey(v, append(kpath[:len(kpath):len(kpath)], k), boundaryKeys)
		}
	}
	if len(c.errs) != before {
		return b, false
	}
	b = b.Normalize()
	if err := b.Validate(); err != nil {
		c.errorf(n.line, key, "%v", err)
		return b, false
	}
	if out, err := b.Canonical(); err != nil || len(out) > boundary.MaxBoundarySize {
		c.errorf(n.line, key, "the boundary is larger than %d bytes of JSON", boundary.MaxBoundarySize)
		return b, false
	}
	return b, true
}

// fsEntry reads one { path, access, match } entry.
func (c *checker) fsEntry(v *tvalue, key string, i int) (boundary.Entry, bool) {
	ekey := key + "[" + strconv.Itoa(i) + "]"
	if v.kind != unstable.InlineTable || v.table == nil {
		c.errorf(v.line, ekey, "must be an inline table { path = \"/abs/path\", access = \"read\" | \"write\", match = \"exact\" | \"subtree\" }, got %s", describeValue(v))
		return boundary.Entry{}, false
	}
	e := boundary.Entry{Access: boundary.Read, Match: boundary.Subtree}
	ok := true
	t := v.table
	for _, k := range t.order {
		f := t.keys[k]
		fk := ekey + "." + k
		switch k {
		case "path":
			if f.kind != valueNode || f.val.kind != unstable.String {
				c.errorf(f.line, fk, "must be a string, got %s", describe(f))
				ok = false
				continue
			}
			p, good := c.boundaryPath(f.val, fk)
			e.Path, ok = p, ok && good
		case "access":
			s, line, good := c.str(f, fk)
			switch {
			case !good:
				ok = false
			case s == "read" || s == "write":
				e.Access = boundary.Access(s)
			default:
				c.errorf(line, fk, "must be \"read\" or \"write\", got %s (deny paths go in deny)", quoteShort(s))
				ok = false
			}
		case "match":
			s, line, good := c.str(f, fk)
			switch {
			case !good:
				ok = false
			case s == "exact" || s == "subtree":
				e.Match = boundary.Match(s)
			default:
				c.errorf(line, fk, "must be \"exact\" or \"subtree\", got %s", quoteShort(s))
				ok = false
			}
		default:
			if sug := suggest(k, fsEntryKeys); sug != "" {
				c.errorf(f.line, fk, "unknown key (did you mean %q?)", sug)
			} else {
				c.errorf(f.line, fk, "unknown key; valid keys here: %s", strings.Join(fsEntryKeys, ", "))
			}
			ok = false
		}
	}
	if _, has := t.keys["path"]; !has {
		c.errorf(v.line, ekey, "needs a path")
		return e, false
	}
	return e, ok
}

// boundaryPath checks an absolute, clean path of a boundary, as
// BOUNDARIES.md normalises them; a path that would be normalised into
// something else is an error rather than a silent rewrite, so that what the
// file says is what is enforced.
func (c *checker) boundaryPath(v *tvalue, key string) (string, bool) {
	p := v.text
	switch {
	case p == "":
		c.errorf(v.line, key, "must not be empty")
	case strings.ContainsRune(p, 0):
		c.errorf(v.line, key, "must not contain a NUL byte")
	case !strings.HasPrefix(p, "/"):
		c.errorf(v.line, key, "%s must be an absolute path", quoteShort(p))
	case len(p) > boundary.MaxPathLen:
		c.errorf(v.line, key, "is %d bytes long; the limit is %d", len(p), boundary.MaxPathLen)
	case path.Clean(p) != p:
		c.errorf(v.line, key, "%s is not clean: write %s", quoteShort(p), quoteShort(path.Clean(p)))
	default:
		return p, true
	}
	return "", false
}

// webFetchKeys are the keys of a web_fetch binding table.
var webFetchKeys = []string{"http_allow", "http_ports", "http_allow_cidrs", "http_ca_files", "credential", "secret_headers", "proxy_secret", "middleware", "middleware_mode"}

// webFetchBinding reads [agents.A.tools.web_fetch]: the built-in has no
// policy of its own, so the binding is its whole policy: the hosts it may
// reach (none unless listed) and the secret material the host attaches.
func (c *checker) webFetchBinding(b *Binding, n *tnode, path []string) {
	b.HTTPAllow = []string{}
	for _, k := range n.order {
		v := n.keys[k]
		kpath := append(path[:len(path):len(path)], k)
		kkey := formatKey(kpath)
		switch k {
		case "http_allow":
			b.HTTPAllow = c.hostPatterns(v, kkey)
			if b.HTTPAllow == nil {
				b.HTTPAllow = []string{}
			}
		case "http_ports":
			b.HTTPPorts = c.ports(v, kkey)
		case "http_allow_cidrs":
			b.HTTPAllowCIDRs = c.cidrs(v, kkey)
		case "http_ca_files":
			b.HTTPCAFiles = c.caFiles(v, kkey)
		case "credential":
			b.Credential = c.secretName(v, kkey)
		case "proxy_secret":
			b.ProxySecret = c.secretName(v, kkey)
		case "secret_headers":
			if v.kind != tableNode && (v.kind != valueNode || v.val.kind != unstable.InlineTable) {
				c.errorf(v.line, kkey, "must be a table of header name = secret name, got %s", describe(v))
				continue
			}
			t := v
			if v.kind == valueNode {
				t = v.val.table
			}
			b.SecretHeaders = map[string]string{}
			for _, h := range t.order {
				hv := t.keys[h]
				hkey := formatKey(append(kpath[:len(kpath):len(kpath)], h))
				if !headerNameRE.MatchString(h) {
					c.errorf(hv.line, hkey, "%s is not an HTTP header name", quoteShort(h))
					continue
				}
				if name := c.secretName(hv, hkey); name != "" {
					b.SecretHeaders[h] = name
				}
			}
		case "middleware":
			b.Middleware = c.middlewareKey(v, path)
		case "middleware_mode":
			b.MiddlewareMode = c.middlewareMode(v, kkey)
		default:
			c.unknownKey(v, kpath, webFetchKeys)
		}
	}
}

// secretName reads a key whose value names a secret.
func (c *checker) secretName(n *tnode, key string) string {
	s, line, ok := c.str(n, key)
	if !ok {
		return ""
	}
	if !secretNameRE.MatchString(s) {
		c.errorf(line, key, "invalid secret name %s: must be 1 to %d characters of A-Z, 0-9 and '_', starting with a letter", quoteShort(s), MaxSecretNameLen)
		return ""
	}
	return s
}

// headerNameRE is an HTTP field name (RFC 9110 token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
