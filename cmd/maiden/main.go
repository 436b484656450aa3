// Command maiden runs AI-agent tools as sandboxed WebAssembly components.
//
//	maiden check  [-config agent.toml]
//	maiden tools  [-config agent.toml] [-agent NAME] [-json]
//	maiden call   [-config agent.toml] [-agent NAME] [-json] TOOL [INPUT | -]
//	maiden serve  [-config agent.toml] [-http ADDR]
//	maiden agents token|ls|revoke-token ...
//	maiden cards  grant|derive|revoke|ls|show ...
//	maiden pending [ID] [-json]
//	maiden sessions ls [-agent NAME] [-json]
//	maiden sessions show ID [-json]
//	maiden sessions end ID
//	maiden approve ID [-always]
//	maiden deny   ID [-reason TEXT]
//	maiden audit  verify|tail|export|whatif ...
//	maiden operators token|ls|revoke-token ...
//	maiden state  check|migrate [-state FILE|URL] [-json]
//	maiden mcp    accept NAME [TOOL...] [-dry-run] [-json]
//	maiden new    go|js|js-command|middleware-go|middleware-js DIR [-add] [-config agent.toml]
//	maiden build  [-o OUT.wasm] [-watch] [DIR]
//	maiden add    [-config agent.toml] [-key cosign.pub] oci://REGISTRY/REPO:TAG [NAME]
//	maiden pull   [-config agent.toml] [-timeout 10m]
//	maiden publish [-sign-key cosign.key] FILE.wasm|DIR oci://REGISTRY/REPO:TAG
//	maiden client config claude|cursor|vscode [-write]
//	maiden completion bash|zsh|fish
//
// The command table below is the one description of the command line: the
// usage text, each command's -h and the shell completions all come from
// it and from the flags each command really defines. See the README for
// the exit codes and the -json envelope.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/maiden-run/maiden"
)

func main() {
	// A worker process (maiden re-executed by itself to run guest code)
	// serves its parent and exits here.
	maiden.WorkerMain()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// workerCommand is the argv of the worker processes the commands' hosts
// start (maiden.Options.WorkerCommand): nil, this binary re-executed (main
// calls maiden.WorkerMain first), except in this package's tests, where
// this program is the race-detector test binary: their TestMain names the
// maiden binary built from the same sources (testkit.Binary), a worker
// that starts in a fraction of the test binary's time and CPU. The
// commands run in the test process as before, under the race detector.
var workerCommand = func() []string { return nil }

// workerArgv is workerCommand for a host of isolation iso: nothing to start
// (nor, in the tests, to build) for tools in process.
func workerArgv(iso maiden.Isolation) []string {
	if iso == maiden.InProcess {
		return nil
	}
	return workerCommand()
}

// runFunc is a command: its arguments (after its name) in, an exit code out.
type runFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// command is one entry of the command line.
type command struct {
	name    string   // as typed; a subcommand's includes its parent's: "client config"
	args    string   // the synopsis after the name
	summary string   // one line, for the usage list and completion
	help    string   // more, for -h (optional)
	run     runFunc  // nil for a parent of subcommands
	subs    []string // a parent's subcommands, in order
	// interspersed: flags may follow positional arguments (parsed with
	// parseInterspersed); otherwise the first positional ends the flags,
	// as with Go's flag package.
	interspersed bool
	// complete lists the candidates for positional argument i (from 0),
	// given the flags typed so far.
	complete func(i int, flags map[string]string) completion
	hidden   bool // not listed in usage or completion
}

// commands is filled in init: the commands' functions read it (for their
// -h text), which a package-level initializer could not allow.
var commands []*command

func init() {
	commands = []*command{
		{name: "check", args: "[-config agent.toml]",
			summary: "validate agent.toml (every problem, with its line) and load every tool",
			run:     noStdin(cmdCheck)},
		{name: "tools", args: "[-config agent.toml] [-agent NAME] [-json]",
			summary: "list the tools: description, input and output schemas, whole policy",
			run:     noStdin(cmdTools)},
		{name: "call", args: "[-config agent.toml] [-agent NAME] [-json] TOOL [INPUT | -]",
			summary:  `run TOOL on INPUT (JSON; "-" reads stdin; default {})`,
			run:      cmdCall,
			complete: completeCall},
		{name: "new", args: "go|js|js-command|middleware-go|middleware-js DIR [-add | -add=false] [-config agent.toml]",
			summary:      "create a tool (or middleware) project from a template (and add a tool to agent.toml)",
			help:         newHelp,
			run:          cmdNew,
			interspersed: true,
			complete:     completeNew},
		{name: "build", args: "[-o OUT.wasm] [-watch] [DIR | FILE.go | FILE.js | FILE.wat]",
			summary:  "build a tool project into a component and check it loads (-watch: on every save)",
			run:      noStdin(cmdBuild),
			complete: func(int, map[string]string) completion { return completion{kind: completeFiles} }},
		{name: "serve", args: "[-config agent.toml] [-http ADDR [-auth-token-env NAME] [-allow-origin ORIGIN]...] [-max-concurrent N] [-max-queued N] [-watch=false]",
			summary: "serve the tools over MCP (stdio, or streamable HTTP at ADDR/mcp)",
			run:     cmdServe},
		{name: "agents", args: "token|ls|revoke-token ...",
			summary: "the agents of agent.toml: mint, list and revoke their bearer tokens",
			subs:    []string{"token", "ls", "revoke-token"}},
		{name: "agents token", args: "NAME [-json]",
			summary: "mint a bearer token for agent NAME, printed once (only its hash is stored)",
			help:    agentsTokenHelp, run: cmdAgentsToken, interspersed: true},
		{name: "agents ls", args: "[-json]",
			summary: "list the agents (agent.toml's and the store's) and their tokens: IDs, never secrets",
			help:    agentsLsHelp, run: cmdAgentsLs, interspersed: true},
		{name: "agents revoke-token", args: "ID [-json]",
			summary: "revoke a bearer token by its ID: it stops authenticating at once",
			help:    stateExitHelp, run: cmdAgentsRevokeToken, interspersed: true},
		{name: "cards", args: "grant|derive|revoke|ls|show ...",
			summary: "permission cards: what each agent may call (see docs/cards.md)",
			subs:    []string{"grant", "derive", "revoke", "ls", "show"}},
		{name: "cards grant", args: "-agent NAME [-budget calls=N,wall_ms=N,bytes_out=N,cost=N] [-dry-run] [-expires 24h] [-deny | -ceiling] [-json] GRANT...",
			summary: "install a card in an agent's wallet: allow (default), cap (-ceiling) or forbid (-deny) the GRANTs",
			help:    cardsGrantHelp, run: cmdCardsGrant, interspersed: true},
		{name: "cards derive", args: "ID -to NAME [-budget calls=N,wall_ms=N,bytes_out=N,cost=N] [-expires 1h] [-json] GRANT...",
			summary: "derive a narrower card from card ID for agent NAME (attenuation only)",
			help:    cardsDeriveHelp, run: cmdCardsDerive, interspersed: true},
		{name: "cards revoke", args: "ID [-json]",
			summary: "revoke card ID and every card derived from it; says how many",
			help:    cardsRevokeHelp, run: cmdCardsRevoke, interspersed: true},
		{name: "cards ls", args: "[-agent NAME] [-json]",
			summary: "list the cards (of one agent): holder, state, expiry, lineage, grants",
			help:    cardsLsHelp, run: cmdCardsLs, interspersed: true},
		{name: "cards show", args: "ID [-json]",
			summary: "print one card: holder, state, lineage, expiry, its four grant lists and each budget's spent and left",
			help:    cardsShowHelp, run: cmdCardsShow, interspersed: true},
		{name: "pending", args: "[ID] [-json]",
			summary: "list the calls waiting for a human's approval (or show request ID with all its context)",
			help:    pendingHelp, run: cmdPending, interspersed: true},
		{name: "approve", args: "ID [-always [-grant GRANT]]",
			summary: "approve a waiting call (-always: and install a card so the same call does not ask again)",
			help:    approveHelp, run: cmdApprove, interspersed: true},
		{name: "deny", args: "ID [-reason TEXT]",
			summary: "deny a waiting call; the agent is shown the reason",
			help:    denyHelp, run: cmdDeny, interspersed: true},
		{name: "sessions", args: "ls|show|end ...",
			summary: "the sessions in the state store and their sandbox boundaries",
			subs:    []string{"ls", "show", "end"}},
		{name: "sessions ls", args: "[-agent NAME] [-json]",
			summary: "list the sessions: agent, boundary revision, network, filesystem entries",
			help:    sessionsLsHelp, run: cmdSessionsLs, interspersed: true},
		{name: "sessions show", args: "ID [-json]",
			summary: "print one session: its boundary, every revision and every boundary request",
			help:    sessionsShowHelp, run: cmdSessionsShow, interspersed: true},
		{name: "sessions end", args: "ID",
			summary: "end a session as an operator: its boundary stops applying, its pending requests are denied",
			help:    sessionsEndHelp, run: cmdSessionsEnd, interspersed: true},
		{name: "audit", args: "verify|tail|export|whatif ...",
			summary: "the hash-chained audit trail of the state store",
			subs:    []string{"verify", "tail", "export", "whatif"}},
		{name: "audit verify", args: "",
			summary: `check the audit chain: "ok: N records", or the first bad record (edited, deleted, inserted, reordered)`,
			help:    auditVerifyHelp, run: cmdAuditVerify, interspersed: true},
		{name: "audit tail", args: "[-f] [-json] [-n N]",
			summary: "print the last audit records (-f: and follow new ones)",
			help:    auditTailHelp, run: cmdAuditTail, interspersed: true},
		{name: "audit export", args: "[-format jsonl|ocsf] [-from N]",
			summary: "stream the audit trail (JSON lines with the chain head, or OCSF events) for a SIEM, resumable from a record",
			help:    auditExportHelp, run: cmdAuditExport, interspersed: true},
		{name: "audit whatif", args: "[-revoke ID]... [-agent NAME -grant GRANT | -deny GRANT | -ceiling GRANT | -grants FILE]... [-config-after FILE] [-since DURATION] [-json]",
			summary: "replay the trail's recorded decisions on a proposed change of the cards: which would flip (exit 1 if any)",
			help:    auditWhatIfHelp, run: cmdAuditWhatIf, interspersed: true},
		{name: "state", args: "check|migrate ...",
			summary: "the state store itself (a SQLite file or a PostgreSQL database): check it, migrate it",
			subs:    []string{"check", "migrate"}},
		{name: "state check", args: "[-state FILE|URL] [-json]",
			summary: "check that this maiden can use the state store: reachable, schema version, privileges",
			help:    stateCheckHelp, run: cmdStateCheck, interspersed: true},
		{name: "state migrate", args: "[-state FILE|URL] [-json]",
			summary: "bring the state store's schema up to this maiden's version (prints OLD → NEW)",
			help:    stateMigrateHelp, run: cmdStateMigrate, interspersed: true},
		{name: "cache", args: "show|trim|clear ...",
			summary: "the compiled-component cache on disk: its size and limit, a trim now, or emptying it",
			subs:    []string{"show", "trim", "clear"}},
		{name: "cache show", args: "[-cache DIR] [-json]",
			summary: "show the cache's folder, entries, size, limit ($MAIDEN_CACHE_MAX), last use and last trim",
			help:    cacheShowHelp, run: cmdCacheShow, interspersed: true},
		{name: "cache trim", args: "[-cache DIR] [-json]",
			summary: "trim the cache now: entries unused for 14 days, then the least recently used down to 70% of the limit",
			help:    cacheTrimHelp, run: cmdCacheTrim, interspersed: true},
		{name: "cache clear", args: "[-cache DIR] [-json]",
			summary: "remove every compiled component from the cache (each tool compiles again at its next load)",
			help:    cacheClearHelp, run: cmdCacheClear, interspersed: true},
		{name: "operators", args: "token|ls|revoke-token ...",
			summary: "the operators of agent.toml (who decide approvals): mint, list and revoke their tokens",
			subs:    []string{"token", "ls", "revoke-token"}},
		{name: "operators token", args: "NAME [-json]",
			summary: "mint a bearer token for operator NAME (the inbox page's sign-in), printed once",
			help:    operatorsTokenHelp, run: cmdOperatorsToken, interspersed: true, complete: completeOperators},
		{name: "operators ls", args: "[-json]",
			summary: "list the operators and their tokens: IDs, never secrets",
			help:    operatorsLsHelp, run: cmdOperatorsLs, interspersed: true},
		{name: "operators revoke-token", args: "ID [-json]",
			summary: "revoke an operator token by its ID: it stops signing in at once",
			help:    operatorsRevokeHelp, run: cmdOperatorsRevokeToken, interspersed: true},
		{name: "mcp", args: "accept ...",
			summary: "imported MCP servers ([mcp.NAME]): review and accept their tools",
			subs:    []string{"accept"}},
		{name: "mcp accept", args: "NAME [TOOL...] [-config agent.toml] [-dry-run] [-json]",
			summary: "show the tools of [mcp.NAME] that are new or changed since accepted (old vs new) and accept them",
			help:    mcpAcceptHelp, run: cmdMCPAccept, interspersed: true},
		{name: "add", args: "[-config agent.toml] [-key cosign.pub] oci://REGISTRY/REPO:TAG [NAME]",
			summary: "pin a component from an OCI registry: resolve, verify, pull, and add [tools.NAME] to agent.toml",
			help:    addHelp, run: cmdAdd, interspersed: true},
		{name: "pull", args: "[-config agent.toml] [-timeout 10m]",
			summary: "fetch every pinned oci:// tool of agent.toml into the local store (then it loads offline)",
			run:     noStdin(cmdPull)},
		{name: "publish", args: "[-sign-key cosign.key] FILE.wasm|DIR oci://REGISTRY/REPO:TAG",
			summary: "push a component (a tool project is built first, as maiden build does) to an OCI registry, and sign it (cosign-compatible); prints the pinned path",
			run:     cmdPublish, interspersed: true},
		{name: "client", args: "config claude|cursor|vscode ...",
			summary: "configure an MCP client to start maiden",
			subs:    []string{"config"}},
		{name: "client config", args: "claude|cursor|vscode [-config agent.toml] [-agent NAME] [-name NAME] [-url URL [-auth-token-env NAME]] [-write [-file PATH]]",
			summary:      "print (or -write into the client's file) the MCP server entry for a client",
			help:         clientConfigHelp,
			run:          cmdClientConfig,
			interspersed: true,
			complete:     completeClients},
		{name: "completion", args: "bash|zsh|fish",
			summary:      "print a shell completion script",
			help:         completionHelp,
			run:          cmdCompletion,
			interspersed: true,
			complete:     choices("bash", "zsh", "fish")},
		{name: "version", summary: "print maiden's version, its commit, wasmtime's and Go's",
			run: cmdVersion},
		{name: "help", args: "[COMMAND | TOOL [SUBCOMMAND...]]", summary: "print this, a command's flags, or a wrapped CLI's commands",
			run: cmdHelp, complete: func(i int, _ map[string]string) completion {
				if i > 0 {
					return completion{}
				}
				return choices(visibleCommandNames()...)(i, nil)
			}},
		{name: "__complete", hidden: true, run: cmdComplete},
	}
}

// noStdin adapts a command that reads no input.
func noStdin(f func(context.Context, []string, io.Writer, io.Writer) int) runFunc {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return f(ctx, args, stdout, stderr)
	}
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// visibleCommandNames are the top-level commands a user may type.
func visibleCommandNames() []string {
	var names []string
	for _, c := range commands {
		if !c.hidden && !strings.Contains(c.name, " ") {
			names = append(names, c.name)
		}
	}
	return names
}

// usage is what `maiden help` prints.
func usage() string {
	var b strings.Builder
	b.WriteString("maiden runs AI-agent tools as sandboxed WebAssembly components.\n\nUsage:\n")
	for _, c := range commands {
		if c.hidden || c.run == nil {
			continue
		}
		fmt.Fprintf(&b, "  maiden %s", c.name)
		if c.args != "" {
			b.WriteString(" " + c.args)
		}
		fmt.Fprintf(&b, "\n        %s\n", c.summary)
	}
	b.WriteString(`
"maiden help COMMAND" or "maiden COMMAND -h" lists a command's flags.

Flags common to check, tools, call, new, build, serve, client config, agents, cards,
pending, approve, deny, audit and operators:
  -config FILE      the agent configuration (default: agent.toml, or $MAIDEN_CONFIG)
  -state FILE       the state store: agents, tokens, cards (default: agent.toml's [state] path,
                    or maiden-state.db next to agent.toml)
  -cache DIR        compiled-component cache ("off" to disable; default: the user cache dir)
  -isolation MODE   where tool code runs: workers (the default) or process
  -v                log maiden's own diagnostics to stderr

Exit codes: 0 ok, 1 tool error, 2 usage or config error, 3 deadline,
4 memory ceiling, 5 trap or invalid tool, 6 denied by policy.
agents and cards: 2 also for a malformed GRANT or an unknown agent, card or token,
6 a change the card rules refuse, 1 the state store failed.
approve and deny: 2 also for an unknown approval ID or one no longer pending;
6 -always refused. audit verify: 1 when the chain is broken.
audit whatif (as diff): 0 nothing flips, 1 a decision flips, 2 an error.
`)
	return b.String()
}

// run is the whole CLI, testable in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-version", "--version":
		name = "version"
	case "-h", "-help", "--help":
		name = "help"
	}
	c := lookupCommand(name)
	if c == nil || strings.Contains(name, " ") {
		fmt.Fprintf(stderr, "maiden: unknown command %q\n\n%s", name, usage())
		return exitUsage
	}
	for c.run == nil { // a parent: the next word names the subcommand
		if len(rest) == 0 || rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help" {
			w := stderr
			code := exitUsage
			if len(rest) > 0 {
				w, code = stdout, exitOK
			}
			fmt.Fprintf(w, "usage: maiden %s %s\n\n%s\n\nsubcommands: %s\n", c.name, c.args, c.summary, strings.Join(c.subs, ", "))
			return code
		}
		sub := lookupCommand(c.name + " " + rest[0])
		if sub == nil {
			fmt.Fprintf(stderr, "maiden %s: unknown subcommand %q (there is: %s)\n", c.name, rest[0], strings.Join(c.subs, ", "))
			return exitUsage
		}
		c, rest = sub, rest[1:]
	}
	return c.run(ctx, rest, stdin, stdout, stderr)
}

func cmdVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := bareFlags("version", stderr)
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "maiden version: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}

// cmdHelp prints the usage, or a command's -h (on stdout: asked for).
func cmdHelp(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := bareFlags("help", stderr)
	def := os.Getenv("MAIDEN_CONFIG")
	if def == "" {
		def = "agent.toml"
	}
	cfgPath := fs.String("config", def, "the agent configuration `FILE` (for maiden help TOOL [COMMAND...])")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	name := strings.Join(fs.Args(), " ")
	c := lookupCommand(name)
	if c == nil && lookupCommand(fs.Arg(0)) == nil {
		// maiden help TOOL [COMMAND...]: the commands of a wrapped CLI or
		// of a command-tree WebAssembly tool (helptool.go).
		if code, ok := toolHelp(ctx, *cfgPath, fs.Args(), stdout, stderr); ok {
			return code
		}
	}
	if c == nil || c.hidden {
		fmt.Fprintf(stderr, "maiden help: unknown command %q (there is: %s)\n", name, strings.Join(visibleCommandNames(), ", "))
		return exitUsage
	}
	return run(ctx, append(strings.Fields(name), "-h"), strings.NewReader(""), stdout, stdout)
}

// bareFlags is the flag set of a command, without the common flags: its
// -h prints the command's synopsis and help from the command table, then
// the flags. The command's own flags are added by the caller.
func bareFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("maiden "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		// "Usage of maiden NAME:" is Go's own first line, kept for scripts.
		fmt.Fprintf(w, "Usage of maiden %s:\n", name)
		if c := lookupCommand(name); c != nil {
			fmt.Fprintf(w, "  %s\n\n%s\n", strings.TrimSpace("maiden "+name+" "+c.args), c.summary)
			if c.help != "" {
				fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
			}
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	if fc, ok := stderr.(*flagCapture); ok {
		fc.fs = fs
	}
	return fs
}

// flagCapture is the stderr given to a command run with -h to learn its
// flags (see commandFlags): bareFlags hands it the flag set.
type flagCapture struct{ fs *flag.FlagSet }

func (*flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// commandFlags returns the flags command c really defines, by running it
// with -h: every command parses its flags before doing anything else, so
// this has no effect beyond defining them. nil if it has none.
func commandFlags(c *command) *flag.FlagSet {
	if c.run == nil || c.hidden {
		return nil
	}
	fc := &flagCapture{}
	c.run(context.Background(), []string{"-h"}, strings.NewReader(""), io.Discard, fc)
	return fc.fs
}

// parseInterspersed parses flags given anywhere among the positional
// arguments (Go's flag package stops at the first positional), so
// `maiden new go greet -add` works. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagGiven says whether the named flag was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
