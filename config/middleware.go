package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/condition"
	"github.com/maiden-run/maiden/internal/limits"
	"github.com/maiden-run/maiden/internal/redact"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The middleware chain an operator puts around tool calls: universal
// layers ([[middleware]], around every tool), a tool's own (middleware =
// [...] in [tools.NAME]) and an agent's binding's ([agents.A.tools.T]
// middleware = [...]). Levels merge in that order — universal, tool,
// binding — each level's list by its merge mode (middleware_mode): append
// (default: after the layers so far), prepend (before them) or replace
// (instead of them). The first layer of the result is the outermost: it
// sees the input first and the output last.

// Built-in middleware names ([[middleware]] use = "...").
const (
	UseApprove   = "approve"
	UseRateLimit = "ratelimit"
	UseQuota     = "quota"
	UseValidate  = "validate"
	UseRedact    = "redact"
)

// BuiltinMiddleware lists the built-in middleware names.
var BuiltinMiddleware = []string{UseApprove, UseRateLimit, UseQuota, UseValidate, UseRedact}

// Merge modes of a tool's or a binding's middleware list.
const (
	MergeAppend  = "append"
	MergePrepend = "prepend"
	MergeReplace = "replace"
)

// DefaultApprovalExpiry is how long an approval request waits for a human
// before it expires (a denial), unless the rule sets expires.
const DefaultApprovalExpiry = 24 * time.Hour

// componentsKey is the internal table name of the [middleware.NAME]
// component declarations (see builder.header): TOML itself would read
// such a header after [[middleware]] as a table inside the last entry.
const componentsKey = "\x00middleware"

// Middleware is one layer of a chain, as the operator wrote it.
type Middleware struct {
	// Rule identifies the layer by where it is written, e.g.
	// "middleware[1]" (the first [[middleware]]), "tools.pay.middleware[2]"
	// or "agents.alice.tools.pay.middleware[1]"; approvals and the audit
	// trail name it so.
	Rule string
	Use  string               // a built-in name or a [middleware.NAME] component
	When *condition.Condition // nil: the layer always applies
	Line int

	// approve
	Reason      string        // why it asks (shown to the human); default the condition
	AllowAlways bool          // allow_always (default true): may a human approve "always"?
	Expires     time.Duration // how long the request waits for a decision

	// ratelimit: Limit calls per Per, per agent and tool, bursts of Burst.
	// quota: Limit cost units per Window, per agent.
	Limit  int64
	Per    time.Duration
	Burst  int64
	Window time.Duration
	Cost   *condition.Condition // int; nil means 1 per call

	// validate
	Check   *condition.Condition
	Message string

	// redact
	Redactor *redact.Redactor

	// a component
	Component *MiddlewareComponent
}

// MiddlewareComponent is a [middleware.NAME] table: operator middleware
// built as a WebAssembly component (maiden:middleware world). It runs with
// no network, under its own deadline and memory ceiling.
type MiddlewareComponent struct {
	Name        string
	Path        string
	Timeout     time.Duration
	MemoryBytes uint64
	Line        int
}

// Default limits of a middleware component.
const (
	DefaultMiddlewareTimeout = 1 * time.Second
	DefaultMiddlewareMemory  = 64 << 20
)

// Middleware returns the universal layers ([[middleware]]), in order.
func (c *Config) Middleware() []Middleware { return slices.Clone(c.universal) }

// MiddlewareComponents returns the [middleware.NAME] components, by name.
func (c *Config) MiddlewareComponents() []MiddlewareComponent {
	return slices.Clone(c.components)
}

// MiddlewareRule finds a layer by its Rule, at any level.
func (c *Config) MiddlewareRule(rule string) (Middleware, bool) {
	find := func(list []Middleware) (Middleware, bool) {
		for _, m := range list {
			if m.Rule == rule {
				return m, true
			}
		}
		return Middleware{}, false
	}
	if m, ok := find(c.universal); ok {
		return m, true
	}
	for _, t := range c.tools {
		if m, ok := find(t.Middleware); ok {
			return m, true
		}
	}
	for _, a := range c.agents {
		for _, b := range a.Bindings {
			if m, ok := find(b.Middleware); ok {
				return m, true
			}
		}
	}
	return Middleware{}, false
}

// Chain is the effective chain of a call of tool by agent: universal,
// then the tool's list, then the agent's binding's, each merged by its
// mode. Outermost first.
func (c *Config) Chain(agent, tool string) []Middleware {
	if !c.layered {
		return nil // every level is empty, whatever its merge mode
	}
	chain := slices.Clone(c.universal)
	if t, ok := c.Tool(tool); ok {
		chain = merge(chain, t.Middleware, t.MiddlewareMode)
	}
	if b, _, ok := c.AgentBinding(agent, tool); ok {
		chain = merge(chain, b.Middleware, b.MiddlewareMode)
	}
	return chain
}

func merge(chain, list []Middleware, mode string) []Middleware {
	switch mode {
	case MergeReplace:
		return slices.Clone(list)
	case MergePrepend:
		return append(slices.Clone(list), chain...)
	}
	return append(chain, list...)
}

var (
	middlewareKeys = map[string][]string{
		UseApprove:   {"use", "when", "reason", "allow_always", "expires"},
		UseRateLimit: {"use", "when", "limit", "per", "burst"},
		UseQuota:     {"use", "when", "limit", "window", "cost"},
		UseValidate:  {"use", "when", "check", "message"},
		UseRedact:    {"use", "when", "patterns", "detectors"},
		"":           {"use", "when"}, // a component
	}
	componentKeys = []string{"path", "timeout_ms", "memory_mb"}
)

// middlewareList reads the universal [[middleware]] array of tables.
func (c *checker) universalMiddleware(n *tnode) {
	if n.kind != arrayTablesNode {
		c.errorf(n.line, "middleware", "must be an array of tables ([[middleware]] with use = \"...\"), got %s", describe(n))
		return
	}
	for i, e := range n.elems {
		rule := fmt.Sprintf("middleware[%d]", i+1)
		if m, ok := c.middleware(e, rule, []string{"middleware"}); ok {
			c.universal = append(c.universal, m)
		}
	}
}

// middlewareKey reads a middleware = [{...}, ...] key of a tool or a
// binding; prefix is that table's key path.
func (c *checker) middlewareKey(n *tnode, prefix []string) []Middleware {
	path := append(slices.Clone(prefix), "middleware")
	key := formatKey(path)
	elems, ok := c.list(n, key, "inline tables ({ use = \"...\", ... })")
	if !ok {
		return nil
	}
	var out []Middleware
	for i, v := range elems {
		ekey := fmt.Sprintf("%s[%d]", key, i+1)
		if v.kind != unstable.InlineTable || v.table == nil {
			c.errorf(v.line, ekey, "must be an inline table ({ use = \"...\", ... }), got %s", describeValue(v))
			continue
		}
		if m, ok := c.middleware(v.table, ekey, path); ok {
			out = append(out, m)
		}
	}
	return out
}

// middlewareMode reads a middleware_mode key.
func (c *checker) middlewareMode(n *tnode, key string) string {
	s, line, ok := c.str(n, key)
	if !ok {
		return ""
	}
	switch s {
	case MergeAppend, MergePrepend, MergeReplace:
		return s
	}
	c.errorf(line, key, "unknown merge mode %s; valid modes: append (default), prepend, replace", quoteShort(s))
	return ""
}

// middleware reads one layer. Its component (use = "NAME") is resolved
// once every [middleware.NAME] is known (resolveComponents).
func (c *checker) middleware(n *tnode, rule string, path []string) (Middleware, bool) {
	m := Middleware{Rule: rule, Line: n.line, AllowAlways: true, Expires: DefaultApprovalExpiry}
	before := len(c.errs)
	useNode, ok := n.keys["use"]
	if !ok {
		c.errorf(n.line, rule, "missing key use: a built-in (%s) or the name of a [middleware.NAME] component", strings.Join(BuiltinMiddleware, ", "))
		return m, false
	}
	use, _, ok := c.str(useNode, rule+".use")
	if !ok {
		return m, false
	}
	m.Use = use
	kind := use
	if !slices.Contains(BuiltinMiddleware, use) {
		kind = ""
		c.pendingUses = append(c.pendingUses, pendingUse{rule: rule, name: use, line: useNode.line})
	}
	var patterns []redact.Pattern
	detectors := true
	for _, k := range n.order {
		v := n.keys[k]
		kkey := rule + "." + k
		switch {
		case !slices.Contains(middlewareKeys[kind], k):
			if kind == "" {
				c.errorf(v.line, kkey, "unknown key for a middleware component (only use and when; the component's own settings are in [middleware.%s])", use)
			} else {
				c.unknownKey(v, append(slices.Clone(path), k), middlewareKeys[kind])
			}
		case k == "use":
		case k == "when":
			m.When = c.cel(v, kkey, condition.Compile)
		case k == "reason":
			m.Reason, _, _ = c.str(v, kkey)
		case k == "allow_always":
			m.AllowAlways = c.boolKey(v, kkey)
		case k == "expires":
			m.Expires = c.duration(v, kkey)
		case k == "limit":
			m.Limit, _ = c.intKey(v, kkey, 1, 1<<40)
		case k == "burst":
			m.Burst, _ = c.intKey(v, kkey, 1, 1<<40)
		case k == "per":
			m.Per = c.duration(v, kkey)
		case k == "window":
			m.Window = c.duration(v, kkey)
		case k == "cost":
			m.Cost = c.cel(v, kkey, condition.CompileInt)
		case k == "check":
			m.Check = c.cel(v, kkey, condition.Compile)
		case k == "message":
			m.Message, _, _ = c.str(v, kkey)
		case k == "detectors":
			detectors = c.boolKey(v, kkey)
		case k == "patterns":
			patterns = c.redactPatterns(v, kkey)
		}
	}
	need := func(key string, ok bool, what string) {
		if !ok {
			c.errorf(n.line, rule, "%s needs %s = %s", use, key, what)
		}
	}
	switch use {
	case UseRateLimit:
		need("limit", m.Limit > 0, "the number of calls allowed per period (e.g. 10)")
		need("per", m.Per > 0, `the period, e.g. "1m"`)
		if m.Burst == 0 {
			m.Burst = m.Limit
		}
		// Refused here, with the line, rather than at the first call.
		if b := (limits.Bucket{Capacity: m.Burst, Refill: m.Limit, Interval: m.Per}); m.Limit > 0 && m.Per > 0 && b.Check() != nil {
			c.errorf(n.line, rule, "ratelimit of %d per %v in bursts of %d takes more than 50 years to refill from empty (burst × per / limit is at most 50 years)", m.Limit, m.Per, m.Burst)
		}
	case UseQuota:
		need("limit", m.Limit > 0, "the cost units allowed per window (e.g. 1000)")
		need("window", m.Window > 0, `the window, e.g. "24h"`)
		if m.Window > limits.MaxSpan {
			c.errorf(n.line, rule, "quota's window of %v is longer than 50 years", m.Window)
		}
	case UseValidate:
		need("check", m.Check != nil || len(c.errs) > before, `a CEL condition the arguments must meet, e.g. 'args.amount <= 100'`)
		if m.Message == "" && m.Check != nil {
			m.Message = "the arguments break the rule " + m.Check.String()
		}
	case UseRedact:
		if r, err := redact.New(patterns, detectors); err != nil {
			c.errorf(n.line, rule+".patterns", "%v", err)
		} else {
			m.Redactor = r
		}
	case UseApprove:
		if m.Reason == "" {
			m.Reason = "a human must approve calls"
			if m.When != nil {
				m.Reason = "a human must approve calls where " + m.When.String()
			}
		}
	}
	return m, len(c.errs) == before
}

// cel compiles a CEL expression key; an error names the expression's line
// in the file (its first line plus the line within it) and column.
func (c *checker) cel(n *tnode, key string, compile func(string) (*condition.Condition, error)) *condition.Condition {
	s, line, ok := c.str(n, key)
	if !ok {
		return nil
	}
	cond, err := compile(s)
	if err != nil {
		if ce, ok := err.(*condition.Error); ok && ce.Line > 0 {
			c.errorf(line+ce.Line-1, key, "CEL column %d: %s", ce.Column, ce.Msg)
		} else {
			c.errorf(line, key, "%v", err)
		}
		return nil
	}
	return cond
}

func (c *checker) boolKey(n *tnode, key string) bool {
	if n.kind != valueNode || n.val.kind != unstable.Bool {
		c.errorf(n.line, key, "must be true or false, got %s", describe(n))
		return false
	}
	return n.val.text == "true"
}

// duration reads a Go duration string ("90s", "10m", "24h"), > 0.
func (c *checker) duration(n *tnode, key string) time.Duration {
	s, line, ok := c.str(n, key)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		c.errorf(line, key, "must be a positive duration such as \"30s\", \"10m\" or \"24h\", got %s", quoteShort(s))
		return 0
	}
	return d
}

// redactPatterns reads patterns = ["RE2", { name = "ticket", expr = "RE2" }].
func (c *checker) redactPatterns(n *tnode, key string) []redact.Pattern {
	elems, ok := c.list(n, key, `RE2 patterns (strings or { name = "...", expr = "..." })`)
	if !ok {
		return nil
	}
	var out []redact.Pattern
	for i, v := range elems {
		ekey := fmt.Sprintf("%s[%d]", key, i+1)
		switch {
		case v.kind == unstable.String:
			out = append(out, redact.Pattern{Name: fmt.Sprintf("pattern-%d", i+1), Expr: v.text})
		case v.kind == unstable.InlineTable && v.table != nil:
			p := redact.Pattern{}
			for _, k := range v.table.order {
				kv := v.table.keys[k]
				switch k {
				case "name":
					p.Name, _, _ = c.str(kv, ekey+".name")
				case "expr":
					p.Expr, _, _ = c.str(kv, ekey+".expr")
				default:
					c.errorf(kv.line, ekey+"."+k, "unknown key; valid keys here: name, expr")
				}
			}
			out = append(out, p)
		default:
			c.errorf(v.line, ekey, "must be a string or { name = \"...\", expr = \"...\" }, got %s", describeValue(v))
		}
	}
	return out
}

// pendingUse is a use = "NAME" that must name a [middleware.NAME].
type pendingUse struct {
	rule, name string
	line       int
}

// components reads the [middleware.NAME] tables.
func (c *checker) middlewareComponents(n *tnode) {
	if n.kind != tableNode {
		c.errorf(n.line, "middleware", "must be tables [middleware.NAME] declaring middleware components, got %s", describe(n))
		return
	}
	for _, name := range n.order {
		v := n.keys[name]
		key := formatKey([]string{"middleware", name})
		if !toolNameRE.MatchString(name) || slices.Contains(BuiltinMiddleware, name) {
			c.errorf(v.line, key, "invalid middleware component name %s: 1 to %d characters of a-z, 0-9, '_' and '-', and not a built-in (%s)",
				quoteShort(name), MaxToolNameLen, strings.Join(BuiltinMiddleware, ", "))
			continue
		}
		if v.kind != tableNode {
			c.errorf(v.line, key, "must be a table with path = \"...\", got %s", describe(v))
			continue
		}
		mc := MiddlewareComponent{Name: name, Line: v.line, Timeout: DefaultMiddlewareTimeout, MemoryBytes: DefaultMiddlewareMemory}
		for _, k := range v.order {
			kv := v.keys[k]
			kkey := key + "." + k
			switch k {
			case "path":
				if s, line, ok := c.str(kv, kkey); ok {
					if p, ok := c.regularFile(line, kkey, s); ok {
						mc.Path = p
					}
				}
			case "timeout_ms":
				if ms, ok := c.intKey(kv, kkey, MinTimeout.Milliseconds(), MaxTimeout.Milliseconds()); ok {
					mc.Timeout = time.Duration(ms) * time.Millisecond
				}
			case "memory_mb":
				if mb, ok := c.intKey(kv, kkey, MinMemoryMB, MaxMemoryMB); ok {
					mc.MemoryBytes = uint64(mb) << 20
				}
			default:
				c.unknownKey(kv, []string{"middleware", name, k}, componentKeys)
			}
		}
		if _, ok := v.keys["path"]; !ok {
			c.errorf(v.line, key, "missing key path: the middleware component's .wasm file (built with maiden build)")
			continue
		}
		c.components = append(c.components, mc)
	}
	slices.SortFunc(c.components, func(a, b MiddlewareComponent) int { return strings.Compare(a.Name, b.Name) })
}

// resolveComponents points each layer that uses a component at it, and
// reports a use = "NAME" that is neither a built-in nor declared.
func (c *checker) resolveComponents(lists ...[]Middleware) {
	byName := map[string]*MiddlewareComponent{}
	for i := range c.components {
		byName[c.components[i].Name] = &c.components[i]
	}
	for _, u := range c.pendingUses {
		if byName[u.name] == nil {
			hint := ""
			if s := suggest(u.name, BuiltinMiddleware); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			c.errorf(u.line, u.rule+".use", "unknown middleware %s%s: not a built-in (%s) and no [middleware.%s] component is declared",
				quoteShort(u.name), hint, strings.Join(BuiltinMiddleware, ", "), u.name)
		}
	}
	for _, list := range lists {
		for i := range list {
			if mc := byName[list[i].Use]; mc != nil {
				cp := *mc
				list[i].Component = &cp
			}
		}
	}
}

// UsesState reports whether calls under c need the state store: agents
// are declared (cards), or some middleware is (approvals, limits, and the
// audit trail of every call), or operators are.
func (c *Config) UsesState() bool {
	if !c.Implicit() || len(c.universal) > 0 || len(c.operators) > 0 {
		return true
	}
	for _, t := range c.tools {
		if len(t.Middleware) > 0 {
			return true
		}
	}
	return false
}
