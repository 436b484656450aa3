package pipeline

import (
	"context"
	"sync/atomic"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/grant"
)

// A tool is one of four kinds, and each kind is one backend: a WebAssembly
// component (wasm.go; whether it takes JSON input or describes a command
// tree is its schema()'s answer, read from the version it opens:
// wasmcommand.go), a wrapped CLI (clis.go), a tool of an imported MCP
// server (imports.go), a built-in (builtins.go, sessionbuiltins.go,
// webfetch.go). The kind is decided once per configuration (kindsOf: a
// name → its backend); the call pipeline's stages, Tools, Check and
// CommandHelp call the backend's methods and never ask which kind it is.
// Every kind passes the same stages (pipeline.go): the differences are
// these methods, nothing else.
type backend interface {
	// resolve is exposure for a call of this kind: the call's agent, the
	// tool as the agent sees it (cfg, agent, tool, policy, bindName), or
	// ErrUnknownTool worded as for a tool that does not exist. A refusal
	// it can explain is inv.fail.
	resolve(ctx context.Context, cfg *config.Config, inv *invocation) error
	// parse reads the call's input before the cards decide on it: a
	// command tool's parsed command and its rendering (inv.cmd,
	// inv.rendered); JSON input is rendered by authorize. An input that
	// does not fit is inv.fail (kind input).
	parse(ctx context.Context, inv *invocation) error
	// carded tells whether the agent's tool:invoke cards decide the call
	// (authorize); a card built-in is decided by its card:VERB grant and
	// the store's rules instead.
	carded() bool
	// open loads the version that will run, checks the input against it
	// under the call's deadline, and runs next with it (again, on a version
	// replaced as it started).
	open(ctx context.Context, inv *invocation, next handler) error
	// run executes the call: inv.res gets the output or the failure.
	run(ctx context.Context, inv *invocation) error
	// reparse reads a middleware's rewritten input, decoded, as the
	// call's own (rendering, and the command for a command tool).
	reparse(inv *invocation, doc any) ([]grant.Arg, *command.Invocation, error)
	// identity is the tool's code identity as it will run, and
	// approvalPolicy its effective policy: what an approval is bound to
	// (approvalbinding.go).
	identity(inv *invocation) string
	approvalPolicy(inv *invocation) ApprovalPolicy

	// describe is what tools/list shows of the configured tool t (an
	// import: each of its tools); check is what Check reports of it.
	// A tool's own failure is in the ToolInfo or report; the error is
	// ctx's, ErrClosed, or maiden's own.
	describe(ctx context.Context, cfg *config.Config, t config.Tool) ([]ToolInfo, error)
	check(ctx context.Context, t config.Tool) (LoadReport, error)
	// confined tells whether t runs a program under confinement (a
	// wrapped CLI, a stdio MCP server), which Check proves first.
	confined(t config.Tool) bool
	// commandSpec is t's command description (CommandHelp), or
	// ErrNoCommands, or ErrUnknownTool for a kind without one.
	commandSpec(ctx context.Context, t config.Tool) (*command.Spec, error)
	// typedCommands tells whether a listed tool's calls are command words
	// and arguments rather than its schema's properties (GrantReach).
	typedCommands(info ToolInfo) bool

	// The host's resources a kind may receive: secret handles in its
	// input (secrets.go), the session's directories as WASI preopens
	// (the session stage, sessions.hold).
	secretHandles() bool
	preopens() bool
}

// kinds is the backend of every name of one configuration: its [tools],
// [clis] and [mcp] entries (an import's NAME.TOOL are its import's), and
// the built-ins no entry shadows.
type kinds struct {
	cfg     *config.Config
	byName  map[string]backend
	imports map[string]backend // by [mcp.NAME]
	// unknown answers a name that is none of them: exposure refuses it
	// (ErrUnknownTool, listing the agent's tools).
	unknown backend
}

// kindsOf is cfg's kinds, made once per configuration (New, SetConfig)
// and kept while it is in force.
func (h *Host) kindsOf(cfg *config.Config) *kinds {
	if k := h.kinds.Load(); k != nil && k.cfg == cfg {
		return k
	}
	k := h.newKinds(cfg)
	if cfg == h.cfg.Load() {
		h.kinds.Store(k)
	}
	return k
}

// setKinds decides the kinds of cfg, the configuration now in force.
func (h *Host) setKinds(cfg *config.Config) { h.kinds.Store(h.newKinds(cfg)) }

func (h *Host) newKinds(cfg *config.Config) *kinds {
	wasm, cli, imp := &wasmBackend{h: h}, &cliBackend{h: h}, &importBackend{h: h}
	k := &kinds{cfg: cfg, byName: map[string]backend{}, imports: map[string]backend{}, unknown: wasm}
	for name, op := range builtins {
		k.byName[name] = &builtinBackend{h: h, name: name, op: op}
	}
	for _, t := range cfg.Tools() {
		switch {
		case t.CLI != nil:
			k.byName[t.Name] = cli
		case t.MCP != nil:
			k.byName[t.Name] = imp
			k.imports[t.Name] = imp
		default:
			k.byName[t.Name] = wasm // a [tools] entry of a built-in's name shadows it
		}
	}
	return k
}

// of is the backend of a call's tool name.
func (k *kinds) of(name string) backend {
	if b, ok := k.byName[name]; ok {
		return b
	}
	if imp, _, ok := config.ImportOf(name); ok {
		if b, ok := k.imports[imp]; ok {
			return b
		}
	}
	return k.unknown
}

// reparse reads a middleware's rewritten input as the call's own.
func (inv *invocation) reparse(doc any) (args []grant.Arg, cmd *command.Invocation, err error) {
	return inv.backend.reparse(inv, doc)
}

// kindsHolder is the Host's kinds for the configuration in force.
type kindsHolder = atomic.Pointer[kinds]
