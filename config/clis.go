package config

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/internal/command"
	"github.com/pelletier/go-toml/v2/unstable"
)

// CLI is what only a wrapped CLI ([clis.NAME]) has beside a tool's keys:
// an existing program the operator chose, described as a command tree,
// run confined (internal/confine) with argv built from the validated
// call's rendering, never through a shell. A wrapped CLI is operator-chosen
// code, unlike a tool: it may receive secrets as environment variables.
type CLI struct {
	// Command is the program's command description (docs/command-model.md).
	Command *command.Spec
	// Dir is the working directory (absolute); "" means agent.toml's.
	Dir string
	// Env is the program's environment: "NAME" passes maiden's own value
	// of NAME, "NAME=value" sets it; everything else is scrubbed.
	Env []string
	// ReadPaths and WritePaths are what Landlock lets it read, and read
	// and write (absolute, cleaned). For a declared agent, each write
	// path is held to its session's boundary and its fs:read / fs:write
	// DIR/** cards (session.CLIWritable); the read paths, its runtime,
	// are not.
	ReadPaths, WritePaths []string
	// MaxOutputBytes caps stdout and stderr each.
	MaxOutputBytes int64
	// Unconfined runs it without Landlock on a kernel that has none
	// (every result then says so); refused otherwise.
	Unconfined bool
	// SeparateValues writes options as "--name value" instead of
	// "--name=value" (option_style = "separate"), for programs such as
	// curl that do not read the = form.
	SeparateValues bool
}

// DefaultCLIOutputBytes caps a wrapped CLI's stdout and stderr each.
const DefaultCLIOutputBytes = 1 << 20

var cliKeys = append(slices.Clone(toolKeys), "command", "command_file", "dir", "env", "read_paths", "write_paths", "max_output_bytes", "unconfined", "option_style")

// clis reads [clis.NAME] tables: tools whose path is a program.
func (c *checker) clis(n *tnode) []Tool {
	if n.kind != tableNode {
		c.errorf(n.line, "clis", "must be a table of wrapped CLIs ([clis.NAME] with path = \"/usr/bin/git\"), got %s", describe(n))
		return nil
	}
	var out []Tool
	for _, name := range n.order {
		v := n.keys[name]
		if t, ok := c.cli(name, v); ok {
			out = append(out, t)
		}
	}
	return out
}

func (c *checker) cli(name string, n *tnode) (Tool, bool) {
	key := formatKey([]string{"clis", name})
	before := len(c.errs)
	if n.kind != tableNode {
		c.errorf(n.line, key, "must be a table, got %s", describe(n))
		return Tool{}, false
	}
	cli := &CLI{MaxOutputBytes: DefaultCLIOutputBytes}
	var cmdText []byte
	cmdKey, cmdLine := "", n.line
	extra := func(t *Tool, k string, v *tnode, kpath []string) bool {
		kkey := formatKey(kpath)
		switch k {
		case "command":
			if s, line, ok := c.str(v, kkey); ok {
				cmdText, cmdKey, cmdLine = []byte(s), kkey, line
			}
		case "command_file":
			if s, line, ok := c.str(v, kkey); ok {
				if p, ok := c.regularFile(line, kkey, s); ok {
					data, err := c.files.readFile(p)
					if err != nil {
						c.errorf(line, kkey, "cannot read %s: %s", quoteShort(s), pathErrText(err))
					} else {
						cmdText, cmdKey, cmdLine = data, kkey+" ("+s+")", line
					}
				}
			}
		case "dir":
			if s, line, ok := c.str(v, kkey); ok {
				cli.Dir = c.absPath(s)
				if mode, err := c.files.stat(cli.Dir); err != nil || !mode.IsDir() {
					c.errorf(line, kkey, "not a directory: %s", quoteShort(s))
				}
			}
		case "env":
			c.strElems(v, kkey, func(_ int, ekey string, e *tvalue) {
				name, _, _ := strings.Cut(e.text, "=")
				if !envNameRE.MatchString(name) {
					c.errorf(e.line, ekey, "%s is not NAME or NAME=value (NAME: letters, digits and '_')", quoteShort(e.text))
					return
				}
				cli.Env = append(cli.Env, e.text)
			})
		case "read_paths", "write_paths":
			c.strElems(v, kkey, func(_ int, ekey string, e *tvalue) {
				p := c.absPath(e.text)
				if _, err := c.files.stat(p); err != nil {
					c.errorf(e.line, ekey, "cannot access %s: %s", quoteShort(e.text), pathErrText(err))
					return
				}
				if k == "read_paths" {
					cli.ReadPaths = append(cli.ReadPaths, p)
				} else {
					cli.WritePaths = append(cli.WritePaths, p)
				}
			})
		case "max_output_bytes":
			if b, ok := c.intKey(v, kkey, 1, 64<<20); ok {
				cli.MaxOutputBytes = b
			}
		case "unconfined":
			cli.Unconfined = c.boolKey(v, kkey)
		case "option_style":
			if s, line, ok := c.str(v, kkey); ok {
				switch s {
				case "equals":
				case "separate":
					cli.SeparateValues = true
				default:
					c.errorf(line, kkey, "must be \"equals\" (--name=value, the default) or \"separate\" (--name value), got %s", quoteShort(s))
				}
			}
		default:
			return false
		}
		return true
	}
	t, ok := c.toolIn("clis", name, n, cliKeys, extra)
	if !ok {
		return Tool{}, false
	}
	if pn, ok := n.keys["path"]; ok && pn.kind == valueNode && pn.val.kind == unstable.String {
		if !filepath.IsAbs(pn.val.text) {
			c.errorf(pn.val.line, key+".path", "must be an absolute path (the program runs as written, never looked up in PATH): %s", quoteShort(pn.val.text))
		} else if mode, err := c.files.stat(t.Path); err == nil {
			switch {
			case mode.Perm()&0o022 != 0:
				c.errorf(pn.val.line, key+".path", "%s is writable by its group or others (mode %v): anyone who can write it could change what agents run", quoteShort(pn.val.text), mode.Perm())
			case mode.Perm()&0o111 == 0:
				c.errorf(pn.val.line, key+".path", "%s is not executable (mode %v)", quoteShort(pn.val.text), mode.Perm())
			}
		}
	}
	switch {
	case cmdText == nil && len(c.errs) == before:
		c.errorf(n.line, key, "missing key command_file (or command): the program's command description (docs/command-model.md)")
	case cmdText != nil:
		spec, err := command.LoadProgram(cmdText)
		if err != nil {
			c.errorf(cmdLine, cmdKey, "command description: %v", err)
		} else {
			cli.Command = spec
		}
	}
	if _, both := n.keys["command"]; both {
		if _, file := n.keys["command_file"]; file {
			c.errorf(n.line, key, "both command and command_file: keep one")
		}
	}
	if sn, ok := n.keys["secrets"]; ok {
		c.noteSecretKeyLine(key+".secrets", sn.line) // for boundSecrets
	}
	if cli.Command != nil {
		// A secret reaches the program as an environment variable; if an
		// option falls back to that variable, the program reads the
		// secret as the option's value whenever a call omits it, a value
		// no card sees (and rendering it instead would put the secret in
		// approvals and the audit trail).
		line := n.line
		if sn, ok := n.keys["secrets"]; ok {
			line = sn.line
		}
		for _, name := range cli.Command.EnvNames() {
			if slices.Contains(t.Secrets, name) {
				c.errorf(line, key+".secrets", "secret %s is also the env fallback of an option in the command description: the program would read the secret as that option's value whenever a call omits it, which no card sees; drop the option's \"env\" or pass the secret under another name", name)
			}
		}
	}
	if len(c.errs) != before {
		return Tool{}, false
	}
	t.CLI = cli
	return t, true
}

// absPath makes p absolute against agent.toml's directory, cleaned.
func (c *checker) absPath(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.dir, p)
	}
	return filepath.Clean(p)
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// SymlinkedPath is a configured path of a wrapped CLI or a stdio MCP
// server with a symlink on it: Table is clis.NAME or mcp.NAME, Key the key
// that names it (read_paths, write_paths, dir), Real where it leads now.
type SymlinkedPath struct {
	Table, Key, Path, Real string
}

// SymlinkedPaths lists the configured paths with a symlink on them. The
// confinement refuses to run a CLI (or start a server) with one, since a
// link there, which whoever writes its parent can change, could lead
// anywhere (docs/confinement.md): what maiden check warns of, so that the
// operator names the real path before the first call fails.
func (c *Config) SymlinkedPaths() []SymlinkedPath {
	var out []SymlinkedPath
	check := func(table, key string, paths ...string) {
		for _, p := range paths {
			if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
				out = append(out, SymlinkedPath{Table: table, Key: key, Path: p, Real: real})
			}
		}
	}
	for _, t := range c.tools {
		switch {
		case t.CLI != nil:
			check("clis."+t.Name, "read_paths", t.CLI.ReadPaths...)
			check("clis."+t.Name, "write_paths", t.CLI.WritePaths...)
		case t.MCP != nil && len(t.MCP.Command) > 0:
			check("mcp."+t.Name, "read_paths", t.MCP.ReadPaths...)
			check("mcp."+t.Name, "write_paths", t.MCP.WritePaths...)
			if t.MCP.Dir != "" {
				check("mcp."+t.Name, "dir", t.MCP.Dir)
			}
		}
	}
	return out
}
