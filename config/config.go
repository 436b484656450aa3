package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/oci"
)

// Version is the only agent.toml format version this package understands.
const Version = 1

// Defaults and limits for the per-tool knobs. The limits are inclusive; a
// value outside them is an error rather than being clamped, so a typo cannot
// silently grant more than intended.
const (
	// DefaultTimeout is a tool call's deadline when timeout_ms is omitted (5s).
	DefaultTimeout = 5 * time.Second
	// MinTimeout is the smallest accepted timeout_ms (1ms).
	MinTimeout = time.Millisecond
	// MaxTimeout is the largest accepted timeout_ms (600000, ten minutes).
	MaxTimeout = 10 * time.Minute

	// DefaultMemoryMB is a tool's linear-memory cap when memory_mb is
	// omitted (64 MiB).
	DefaultMemoryMB = 64
	// MinMemoryMB is the smallest accepted memory_mb.
	MinMemoryMB = 1
	// MaxMemoryMB is the largest accepted memory_mb (4 GiB, the wasm32 limit).
	MaxMemoryMB = 4096

	// DefaultMaxResponseBytes is the HTTP response body cap when
	// http_max_response_bytes is omitted (2 MiB).
	DefaultMaxResponseBytes = 2 << 20
	// MinMaxResponseBytes is the smallest accepted http_max_response_bytes.
	MinMaxResponseBytes = 1
	// MaxMaxResponseBytes is the largest accepted http_max_response_bytes
	// (64 MiB); the whole body is held in memory on its way to the tool.
	MaxMaxResponseBytes = 64 << 20

	// DefaultMaxInputBytes is the largest call input (a tools/call's
	// arguments, a CLI input, an embedder's Call.Input) when the top-level
	// max_input_bytes is omitted (1 MiB). Inputs are refused before they are
	// parsed: a 20 MB array of small numbers took 860 MB to parse.
	DefaultMaxInputBytes = 1 << 20
	// MinMaxInputBytes is the smallest accepted max_input_bytes (1 KiB).
	MinMaxInputBytes = 1 << 10
	// MaxMaxInputBytes is the largest accepted max_input_bytes (64 MiB).
	MaxMaxInputBytes = 64 << 20

	// HTTPSPort is the destination port every tool with an http_allow entry
	// may use; http_ports lists extra ones (default: none).
	HTTPSPort = 443

	// MaxToolNameLen is the longest tool name; MCP clients reject longer ones.
	MaxToolNameLen = 64
	// MaxSecretNameLen is the longest secret name.
	MaxSecretNameLen = 128
)

// Config is a validated agent.toml. It is immutable: accessors return copies.
type Config struct {
	file     string
	dir      string
	tools    []Tool // sorted by name, names unique
	maxInput int64
	// agents are sorted by name; empty means the implicit DefaultAgent.
	agents    []Agent
	statePath string // absolute; "" for the default
	stateURL  string // [state] url; "" for a SQLite file
	// secretDests are the [secrets.NAME] tables, sorted by name.
	secretDests []SecretDestination
	universal   []Middleware          // [[middleware]], in order
	components  []MiddlewareComponent // [middleware.NAME], by name
	operators   []Operator            // [operators.NAME], by name
	trace       Trace                 // [trace]
	requireSigs bool                  // require_signatures
	// layered: some call has a middleware layer (universal, a tool's or a
	// binding's). Without, Chain answers every call at once.
	layered bool
}

// MaxInputBytes returns the largest call input in bytes (max_input_bytes;
// DefaultMaxInputBytes if omitted). Every front end refuses larger inputs
// before parsing them.
func (c *Config) MaxInputBytes() int64 {
	if c.maxInput == 0 {
		return DefaultMaxInputBytes
	}
	return c.maxInput
}

// RequireSignatures reports require_signatures = true: every [tools.NAME]
// must be an oci:// component a key or keyless identity verifies (a file
// that says so and has another tool does not load).
func (c *Config) RequireSignatures() bool { return c.requireSigs }

// File returns the path of the configuration file as given to Load or Parse.
func (c *Config) File() string { return c.file }

// Dir returns the absolute directory relative paths were resolved against.
func (c *Config) Dir() string { return c.dir }

// Tools returns every tool sorted by name. The slice and everything in it is
// a fresh copy, so callers may modify it freely.
func (c *Config) Tools() []Tool {
	out := make([]Tool, len(c.tools))
	for i, t := range c.tools {
		out[i] = t.clone()
	}
	return out
}

// Tool returns a copy of the named tool.
func (c *Config) Tool(name string) (Tool, bool) {
	i, ok := slices.BinarySearchFunc(c.tools, name, func(t Tool, name string) int { return strings.Compare(t.Name, name) })
	if !ok {
		return Tool{}, false
	}
	return c.tools[i].clone(), true
}

// Tool is the policy for one tool. Every field has been validated and
// defaulted; slices are never shared with the Config it came from.
type Tool struct {
	Name                 string
	Path                 string         // absolute, cleaned path of the .wasm component
	Timeout              time.Duration  // per call
	MemoryBytes          uint64         // memory_mb << 20
	HTTPAllow            []string       // normalised host patterns (see NormalizeHostPattern); empty means no network
	Secrets              []string       // secret names the tool may ask the host to attach
	Reveal               []string       // secrets (within Secrets) whose value reveal (maiden:tool@0.3.0) may return, given a handle and a secret:reveal card
	HTTPPorts            []uint16       // allowed destination ports besides HTTPSPort
	HTTPAllowCIDRs       []netip.Prefix // masked; special-purpose ranges the operator opened explicitly
	HTTPCAFiles          []string       // absolute paths of extra CA bundles
	HTTPMaxResponseBytes int64
	Title                string      // shown by clients instead of the name; "" if not set
	Annotations          Annotations // the operator's overrides of the derived MCP hints
	// Middleware is the tool's own layers (middleware = [...]) and
	// MiddlewareMode how they merge with the universal ones ("" = append).
	Middleware     []Middleware
	MiddlewareMode string
	// CLI is set for a wrapped CLI ([clis.NAME]): Path is then the program.
	CLI *CLI
	// MCP is set for an imported MCP server ([mcp.NAME]): its tools are
	// NAME.TOOL, and Path is "".
	MCP *MCPImport
	// FS is a WebAssembly tool's filesystem policy (fs = "read" or
	// "write"; FSNone, no filesystem, when absent): see FSRead and FSWrite.
	FS string
	// Cost is what one call spends of a card's cost budget (the cost key,
	// 1..MaxCost); 0 when not declared, which CallCost reads as 1.
	Cost int64
	// OCI is set when path is an oci:// reference: Path is then the
	// verified component in the local store (see OCISource).
	OCI  *OCISource
	Line int // line of the tool's table header (or first key), for later messages
}

// CallCost is what one call of t spends of a card's cost budget
// (docs/cards.md, "Budgets"): its cost key, 1 when it declares none.
func (t Tool) CallCost() int64 {
	if t.Cost > 0 {
		return t.Cost
	}
	return 1
}

// Annotations are an operator's overrides of the hints maiden derives from a
// tool's policy for MCP clients (readOnlyHint, destructiveHint,
// idempotentHint, openWorldHint). A nil field keeps the derived value. They
// are hints for the client's user interface; they grant nothing.
type Annotations struct {
	ReadOnly    *bool
	Destructive *bool
	Idempotent  *bool
	OpenWorld   *bool
}

func (t Tool) clone() Tool {
	t.HTTPAllow = slices.Clone(t.HTTPAllow)
	t.Secrets = slices.Clone(t.Secrets)
	t.Reveal = slices.Clone(t.Reveal)
	t.HTTPPorts = slices.Clone(t.HTTPPorts)
	t.HTTPAllowCIDRs = slices.Clone(t.HTTPAllowCIDRs)
	t.HTTPCAFiles = slices.Clone(t.HTTPCAFiles)
	t.Annotations = t.Annotations.clone()
	t.Middleware = slices.Clone(t.Middleware)
	if t.OCI != nil {
		o := *t.OCI
		t.OCI = &o
	}
	return t
}

func (a Annotations) clone() Annotations {
	for _, p := range []**bool{&a.ReadOnly, &a.Destructive, &a.Idempotent, &a.OpenWorld} {
		if *p != nil {
			b := **p
			*p = &b
		}
	}
	return a
}

// Load reads and validates the configuration file at path. Relative paths in
// it are resolved against the file's directory. Only a regular file of at
// most MaxFileBytes is read (see ReadFile). On failure the error is an
// Errors holding every problem found.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path, MaxFileBytes)
	if err != nil {
		msg := "cannot read: " + pathErrText(err)
		if errors.Is(err, fs.ErrNotExist) {
			msg = "file not found"
		}
		return nil, Errors{{File: path, Msg: msg}}
	}
	return Parse(path, data, filepath.Dir(path))
}

// Parse validates configuration data as if read from file (used only in
// messages), resolving relative paths against dir. Referenced files must
// exist, exactly as with Load.
func Parse(file string, data []byte, dir string) (*Config, error) {
	return parse(file, data, dir, osFiles)
}

// fileSystem is the loader's only access to files other than agent.toml
// itself, so tests and fuzzing can run without real tool binaries.
type fileSystem struct {
	stat     func(name string) (fs.FileMode, error)
	readFile func(name string) ([]byte, error)
	// component loads a pinned oci:// component from the local store,
	// verified (with src's verify key or keyless policy when set); nil refuses every oci://
	// path.
	component func(r oci.Ref, src *OCISource) (oci.Component, error)
	// schema checks that the store holds the schema document pinned by
	// hash, unchanged; nil refuses every schema pin.
	schema func(hash string) error
}

var osFiles = fileSystem{
	stat: func(name string) (fs.FileMode, error) {
		fi, err := os.Stat(name)
		if err != nil {
			return 0, err
		}
		return fi.Mode(), nil
	},
	readFile:  func(name string) ([]byte, error) { return ReadFile(name, MaxFileBytes) },
	component: osComponent,
	schema:    osSchema,
}

func parse(file string, data []byte, dir string, files fileSystem) (*Config, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	} else {
		dir = filepath.Clean(dir)
	}
	doc, errs, truncated, complete := parseDocument(file, data)
	c := &checker{file: file, dir: dir, files: files, errs: errs, truncated: truncated, complete: complete, parseErrs: len(errs)}
	tools, agents := c.config(doc)
	if len(c.errs) > 0 {
		errs := c.errs
		slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
		if c.truncated || len(errs) > maxErrors {
			errs = errs[:min(len(errs), maxErrors)]
			last := errs[len(errs)-1].Line
			errs = append(errs, &Error{File: file, Line: last, Msg: fmt.Sprintf("too many problems; stopped after %d", maxErrors)})
		}
		return nil, errs
	}
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return &Config{file: file, dir: dir, tools: tools, maxInput: c.maxInput, agents: agents, statePath: c.statePath, stateURL: c.stateURL, secretDests: c.secretDests,
		universal: c.universal, components: c.components, operators: c.operators, trace: c.trace, requireSigs: c.requireSigs,
		layered: layered(c.universal, tools, agents)}, nil
}

// layered reports whether any call of a configuration has a middleware
// layer: universal ones, or a tool's or a binding's own.
func layered(universal []Middleware, tools []Tool, agents []Agent) bool {
	if len(universal) > 0 {
		return true
	}
	for _, t := range tools {
		if len(t.Middleware) > 0 {
			return true
		}
	}
	for _, a := range agents {
		for _, b := range a.Bindings {
			if len(b.Middleware) > 0 {
				return true
			}
		}
	}
	return false
}
