package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/hostpattern"
	"github.com/pelletier/go-toml/v2/unstable"
)

// DefaultAgent is the name of the implicit agent of a configuration that
// declares no [agents]: bound to every tool, holding a card that allows
// everything, so such a file works exactly as before agents existed.
const DefaultAgent = "default"

// BuiltinTools are the tools maiden itself provides, which an agent binds
// by name like any other tool (they are not [tools] entries). Each is listed
// for an agent only if it is bound and the agent's cards allow it.
var BuiltinTools = []string{"cards_derive", "cards_list", "cards_revoke", "cards_transfer",
	"fs_list", "fs_read", "fs_write", "request_sandbox_boundary", "session_open", "web_fetch"}

// DefaultStateFile is the store's file name, next to agent.toml, when
// [state] path is not set.
const DefaultStateFile = "maiden-state.db"

// Agent is one [agents.NAME] table: an identity, the tools it may see (its
// bindings, each possibly narrowing the tool's policy for it) and the system
// grants the operator gives it.
type Agent struct {
	Name     string
	Bindings []Binding     // sorted by tool name, one per tool
	Grants   []SystemGrant // in file order
	// Boundary is the initial ExecutionBoundary of each of the agent's
	// sessions: [agents.NAME.boundary], else DefaultBoundary().
	Boundary boundary.Boundary
	// BoundaryLine is the line of [agents.NAME.boundary]; 0 when the agent
	// has none (its sessions then start at DefaultBoundary, and wrapped
	// CLIs keep their declared write_paths).
	BoundaryLine int
	// MaxPending is max_pending: how many of the agent's questions to a
	// human may wait at once (DefaultMaxPending when not set); see
	// Config.MaxPending.
	MaxPending int
	Line       int
}

// Binding exposes one tool to one agent. A zero field keeps the tool's own
// value; a set one narrows it (validated to be within the tool's policy).
type Binding struct {
	Tool        string
	Builtin     bool          // one of BuiltinTools
	HTTPAllow   []string      // nil: the tool's; else a subset of it (normalised patterns)
	Secrets     []string      // nil: the tool's; else a subset of it
	Reveal      []string      // nil: the tool's reveal; else a subset of it
	Timeout     time.Duration // 0: the tool's; else at most the tool's
	MemoryBytes uint64        // 0: the tool's; else at most the tool's
	// Middleware is the binding's own layers and MiddlewareMode how they
	// merge with the tool's chain ("" = append).
	Middleware     []Middleware
	MiddlewareMode string
	// The web_fetch built-in's secret material, by secret name (resolved
	// by the host, used only inside web_fetch, never returned): Credential
	// is sent as the request's Authorization, SecretHeaders maps a header
	// name to the secret sent as its value, ProxySecret is described with
	// web_fetch (docs/builtins.md).
	Credential    string
	SecretHeaders map[string]string
	ProxySecret   string
	// The web_fetch binding's other network keys, as a tool's
	// (http_ports, http_allow_cidrs, http_ca_files).
	HTTPPorts      []uint16
	HTTPAllowCIDRs []netip.Prefix
	HTTPCAFiles    []string
	Line           int
}

// SystemGrant is one entry of an agent's grants list: a card the operator's
// configuration installs, which only the operator can revoke.
type SystemGrant struct {
	Text  string      // as written
	Grant grant.Grant // parsed
	// Budget is the card's budgets by key (calls, wall_ms, bytes_out,
	// cost), from the entry's budget; nil when it has none.
	Budget map[string]int64
	Line   int
}

// FileGrantGap is a tool an agent binds whose file access none of its
// grants in agent.toml can allow (FileGrantGaps).
type FileGrantGap struct {
	Tool string // fs_read, fs_list, fs_write, or a wrapped CLI with write_paths
	Verb string // the fs verb it needs: read, or write
	// CLI: a wrapped CLI, which without an fs:read grant is given none of
	// its write_paths (Verb read), and with one but without an fs:write
	// grant only reads them (Verb write).
	CLI  bool
	Line int // the binding's line
}

// FileGrantGaps are the tools agent a binds whose file access needs an fs
// card (CARDS.md's resource grants, besides tool:invoke) while none of a's
// grants is an fs grant of that verb (or of any verb): the file built-ins
// (fs_read and fs_list read their path, fs_write writes it), whose calls
// are then refused, and the wrapped CLIs with write_paths, which are given
// none of them without an fs:read grant (one gap, of verb read) and only
// read them without an fs:write grant (of verb write); unless a card from
// the store allows it (maiden cards grant). What maiden check warns of.
func (c *Config) FileGrantGaps(a Agent) []FileGrantGap {
	var gaps []FileGrantGap
	granted := func(verb string) bool {
		return slices.ContainsFunc(a.Grants, func(g SystemGrant) bool {
			return g.Grant.Class == grant.FS && (g.Grant.Verb == "" || g.Grant.Verb == verb)
		})
	}
	for _, b := range a.Bindings {
		var verb string
		t, _ := c.Tool(b.Tool)
		cli := !b.Builtin && t.CLI != nil && len(t.CLI.WritePaths) > 0
		switch {
		case cli && !granted("read"):
			verb = "read"
		case cli, b.Builtin && b.Tool == "fs_write":
			verb = "write"
		case b.Builtin && (b.Tool == "fs_read" || b.Tool == "fs_list"):
			verb = "read"
		default:
			continue
		}
		if !granted(verb) {
			gaps = append(gaps, FileGrantGap{Tool: b.Tool, Verb: verb, CLI: cli, Line: b.Line})
		}
	}
	return gaps
}

// CredentialGrantGap is an import an agent binds whose credential none of
// its grants in agent.toml allows it to use (CredentialGrantGaps).
type CredentialGrantGap struct {
	Import string // the [mcp.NAME] bound
	Secret string // its credential
	Line   int    // the binding's line
}

// CredentialGrantGaps are the imports agent a binds that send their server
// a credential (an [mcp.NAME] table's credential) while none of a's grants
// allows secret:use of it: every call of their tools is then refused
// unless a card from the store allows it (maiden cards grant). What maiden
// check warns of.
func (c *Config) CredentialGrantGaps(a Agent) []CredentialGrantGap {
	var gaps []CredentialGrantGap
	for _, b := range a.Bindings {
		t, ok := c.Tool(b.Tool)
		if b.Builtin || !ok || t.MCP == nil || t.MCP.Credential == "" {
			continue
		}
		target := grant.SecretTarget("use", t.MCP.Credential)
		if !slices.ContainsFunc(a.Grants, func(g SystemGrant) bool { return g.Grant.AllowsRef(&target) }) {
			gaps = append(gaps, CredentialGrantGap{Import: b.Tool, Secret: t.MCP.Credential, Line: b.Line})
		}
	}
	return gaps
}

func (a Agent) clone() Agent {
	a.Bindings = slices.Clone(a.Bindings)
	for i := range a.Bindings {
		a.Bindings[i].Middleware = slices.Clone(a.Bindings[i].Middleware)
		a.Bindings[i].HTTPAllow = slices.Clone(a.Bindings[i].HTTPAllow)
		a.Bindings[i].Secrets = slices.Clone(a.Bindings[i].Secrets)
		a.Bindings[i].Reveal = slices.Clone(a.Bindings[i].Reveal)
		a.Bindings[i].SecretHeaders = maps.Clone(a.Bindings[i].SecretHeaders)
		a.Bindings[i].HTTPPorts = slices.Clone(a.Bindings[i].HTTPPorts)
		a.Bindings[i].HTTPAllowCIDRs = slices.Clone(a.Bindings[i].HTTPAllowCIDRs)
		a.Bindings[i].HTTPCAFiles = slices.Clone(a.Bindings[i].HTTPCAFiles)
	}
	a.Grants = slices.Clone(a.Grants)
	a.Boundary.Entries = slices.Clone(a.Boundary.Entries)
	a.Boundary.Deny = slices.Clone(a.Boundary.Deny)
	a.Boundary.Protected = slices.Clone(a.Boundary.Protected)
	return a
}

// Binding returns the agent's binding of the named tool.
func (a Agent) Binding(tool string) (Binding, bool) {
	i, ok := slices.BinarySearchFunc(a.Bindings, tool, func(b Binding, name string) int { return strings.Compare(b.Tool, name) })
	if !ok {
		return Binding{}, false
	}
	b := a.Bindings[i]
	b.HTTPAllow = slices.Clone(b.HTTPAllow)
	b.Secrets = slices.Clone(b.Secrets)
	b.Reveal = slices.Clone(b.Reveal)
	return b, true
}

// Agents returns the declared agents sorted by name (fresh copies). It is
// empty for a configuration without [agents]; see Implicit.
func (c *Config) Agents() []Agent {
	out := make([]Agent, len(c.agents))
	for i, a := range c.agents {
		out[i] = a.clone()
	}
	return out
}

// Agent returns a copy of the named declared agent.
func (c *Config) Agent(name string) (Agent, bool) {
	i, ok := slices.BinarySearchFunc(c.agents, name, func(a Agent, name string) int { return strings.Compare(a.Name, name) })
	if !ok {
		return Agent{}, false
	}
	return c.agents[i].clone(), true
}

// AgentBinding returns agent's binding of tool without copying the rest of
// the agent (it is on every call's path): agentOK tells whether the agent
// is declared, bound whether the tool is bound to it.
func (c *Config) AgentBinding(agent, tool string) (b Binding, agentOK, bound bool) {
	i, ok := slices.BinarySearchFunc(c.agents, agent, func(a Agent, name string) int { return strings.Compare(a.Name, name) })
	if !ok {
		return Binding{}, false, false
	}
	bs := c.agents[i].Bindings
	j, ok := slices.BinarySearchFunc(bs, tool, func(b Binding, name string) int { return strings.Compare(b.Tool, name) })
	if !ok {
		return Binding{}, true, false
	}
	b = bs[j]
	b.HTTPAllow = slices.Clone(b.HTTPAllow)
	b.Secrets = slices.Clone(b.Secrets)
	b.Reveal = slices.Clone(b.Reveal)
	return b, true, true
}

// DefaultMaxPending is an agent's max_pending when agent.toml does not set
// it, and the implicit agent's. MaxMaxPending is the largest accepted.
const (
	DefaultMaxPending = 100
	MaxMaxPending     = 10000
)

// MaxPending is how many of agent's questions to a human may wait at once:
// its approval requests pending and not expired, its boundary requests
// likewise (counted apart), and its calls waiting for a decision in one
// process. A human's attention is the scarce resource behind the inbox:
// an agent (or a prompt injected into it) that varies its input could
// otherwise fill the inbox without bound, burying every other agent's
// requests. It is [agents.NAME] max_pending, else DefaultMaxPending (for
// an undeclared agent and the implicit one too).
func (c *Config) MaxPending(agent string) int {
	i, ok := slices.BinarySearchFunc(c.agents, agent, func(a Agent, name string) int { return strings.Compare(a.Name, name) })
	if !ok || c.agents[i].MaxPending <= 0 {
		return DefaultMaxPending
	}
	return c.agents[i].MaxPending
}

// Implicit reports whether the configuration declares no agents, so every
// call runs as DefaultAgent with every tool bound and everything allowed.
func (c *Config) Implicit() bool { return len(c.agents) == 0 }

// StatePath is where the state store lives: [state] url (a postgres:// or
// postgresql:// URL, without a password), else the absolute path of its
// SQLite file, [state] path or DefaultStateFile next to agent.toml.
// internal/store's Open takes either.
func (c *Config) StatePath() string {
	if c.stateURL != "" {
		return c.stateURL
	}
	if c.statePath != "" {
		return c.statePath
	}
	return filepath.Join(c.dir, DefaultStateFile)
}

// StateURL is [state] url, or "" when the store is a SQLite file.
func (c *Config) StateURL() string { return c.stateURL }

// IsStateURL reports whether a state location (a -state flag's value, or
// StatePath) names a PostgreSQL database rather than a file.
func IsStateURL(loc string) bool {
	l := strings.ToLower(loc)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// CheckStateURL checks a PostgreSQL state URL: the postgres or postgresql
// scheme, parseable, no password (in the user part or as a password query
// parameter): the password comes from PGPASSWORD or ~/.pgpass, which the
// driver reads, so that agent.toml and command lines never carry it. The
// error never repeats the password.
func CheckStateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the input, which may hold a password.
		return fmt.Errorf("not a valid URL (postgres://USER@HOST:PORT/DATABASE)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("scheme %q: want postgres:// or postgresql://", u.Scheme)
	}
	if u.Opaque != "" {
		return fmt.Errorf("not a valid URL (postgres://USER@HOST:PORT/DATABASE)")
	}
	if _, has := u.User.Password(); has {
		return fmt.Errorf("the URL carries a password: remove it and set PGPASSWORD or a ~/.pgpass entry instead (a password never belongs in agent.toml or on a command line)")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("the URL's query is malformed")
	}
	for k := range q {
		if strings.EqualFold(k, "password") {
			return fmt.Errorf("the URL carries a password parameter: remove it and set PGPASSWORD or a ~/.pgpass entry instead")
		}
		// The passphrase of the client's TLS key (sslkey), which the
		// driver reads from PGSSLPASSWORD too.
		if strings.EqualFold(k, "sslpassword") {
			return fmt.Errorf("the URL carries an sslpassword parameter (the passphrase of the client key): remove it and set PGSSLPASSWORD instead")
		}
	}
	return nil
}

var (
	agentKeys   = []string{"tools", "grants", "boundary", "max_pending"}
	bindingKeys = []string{"http_allow", "secrets", "timeout_ms", "memory_mb", "middleware", "middleware_mode", "reveal"}
	stateKeys   = []string{"path", "url"}
)

// agents checks the [agents] table against the tools already read.
func (c *checker) agents(n *tnode, tools []Tool) []Agent {
	if n.kind != tableNode {
		c.errorf(n.line, "agents", "must be a table of agents ([agents.NAME]), got %s", describe(n))
		return nil
	}
	byName := map[string]*Tool{}
	for i := range tools {
		byName[tools[i].Name] = &tools[i]
	}
	var out []Agent
	for _, name := range n.order {
		a, ok := c.agent(name, n.keys[name], byName)
		if ok {
			out = append(out, a)
		}
	}
	if len(n.order) == 0 {
		c.errorf(n.line, "agents", "declares no agent; remove it to keep the implicit agent %q, or add [agents.NAME]", DefaultAgent)
	}
	slices.SortFunc(out, func(a, b Agent) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (c *checker) agent(name string, n *tnode, tools map[string]*Tool) (Agent, bool) {
	path := []string{"agents", name}
	key := formatKey(path)
	before := len(c.errs)
	if !toolNameRE.MatchString(name) {
		c.errorf(n.line, key, "invalid agent name %s: must be 1 to %d characters of a-z, 0-9, '_' and '-', starting with a letter or digit",
			quoteShort(name), MaxToolNameLen)
	}
	if n.kind != tableNode {
		c.errorf(n.line, key, "must be a table, got %s", describe(n))
		return Agent{}, false
	}
	a := Agent{Name: name, Line: n.line, Boundary: DefaultBoundary()}
	for _, k := range n.order {
		v := n.keys[k]
		kpath := append(path[:2:2], k)
		switch k {
		case "tools":
			a.Bindings = c.bindings(v, kpath, tools)
		case "grants":
			a.Grants = c.grants(v, formatKey(kpath))
		case "boundary":
			if b, ok := c.agentBoundary(v, kpath); ok {
				a.Boundary, a.BoundaryLine = b, v.line
			}
		case "max_pending":
			if n, ok := c.intKey(v, formatKey(kpath), 1, MaxMaxPending); ok {
				a.MaxPending = int(n)
			}
		default:
			c.unknownKey(v, kpath, agentKeys)
		}
	}
	slices.SortFunc(a.Bindings, func(x, y Binding) int { return strings.Compare(x.Tool, y.Tool) })
	return a, len(c.errs) == before
}

// bindings reads an agent's tools: an array of names, or a table of
// per-tool tables that may narrow each tool's policy.
func (c *checker) bindings(n *tnode, path []string, tools map[string]*Tool) []Binding {
	key := formatKey(path)
	var out []Binding
	seen := map[string]bool{}
	add := func(name string, line int, ekey string) (*Binding, bool) {
		_, isTool := tools[name]
		builtin := slices.Contains(BuiltinTools, name)
		if !isTool && !builtin && c.declared[name] {
			return nil, false // its table's own errors say what is wrong
		}
		if !isTool && !builtin {
			c.errorf(line, ekey, "unknown tool %s: not in [tools] and not a built-in (%s)", quoteShort(name), strings.Join(BuiltinTools, ", "))
			return nil, false
		}
		if seen[name] {
			c.errorf(line, ekey, "tool %s is listed twice", quoteShort(name))
			return nil, false
		}
		seen[name] = true
		out = append(out, Binding{Tool: name, Builtin: builtin && !isTool, Line: line})
		return &out[len(out)-1], true
	}
	switch {
	case n.kind == valueNode && n.val.kind == unstable.Array:
		c.strElems(n, key, func(_ int, ekey string, v *tvalue) {
			add(v.text, v.line, ekey)
		})
	case n.kind == tableNode:
		for _, name := range n.order {
			v := n.keys[name]
			tpath := append(path[:len(path):len(path)], name)
			tkey := formatKey(tpath)
			if v.kind != tableNode {
				c.errorf(v.line, tkey, "must be a table of narrowing keys (%s; all optional), got %s", strings.Join(bindingKeys, ", "), describe(v))
				continue
			}
			b, ok := add(name, v.line, tkey)
			if !ok {
				continue
			}
			if b.Builtin && name == "web_fetch" {
				c.webFetchBinding(b, v, tpath)
				continue
			}
			if b.Builtin && len(v.order) > 0 {
				c.errorf(v.line, tkey, "%s is a built-in tool: it has no policy to narrow", quoteShort(name))
				continue
			}
			if t := tools[name]; t != nil {
				c.narrow(b, v, tpath, t)
			}
		}
	default:
		c.errorf(n.line, key, "must be an array of tool names or a table of per-tool tables, got %s", describe(n))
	}
	return out
}

// narrow reads a binding's narrowing keys, each of which must stay within
// the tool's own policy: a binding can take authority away, never add it.
func (c *checker) narrow(b *Binding, n *tnode, path []string, t *Tool) {
	for _, k := range n.order {
		v := n.keys[k]
		kpath := append(path[:len(path):len(path)], k)
		kkey := formatKey(kpath)
		switch k {
		case "http_allow":
			b.HTTPAllow = []string{}
			c.strElems(v, kkey, func(_ int, ekey string, e *tvalue) {
				p, err := NormalizeHostPattern(e.text)
				if err != nil {
					c.errorf(e.line, ekey, "%v", err)
					return
				}
				if !patternWithin(p, t.HTTPAllow) {
					c.errorf(e.line, ekey, "%s is not allowed by the tool itself (tools.%s.http_allow: %s): a binding can only narrow", quoteShort(p), t.Name, listOrNone(t.HTTPAllow))
					return
				}
				if !slices.Contains(b.HTTPAllow, p) {
					b.HTTPAllow = append(b.HTTPAllow, p)
				}
			})
		case "secrets":
			b.Secrets = []string{}
			c.strElems(v, kkey, func(_ int, ekey string, e *tvalue) {
				if !slices.Contains(t.Secrets, e.text) {
					c.errorf(e.line, ekey, "secret %s is not in the tool's own secrets (tools.%s.secrets: %s): a binding can only narrow", quoteShort(e.text), t.Name, listOrNone(t.Secrets))
					return
				}
				if !slices.Contains(b.Secrets, e.text) {
					b.Secrets = append(b.Secrets, e.text)
				}
			})
		case "reveal":
			b.Reveal = c.revealList(v, kkey, t.Reveal, fmt.Sprintf("the tool's own reveal (tools.%s.reveal: %s): a binding can only narrow", t.Name, listOrNone(t.Reveal)))
		case "timeout_ms":
			if ms, ok := c.intKey(v, kkey, MinTimeout.Milliseconds(), t.Timeout.Milliseconds()); ok {
				b.Timeout = time.Duration(ms) * time.Millisecond
			}
		case "memory_mb":
			if mb, ok := c.intKey(v, kkey, MinMemoryMB, int64(t.MemoryBytes>>20)); ok {
				b.MemoryBytes = uint64(mb) << 20
			}
		case "middleware":
			b.Middleware = c.middlewareKey(v, path)
		case "middleware_mode":
			b.MiddlewareMode = c.middlewareMode(v, kkey)
		default:
			c.unknownKey(v, kpath, bindingKeys)
		}
	}
}

// patternWithin reports whether every host p matches is matched by one of
// the tool's patterns. A single-label wildcard is within only itself.
func patternWithin(p string, allowed []string) bool {
	for _, a := range allowed {
		if a == p || (!strings.HasPrefix(p, "*.") && hostpattern.Match(a, p)) {
			return true
		}
	}
	return false
}

// grants reads an agent's system grants: each a grant text, or an inline
// table { grant = "GRANT", budget = "calls=N,wall_ms=N,bytes_out=N,cost=N" }
// for a card with budgets (docs/cards.md, "Budgets").
func (c *checker) grants(n *tnode, key string) []SystemGrant {
	var out []SystemGrant
	elems, ok := c.list(n, key, "grants (strings, or tables with grant and budget)")
	if !ok {
		return nil
	}
	for i, v := range elems {
		ekey := fmt.Sprintf("%s[%d]", key, i)
		text, budgetText, line, ok := v.text, "", v.line, true
		switch v.kind {
		case unstable.String:
		case unstable.InlineTable:
			text, budgetText, ok = c.budgetedGrant(v.table, ekey)
		default:
			c.errorf(v.line, ekey, "must be a grant string or a table { grant = \"...\", budget = \"calls=N,...\" }, got %s", describeValue(v))
			continue
		}
		if !ok {
			continue
		}
		g, err := grant.Parse(text)
		if err != nil {
			var pe *grant.ParseError
			if errors.As(err, &pe) {
				c.errorf(line, ekey, "at column %d of %s: expected %s, found %s", pe.Pos+1, quoteShort(text), pe.Expected, pe.Found)
			} else {
				c.errorf(line, ekey, "%v", err)
			}
			continue
		}
		sg := SystemGrant{Text: text, Grant: g, Line: line}
		if budgetText != "" {
			b, err := cards.ParseBudget(budgetText)
			if err != nil {
				c.errorf(line, ekey+".budget", "%v", err)
				continue
			}
			sg.Budget = b
		}
		out = append(out, sg)
	}
	return out
}

// budgetedGrant reads { grant = "...", budget = "..." }.
func (c *checker) budgetedGrant(t *tnode, key string) (text, budget string, ok bool) {
	for _, k := range t.order {
		v := t.keys[k]
		switch k {
		case "grant":
			text, _, _ = c.str(v, key+".grant")
		case "budget":
			budget, _, _ = c.str(v, key+".budget")
		default:
			if s := suggest(k, []string{"grant", "budget"}); s != "" {
				c.errorf(v.line, key+"."+formatKey([]string{k}), "unknown key (did you mean %q?)", s)
			} else {
				c.errorf(v.line, key+"."+formatKey([]string{k}), "unknown key; valid keys here: grant, budget")
			}
			return "", "", false
		}
	}
	if text == "" {
		c.errorf(t.line, key+".grant", "required key is missing")
		return "", "", false
	}
	return text, budget, true
}

// state reads the [state] table: path (a SQLite file) or url (PostgreSQL),
// not both.
func (c *checker) state(n *tnode) {
	if n.kind != tableNode {
		c.errorf(n.line, "state", "must be a table, got %s", describe(n))
		return
	}
	var pathLine, urlLine int
	for _, k := range n.order {
		v := n.keys[k]
		kpath := []string{"state", k}
		switch k {
		case "path":
			if s, line, ok := c.str(v, formatKey(kpath)); ok {
				if IsStateURL(s) {
					c.errorf(line, formatKey(kpath), "is a file; a PostgreSQL database goes in state.url")
					continue
				}
				if !filepath.IsAbs(s) {
					s = filepath.Join(c.dir, s)
				}
				c.statePath = filepath.Clean(s)
				pathLine = line
			}
		case "url":
			if s, line, ok := c.str(v, formatKey(kpath)); ok {
				if err := CheckStateURL(s); err != nil {
					c.errorf(line, formatKey(kpath), "%v", err)
					continue
				}
				c.stateURL = s
				urlLine = line
			}
		default:
			c.unknownKey(v, kpath, stateKeys)
		}
	}
	if pathLine != 0 && urlLine != 0 {
		c.errorf(max(pathLine, urlLine), "state", "path (line %d) and url (line %d) are mutually exclusive: the store is a SQLite file or a PostgreSQL database", pathLine, urlLine)
	}
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// Narrowed is t with binding b applied, as every call of the agent that
// holds b sees it: b's http_allow, secrets and reveal replace the tool's
// (the configuration has checked each stays within the tool's own policy,
// so replacing is intersecting), and its timeout and memory cap the
// tool's. The call path and the what-if replay of another agent.toml both
// narrow through it.
func (t Tool) Narrowed(b Binding) Tool {
	if b.HTTPAllow != nil {
		t.HTTPAllow = slices.Clone(b.HTTPAllow)
	}
	if b.Secrets != nil {
		t.Secrets = slices.Clone(b.Secrets)
	}
	if b.Reveal != nil {
		t.Reveal = slices.Clone(b.Reveal)
	}
	if b.Timeout > 0 {
		t.Timeout = min(t.Timeout, b.Timeout)
	}
	if b.MemoryBytes > 0 {
		t.MemoryBytes = min(t.MemoryBytes, b.MemoryBytes)
	}
	return t
}
