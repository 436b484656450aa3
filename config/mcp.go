package config

import (
	"net/url"
	"path/filepath"
	"strings"
	"time"

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
					if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
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

// ImportOf splits an imported tool's name (NAME.TOOL) into the import and
// the tool's exposed name; ok is false for other names.
func ImportOf(name string) (imp, tool string, ok bool) {
	imp, tool, ok = strings.Cut(name, ".")
	return imp, tool, ok && imp != "" && tool != ""
}
