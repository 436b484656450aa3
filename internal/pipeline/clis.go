package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/callegress"
	"github.com/maiden-run/maiden/internal/clitool"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is wrapped CLIs ([clis.NAME], issue 13): an existing program
// described as a command tree (internal/command) goes through the same
// stages as a WebAssembly tool — exposure, cards (argument-level grants
// on the command's canonical rendering), middleware, approvals, the audit
// trail — and runs confined (internal/confine: Landlock, rlimits, its own
// process group killed at the deadline, capped output), with argv built
// only from the validated call's rendering: what was authorized is exactly
// what runs, and there is never a shell.

// cliBackend is the wrapped CLIs' backend. It holds what it needs of the
// Host (newBackends), not the Host.
type cliBackend struct {
	exposures *exposures    // each tool as exposed, and its compiled egress policy (resolveTool)
	schemas   *toolSchemas  // describe and check, as for a loaded component
	gate      *egress.Gate  // redaction; the secrets it holds (Check's warnings)
	probe     *probe        // the proof that confinement is in force
	proxy     *connectProxy // the CONNECT proxy, its only road out
	// lookupSecret resolves the secrets it gets as environment variables
	// (Host.lookupSecret).
	lookupSecret func(name string) (string, bool)
	trail        *callaudit.Trail // each CONNECT's record
	sessions     *session.Gate    // the call's session, whose boundary narrows its writable paths
	log          *slog.Logger
}

func (b *cliBackend) resolve(_ context.Context, cfg *config.Config, call Call, _ time.Time) (resolved, *ToolError, error) {
	return resolveTool(b.exposures, cfg, call, call.Tool)
}

func (b *cliBackend) carded() bool                { return true }
func (b *cliBackend) secretHandles() bool         { return false } // its secrets are environment variables (clitool.Env)
func (b *cliBackend) preopens() bool              { return false } // its paths are Landlock's (runCLI)
func (b *cliBackend) files() bool                 { return false }
func (b *cliBackend) pooled() bool                { return false } // its own confined process
func (b *cliBackend) confined(config.Tool) bool   { return true }
func (b *cliBackend) typedCommands(ToolInfo) bool { return true }

// credential: none the host attaches itself; the egress proxy asks
// secret:use of each CONNECT's (run).
func (b *cliBackend) credential(*config.Tool) (string, string) { return "", "" }

// parse reads a wrapped CLI's call with its command description: the
// input (MCP arguments shaped by the description's JSON Schema) must name
// a described command and fit it, or the call is kind input with the
// offending argument named. Its rendering is what cards, conditions and
// approvals see.
func (b *cliBackend) parse(_ context.Context, inv *invocation) (parsed, *ToolError, error) {
	v, err := inv.value()
	if err != nil {
		return parsed{}, nil, err
	}
	cmd, err := clitool.Spec(inv.tool.CLI).ParseValue(v)
	if err != nil {
		return parsed{}, &ToolError{Kind: KindInput, Message: inv.tool.Name + ": " + err.Error()}, nil
	}
	return parsed{cmd: cmd}, nil, nil
}

// open has nothing to load: parse validated the call against the
// description.
func (b *cliBackend) open(context.Context, *invocation, bool) (loaded, *ToolError, error) {
	return loaded{}, nil, nil
}

func (b *cliBackend) reparse(inv *invocation, doc any) ([]grant.Arg, *command.Invocation, error) {
	cmd, err := clitool.Spec(inv.tool.CLI).ParseValue(doc)
	if err != nil {
		return nil, nil, err
	}
	return cmd.Render(), cmd, nil
}

// identity is the SHA-256 of its program path and command configuration
// (the command description, working directory, environment, option style).
func (b *cliBackend) identity(inv *invocation) string {
	t := inv.tool
	spec, err := json.Marshal(t.CLI.Command)
	if err != nil {
		spec = []byte(t.CLI.Command.JSONSchema())
	}
	return "cli:" + digestOf(struct {
		Path     string
		Command  json.RawMessage
		Dir      string
		Env      []string
		Separate bool
	}{t.Path, spec, t.CLI.Dir, t.CLI.Env, t.CLI.SeparateValues})
}

func (b *cliBackend) approvalPolicy(inv *invocation) ApprovalPolicy {
	out, c := basePolicy(inv.cfg, *inv.tool), inv.tool.CLI
	out.ReadPaths, out.WritePaths, out.Unconfined, out.MaxOutputBytes = c.ReadPaths, c.WritePaths, c.Unconfined, c.MaxOutputBytes
	out.Env = envNames(c.Env)
	return out
}

func (b *cliBackend) describe(ctx context.Context, cfg *config.Config, t config.Tool) ([]ToolInfo, error) {
	return b.schemas.describeLoaded(ctx, cfg, t, cliInfo(t), nil)
}

func (b *cliBackend) check(ctx context.Context, t config.Tool) (LoadReport, error) {
	return b.schemas.checkLoaded(ctx, b.gate.HasSecret, t, cliInfo(t), nil)
}

func (b *cliBackend) commandSpec(_ context.Context, t config.Tool) (*command.Spec, error) {
	return t.CLI.Command, nil
}

// target is what the agent's cards must allow for this call, with the
// component it runs (component, wasm.go).
func (inv *invocation) target() grant.Target {
	var t grant.Target
	if inv.cmd != nil {
		t = inv.cmd.Target(inv.tool.Name)
	} else {
		t = grant.ToolTarget(inv.tool.Name, inv.rendered)
	}
	t.Component = inv.component()
	return t
}

// alwaysTarget is the standing approval that lets this call skip an
// approve layer.
func (inv *invocation) alwaysTarget() grant.Target {
	if inv.cmd != nil {
		return grant.AlwaysCommandTarget(inv.tool.Name, inv.cmd.Path(), inv.cmd.Render(), inv.cmd.Positionals())
	}
	return grant.AlwaysTarget(inv.tool.Name, inv.rendered)
}

// cliInfo is a wrapped CLI's description and input schema as tools/list
// shows them, from its command description.
func cliInfo(t config.Tool) sandbox.LoadInfo {
	desc, schema, digest := clitool.Describe(t)
	return sandbox.LoadInfo{Info: sandbox.Info{Description: desc, Schema: schema, World: sandbox.WorldTool}, Digest: digest}
}

// probe is the Host's proof that confinement is in force, run once, at the
// first wrapped CLI's call (or by Check): a confined child tries a
// forbidden read, write, connect, Fast Open send, listen, io_uring... (see
// confine.Probe). It fails closed.
type probe struct {
	once   sync.Once
	status confine.Status
	err    error
}

func (p *probe) confinement(ctx context.Context) (confine.Status, error) {
	p.once.Do(func() { p.status, p.err = proveOnce(context.WithoutCancel(ctx)) })
	return p.status, p.err
}

// proven is this process's successful probe. What confinement a run gets
// is the kernel's and this process's to give (Landlock's ABI, whether it
// may make a network namespace), which do not change while it runs, so
// every Host after the first that proved it (a configuration reloaded by
// serve, a test binary's hosts) takes the proof rather than start the
// probe's two processes again: each is this executable started again
// (BenchmarkProcessStart), and they were 64 of the 104 times the root
// package's tests started their own binary. A failure is not kept: the
// next Host probes again, and fails closed until a probe succeeds.
var proven struct {
	mu     sync.Mutex // held through a probe: one at a time
	ok     bool
	status confine.Status
}

// probeFunc is confine.Probe; tests count its calls.
var probeFunc = confine.Probe

func proveOnce(ctx context.Context) (confine.Status, error) {
	proven.mu.Lock()
	defer proven.mu.Unlock()
	if proven.ok {
		return proven.status, nil
	}
	st, err := probeFunc(ctx)
	if err == nil {
		proven.ok, proven.status = true, st
	}
	return st, err
}

// connectProxy is the Host's CONNECT proxy over its egress gate, started
// on first need, refused once the Host is closed.
type connectProxy struct {
	mu     sync.Mutex
	p      *egress.ConnectProxy
	gate   *egress.Gate
	closed *atomic.Bool // the Host's
}

// get is the proxy, started if need be.
func (c *connectProxy) get() (*egress.ConnectProxy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if c.p == nil {
		p, err := egress.NewConnectProxy(c.gate)
		if err != nil {
			return nil, err
		}
		c.p = p
	}
	return c.p, nil
}

func (c *connectProxy) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p != nil {
		c.p.Close()
		c.p = nil
	}
}

// tunnelRooms are the audit records' rooms a call's CONNECTs took
// (callaudit.Trail.Reserve), given back when the call ends: a tunnel the
// proxy never reported holds none after it.
type tunnelRooms struct {
	mu sync.Mutex
	ps []*callaudit.Pending
}

func (r *tunnelRooms) add(p *callaudit.Pending) {
	r.mu.Lock()
	r.ps = append(r.ps, p)
	r.mu.Unlock()
}

func (r *tunnelRooms) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.ps {
		p.Release()
	}
	r.ps = nil
}

// run runs a wrapped CLI's validated call (internal/clitool) once the
// host has decided its environment, paths and network.
func (b *cliBackend) run(ctx context.Context, inv *invocation) (ran, *ToolError, error) {
	t, cli := *inv.tool, inv.tool.CLI
	if _, err := b.probe.confinement(ctx); err != nil && !cli.Unconfined {
		return ran{}, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("%s: wrapped CLIs are refused because confinement is not in force here (%v); set unconfined = true in [clis.%s] to run it anyway", t.Name, err, t.Name)}, nil
	}
	env, err := clitool.Env(t, b.lookupSecret)
	if err != nil {
		return ran{}, &ToolError{Kind: KindDenied, Message: err.Error()}, nil
	}
	dir := cli.Dir
	if dir == "" {
		dir = inv.cfg.Dir()
	}
	// Its read_paths are named by their real path: confine refuses a run
	// with a symlink on one (the agent may have made it, writing its
	// parent through a CLI); the system's CA bundle, added here, may be
	// reached through links.
	readOnly, system, proxyPort := cli.ReadPaths, []string(nil), 0
	refusal := func() string { return "" } // the proxy's first refused CONNECT
	stopped := func() string { return "" } // the first tunnel the budget closed
	var payFailed atomic.Pointer[string]   // the store's first failure to spend a tunnel's bytes
	if len(t.HTTPAllow) > 0 {
		// Its only road out: maiden's CONNECT proxy on loopback, which
		// applies the same allowlist, address rules and network cards as
		// http-fetch and audits each tunnel; Landlock lets it connect to
		// that port only, seccomp refuses the connects and binds Landlock
		// does not see (Fast Open, listen), and where maiden may create
		// one, a network namespace holds nothing but that proxy.
		proxy, err := b.proxy.get()
		if err != nil {
			return ran{}, nil, fmt.Errorf("%s: the egress proxy: %w", t.Name, err)
		}
		var sess *egress.ProxySession
		if audited := inv.audited(); audited || inv.tr != nil {
			// Each CONNECT a record of the trail, with the decisions of
			// the agent's cards about it (as an http-fetch's), and a span.
			var held tunnelRooms
			defer held.release()
			sess, err = proxy.OpenEach(inv.policy, inv.agent, func() (egress.Authorizer, func(egress.Tunnel)) {
				noted := &decisions{}
				authz := walletAuthorizer(inv.wallet)
				if audited && inv.wallet != nil {
					authz = callegress.Noting(inv.wallet, noted.add)
				}
				// The tunnel's record's room is taken before the proxy
				// dials: a CONNECT its record could not follow is refused
				// (as an http-fetch's, callaudit.Fetch) by the last check
				// before the dial, with the rule audit-trail; the room of
				// a tunnel never reported is given back when the call
				// ends.
				var pending *callaudit.Pending
				if audited {
					p, err := b.trail.Reserve(ctx, inv.auditCall(), callaudit.TunnelRecordSize)
					if err != nil {
						reason := callaudit.RefusalReason("tunnel", err)
						authz = func(string, int, string) error {
							return &egress.Refusal{Rule: callaudit.RuleAuditTrail, Reason: reason}
						}
					} else {
						pending = p
						held.add(p)
					}
				}
				end := inv.connectSpan(ctx)
				return authz, func(t egress.Tunnel) {
					end(t.Host, t.Port, t.Allowed, t.Rule)
					if audited {
						// The proxy redacted the host and reason (the CLI
						// holds its secrets' values); the cards' decisions
						// quote the same host.
						body := callaudit.TunnelBody(t, noted.list())
						redactDecisions(body, b.gate.RedactorIfAny(inv.policy))
						if pending != nil {
							pending.Event(ctx, store.AuditFetch, body)
						} else {
							auditEvent(ctx, b.trail, inv, store.AuditFetch, body)
						}
					}
				}
			})
		} else {
			sess, err = proxy.Open(inv.policy, walletAuthorizer(inv.wallet), inv.agent)
		}
		if err != nil {
			return ran{}, nil, fmt.Errorf("%s: the egress proxy: %w", t.Name, err)
		}
		if inv.budget.LimitsBytes() {
			// Its tunnels pay bytes_out before they send, as a tool's
			// http-fetches do: one that cannot pay is closed, and the
			// budget's refusal is the session's. One the store could not
			// spend for is closed too, and the call is the store's
			// failure (as an import's), not a spent budget.
			sess.SetPay(func(n int64) error {
				refusal, failed := inv.budget.Pay(ctx, n)
				if failed {
					payFailed.CompareAndSwap(nil, &refusal)
				}
				if refusal != "" {
					return errors.New(refusal)
				}
				return nil
			})
		}
		defer func() {
			sess.Close()
			// What its tunnels sent counts against the bytes_out budget of
			// the card that allowed the call (read once closed: no tunnel
			// sends more); what they paid and did not send is given back.
			inv.budget.Sent(sess.Sent())
		}()
		env = append(env, "HTTPS_PROXY="+sess.URL(), "https_proxy="+sess.URL())
		proxyPort = proxy.Port()
		refusal, stopped = sess.Refusal, sess.Stopped
		for _, p := range []string{"/etc/ssl/certs", "/usr/share/ca-certificates", "/etc/ssl/openssl.cnf"} {
			if _, err := os.Stat(p); err == nil {
				system = append(system, p) // the system's CA bundle, to verify the servers
			}
		}
	}
	var r ran
	// What it may write: its write_paths narrowed by the session's
	// boundary (an agent with a declared boundary) and the agent's
	// fs:write cards; the rest of them it may only read, those the
	// agent's fs:read cards allow: one they do not is left out of the
	// sandbox altogether (session.CardWritable).
	sc := inv.sessionCall()
	writable, lost, _, terr, err := b.sessions.CLIWritable(ctx, &sc)
	r.sess = sc.Sess
	if err != nil || terr != nil {
		return r, terr, err
	}
	readOnly = append(slices.Clone(readOnly), lost...)
	out, err := clitool.Run(ctx, clitool.Call{
		Tool: t, Cmd: inv.cmd, Dir: dir, Env: env, ReadOnly: readOnly, Writable: writable, SystemReadOnly: system, ProxyPort: proxyPort,
		Redact: b.gate.Redactor(inv.policy),
	})
	if err != nil {
		return r, nil, err
	}
	if out.NoNetNS {
		b.log.Warn("a wrapped CLI with network ran without its own network namespace", "tool", t.Name)
	}
	r.unconfined, r.logs = out.Unconfined, out.Logs
	if out.Failure != nil {
		if why := payFailed.Load(); why != nil && out.Failure.Kind == KindTool {
			return r, nil, fmt.Errorf("%w: %s: its tunnel was closed (the CLI then failed: %s)", ErrState, *why, out.Failure.Message)
		}
		if why := stopped(); why != "" && out.Failure.Kind == KindTool {
			// The CLI gave up after the proxy closed a tunnel that could
			// not pay for what it was sending.
			return r, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("its tunnel was closed: %s (the CLI then failed: %s)", why, out.Failure.Message)}, nil
		}
		if first := refusal(); first != "" && out.Failure.Kind == KindTool {
			// The CLI gave up after the proxy refused its CONNECT (curl:
			// "CONNECT tunnel failed, response 403"): the cause is the
			// policy, said with its rule, as for a refused http-fetch.
			return r, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("its CONNECT was refused: %s (the CLI then failed: %s)", first, out.Failure.Message)}, nil
		}
		return r, &ToolError{Kind: out.Failure.Kind, Message: out.Failure.Message}, nil
	}
	r.output = out.Output
	return r, nil, nil
}

// secretLookup is how the host resolves a secret by name:
// Options.LookupSecret, else the environment's MAIDEN_SECRET_NAME
// (Host.lookupSecret, given to the backends that need it).
func secretLookup(o Options) func(name string) (string, bool) {
	if o.LookupSecret != nil {
		return o.LookupSecret
	}
	return func(name string) (string, bool) { return os.LookupEnv("MAIDEN_SECRET_" + name) }
}
