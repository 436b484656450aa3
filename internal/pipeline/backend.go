package pipeline

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
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
	// resolve is exposure for a call of this kind (reads the call and
	// cfg; writes nothing: the policy stage writes what it returns into
	// cfg, agent, tool, policy, bindName, call.Input, builtinWallet): the
	// tool as the call's agent sees it, or ErrUnknownTool worded as for a
	// tool that does not exist, or a refusal it can explain (*ToolError).
	resolve(ctx context.Context, cfg *config.Config, call Call, at time.Time) (resolved, *ToolError, error)
	// parse reads the call's input before the cards decide on it (reads
	// tool, input; writes nothing: the parse stage writes what it returns
	// into cmd, rendered, opened, openErr, toolCmd): a command tool's
	// parsed command; JSON input is rendered by authorize. An input that
	// does not fit is a *ToolError (kind input).
	parse(ctx context.Context, inv *invocation) (parsed, *ToolError, error)
	// carded tells whether the agent's tool:invoke cards decide the call
	// (authorize); a card built-in is decided by its card:VERB grant and
	// the store's rules instead. Reads and writes nothing.
	carded() bool
	// credential is the secret the host itself attaches to every call
	// of t, outside the egress gate (an import's credential, sent to its
	// server), and who sends it ("import shop"), for the refusal: the
	// agent's cards must allow secret:use of it before the call goes on
	// (authorize, right after tool:invoke). "" for a kind whose secrets
	// the egress gate decides per request. Reads and writes nothing.
	credential(t *config.Tool) (name, sender string)
	// open loads the version that will run and checks the input against
	// it under the call's deadline (replaced: again, after the version
	// parse opened was replaced as it started). Reads cfg, tool, input,
	// opened, openErr, cmd, toolCmd; writes nothing: the load stage
	// (loadAndValidate) writes what it returns into opened, schema,
	// output, toolDigest, upstreamTool (and cmd, toolCmd on a replaced
	// version), then its refusal, and owns the retry.
	open(ctx context.Context, inv *invocation, replaced bool) (loaded, *ToolError, error)
	// run executes the call. Reads what resolve, parse and open wrote, the
	// call's input and callbacks, wallet, policy, secrets, preopens, budget,
	// the session; writes nothing (but the admission turn, given back
	// while request_sandbox_boundary waits for a human, as an approval's
	// wait does): the run stage writes what it returns into res and sess. sandbox.ErrStale: the version it was given was
	// replaced as it started (the load stage opens it again).
	run(ctx context.Context, inv *invocation) (ran, *ToolError, error)
	// reparse reads a middleware's rewritten input, decoded, as the
	// call's own (rendering, and the command for a command tool). Reads
	// tool and toolCmd; writes nothing.
	reparse(inv *invocation, doc any) ([]grant.Arg, *command.Invocation, error)
	// identity is the tool's code identity as it will run (reads tool,
	// opened, toolDigest), and approvalPolicy its effective policy (reads
	// cfg, agent, tool): what an approval is bound to (approvalbinding.go).
	// Neither writes.
	identity(inv *invocation) string
	approvalPolicy(inv *invocation) ApprovalPolicy

	// describe is what tools/list shows of the configured tool t (an
	// import: each of its tools); check is what Check reports of it.
	// A tool's own failure is in the ToolInfo or report; the error is
	// ctx's, ErrClosed, or maiden's own. No invocation.
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
	// files tells whether it is a file built-in (fs_read, fs_write,
	// fs_list), whose path the wallet's fs cards decide before it runs
	// (the session stage) and where it led as it runs (sessionbuiltins.go).
	files() bool
	// pooled tells whether its calls run in the sandbox's runner (a
	// worker of the pool), whose unproven tools' first calls admission
	// runs one at a time (backoff.go, firstCalls).
	pooled() bool
}

// resolved is what a backend's resolve exposes of a call, which the policy
// stage writes into the invocation.
type resolved struct {
	agent    string       // the call's agent: DefaultAgent when the configuration declares none
	tool     *config.Tool // as the agent's binding narrows it; never written through
	policy   *egress.Policy
	bindName string // the name the agent binds: the tool's, an import's NAME
	// input is the input the call goes on with: the call's (a built-in's
	// empty one is {}).
	input string
	// wallet is the wallet a built-in's visibility was decided on, which
	// its card operation acts with (nil for other kinds).
	wallet *cards.Wallet
}

// loaded is what a backend's open found, which the load stage writes into
// the invocation (each field only when set), before the refusal open
// returned with it if any: a refused call's record names what was found.
type loaded struct {
	// version is a WebAssembly tool's opened version, which runs; nil
	// keeps the one parse opened.
	version *sandbox.Tool
	schema  *inputSchema // the input schema the input was checked against
	output  *inputSchema // a declared output schema (checkOutput), or nil
	// digest is an import's upstream definition as the call found it
	// (its identity: approvals are bound to it), and upstreamTool the
	// tool's name upstream ("" when the import was retired since).
	digest       string
	upstreamTool string
	// cmd and toolCmd are a command tree's call as a replaced version
	// reads it (the same command: wasmBackend.sameCommand).
	cmd     *command.Invocation
	toolCmd *toolCommand
}

// ran is what a backend's run produced, which the run stage writes into
// the result: the output (a refusal or failure is run's *ToolError), the
// tool's logs (nil: none were kept), whether a wrapped CLI ran without
// confinement, and the call's session when run looked it up.
type ran struct {
	output     string
	logs       []LogEntry
	unconfined bool
	sess       *store.Session
}

// parsed is what a backend's parse read of the input, which the parse
// stage writes into the invocation.
type parsed struct {
	// cmd is a command tool's parsed call (its rendering is what the
	// cards see); nil for JSON input.
	cmd *command.Invocation
	// A WebAssembly tool's version opened to read its schema() (the one
	// that runs), or why it did not open (open reports it, after
	// authorization as always), and the command description the call was
	// parsed with.
	opened  *sandbox.Tool
	openErr error
	toolCmd *toolCommand
}

// resolveTool is exposure for a configured tool (any kind but a
// built-in): the tool as the call's agent's binding narrows it, and its
// egress policy (each tool's compiled policy for the configuration in
// force); bindName is the name the agent binds (an import's NAME for its
// NAME.TOOL), whose middleware the call gets. Both depend on the
// configuration alone: ex keeps what it found for each agent and tool a
// configuration exposes, so a call finds it without copying the tool or
// compiling anything (issue 23).
func resolveTool(ex *exposures, cfg *config.Config, call Call, bindName string) (resolved, *ToolError, error) {
	key := exposureKey{agent: call.Agent, tool: call.Tool, bindName: bindName}
	if r := ex.lookup(cfg, key); r != nil {
		out := *r
		out.input = call.Input
		return out, nil, nil
	}
	exp, err := expose(cfg, call.Agent, call.Tool)
	if err != nil {
		return resolved{}, nil, err
	}
	pol, err := exp.policy(ex.pols.Of(cfg))
	if err != nil {
		return resolved{}, &ToolError{Kind: KindConfig, Message: err.Error()}, nil
	}
	r := &resolved{agent: exp.agent, tool: &exp.tool, policy: pol, bindName: bindName}
	if bindName == call.Tool {
		// Not an import's NAME.TOOL: expose accepts any TOOL of a bound
		// import (whether the server offers it is known only at open),
		// so keeping those would let a caller grow the set with names.
		ex.keep(cfg, key, r)
	}
	out := *r
	out.input = call.Input
	return out, nil, nil
}

// exposures are what resolveTool found, for the configuration it last
// resolved a call of: by the call's agent, tool and bound name, the agent
// and narrowed tool that call runs as and the tool's egress policy (its
// input is each call's own). Only what a configuration exposes is kept (a
// refusal is worked out again each time), and not an import's tools
// (NAME.TOOL, any TOOL of which is exposed until open asks the server),
// so the set is bounded by the configuration's tools and bindings, never
// by what callers send; maxExposures bounds it besides. A set is replaced,
// never changed: a reader takes it without a lock.
type exposures struct {
	pols *callegress.Policies // each tool's compiled egress policy
	mu   sync.Mutex           // serializes keep
	cur  atomic.Pointer[exposureSet]
}

type exposureSet struct {
	cfg *config.Config
	m   map[exposureKey]*resolved
}

type exposureKey struct{ agent, tool, bindName string }

// maxExposures is the most views a set keeps: past it a call is resolved
// as without the cache (each keep copies the set).
const maxExposures = 4096

// lookup is what was kept for key under cfg, or nil.
func (e *exposures) lookup(cfg *config.Config, key exposureKey) *resolved {
	if s := e.cur.Load(); s != nil && s.cfg == cfg {
		return s.m[key]
	}
	return nil
}

// keep remembers r for key under cfg; a set of another configuration is
// dropped (the configuration in force changed).
func (e *exposures) keep(cfg *config.Config, key exposureKey, r *resolved) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.cur.Load()
	s := &exposureSet{cfg: cfg, m: map[exposureKey]*resolved{key: r}}
	if old != nil && old.cfg == cfg {
		if _, ok := old.m[key]; ok || len(old.m) >= maxExposures {
			return
		}
		maps.Copy(s.m, old.m)
	}
	e.cur.Store(s)
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

// kindsHolder is the kinds of the configuration in force (cur), made
// once per configuration (New, SetConfig) from the backends, which are
// built once (New: newBackends) and hold what they need of the Host, not
// the Host.
type kindsHolder struct {
	cur      atomic.Pointer[kinds]
	cfg      *atomic.Pointer[config.Config] // the configuration in force
	backends kindBackends
}

// of is cfg's kinds: the ones kept while cfg is in force, else made now.
func (h *kindsHolder) of(cfg *config.Config) *kinds {
	if k := h.cur.Load(); k != nil && k.cfg == cfg {
		return k
	}
	k := h.backends.kinds(cfg)
	if cfg == h.cfg.Load() {
		h.cur.Store(k)
	}
	return k
}

// set decides the kinds of cfg, the configuration now in force.
func (h *kindsHolder) set(cfg *config.Config) { h.cur.Store(h.backends.kinds(cfg)) }

// kindsOf is cfg's kinds (kindsHolder.of).
func (h *Host) kindsOf(cfg *config.Config) *kinds { return h.kinds.of(cfg) }

// kindBackends are the backends of the four kinds, built once (New) and
// shared by every configuration's kinds.
type kindBackends struct {
	wasm *wasmBackend
	cli  *cliBackend
	imp  *importBackend
	bi   *builtinDeps // each built-in's backend is made over these
}

// newBackends builds the backends, each holding what it needs of the
// Host, named here (a field, a function), never the Host itself
// (TestBackendsHoldNoHost, TestNoHostMethodValues).
func (h *Host) newBackends() kindBackends {
	st := &h.stateHolder
	ex := &exposures{pols: &h.pols}
	return kindBackends{
		wasm: &wasmBackend{
			runner: h.runner, schemas: &h.schemas, exposures: ex, gate: h.gate, observer: h.opts.Observer,
			trail: &h.trail, secrets: callSecrets{trail: &h.trail, lookup: h.lookupSecret}, crashes: &h.crashes,
		},
		cli: &cliBackend{
			exposures: ex, schemas: &h.schemas, gate: h.gate, probe: &h.probe, proxy: &h.proxy,
			lookupSecret: h.lookupSecret, trail: &h.trail, sessions: &h.sessions, log: h.log,
		},
		imp: &importBackend{
			exposures: ex, upstreams: &h.imports, pins: &h.pins, schemas: &h.schemas, gate: h.gate,
			lookupSecret: h.lookupSecret, log: h.log,
		},
		bi: &builtinDeps{
			state: st.get, wallet: st.wallet, sessions: &h.sessions, human: &h.human, gate: h.gate,
			lookupSecret: h.opts.LookupSecret, materials: &h.material, observer: h.opts.Observer, trail: &h.trail, log: h.log,
		},
	}
}

// kinds is the backend of each name of cfg.
func (b kindBackends) kinds(cfg *config.Config) *kinds {
	k := &kinds{cfg: cfg, byName: map[string]backend{}, imports: map[string]backend{}, unknown: b.wasm}
	for name, op := range builtins {
		k.byName[name] = &builtinBackend{deps: b.bi, name: name, op: op}
	}
	for _, t := range cfg.Tools() {
		switch {
		case t.CLI != nil:
			k.byName[t.Name] = b.cli
		case t.MCP != nil:
			k.byName[t.Name] = b.imp
			k.imports[t.Name] = b.imp
		default:
			k.byName[t.Name] = b.wasm // a [tools] entry of a built-in's name shadows it
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
