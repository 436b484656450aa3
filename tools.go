package maiden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/maiden-run/maiden/api"
	"net/netip"
	"strings"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/netguard"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// ToolInfo describes one configured tool: what it says about itself and the
// policy it runs under.
type ToolInfo struct {
	Name string `json:"name"`
	// Title is what clients may show instead of the name (agent.toml's
	// title); "" if not set.
	Title       string `json:"title,omitempty"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema text the tool's schema() returned
	// (for a tool whose schema() is a command description: that
	// description's JSON Schema projection).
	InputSchema string `json:"input_schema"`
	// OutputSchema is the JSON Schema of the tool's output, if it declares
	// one (maiden:tool@0.2.0's output-schema()); "" otherwise.
	OutputSchema string `json:"output_schema,omitempty"`
	// Digest is the SHA-256 of the component file: it changes exactly when
	// the tool's code does.
	Digest string `json:"digest,omitempty"`
	Policy Policy `json:"policy"`
	// Hints are the MCP tool annotations: derived from the policy, then
	// overridden by agent.toml's annotations table.
	Hints Hints `json:"hints"`
	// Error is set when the tool cannot be served: its file cannot be
	// loaded, describe() or schema() fail, or the schema is not a usable
	// JSON Schema for an object.
	Error *ToolError `json:"error,omitempty"`
}

// MarshalJSON writes the schemas as JSON values, not strings holding JSON
// (a schema that is not JSON stays a string, so nothing is lost).
func (t ToolInfo) MarshalJSON() ([]byte, error) {
	type plain ToolInfo
	return json.Marshal(struct {
		plain
		InputSchema  any `json:"input_schema"`
		OutputSchema any `json:"output_schema,omitempty"`
	}{plain(t), rawOrString(t.InputSchema), rawOrString(t.OutputSchema)})
}

func rawOrString(s string) any {
	switch {
	case s == "":
		return nil
	case json.Valid([]byte(s)):
		return json.RawMessage(s)
	}
	return s
}

// Policy is a tool's whole effective policy: its limits and every grant.
type Policy struct {
	Path      string   `json:"path"`
	TimeoutMS int64    `json:"timeout_ms"`
	MemoryMB  uint64   `json:"memory_mb"`
	HTTPAllow []string `json:"http_allow"`
	// HTTPPorts are the destination ports allowed besides 443.
	HTTPPorts []uint16 `json:"http_ports"`
	// HTTPAllowCIDRs are special-purpose address ranges opened to the tool.
	HTTPAllowCIDRs []string `json:"http_allow_cidrs"`
	// HTTPCAFiles are extra trust anchors for its TLS connections.
	HTTPCAFiles []string `json:"http_ca_files"`
	// HTTPMaxResponseBytes caps a decoded response body.
	HTTPMaxResponseBytes int64    `json:"http_max_response_bytes"`
	Secrets              []string `json:"secrets"`
	// SecretDestinations are where each of the tool's secrets that
	// agent.toml binds ([secrets.NAME]) may be sent; a secret not here may
	// go to any host the tool may reach.
	SecretDestinations map[string]SecretDestination `json:"secret_destinations,omitempty"`
}

// SecretDestination is where a secret may be attached: hosts, and if set,
// only these methods and paths under these prefixes.
type SecretDestination struct {
	Hosts        []string `json:"hosts"`
	Methods      []string `json:"methods,omitempty"`
	PathPrefixes []string `json:"path_prefixes,omitempty"`
}

// withDestinations adds cfg's secret bindings for the policy's secrets.
func (p Policy) withDestinations(cfg *config.Config) Policy {
	for _, name := range p.Secrets {
		if d, ok := cfg.SecretDestination(name); ok {
			if p.SecretDestinations == nil {
				p.SecretDestinations = map[string]SecretDestination{}
			}
			p.SecretDestinations[name] = SecretDestination{Hosts: d.Hosts, Methods: d.Methods, PathPrefixes: d.PathPrefixes}
		}
	}
	return p
}

// Hints are the behaviour hints MCP clients use to decide how careful to be
// with a tool (whether to ask the user first, say). They are derived from
// what the policy lets the tool do: with no network (tools have no
// filesystem) it cannot change the world outside the call, so it is
// read-only, not destructive, idempotent as far as the host can tell, and
// closed; with hosts allowed it reaches an open world and may change it. An
// operator overrides any of them per tool in agent.toml. They grant nothing.
type Hints struct {
	ReadOnly    bool `json:"read_only"`
	Destructive bool `json:"destructive"`
	Idempotent  bool `json:"idempotent"`
	OpenWorld   bool `json:"open_world"`
}

func hintsOf(t config.Tool) Hints {
	network := len(t.HTTPAllow) > 0
	writes := t.FS == config.FSWrite // the session's directories, writable where the boundary allows
	h := Hints{ReadOnly: !network && !writes, Destructive: network || writes, Idempotent: !network && !writes, OpenWorld: network}
	for _, o := range []struct {
		set *bool
		dst *bool
	}{
		{t.Annotations.ReadOnly, &h.ReadOnly},
		{t.Annotations.Destructive, &h.Destructive},
		{t.Annotations.Idempotent, &h.Idempotent},
		{t.Annotations.OpenWorld, &h.OpenWorld},
	} {
		if o.set != nil {
			*o.dst = *o.set
		}
	}
	return h
}

func policyOf(t config.Tool) Policy {
	p := Policy{
		Path:                 t.Path,
		TimeoutMS:            t.Timeout.Milliseconds(),
		MemoryMB:             t.MemoryBytes >> 20,
		HTTPAllow:            orEmpty(t.HTTPAllow),
		HTTPPorts:            orEmpty(t.HTTPPorts),
		HTTPAllowCIDRs:       []string{},
		HTTPCAFiles:          orEmpty(t.HTTPCAFiles),
		HTTPMaxResponseBytes: egressRules(t).MaxResponseBytes,
		Secrets:              orEmpty(t.Secrets),
	}
	if p.HTTPMaxResponseBytes == 0 {
		p.HTTPMaxResponseBytes = egress.DefaultMaxResponseBytes
	}
	for _, c := range t.HTTPAllowCIDRs {
		p.HTTPAllowCIDRs = append(p.HTTPAllowCIDRs, c.String())
	}
	return p
}

func orEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// Tools loads every configured tool (compiling it if needed) and returns
// what each says about itself, in name order. A tool that cannot be loaded
// is listed with its Error set. The error is ctx's when ctx ended,
// ErrClosed after Close, or a failure of maiden itself (a worker process
// that cannot be started), never a tool's.
func (h *Host) Tools(ctx context.Context) ([]ToolInfo, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	cfg := h.cfg.Load()
	k := h.kindsOf(cfg)
	var out []ToolInfo
	for _, t := range cfg.Tools() {
		infos, err := k.of(t.Name).describe(ctx, cfg, t)
		if err != nil {
			return nil, err
		}
		out = append(out, infos...)
	}
	return out, nil
}

// describeLoaded is the ToolInfo of a tool of one component (a WebAssembly
// tool; a wrapped CLI, from its description) as loaded: li, or why it
// could not be (err).
func (h *Host) describeLoaded(ctx context.Context, cfg *config.Config, t config.Tool, li sandbox.LoadInfo, err error) ([]ToolInfo, error) {
	info := ToolInfo{Name: t.Name, Title: t.Title, Policy: policyOf(t).withDestinations(cfg), Hints: hintsOf(t)}
	switch {
	case err == nil:
		info.Description, info.InputSchema, info.OutputSchema, info.Digest = li.Description, li.Schema, li.OutputSchema, li.Digest
		s := h.schemas.getTool(li.Digest, li.Schema)
		if s.cmd != nil {
			info.InputSchema = s.text // a command description's JSON Schema projection (wasmcommand.go)
		}
		if s.err != nil {
			info.Error = &ToolError{Kind: KindInvalid, Message: s.err.Error()}
		} else if err := h.outputSchemaErr(li); err != nil {
			info.Error = &ToolError{Kind: KindInvalid, Message: err.Error()}
		}
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, api.ErrClosed), errors.Is(err, api.ErrClosed):
		return nil, ErrClosed
	case errors.Is(err, sandbox.ErrInvalidTool):
		kind, msg := loadFailure(err)
		info.Error = &ToolError{Kind: kind, Message: msg}
	default:
		return nil, err
	}
	return []ToolInfo{info}, nil
}

// checkLoaded is Check's report of a tool of one component as loaded.
func (h *Host) checkLoaded(ctx context.Context, t config.Tool, li sandbox.LoadInfo, err error) (LoadReport, error) {
	if err != nil && ctx.Err() != nil {
		return LoadReport{}, ctx.Err()
	}
	if err == nil {
		err = h.schemas.getTool(li.Digest, li.Schema).err
	}
	if err == nil {
		err = h.outputSchemaErr(li)
	}
	return LoadReport{Tool: t.Name, Err: err, Cached: li.Cached, Compile: li.Compile, Warnings: policyWarnings(t, h.gate.HasSecret)}, nil
}

// outputSchemaErr says why a tool's declared output schema is unusable.
func (h *Host) outputSchemaErr(li sandbox.LoadInfo) error {
	if li.OutputSchema == "" {
		return nil
	}
	if err := h.outSchemas.get(li.Digest, li.OutputSchema).err; err != nil {
		return fmt.Errorf("output-schema(): %w", err)
	}
	return nil
}

// toolWorld refuses a component of another world (middleware) where a
// tool is expected.
func toolWorld(t *sandbox.Tool) error {
	if t.World != sandbox.WorldTool {
		return fmt.Errorf("%w: it is a %s component (maiden:%s world), not a tool: declare it as [middleware.NAME] and use it in [[middleware]]", sandbox.ErrInvalidTool, t.World, t.World)
	}
	return nil
}

// LoadReport is what Check found for one tool.
type LoadReport struct {
	Tool string
	// Err is nil when the tool loads: its component compiles, matches the
	// contract, describes itself, and its schema is a JSON Schema for an
	// object.
	Err error
	// Cached tells whether compiled code came from the disk cache.
	Cached  bool
	Compile time.Duration
	// Warnings are what will certainly fail or do nothing at call time
	// although the tool loads, each naming the agent.toml key (or the
	// variable) that changes it: a declared secret with no value, a network
	// key without http_allow, an address in http_allow the range rules
	// always refuse.
	Warnings []string
}

// policyWarnings finds what in t's policy will certainly fail or do nothing
// at call time. secret reports whether a secret has a value on this host.
func policyWarnings(t config.Tool, secret func(string) bool) []string {
	var w []string
	key := "tools." + t.Name + "."
	if len(t.HTTPAllow) == 0 {
		for _, k := range []struct {
			name string
			set  bool
		}{{"secrets", len(t.Secrets) > 0}, {"http_ports", len(t.HTTPPorts) > 0}, {"http_allow_cidrs", len(t.HTTPAllowCIDRs) > 0}, {"http_ca_files", len(t.HTTPCAFiles) > 0}} {
			if k.set {
				w = append(w, fmt.Sprintf("%s%s has no effect: the tool has no http_allow, so every http-fetch it makes is refused", key, k.name))
			}
		}
	}
	for _, name := range t.Secrets {
		if !secret(name) {
			w = append(w, fmt.Sprintf("%ssecrets: %s%s is not set here, so an http-fetch naming credential %s will be denied until it is", key, egress.SecretEnvPrefix, name, name))
		}
	}
	for _, host := range t.HTTPAllow {
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			addrs = []netip.Addr{a}
		} else if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			// Always loopback (RFC 6761), over either family.
			addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
		}
		var refused []netguard.Result
		for _, a := range addrs {
			if d := netguard.Check(a, t.HTTPAllowCIDRs); !d.Allow {
				refused = append(refused, d)
			}
		}
		if len(refused) > 0 && len(refused) == len(addrs) {
			w = append(w, fmt.Sprintf("%shttp_allow: %s will always be refused: %s; to allow it, add its range to http_allow_cidrs", key, host, refused[0].Reason))
		}
	}
	return w
}

// Check loads every tool and reports each one's fate, in name order. The
// error return is only for ctx.
func (h *Host) Check(ctx context.Context) ([]LoadReport, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	cfg := h.cfg.Load()
	k := h.kindsOf(cfg)
	var out []LoadReport
	for _, t := range cfg.Tools() {
		rep, err := k.of(t.Name).check(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	for _, t := range cfg.Tools() {
		if k.of(t.Name).confined(t) {
			// Wrapped CLIs and stdio imports run confined: prove it now.
			rep := LoadReport{Tool: "confinement"}
			if _, err := h.confinement(ctx); err != nil {
				rep.Err = err
			}
			out = append(out, rep)
			break
		}
	}
	for _, c := range cfg.MiddlewareComponents() {
		opened, err := h.runner.Open(ctx, c.Path, sandbox.Limits{Timeout: c.Timeout, Memory: c.MemoryBytes})
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rep := LoadReport{Tool: "middleware." + c.Name, Err: err}
		if err == nil {
			rep.Cached, rep.Compile = opened.Cached, opened.Compile
			if opened.World != sandbox.WorldMiddleware {
				rep.Err = fmt.Errorf("%w: %s is a %s component, not middleware (maiden:middleware world; build it from a maiden new middleware-go or middleware-js project)", sandbox.ErrInvalidTool, c.Path, opened.World)
			}
		}
		out = append(out, rep)
	}
	return out, nil
}
