package api

import (
	"encoding/json"
	"time"
)

// This file is what maiden shows of a configured tool (Host.Tools, Check):
// its description, schemas, effective policy and hints.

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
	// Provenance is where an oci:// tool's component came from and the
	// hash of the definition it reports; nil for every other tool.
	Provenance *Provenance `json:"provenance,omitempty"`
	// Error is set when the tool cannot be served: its file cannot be
	// loaded, describe() or schema() fail, or the schema is not a usable
	// JSON Schema for an object.
	Error *ToolError `json:"error,omitempty"`
}

// Provenance is the chain behind a tool pulled from an OCI registry
// (docs/oci.md): the reference agent.toml pins, the component's manifest
// digest, the key that verified its signature, and its schema hash, which
// agent.toml's schema key pins.
type Provenance struct {
	Ref       string `json:"ref"`              // oci://REGISTRY/REPO[:TAG]@sha256:...
	Component string `json:"component"`        // the manifest digest
	Signer    string `json:"signer,omitempty"` // the verifying key's ID; "" when unsigned
	// Schema is the hash (sha256:...) of the definition the component
	// reports: its description, input schema as served and output schema
	// in a canonical JSON document. With SchemaPinned it is the one
	// agent.toml pins (a component reporting another is not served).
	Schema       string `json:"schema"`
	SchemaPinned bool   `json:"schema_pinned"`
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
	// Kind is how the host attaches the secret ("header", "basic", "hmac",
	// "sigv4", "mtls", "oauth2"); "" is a bearer token. Settings are the
	// kind's settings from agent.toml (a header's name, a token endpoint,
	// a client ID, scopes...), never a value. Both are part of what an
	// approval binds: a human who approved a bearer token to one host did
	// not approve a signing key, or a token endpoint.
	Kind     string            `json:"kind,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
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

// ToolReach is what a tool grant reaches of one tool, as the tool's input
// schema tells. A grant matches a call argument by argument (docs/cards.md),
// prohibiting grants as much as allowing ones, so a grant can name a tool
// and still match none of its calls: -deny 'tool:invoke greet' forbids only
// a call of greet without arguments, which greet's schema may refuse. The
// operator's CLI checks a prohibition with it before installing it.
type ToolReach struct {
	// Tool is the tool's name.
	Tool string
	// Command is set for a typed command (a wrapped CLI, or a WebAssembly
	// tool whose schema() is a command description): a grant matches its
	// command words exactly, its options, and its positionals after "--".
	Command bool
	// Never says why no call of Tool that its input schema accepts matches
	// the grant; "" when some may, or when the schema does not tell (a tool
	// that cannot be loaded, a typed command).
	Never string
	// Escapes describes an argument the schema accepts that the grant
	// neither names nor allows with "--..." ("--force", or "any argument
	// its input schema does not list"): a call that adds it is not
	// matched. "" when there is none or the grant ends with "--...".
	Escapes string
}
