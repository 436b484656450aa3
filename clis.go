package maiden

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// This file is wrapped CLIs ([clis.NAME], issue 13): an existing program
// described as a command tree (internal/command) goes through the same
// stages as a WebAssembly tool — exposure, cards (argument-level grants
// on the command's canonical rendering), middleware, approvals, the audit
// trail — and runs confined (internal/confine: Landlock, rlimits, its own
// process group killed at the deadline, capped output), with argv built
// only from the validated call's rendering: what was authorized is exactly
// what runs, and there is never a shell.

// cliBackend is the wrapped CLIs' backend.
type cliBackend struct{ h *Host }

func (b *cliBackend) resolve(_ context.Context, cfg *config.Config, inv *invocation) error {
	return b.h.resolveTool(cfg, inv, inv.call.Tool)
}

func (b *cliBackend) carded() bool                { return true }
func (b *cliBackend) secretHandles() bool         { return false } // its secrets are environment variables (cliEnv)
func (b *cliBackend) preopens() bool              { return false } // its paths are Landlock's (runCLI)
func (b *cliBackend) confined(config.Tool) bool   { return true }
func (b *cliBackend) typedCommands(ToolInfo) bool { return true }

// parse reads a wrapped CLI's call with its command description: the
// input (MCP arguments shaped by the description's JSON Schema) must name
// a described command and fit it, or the call is kind input with the
// offending argument named. Its rendering is what cards, conditions and
// approvals see.
func (b *cliBackend) parse(_ context.Context, inv *invocation) error {
	cmd, err := cliSpec(inv.tool.CLI).ParseJSON([]byte(inv.call.Input))
	if err != nil {
		return inv.fail(KindInput, inv.tool.Name+": "+err.Error())
	}
	inv.cmd, inv.rendered, inv.renderedText = cmd, cmd.Render(), cmd.String()
	return nil
}

// open has nothing to load: parse validated the call against the
// description.
func (b *cliBackend) open(ctx context.Context, inv *invocation, next handler) error {
	return next(ctx, inv)
}

func (b *cliBackend) run(ctx context.Context, inv *invocation) error { return b.h.runCLI(ctx, inv) }

func (b *cliBackend) reparse(inv *invocation, input string) ([]grant.Arg, *command.Invocation, error) {
	cmd, err := cliSpec(inv.tool.CLI).ParseJSON([]byte(input))
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
	out, c := basePolicy(inv.cfg, inv.tool), inv.tool.CLI
	out.ReadPaths, out.WritePaths, out.Unconfined, out.MaxOutputBytes = c.ReadPaths, c.WritePaths, c.Unconfined, c.MaxOutputBytes
	out.Env = envNames(c.Env)
	return out
}

func (b *cliBackend) describe(ctx context.Context, cfg *config.Config, t config.Tool) ([]ToolInfo, error) {
	return b.h.describeLoaded(ctx, cfg, t, cliInfo(t), nil)
}

func (b *cliBackend) check(ctx context.Context, t config.Tool) (LoadReport, error) {
	return b.h.checkLoaded(ctx, t, cliInfo(t), nil)
}

func (b *cliBackend) commandSpec(_ context.Context, t config.Tool) (*command.Spec, error) {
	return t.CLI.Command, nil
}

// cliSpec is the CLI's description with its options' environment
// fallbacks read from the CLI's own environment (agent.toml's env), so
// that a value taken from the environment is part of the rendering the
// cards decide on; those variables are then not passed (cliEnv), the
// value reaching the program only as the argument that was authorized.
func cliSpec(cli *config.CLI) *command.Spec {
	if len(cli.Command.EnvNames()) == 0 {
		return cli.Command
	}
	return cli.Command.WithEnv(func(name string) (string, bool) {
		for _, e := range cli.Env {
			k, v, set := strings.Cut(e, "=")
			if k != name {
				continue
			}
			if set {
				return v, true
			}
			return os.LookupEnv(name)
		}
		return "", false
	})
}

// target is what the agent's cards must allow for this call.
func (inv *invocation) target() grant.Target {
	if inv.cmd != nil {
		return inv.cmd.Target(inv.tool.Name)
	}
	return grant.ToolTarget(inv.tool.Name, inv.rendered)
}

// alwaysTarget is the standing approval that lets this call skip an
// approve layer.
func (inv *invocation) alwaysTarget() grant.Target {
	if inv.cmd != nil {
		return grant.AlwaysCommandTarget(inv.tool.Name, inv.cmd.Path(), inv.cmd.Render(), inv.cmd.Positionals())
	}
	return grant.AlwaysTarget(inv.tool.Name, inv.rendered)
}

// reparse reads a middleware's rewritten input as the call's own.
func (inv *invocation) reparse(input string) (args []grant.Arg, cmd *command.Invocation, err error) {
	return inv.backend.reparse(inv, input)
}

// cliInfo is a wrapped CLI's description and input schema as tools/list
// shows them, from its command description.
func cliInfo(t config.Tool) sandbox.LoadInfo {
	spec := t.CLI.Command
	schema := spec.JSONSchema()
	sum := sha256.Sum256([]byte("cli\x00" + t.Path + "\x00" + schema))
	desc := spec.Root.Summary
	if spec.Root.Description != "" {
		desc = strings.TrimSpace(desc + "\n\n" + spec.Root.Description)
	}
	if desc == "" {
		desc = "Runs " + t.Path + " (a wrapped CLI)."
	}
	return sandbox.LoadInfo{Info: sandbox.Info{Description: desc, Schema: schema, World: sandbox.WorldTool}, Digest: "cli:" + hex.EncodeToString(sum[:])}
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

func (h *Host) confinement(ctx context.Context) (confine.Status, error) {
	h.probe.once.Do(func() { h.probe.status, h.probe.err = confine.Probe(context.WithoutCancel(ctx)) })
	return h.probe.status, h.probe.err
}

// connectProxy is the Host's CONNECT proxy, started on first need.
func (h *Host) connectProxy() (*egress.ConnectProxy, error) {
	h.proxyMu.Lock()
	defer h.proxyMu.Unlock()
	if h.closed.Load() {
		return nil, ErrClosed
	}
	if h.proxy == nil {
		p, err := egress.NewConnectProxy(h.gate)
		if err != nil {
			return nil, err
		}
		h.proxy = p
	}
	return h.proxy, nil
}

func (h *Host) closeProxy() {
	h.proxyMu.Lock()
	defer h.proxyMu.Unlock()
	if h.proxy != nil {
		h.proxy.Close()
		h.proxy = nil
	}
}

// runCLI runs a wrapped CLI's validated call.
func (h *Host) runCLI(ctx context.Context, inv *invocation) error {
	t, cli := inv.tool, inv.tool.CLI
	if _, err := h.confinement(ctx); err != nil && !cli.Unconfined {
		return inv.fail(KindDenied, fmt.Sprintf("%s: wrapped CLIs are refused because confinement is not in force here (%v); set unconfined = true in [clis.%s] to run it anyway", t.Name, err, t.Name))
	}
	env, err := h.cliEnv(t)
	if err != nil {
		return inv.fail(KindDenied, err.Error())
	}
	dir := cli.Dir
	if dir == "" {
		dir = inv.cfg.Dir()
	}
	readOnly, proxyPort := cli.ReadPaths, 0
	if len(t.HTTPAllow) > 0 {
		// Its only road out: maiden's CONNECT proxy on loopback, which
		// applies the same allowlist, address rules and network cards as
		// http-fetch and audits each tunnel; Landlock lets it connect to
		// that port only, seccomp refuses the connects and binds Landlock
		// does not see (Fast Open, listen), and where maiden may create
		// one, a network namespace holds nothing but that proxy.
		proxy, err := h.connectProxy()
		if err != nil {
			return fmt.Errorf("%s: the egress proxy: %w", t.Name, err)
		}
		sess, err := proxy.Open(inv.policy, walletAuthorizer(inv.wallet), inv.agent)
		if err != nil {
			return fmt.Errorf("%s: the egress proxy: %w", t.Name, err)
		}
		defer sess.Close()
		env = append(env, "HTTPS_PROXY="+sess.URL(), "https_proxy="+sess.URL())
		proxyPort = proxy.Port()
		for _, p := range []string{"/etc/ssl/certs", "/usr/share/ca-certificates", "/etc/ssl/openssl.cnf"} {
			if _, err := os.Stat(p); err == nil {
				readOnly = append(slices.Clone(readOnly), p) // the system's CA bundle, to verify the servers
			}
		}
	}
	var stdin []byte
	if s, ok := inv.cmd.Stdin(); ok {
		stdin = []byte(s)
	}
	style := command.StyleEquals
	if cli.SeparateValues {
		style = command.StyleSeparate
	}
	writable := cli.WritePaths
	if a, ok := inv.cfg.Agent(inv.agent); ok && a.BoundaryLine > 0 && len(writable) > 0 {
		// An agent with a declared boundary: its sessions' boundary
		// narrows what the CLI may write.
		s, terr, err := h.session(ctx, inv)
		if err != nil || terr != nil {
			if terr != nil {
				inv.res.Error = terr
			}
			return err
		}
		var lost []string
		writable, lost = narrowWritable(writable, s.Boundary)
		readOnly = append(slices.Clone(readOnly), lost...)
	}
	res, err := confine.Run(ctx, confine.Spec{
		Path: t.Path, Args: inv.cmd.Argv(style), Dir: dir, Env: env, Stdin: stdin,
		ReadOnly: readOnly, Writable: writable, ProxyPort: proxyPort, Timeout: t.Timeout, MaxOutput: cli.MaxOutputBytes,
		Limits: confine.Limits{Memory: t.MemoryBytes}, Unconfined: cli.Unconfined,
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, confine.ErrNotEnforced) {
			return inv.fail(KindDenied, fmt.Sprintf("%s: %v", t.Name, err))
		}
		return inv.fail(KindTool, fmt.Sprintf("%s: could not run %s: %v", t.Name, t.Path, err))
	}
	redact := h.gate.Redactor(inv.policy)
	stdout, stderr := redact(string(res.Stdout)), redact(string(res.Stderr))
	var logs []LogEntry
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if line != "" {
			logs = append(logs, LogEntry{Level: api.LevelInfo, Source: api.SourceStderr, Message: line})
		}
	}
	if res.StdoutDropped > 0 || res.StderrDropped > 0 {
		logs = append(logs, LogEntry{Level: api.LevelWarn, Source: api.SourceHost, Message: fmt.Sprintf("output over max_output_bytes (%d): %d bytes of stdout and %d of stderr dropped", cli.MaxOutputBytes, res.StdoutDropped, res.StderrDropped)})
	}
	if proxyPort != 0 && !res.NetNS && !res.Unconfined {
		// Landlock's per-port rule and the seccomp filter still hold, but
		// the proxy's port on another address of this host is reachable.
		logs = append(logs, LogEntry{Level: api.LevelWarn, Source: api.SourceHost, Message: "no network namespace for this run (the kernel refused one): only Landlock's proxy-port rule and seccomp confine its network"})
		h.log.Warn("a wrapped CLI with network ran without its own network namespace", "tool", t.Name)
	}
	if res.Unconfined {
		inv.res.Unconfined = true
		logs = append(logs, LogEntry{Level: api.LevelWarn, Source: api.SourceHost, Message: "unconfined: this ran without Landlock (unconfined = true in agent.toml)"})
	}
	if logs == nil {
		logs = []LogEntry{}
	}
	inv.res.Logs = logs
	switch {
	case res.TimedOut:
		return inv.fail(KindDeadline, fmt.Sprintf("%s ran past its %v timeout and was killed with its process group", t.Name, t.Timeout))
	case res.Signal != "":
		return inv.fail(KindTrap, fmt.Sprintf("%s was killed by %s", t.Name, res.Signal))
	case res.ExitCode != 0:
		msg := fmt.Sprintf("%s exited with status %d", t.Name, res.ExitCode)
		if e, ok := inv.cmd.Command().ErrorFor(res.ExitCode); ok {
			msg += " (" + e.Name + ")"
		}
		if tail := lastLine(stderr); tail != "" {
			msg += ": " + tail
		}
		return inv.fail(KindTool, msg)
	}
	inv.res.OK, inv.res.Output = true, stdout
	return nil
}

// cliEnv builds a wrapped CLI's environment: its allowlist (maiden's own
// values of the names it lists, or the values it sets) and its secrets by
// name (MAIDEN_SECRET_<NAME> or Options.LookupSecret); nothing else.
func (h *Host) cliEnv(t config.Tool) ([]string, error) {
	var env []string
	fallbacks := t.CLI.Command.EnvNames()
	for _, e := range t.CLI.Env {
		if name, _, _ := strings.Cut(e, "="); slices.Contains(fallbacks, name) {
			continue // rendered into argv, where the cards saw it
		}
		if strings.Contains(e, "=") {
			env = append(env, e)
		} else if v, ok := os.LookupEnv(e); ok {
			env = append(env, e+"="+v)
		}
	}
	for _, name := range t.Secrets {
		v, ok := h.lookupSecret(name)
		if !ok {
			return nil, fmt.Errorf("%s: secret %s has no value: set MAIDEN_SECRET_%s", t.Name, name, name)
		}
		env = append(env, name+"="+v)
	}
	return env, nil
}

func (h *Host) lookupSecret(name string) (string, bool) {
	if h.opts.LookupSecret != nil {
		return h.opts.LookupSecret(name)
	}
	return os.LookupEnv("MAIDEN_SECRET_" + name)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 512 {
		s = s[:512] + "..."
	}
	return s
}
