package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/hostpattern"
	"github.com/pelletier/go-toml/v2/unstable"
)

// MCPImport is an [mcp.NAME] table: someone else's MCP server whose tools
// maiden re-exposes as NAME.TOOL, each call through the same exposure,
// cards, middleware, approvals and audit as a tool. An agent binds the
// import by NAME (tools = ["NAME"]) and sees all its tools; its cards
// decide on each (tool:invoke NAME.TOOL ...).
type MCPImport struct {
	// Command is a stdio server's argv (argv[0] absolute); Env its
	// environment (NAME passes maiden's value, NAME=value sets it;
	// everything else is scrubbed); Dir its working directory.
	Command []string
	Env     []string
	Dir     string
	// URL is a streamable HTTP server's endpoint; Credential the name of
	// the secret the host sends as "Authorization: Bearer <value>".
	URL        string
	Credential string
	// ReadPaths and WritePaths are what a stdio server may read, and read
	// and write, under Landlock (its program and the system's libraries
	// are readable anyway); Unconfined runs it without Landlock on a
	// kernel that has none.
	ReadPaths, WritePaths []string
	Unconfined            bool
	// AcceptNewTools pins a tool the upstream offers that no operator has
	// accepted yet on first sight (trust on first use), instead of refusing
	// it until `maiden mcp accept NAME`. A change to an accepted tool is
	// refused either way.
	AcceptNewTools bool
}

var mcpKeys = []string{"command", "env", "dir", "url", "credential", "read_paths", "write_paths", "unconfined", "accept_new_tools", "timeout_ms", "title", "middleware", "middleware_mode"}

// mcpImports reads [mcp.NAME] tables.
func (c *checker) mcpImports(n *tnode) []Tool {
	if n.kind != tableNode {
		c.errorf(n.line, "mcp", "must be a table of imported MCP servers ([mcp.NAME] with command = [...] or url = \"...\"), got %s", describe(n))
		return nil
	}
	var out []Tool
	for _, name := range n.order {
		v := n.keys[name]
		path := []string{"mcp", name}
		key := formatKey(path)
		before := len(c.errs)
		if !toolNameRE.MatchString(name) {
			c.errorf(v.line, key, "invalid name %s: must be 1 to %d characters of a-z, 0-9, '_' and '-', starting with a letter or digit", quoteShort(name), MaxToolNameLen)
			continue
		}
		if v.kind != tableNode {
			c.errorf(v.line, key, "must be a table, got %s", describe(v))
			continue
		}
		t := Tool{Name: name, Line: v.line, Timeout: DefaultTimeout, MemoryBytes: DefaultMemoryMB << 20, MCP: &MCPImport{}}
		for _, k := range v.order {
			kv := v.keys[k]
			kpath := append(path[:2:2], k)
			kkey := formatKey(kpath)
			switch k {
			case "command":
				c.strElems(kv, kkey, func(i int, ekey string, e *tvalue) {
					if i == 0 && !filepath.IsAbs(e.text) {
						c.errorf(e.line, ekey, "the program must be an absolute path (never looked up in PATH): %s", quoteShort(e.text))
					}
					t.MCP.Command = append(t.MCP.Command, e.text)
				})
				if len(t.MCP.Command) > 0 {
					if _, err := c.files.stat(t.MCP.Command[0]); err != nil {
						c.errorf(kv.line, kkey, "cannot run %s: %s", quoteShort(t.MCP.Command[0]), pathErrText(err))
					}
				}
			case "env":
				c.strElems(kv, kkey, func(_ int, ekey string, e *tvalue) {
					name, _, _ := strings.Cut(e.text, "=")
					if !envNameRE.MatchString(name) {
						c.errorf(e.line, ekey, "%s is not NAME or NAME=value", quoteShort(e.text))
						return
					}
					t.MCP.Env = append(t.MCP.Env, e.text)
				})
			case "dir":
				if s, _, ok := c.str(kv, kkey); ok {
					t.MCP.Dir = c.absPath(s)
				}
			case "url":
				if s, line, ok := c.str(kv, kkey); ok {
					u, err := url.Parse(s)
					if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
						(u.Scheme == "http" && !loopbackHost(u.Hostname())) {
						c.errorf(line, kkey, "must be an https URL without user:password (http only to loopback), got %s", quoteShort(s))
					}
					t.MCP.URL = s
				}
			case "credential":
				if s, line, ok := c.str(kv, kkey); ok {
					if !secretNameRE.MatchString(s) {
						c.errorf(line, kkey, "must be a secret's NAME (A-Z, 0-9, _), whose value comes from MAIDEN_SECRET_NAME, got %s", quoteShort(s))
					}
					t.MCP.Credential = s
					c.noteSecretKeyLine(kkey, line)
				}
			case "timeout_ms":
				if kv.kind == valueNode && kv.val.kind == unstable.Integer {
					if ms, ok := c.intKey(kv, kkey, MinTimeout.Milliseconds(), MaxTimeout.Milliseconds()); ok {
						t.Timeout = time.Duration(ms) * time.Millisecond
					}
				} else {
					c.intKey(kv, kkey, MinTimeout.Milliseconds(), MaxTimeout.Milliseconds())
				}
			case "read_paths", "write_paths":
				c.strElems(kv, kkey, func(_ int, ekey string, e *tvalue) {
					p := c.absPath(e.text)
					if _, err := c.files.stat(p); err != nil {
						c.errorf(e.line, ekey, "cannot access %s: %s", quoteShort(e.text), pathErrText(err))
						return
					}
					if k == "read_paths" {
						t.MCP.ReadPaths = append(t.MCP.ReadPaths, p)
					} else {
						t.MCP.WritePaths = append(t.MCP.WritePaths, p)
					}
				})
			case "unconfined":
				t.MCP.Unconfined = c.boolKey(kv, kkey)
			case "accept_new_tools":
				t.MCP.AcceptNewTools = c.boolKey(kv, kkey)
			case "title":
				t.Title = c.title(kv, kkey)
			case "middleware":
				t.Middleware = c.middlewareKey(kv, path)
			case "middleware_mode":
				t.MiddlewareMode = c.middlewareMode(kv, kkey)
			default:
				c.unknownKey(kv, kpath, mcpKeys)
			}
		}
		switch {
		case len(t.MCP.Command) == 0 && t.MCP.URL == "":
			c.errorf(v.line, key, "needs command = [\"/abs/program\", ...] (a stdio server) or url = \"https://...\"")
		case len(t.MCP.Command) > 0 && t.MCP.URL != "":
			c.errorf(v.line, key, "has both command and url: keep one")
		case t.MCP.Credential != "" && t.MCP.URL == "":
			c.errorf(v.line, key, "credential is sent to a url; a stdio server gets secrets through env")
		}
		if len(c.errs) == before {
			out = append(out, t)
		}
	}
	return out
}

// importMethods are the methods streamable HTTP sends an import's
// credential with: POST for every message, GET for the server's stream,
// DELETE to end the session.
var importMethods = []string{"POST", "GET", "DELETE"}

// boundSecrets checks the secrets that leave maiden outside the egress
// gate against their [secrets.NAME] bindings, which the gate enforces for
// http-fetch and web_fetch only: an import's credential and a wrapped
// CLI's secrets. Without it a secret bound to one API went to any upstream
// that named it, or to any host a CLI that holds it may reach.
func (c *checker) boundSecrets(tools []Tool) {
	for _, t := range tools {
		switch {
		case t.MCP != nil && t.MCP.Credential != "" && t.MCP.URL != "":
			if b, ok := c.binding(t.MCP.Credential); ok {
				key := formatKey([]string{"mcp", t.Name, "credential"})
				c.importCredential(t, b, c.secretKeyLine(key, t.Line), key)
			}
		case t.CLI != nil:
			key := formatKey([]string{"clis", t.Name, "secrets"})
			for _, name := range t.Secrets {
				if b, ok := c.binding(name); ok {
					c.cliSecret(t, b, c.secretKeyLine(key, t.Line), key)
				}
			}
		}
	}
}

// importCredential checks an import's credential against its binding b.
// The import attaches the value itself, as "Authorization: Bearer VALUE"
// on every request to its url: the binding must allow the url's host and
// path, the methods streamable HTTP uses, and be a bearer token (a signing
// key, a client's private key or an OAuth client secret sent as one would
// be the key itself on the wire).
func (c *checker) importCredential(t Tool, b SecretDestination, line int, key string) {
	where := fmt.Sprintf("%s:%d", filepath.Base(c.file), b.Line)
	if b.Kind != "" && b.Kind != "bearer" {
		c.errorf(line, key, "the credential %s is of kind %s ([secrets.%s], %s): an import sends its value itself as \"Authorization: Bearer VALUE\", so only a bearer secret may be an import's credential",
			quoteShort(b.Name), quoteShort(b.Kind), b.Name, where)
		return
	}
	u, err := url.Parse(t.MCP.URL)
	if err != nil {
		return // reported with the url
	}
	binding := fmt.Sprintf("[secrets.%s] (%s)", b.Name, where)
	refuse := func(format string, args ...any) {
		c.errorf(line, key, "the credential %s may not be sent to this import's url: %s", quoteShort(b.Name), fmt.Sprintf(format, args...))
	}
	host, why := hostpattern.Normalize(u.Hostname())
	if why != "" || !slices.ContainsFunc(b.Hosts, func(p string) bool { return hostpattern.Match(p, host) }) {
		refuse("its host %s is not in the hosts of %s: %s", quoteShort(host), binding, tomlList(b.Hosts))
		return
	}
	if len(b.PathPrefixes) > 0 {
		// The path as the server reads it, in the one spelling a prefix
		// has (no escapes, no dot segments), as http-fetch compares a
		// request's.
		p := u.EscapedPath()
		if p == "" {
			p = "/"
		}
		if pathPrefixProblem(p) != "" || !slices.ContainsFunc(b.PathPrefixes, func(pre string) bool { return egress.UnderPathPrefix(p, pre) }) {
			refuse("its path %s is not under the path_prefixes of %s: %s", quoteShort(p), binding, tomlList(b.PathPrefixes))
			return
		}
	}
	if len(b.Methods) > 0 && slices.ContainsFunc(importMethods, func(m string) bool { return !slices.Contains(b.Methods, m) }) {
		refuse("streamable HTTP sends it with POST, GET and DELETE, and the methods of %s are %s", binding, tomlList(b.Methods))
	}
}

// cliSecret checks a wrapped CLI's secret against its binding b. The
// program gets the value as an environment variable and may send it on
// any tunnel through maiden's CONNECT proxy, which sees each tunnel's host
// and nothing inside its TLS: so every host the CLI may reach must be one
// the secret may go to, and the binding cannot narrow methods or paths.
func (c *checker) cliSecret(t Tool, b SecretDestination, line int, key string) {
	binding := fmt.Sprintf("[secrets.%s] (%s:%d)", b.Name, filepath.Base(c.file), b.Line)
	for _, h := range t.HTTPAllow {
		if !patternWithin(h, b.Hosts) {
			c.errorf(line, key, "the secret %s reaches this CLI as an environment variable, and its http_allow entry %s is not within the hosts of %s: %s; the CLI could send the secret there (bind the secret to every host the CLI may reach, or do not give it the secret)",
				quoteShort(b.Name), quoteShort(h), binding, tomlList(b.Hosts))
			return
		}
	}
	if len(t.HTTPAllow) > 0 && (len(b.Methods) > 0 || len(b.PathPrefixes) > 0) {
		c.errorf(line, key, "the secret %s reaches this CLI as an environment variable, and %s narrows methods or path_prefixes, which maiden cannot hold a CLI's requests to: its proxy sees only each TLS tunnel's host",
			quoteShort(b.Name), binding)
	}
}

// binding is the [secrets.NAME] table of secret name, if there is one.
func (c *checker) binding(name string) (SecretDestination, bool) {
	i, ok := slices.BinarySearchFunc(c.secretDests, name, func(d SecretDestination, name string) int { return strings.Compare(d.Name, name) })
	if !ok {
		return SecretDestination{}, false
	}
	return c.secretDests[i], true
}

func (c *checker) noteSecretKeyLine(key string, line int) {
	if c.secretKeyLines == nil {
		c.secretKeyLines = map[string]int{}
	}
	c.secretKeyLines[key] = line
}

// secretKeyLine is the line noteSecretKeyLine recorded for key, else def.
func (c *checker) secretKeyLine(key string, def int) int {
	if l, ok := c.secretKeyLines[key]; ok {
		return l
	}
	return def
}

// tomlList renders names as TOML would: ["a", "b"].
func tomlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = quoteShort(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// ImportOf splits an imported tool's name (NAME.TOOL) into the import and
// the tool's exposed name; ok is false for other names.
func ImportOf(name string) (imp, tool string, ok bool) {
	imp, tool, ok = strings.Cut(name, ".")
	return imp, tool, ok && imp != "" && tool != ""
}
