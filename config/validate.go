package config

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/maiden-run/maiden/internal/oci"
)

var (
	// Tool names become MCP tool names, which clients restrict to this set.
	toolNameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	secretNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,127}$`)

	rootKeys = []string{"version", "tools", "max_input_bytes", "agents", "state", "secrets", "middleware", "operators", "clis", "mcp", "require_signatures", "trace"}
	toolKeys = []string{
		"path", "timeout_ms", "memory_mb", "http_allow", "secrets",
		"http_ports", "http_allow_cidrs", "http_ca_files", "http_max_response_bytes",
		"title", "annotations", "middleware", "middleware_mode", "cost",
	}
	annotationKeys = []string{"read_only", "destructive", "idempotent", "open_world"}
)

// MaxCost bounds a tool's cost per call (the cost key), the units a
// call spends of a card's cost budget.
const MaxCost = 1_000_000_000

// MaxTitleLen bounds a tool's title (characters), which clients show in
// menus.
const MaxTitleLen = 128

// maxErrors bounds the problems reported for one file: nobody reads more,
// and collecting them from a hostile file could take a lot of memory.
const maxErrors = 100

// checker applies the agent.toml schema to a parsed document, collecting
// every problem instead of stopping at the first.
type checker struct {
	file  string
	dir   string
	files fileSystem
	errs  Errors
	// complete is false after a syntax error: a key may be missing only
	// because parsing stopped before it, so "missing" is not reported.
	complete    bool
	truncated   bool // errors were dropped after maxErrors
	parseErrs   int  // errors from parsing, counted separately so both parts get reported
	maxInput    int64
	statePath   string
	stateURL    string
	secretDests []SecretDestination
	universal   []Middleware
	components  []MiddlewareComponent
	pendingUses []pendingUse
	operators   []Operator
	trace       Trace
	requireSigs bool // require_signatures
	// declared: every name with a [tools], [clis] or [mcp] table, valid or
	// not, so that an agent binding a tool whose table has an error is not
	// reported again as binding an unknown tool.
	declared map[string]bool

	// secretKeyLines: the line of each [mcp.NAME]'s credential key and
	// [clis.NAME]'s secrets key (by key path), for the errors of
	// boundSecrets, which runs once the [secrets] tables are read.
	secretKeyLines map[string]int
}

func (c *checker) errorf(line int, key string, format string, args ...any) {
	if len(c.errs)-c.parseErrs >= maxErrors {
		c.truncated = true
		return
	}
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) config(root *tnode) ([]Tool, []Agent) {
	var tools []Tool
	var agentsNode, secretsNode, clisNode, mcpNode *tnode
	for _, name := range root.order {
		n := root.keys[name]
		switch name {
		case "version":
			c.version(n)
		case "max_input_bytes":
			if v, ok := c.intKey(n, name, MinMaxInputBytes, MaxMaxInputBytes); ok {
				c.maxInput = v
			}
		case "tools":
			tools = c.tools(n)
		case "agents":
			agentsNode = n // checked against the tools, wherever they are in the file
		case "state":
			c.state(n)
		case "secrets":
			secretsNode = n // checked against the tools' secrets, wherever they are
		case "middleware":
			c.universalMiddleware(n)
		case componentsKey:
			c.middlewareComponents(n)
		case "operators":
			c.operatorsTable(n)
		case "clis":
			clisNode = n
		case "mcp":
			mcpNode = n
		case "require_signatures":
			c.requireSigs = c.boolKey(n, name)
		case "trace":
			c.traceTable(n)
		default:
			c.unknownKey(n, []string{name}, rootKeys)
		}
	}
	if _, ok := root.keys["version"]; !ok && c.complete {
		c.errorf(0, "version", "required key is missing; add \"version = %d\" at the top", Version)
	}
	if c.requireSigs {
		c.requireSignatures(tools)
	}
	if clisNode != nil {
		// Wrapped CLIs are tools to agents: one namespace, one binding.
		for _, t := range c.clis(clisNode) {
			if o, ok := sameTool(tools, t.Name); ok {
				if o.Name == t.Name {
					c.errorf(t.Line, formatKey([]string{"clis", t.Name}), "%s is also a [tools] name: a wrapped CLI and a tool need different names", quoteShort(t.Name))
				} else {
					c.errorf(t.Line, formatKey([]string{"clis", t.Name}), "duplicate tool: same name as %s on line %d (names are compared ignoring case and '-' vs '_'): a wrapped CLI needs a name of its own", quoteShort(o.Name), o.Line)
				}
				continue
			}
			tools = append(tools, t)
		}
	}
	if mcpNode != nil {
		for _, t := range c.mcpImports(mcpNode) {
			if o, ok := sameTool(tools, t.Name); ok {
				if o.Name == t.Name {
					c.errorf(t.Line, formatKey([]string{"mcp", t.Name}), "%s is also a tool's or a wrapped CLI's name: an import needs its own", quoteShort(t.Name))
				} else {
					c.errorf(t.Line, formatKey([]string{"mcp", t.Name}), "duplicate tool: same name as %s on line %d (names are compared ignoring case and '-' vs '_'): an import needs its own", quoteShort(o.Name), o.Line)
				}
				continue
			}
			tools = append(tools, t)
		}
	}
	// A built-in is bound by its name too: a tool named exactly like one
	// stands in for it, one that only reads the same would be confused
	// with it.
	for _, t := range tools {
		for _, b := range BuiltinTools {
			if t.MCP == nil && t.Name != b && foldToolName(t.Name) == foldToolName(b) {
				section := "tools"
				if t.CLI != nil {
					section = "clis"
				}
				c.errorf(t.Line, formatKey([]string{section, t.Name}), "duplicate tool: same name as the built-in %s (names are compared ignoring case and '-' vs '_'): name it exactly %s to stand in for the built-in, or choose another name", quoteShort(b), quoteShort(b))
			}
		}
	}
	c.declared = map[string]bool{}
	for _, k := range []string{"tools", "clis", "mcp"} {
		if n := root.keys[k]; n != nil && n.kind == tableNode {
			for _, name := range n.order {
				c.declared[name] = true
			}
		}
	}
	var agents []Agent
	if agentsNode != nil {
		agents = c.agents(agentsNode, tools)
	}
	if secretsNode != nil {
		c.secretDests = c.secretDestinations(secretsNode, tools)
	}
	c.boundSecrets(tools)
	lists := [][]Middleware{c.universal}
	for _, t := range tools {
		lists = append(lists, t.Middleware)
	}
	for _, a := range agents {
		for _, b := range a.Bindings {
			lists = append(lists, b.Middleware)
		}
	}
	c.resolveComponents(lists...)
	c.checkOperatorNames(agents)
	return tools, agents
}

func (c *checker) version(n *tnode) {
	if n.kind == valueNode && n.val.kind == unstable.Integer {
		if v, err := parseInt(n.val.text); err == nil && v == Version {
			return
		}
		c.errorf(n.line, "version", "unsupported version %s; supported versions: %d", n.val.text, Version)
		return
	}
	c.errorf(n.line, "version", "must be the integer %d, got %s%s", Version, describe(n), floatHint(n))
}

func (c *checker) tools(n *tnode) []Tool {
	if n.kind != tableNode {
		hint := ""
		if n.kind == arrayTablesNode {
			hint = " (write [tools.NAME], not [[tools]])"
		}
		c.errorf(n.line, "tools", "must be a table of tools, got %s%s", describe(n), hint)
		return nil
	}
	type seenTool struct {
		name string
		line int
	}
	seen := map[string]seenTool{}
	var tools []Tool
	for _, name := range n.order {
		child := n.keys[name]
		// MCP clients and humans treat these as the same name, so two tools
		// differing only this way would be confusable.
		t, ok := c.tool(name, child)
		if ok {
			tools = append(tools, t)
		}
		folded := foldToolName(name)
		if prev, dup := seen[folded]; dup {
			c.errorf(child.line, formatKey([]string{"tools", name}),
				"duplicate tool: same name as %s on line %d (names are compared ignoring case and '-' vs '_')",
				quoteShort(prev.name), prev.line)
		} else {
			seen[folded] = seenTool{name, child.line}
		}
	}
	return tools
}

// ValidName reports whether name is a valid name of a tool, a wrapped
// CLI, an import, an agent or an operator (a-z, 0-9, '_' and '-', up to
// 64, starting with a letter or digit): what a reader of an agent.toml it
// has not loaded (shell completion) may offer as one.
func ValidName(name string) bool { return toolNameRE.MatchString(name) }

// foldToolName is a tool's name as MCP clients and humans read it: case
// and '-' vs '_' do not tell two names apart.
func foldToolName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "-", "_")
}

// sameTool is the tool of tools whose name is name, or reads the same
// (foldToolName): tools, wrapped CLIs and imports share one namespace, so
// each must be told apart from all the others.
func sameTool(tools []Tool, name string) (Tool, bool) {
	f := foldToolName(name)
	for _, o := range tools {
		if foldToolName(o.Name) == f {
			return o, true
		}
	}
	return Tool{}, false
}

// wasmToolKeys are the keys of [tools.NAME]: toolKeys and reveal, which
// only a WebAssembly tool (maiden:tool@0.3.0's reveal) can use.
var wasmToolKeys = append(slices.Clone(toolKeys), "reveal", "verify", "registry_credential", "schema")

func (c *checker) tool(name string, n *tnode) (Tool, bool) {
	var reveal *tnode
	var revealPath []string
	var verify *tnode
	var verifyPath []string
	var regCred *tnode
	var regCredPath []string
	var schema *tnode
	var schemaPath []string
	t, ok := c.toolIn("tools", name, n, wasmToolKeys, func(_ *Tool, k string, v *tnode, kpath []string) bool {
		switch k {
		case "reveal":
			reveal, revealPath = v, slices.Clone(kpath)
		case "verify":
			verify, verifyPath = v, slices.Clone(kpath)
		case "registry_credential":
			regCred, regCredPath = v, slices.Clone(kpath)
		case "schema":
			schema, schemaPath = v, slices.Clone(kpath)
		default:
			return false
		}
		return true
	})
	if verify != nil {
		before := len(c.errs)
		spec := c.verifyTable(verify, verifyPath)
		switch {
		case len(c.errs) > before:
			ok = false
		case t.OCI == nil && c.ociWritten(n):
			// path was an oci:// reference refused already.
		case t.OCI == nil:
			c.errorf(verify.line, formatKey(verifyPath), "verify checks the signature of an oci:// component; path is a local file")
			ok = false
		default:
			t.OCI.Key, t.OCI.Keyless = spec.key, spec.keyless
		}
	}
	if regCred != nil {
		key := formatKey(regCredPath)
		if s, line, sok := c.str(regCred, key); sok {
			switch {
			case !secretNameRE.MatchString(s):
				c.errorf(line, key, "must be a secret's NAME (A-Z, 0-9, _), whose value (USER:PASSWORD, or a registry token) comes from MAIDEN_SECRET_NAME, got %s", quoteShort(s))
				ok = false
			case t.OCI == nil && c.ociWritten(n):
				// path was an oci:// reference refused already.
			case t.OCI == nil:
				c.errorf(line, key, "registry_credential logs in to the registry of an oci:// component; path is a local file")
				ok = false
			default:
				t.OCI.Credential = s
			}
		} else {
			ok = false
		}
	}
	if schema != nil && !c.schemaPin(schema, schemaPath, &t, c.ociWritten(n)) {
		ok = false
	}
	if ok && t.OCI != nil {
		before := len(c.errs)
		c.resolveOCI(&t, n.keys["path"].val.line)
		ok = len(c.errs) == before
	}
	if reveal != nil {
		// Checked after the loop: secrets may come after reveal.
		before := len(c.errs)
		t.Reveal = c.revealList(reveal, formatKey(revealPath), t.Secrets, fmt.Sprintf("the tool's secrets (tools.%s.secrets: %s): a tool may reveal only a secret it may use", name, listOrNone(t.Secrets)))
		ok = ok && len(c.errs) == before
	}
	return t, ok
}

// revealList reads a reveal list: secret names, each in within (the
// message says what within is when one is not).
func (c *checker) revealList(n *tnode, key string, within []string, notWithin string) []string {
	out := []string{}
	c.strElems(n, key, func(_ int, ekey string, e *tvalue) {
		if !slices.Contains(within, e.text) {
			c.errorf(e.line, ekey, "secret %s is not in %s", quoteShort(e.text), notWithin)
			return
		}
		if !slices.Contains(out, e.text) {
			out = append(out, e.text)
		}
	})
	return out
}

// toolIn reads a tool-like table under section ("tools", "clis"): the keys
// every kind of tool shares, and through extra (which reports whether it
// took the key) the section's own; known lists them for messages.
func (c *checker) toolIn(section, name string, n *tnode, known []string, extra func(t *Tool, k string, v *tnode, kpath []string) bool) (Tool, bool) {
	path := []string{section, name}
	key := formatKey(path)
	before := len(c.errs)
	if !toolNameRE.MatchString(name) {
		c.errorf(n.line, key, "invalid tool name %s: must be 1 to %d characters of a-z, 0-9, '_' and '-', starting with a letter or digit",
			quoteShort(name), MaxToolNameLen)
	}
	if n.kind != tableNode {
		c.errorf(n.line, key, "must be a table, got %s", describe(n))
		return Tool{}, false
	}
	t := Tool{
		Name:                 name,
		Line:                 n.line,
		Timeout:              DefaultTimeout,
		MemoryBytes:          DefaultMemoryMB << 20,
		HTTPMaxResponseBytes: DefaultMaxResponseBytes,
	}
	for _, k := range n.order {
		v := n.keys[k]
		kpath := append(path[:2:2], k)
		kkey := formatKey(kpath)
		switch k {
		case "path":
			if s, line, ok := c.str(v, kkey); ok && section == "tools" && strings.HasPrefix(s, oci.Scheme) {
				c.ociPath(line, kkey, s, &t)
			} else if ok {
				if p, ok := c.regularFile(line, kkey, s); ok {
					t.Path = p
				}
			}
		case "timeout_ms":
			if ms, ok := c.intKey(v, kkey, MinTimeout.Milliseconds(), MaxTimeout.Milliseconds()); ok {
				t.Timeout = time.Duration(ms) * time.Millisecond
			}
		case "memory_mb":
			if mb, ok := c.intKey(v, kkey, MinMemoryMB, MaxMemoryMB); ok {
				t.MemoryBytes = uint64(mb) << 20
			}
		case "http_max_response_bytes":
			if b, ok := c.intKey(v, kkey, MinMaxResponseBytes, MaxMaxResponseBytes); ok {
				t.HTTPMaxResponseBytes = b
			}
		case "http_allow":
			t.HTTPAllow = c.hostPatterns(v, kkey)
		case "secrets":
			t.Secrets = c.secrets(v, kkey)
		case "http_ports":
			t.HTTPPorts = c.ports(v, kkey)
		case "http_allow_cidrs":
			t.HTTPAllowCIDRs = c.cidrs(v, kkey)
		case "http_ca_files":
			t.HTTPCAFiles = c.caFiles(v, kkey)
		case "title":
			t.Title = c.title(v, kkey)
		case "annotations":
			t.Annotations = c.annotations(v, kpath)
		case "middleware":
			t.Middleware = c.middlewareKey(v, kpath[:len(kpath)-1])
		case "middleware_mode":
			t.MiddlewareMode = c.middlewareMode(v, kkey)
		case "cost":
			if n, ok := c.intKey(v, kkey, 1, MaxCost); ok {
				t.Cost = n
			}
		case "fs":
			if section != "tools" {
				// A wrapped CLI's files are its read_paths and write_paths.
				c.unknownKey(v, kpath, known)
				break
			}
			t.FS = c.fsAccess(v, kkey)
		default:
			if extra == nil || !extra(&t, k, v, kpath) {
				c.unknownKey(v, kpath, known)
			}
		}
	}
	if _, ok := n.keys["path"]; !ok && c.complete {
		c.errorf(n.line, key+".path", "required key is missing")
	}
	return t, len(c.errs) == before
}

// title checks a tool's display title: printable text of at most
// MaxTitleLen characters.
func (c *checker) title(n *tnode, key string) string {
	s, line, ok := c.str(n, key)
	if !ok {
		return ""
	}
	if n := utf8.RuneCountInString(s); n > MaxTitleLen {
		c.errorf(line, key, "must be at most %d characters, got %d", MaxTitleLen, n)
		return ""
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			c.errorf(line, key, "must be printable text, but contains %q", r)
			return ""
		}
	}
	return s
}

// annotations reads the operator's overrides of the MCP hints maiden
// derives from a tool's policy.
func (c *checker) annotations(n *tnode, path []string) Annotations {
	var a Annotations
	key := formatKey(path)
	if n.kind != tableNode {
		c.errorf(n.line, key, "must be a table such as { read_only = true }, got %s", describe(n))
		return a
	}
	for _, k := range n.order {
		v := n.keys[k]
		kpath := append(path[:len(path):len(path)], k)
		var dst **bool
		switch k {
		case "read_only":
			dst = &a.ReadOnly
		case "destructive":
			dst = &a.Destructive
		case "idempotent":
			dst = &a.Idempotent
		case "open_world":
			dst = &a.OpenWorld
		default:
			c.unknownKey(v, kpath, annotationKeys)
			continue
		}
		if v.kind != valueNode || v.val.kind != unstable.Bool {
			c.errorf(v.line, formatKey(kpath), "must be true or false, got %s", describe(v))
			continue
		}
		b := v.val.text == "true"
		*dst = &b
	}
	return a
}

func (c *checker) unknownKey(n *tnode, path []string, known []string) {
	name := path[len(path)-1]
	if s := suggest(name, known); s != "" {
		c.errorf(n.line, formatKey(path), "unknown key (did you mean %q?)", s)
		return
	}
	c.errorf(n.line, formatKey(path), "unknown key; valid keys here: %s", strings.Join(known, ", "))
}

// suggest returns the known key closest to name, if it is close enough to be
// a plausible typo.
func suggest(name string, known []string) string {
	best, bestDist := "", math.MaxInt
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist <= 2 && bestDist < len(best)/2 {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	if len(a) > 64 {
		return math.MaxInt // not a typo of any key; avoid quadratic work on junk
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// str returns a non-empty string key's value and line.
func (c *checker) str(n *tnode, key string) (string, int, bool) {
	if n.kind != valueNode || n.val.kind != unstable.String {
		c.errorf(n.line, key, "must be a string, got %s", describe(n))
		return "", 0, false
	}
	if n.val.text == "" {
		c.errorf(n.val.line, key, "must not be empty")
		return "", 0, false
	}
	return n.val.text, n.val.line, true
}

func (c *checker) intKey(n *tnode, key string, lo, hi int64) (int64, bool) {
	if n.kind != valueNode {
		c.errorf(n.line, key, "must be an integer in %d..%d, got %s", lo, hi, describe(n))
		return 0, false
	}
	return c.intValue(n.val, key, lo, hi)
}

func (c *checker) intValue(v *tvalue, key string, lo, hi int64) (int64, bool) {
	if v.kind == unstable.Integer {
		if x, err := parseInt(v.text); err == nil && x >= lo && x <= hi {
			return x, true
		}
		c.errorf(v.line, key, "must be an integer in %d..%d, got %s", lo, hi, v.text)
		return 0, false
	}
	c.errorf(v.line, key, "must be an integer in %d..%d, got %s%s", lo, hi, describeValue(v), floatValueHint(v))
	return 0, false
}

func floatHint(n *tnode) string {
	if n.kind != valueNode {
		return ""
	}
	return floatValueHint(n.val)
}

// floatValueHint tells people who wrote 64.0 or 1e3 what to write instead,
// since TOML keeps the two types apart even when the value is whole.
func floatValueHint(v *tvalue) string {
	if v.kind != unstable.Float {
		return ""
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(v.text, "_", ""), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return ""
	}
	return fmt.Sprintf(" (write it as %d: floats are not allowed)", int64(f))
}

// list returns the elements of an array key.
func (c *checker) list(n *tnode, key, of string) ([]*tvalue, bool) {
	if n.kind != valueNode || n.val.kind != unstable.Array {
		c.errorf(n.line, key, "must be an array of %s, got %s", of, describe(n))
		return nil, false
	}
	return n.val.elems, true
}

// strElems returns the string elements of an array key, reporting the others.
// Element i is reported under key "name[i]".
func (c *checker) strElems(n *tnode, key string, fn func(i int, key string, v *tvalue)) {
	elems, ok := c.list(n, key, "strings")
	if !ok {
		return
	}
	for i, v := range elems {
		ekey := fmt.Sprintf("%s[%d]", key, i)
		if v.kind != unstable.String {
			c.errorf(v.line, ekey, "must be a string, got %s", describeValue(v))
			continue
		}
		fn(i, ekey, v)
	}
}

func (c *checker) hostPatterns(n *tnode, key string) []string {
	var out []string
	first := map[string]int{}
	c.strElems(n, key, func(i int, ekey string, v *tvalue) {
		p, err := NormalizeHostPattern(v.text)
		if err != nil {
			c.errorf(v.line, ekey, "%v", err)
			return
		}
		if j, dup := first[p]; dup {
			c.errorf(v.line, ekey, "duplicate entry %s (same as [%d])", quoteShort(p), j)
			return
		}
		first[p] = i
		out = append(out, p)
	})
	return out
}

func (c *checker) secrets(n *tnode, key string) []string {
	var out []string
	first := map[string]int{}
	c.strElems(n, key, func(i int, ekey string, v *tvalue) {
		if !secretNameRE.MatchString(v.text) {
			c.errorf(v.line, ekey, "invalid secret name %s: must be 1 to %d characters of A-Z, 0-9 and '_', starting with a letter",
				quoteShort(v.text), MaxSecretNameLen)
			return
		}
		if j, dup := first[v.text]; dup {
			c.errorf(v.line, ekey, "duplicate entry %q (same as [%d])", v.text, j)
			return
		}
		first[v.text] = i
		out = append(out, v.text)
	})
	return out
}

func (c *checker) ports(n *tnode, key string) []uint16 {
	elems, ok := c.list(n, key, "integers")
	if !ok {
		return nil
	}
	var out []uint16
	first := map[int64]int{}
	for i, v := range elems {
		ekey := fmt.Sprintf("%s[%d]", key, i)
		p, ok := c.intValue(v, ekey, 1, math.MaxUint16)
		if !ok {
			continue
		}
		if j, dup := first[p]; dup {
			c.errorf(v.line, ekey, "duplicate entry %d (same as [%d])", p, j)
			continue
		}
		first[p] = i
		out = append(out, uint16(p))
	}
	return out
}

func (c *checker) cidrs(n *tnode, key string) []netip.Prefix {
	var out []netip.Prefix
	first := map[netip.Prefix]int{}
	c.strElems(n, key, func(i int, ekey string, v *tvalue) {
		p, err := netip.ParsePrefix(v.text)
		if err != nil {
			c.errorf(v.line, ekey, "invalid address range %s: expected CIDR notation like \"10.0.0.0/8\" or \"fd00::/8\"", quoteShort(v.text))
			return
		}
		p = p.Masked()
		if j, dup := first[p]; dup {
			c.errorf(v.line, ekey, "duplicate entry %q (same as [%d])", p.String(), j)
			return
		}
		first[p] = i
		out = append(out, p)
	})
	return out
}

func (c *checker) caFiles(n *tnode, key string) []string {
	var out []string
	first := map[string]int{}
	c.strElems(n, key, func(i int, ekey string, v *tvalue) {
		if v.text == "" {
			c.errorf(v.line, ekey, "must not be empty")
			return
		}
		p, ok := c.regularFile(v.line, ekey, v.text)
		if !ok {
			return
		}
		if j, dup := first[p]; dup {
			c.errorf(v.line, ekey, "duplicate entry %s (same as [%d])", quoteShort(v.text), j)
			return
		}
		first[p] = i
		if c.checkCerts(v.line, ekey, v.text, p) {
			out = append(out, p)
		}
	})
	return out
}

// checkCerts makes sure a CA file holds certificates now, rather than when
// the first TLS handshake fails in production.
func (c *checker) checkCerts(line int, key, written, abs string) bool {
	data, err := c.files.readFile(abs)
	if err != nil {
		c.errorf(line, key, "cannot read %s: %s", quoteShort(written), pathErrText(err))
		return false
	}
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			c.errorf(line, key, "certificate %d in %s does not parse: %v", n, quoteShort(written), err)
			return false
		}
	}
	if n == 0 {
		c.errorf(line, key, "no PEM certificate (-----BEGIN CERTIFICATE-----) found in %s", quoteShort(written))
		return false
	}
	return true
}

// regularFile resolves a path from agent.toml against the config directory
// and checks that it names a regular file.
func (c *checker) regularFile(line int, key, written string) (string, bool) {
	p := written
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.dir, p)
	}
	p = filepath.Clean(p)
	mode, err := c.files.stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.errorf(line, key, "file not found: %s", quoteShort(written))
	case err != nil:
		c.errorf(line, key, "cannot access %s: %s", quoteShort(written), pathErrText(err))
	case mode.IsDir():
		c.errorf(line, key, "is a directory: %s", quoteShort(written))
	case !mode.IsRegular():
		c.errorf(line, key, "not a regular file: %s", quoteShort(written))
	default:
		return p, true
	}
	return "", false
}

// pathErrText drops the path from an *fs.PathError, which the message names
// already in the form the user wrote it.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
