package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
)

// Exit codes. They are public: scripts branch on them (README, "Exit codes").
const (
	exitOK       = 0
	exitTool     = 1 // the tool returned an error
	exitUsage    = 2 // bad command line, bad agent.toml, unknown tool, input not JSON or not per schema
	exitDeadline = 3
	exitMemory   = 4
	exitTrap     = 5 // trap, or not a loadable maiden tool
	exitDenied   = 6
	exitPending  = 7 // a human must approve the call first
	exitUnavail  = 8 // the tool's server (an imported MCP server) is down
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// common holds the flags every command takes.
type common struct {
	config    string
	cache     string
	verbose   bool
	isolation isolationFlag
	state     string   // -state: the state store's file or URL ("" = the configuration's)
	refused   []string // -state values refused (not printed back: they may hold a password)
}

// stateFlag is -state: a file, or a PostgreSQL URL, which is checked as
// agent.toml's [state] url is (no password in it).
type stateFlag struct{ c *common }

func (f stateFlag) String() string {
	if f.c == nil {
		return ""
	}
	return f.c.state
}

func (f stateFlag) Set(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if config.IsStateURL(s) {
		if err := config.CheckStateURL(s); err != nil {
			f.c.refused = append(f.c.refused, s)
			return err
		}
	}
	f.c.state = s
	return nil
}

// scrubWriter is a flag set's output: it replaces the -state values that
// were refused (they may hold a password) before they reach the terminal.
type scrubWriter struct {
	w io.Writer
	c *common
}

func (s *scrubWriter) Write(p []byte) (int, error) {
	if len(s.c.refused) == 0 {
		return s.w.Write(p)
	}
	text := string(p)
	for _, v := range s.c.refused {
		text = strings.ReplaceAll(text, strconv.Quote(v), "(the URL given, not repeated)")
		text = strings.ReplaceAll(text, v, "(the URL given, not repeated)")
	}
	if _, err := io.WriteString(s.w, text); err != nil {
		return 0, err
	}
	return len(p), nil
}

// parseFailed is the exit code of a command whose flags did not parse:
// asking for help (-h) is a success, anything else a usage error.
func parseFailed(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// isolationFlag is -isolation: "workers" (the default) or "process".
type isolationFlag struct{ inProcess bool }

func (f *isolationFlag) String() string {
	if f.inProcess {
		return "process"
	}
	return "workers"
}

func (f *isolationFlag) Set(s string) error {
	switch s {
	case "workers":
		f.inProcess = false
	case "process":
		f.inProcess = true
	default:
		return fmt.Errorf(`must be "workers" or "process", got %q`, s)
	}
	return nil
}

// Choices are the values shell completion offers.
func (f *isolationFlag) Choices() []string { return []string{"workers", "process"} }

func (f *isolationFlag) value() maiden.Isolation {
	if f.inProcess {
		return maiden.InProcess
	}
	return maiden.Workers
}

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *common) {
	fs := bareFlags(name, stderr)
	c := &common{}
	def := os.Getenv("MAIDEN_CONFIG")
	if def == "" {
		def = "agent.toml"
	}
	fs.StringVar(&c.config, "config", def, "the agent configuration `FILE`")
	fs.StringVar(&c.cache, "cache", "", "compiled-component cache `DIR` (\"off\" disables it; default: the user cache directory; $MAIDEN_CACHE_MAX bounds its size, default 2GiB)")
	fs.BoolVar(&c.verbose, "v", false, "log maiden's diagnostics to stderr")
	fs.Var(&c.isolation, "isolation", "`MODE`: where tool code runs; \"workers\" (supervised, confined processes; the default) or \"process\" (in this process: faster, the weaker wall)")
	// The flag package quotes a refused value in its message: a -state URL
	// refused for carrying a password must not be printed back.
	fs.SetOutput(&scrubWriter{w: stderr, c: c})
	fs.Var(stateFlag{c}, "state", "the state store (agents, tokens, cards, approvals, the audit trail): a SQLite `FILE`, or a postgres:// URL without a password (PGPASSWORD or ~/.pgpass supply it); default: agent.toml's [state] url or path, or "+config.DefaultStateFile+" next to it")
	return fs, c
}

func (c *common) host(stderr io.Writer) (*maiden.Host, error) {
	cfg, err := config.Load(c.config)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.DiscardHandler)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return maiden.New(cfg, &maiden.Options{Logger: logger, CacheDir: c.cache, Isolation: c.isolation.value(), StatePath: c.state,
		WorkerCommand: workerArgv(c.isolation.value()), OnCompile: compileNote(stderr)})
}

// compileNote says on the operator's terminal that a component is being
// compiled: a JavaScript tool's first call otherwise sat silent for 10 to
// 20 seconds here before its answer. Not on a pipe or a file (scripts
// read stderr too), and nothing when the code came from the cache.
func compileNote(stderr io.Writer) func(path string) {
	if !writerIsTerminal(stderr) {
		return nil
	}
	var mu sync.Mutex
	return func(path string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "maiden: compiling %s for this machine (its first use; the result is cached)\n", terminalSafe(path))
	}
}

// writerIsTerminal says whether w is a terminal. A variable for tests.
var writerIsTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && fileIsTerminal(f)
}

// printConfigErrors prints every problem of a bad agent.toml, one per line.
func printConfigErrors(stderr io.Writer, err error) {
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(stderr, e)
		}
		return
	}
	fmt.Fprintln(stderr, "maiden:", err)
}

func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("check", stderr)
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "maiden check: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	h, err := c.host(stderr)
	if err != nil {
		printConfigErrors(stderr, err)
		hintPins(ctx, stderr, err)
		return exitUsage
	}
	defer h.Close(context.Background())
	reports, err := h.Check(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "maiden check:", err)
		return exitUsage
	}
	// Reports are of tools, and of maiden's own checks (the confinement
	// wrapped CLIs need), which are not counted as tools.
	bad, badTools, tools := 0, 0, 0
	for _, r := range reports {
		t, _ := h.Config().Tool(strings.TrimPrefix(r.Tool, "mcp.")) // an import's report is "mcp.NAME"
		if t.Name != "" {
			tools++
		}
		if r.Err != nil {
			bad++
			if t.Name != "" {
				badTools++
			}
			// A message's later lines (an MCP server's stderr) are
			// escaped one by one, so that they stay lines.
			lines := strings.Split(r.Err.Error(), "\n")
			for i := range lines {
				lines[i] = terminalSafe(lines[i])
			}
			fmt.Fprintf(stderr, "%s:%d: %s: %s\n", c.config, t.Line, tableKey(r.Tool, t), strings.Join(lines, "\n"))
			continue
		}
		how := "compiled in " + r.Compile.Round(1e6).String()
		if r.Cached {
			how = "loaded from cache"
		}
		fmt.Fprintf(stdout, "ok   %-20s %s (%s)\n", r.Tool, t.Path, how)
		// What will certainly fail at call time, though the file loads.
		for _, w := range r.Warnings {
			fmt.Fprintf(stderr, "%s:%d: warning: %s\n", c.config, t.Line, terminalSafe(w))
		}
	}
	if bad > 0 {
		if badTools > 0 {
			fmt.Fprintf(stderr, "%d of %d tools cannot be loaded\n", badTools, tools)
		} else {
			fmt.Fprintln(stderr, "the wrapped CLIs cannot run here (above)")
		}
		return exitTrap
	}
	switch tools {
	case 0:
		fmt.Fprintf(stdout, "%s: no tools to load (the agents' built-ins need none)\n", c.config)
	case 1:
		fmt.Fprintf(stdout, "%s: 1 tool ok\n", c.config)
	default:
		fmt.Fprintf(stdout, "%s: %d tools ok\n", c.config, tools)
	}
	cfg := h.Config()
	if cfg.Implicit() {
		fmt.Fprintf(stdout, "%s: no [agents]: every call runs as the implicit agent %q, allowed everything\n", c.config, maiden.DefaultAgent)
	} else {
		var names []string
		for _, a := range cfg.Agents() {
			names = append(names, a.Name)
		}
		fmt.Fprintf(stdout, "%s: agents %s; state store %s\n", c.config, strings.Join(names, ", "), c.statePath(cfg))
		// What will certainly be refused at call time unless the store
		// holds a card for it: a file built-in, or a wrapped CLI's reads
		// or writes of its write_paths, without an fs grant; an import's
		// calls without secret:use of its credential.
		for _, a := range cfg.Agents() {
			for _, g := range cfg.FileGrantGaps(a) {
				if g.CLI && g.Verb == "read" {
					fmt.Fprintf(stderr, "%s:%d: warning: agent %s binds %s, but none of its grants is an fs:read grant: the CLI is given none of its write_paths, neither to read nor to write, unless a card allows fs:read of each, whole (and fs:write, to write there) (add one to grants, e.g. \"fs:read /srv/work/**\", or maiden cards grant -agent %s ...)\n",
						c.config, g.Line, a.Name, g.Tool, a.Name)
					continue
				}
				if g.CLI {
					fmt.Fprintf(stderr, "%s:%d: warning: agent %s binds %s, but none of its grants is an fs:write grant: the CLI only reads its write_paths unless a card allows fs:write of each, whole (add one to grants, e.g. \"fs:write /srv/work/**\", or maiden cards grant -agent %s ...)\n",
						c.config, g.Line, a.Name, g.Tool, a.Name)
					continue
				}
				fmt.Fprintf(stderr, "%s:%d: warning: agent %s binds %s, but none of its grants is an fs:%s grant: each call is refused unless a card allows fs:%s of its path (add one to grants, e.g. \"fs:%s /srv/work/**\", or maiden cards grant -agent %s ...)\n",
					c.config, g.Line, a.Name, g.Tool, g.Verb, g.Verb, g.Verb, a.Name)
			}
			// An import that sends its server a credential: the agent's
			// use of that secret, which its cards must allow.
			for _, g := range cfg.CredentialGrantGaps(a) {
				fmt.Fprintf(stderr, "%s:%d: warning: agent %s binds %s, whose credential %s maiden sends its server, but none of its grants allows secret:use %s: each call of its tools is refused unless a card allows it (add \"secret:use %s\" to grants, or maiden cards grant -agent %s 'secret:use %s')\n",
					c.config, g.Line, a.Name, g.Import, g.Secret, g.Secret, g.Secret, a.Name, g.Secret)
			}
		}
	}
	// What the confinement will refuse at the first call: a configured
	// path with a symlink on it.
	for _, p := range cfg.SymlinkedPaths() {
		fmt.Fprintf(stderr, "%s: warning: %s.%s names %s, which has a symlink on its path (it leads to %s now): the confinement refuses to run with it, since a link there could lead anywhere; name the real path\n",
			c.config, p.Table, p.Key, p.Path, p.Real)
	}
	return exitOK
}

// tableKey is the agent.toml key of the table of the tool a report named
// report is about (t; zero when the report is maiden's own, such as the
// confinement's): tools.NAME, clis.NAME or mcp.NAME.
func tableKey(report string, t config.Tool) string {
	switch {
	case t.Name == "":
		return report
	case t.MCP != nil:
		return "mcp." + t.Name
	case t.CLI != nil:
		return "clis." + t.Name
	}
	return "tools." + t.Name
}

// statePath is the state store's file or URL: -state, or the configuration's.
func (c *common) statePath(cfg *config.Config) string {
	if c.state != "" {
		return c.state
	}
	return cfg.StatePath()
}

func cmdTools(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("tools", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	agent := fs.String("agent", "", "list the tools as agent `NAME` sees them (its bindings; default: every tool of agent.toml)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	h, err := c.host(stderr)
	if err != nil {
		printConfigErrors(stderr, err)
		return exitUsage
	}
	defer h.Close(context.Background())
	var infos []maiden.ToolInfo
	if *agent != "" {
		infos, err = h.ToolsFor(ctx, *agent)
	} else {
		infos, err = h.Tools(ctx)
	}
	if err != nil {
		fmt.Fprintln(stderr, "maiden tools:", err)
		return exitUsage
	}
	if *asJSON {
		if infos == nil {
			infos = []maiden.ToolInfo{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(infos)
		return exitOK
	}
	for i, t := range infos {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		// An imported tool's title, description and schemas are an
		// upstream's text: shown escaped, as everything below.
		if t.Title != "" {
			fmt.Fprintf(stdout, "%s (%s)\n", terminalSafe(t.Name), terminalSafe(t.Title))
		} else {
			fmt.Fprintf(stdout, "%s\n", terminalSafe(t.Name))
		}
		if t.Error != nil {
			fmt.Fprintf(stdout, "  error:   %s: %s\n", t.Error.Kind, terminalSafe(t.Error.Message))
		}
		if t.Error == nil || t.Error.Kind == maiden.KindDenied && t.InputSchema != "" { // a changed import: as accepted
			lines := strings.Split(strings.TrimSpace(t.Description), "\n")
			for i, l := range lines {
				lines[i] = terminalSafe(l)
			}
			fmt.Fprintf(stdout, "  %s\n", strings.Join(lines, "\n  "))
			fmt.Fprintf(stdout, "  input:   %s\n", terminalSafe(compactJSON(t.InputSchema)))
		}
		if t.OutputSchema != "" {
			fmt.Fprintf(stdout, "  output:  %s\n", terminalSafe(compactJSON(t.OutputSchema)))
		}
		p := t.Policy
		fmt.Fprintf(stdout, "  policy:  timeout %dms, memory %d MiB, network %s, secrets %s\n",
			p.TimeoutMS, p.MemoryMB, listOrNone(p.HTTPAllow), listOrNone(p.Secrets))
		if len(p.HTTPAllow) > 0 {
			ports := []string{"443"}
			for _, port := range p.HTTPPorts {
				ports = append(ports, fmt.Sprint(port))
			}
			fmt.Fprintf(stdout, "  network: ports %s, private ranges allowed %s, extra CA files %s, responses up to %d bytes\n",
				strings.Join(ports, ", "), listOrNone(p.HTTPAllowCIDRs), listOrNone(p.HTTPCAFiles), p.HTTPMaxResponseBytes)
		}
		for _, name := range p.Secrets {
			if d, ok := p.SecretDestinations[name]; ok {
				fmt.Fprintf(stdout, "  secret %s: only to %s", name, strings.Join(d.Hosts, ", "))
				if len(d.Methods) > 0 {
					fmt.Fprintf(stdout, ", methods %s", strings.Join(d.Methods, ", "))
				}
				if len(d.PathPrefixes) > 0 {
					fmt.Fprintf(stdout, ", paths under %s", strings.Join(d.PathPrefixes, ", "))
				}
				fmt.Fprintln(stdout)
			}
		}
		fmt.Fprintf(stdout, "  hints:   %s\n", hintText(t.Hints))
		if pv := t.Provenance; pv != nil {
			signed, pinned := "unsigned", "not pinned: add schema = "+strconv.Quote(pv.Schema)+" to pin it"
			if pv.Signer != "" {
				signed = "signed by key " + pv.Signer
			}
			if pv.SchemaPinned {
				pinned = "pinned"
			}
			fmt.Fprintf(stdout, "  from:    %s (%s)\n  schema:  %s (%s)\n", terminalSafe(pv.Ref), signed, pv.Schema, pinned)
		}
	}
	return exitOK
}

// hintText lists the MCP hints that hold, as clients are told them.
func hintText(h maiden.Hints) string {
	var on []string
	for _, x := range []struct {
		set  bool
		name string
	}{{h.ReadOnly, "read-only"}, {h.Destructive, "destructive"}, {h.Idempotent, "idempotent"}, {h.OpenWorld, "open-world"}} {
		if x.set {
			on = append(on, x.name)
		}
	}
	return listOrNone(on)
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func compactJSON(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

func cmdCall(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("call", stderr)
	asJSON := fs.Bool("json", false, "print one JSON envelope instead of the raw output")
	agent := fs.String("agent", "", "call as agent `NAME` of agent.toml (needed when it declares [agents]; its bindings and cards decide)")
	wait := fs.Duration("wait", maiden.DefaultApprovalWait, "how long to wait for a human when an approve rule asks (0: do not wait; the call is then pending, exit 7)")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(stderr, "usage: maiden call [-config agent.toml] [-agent NAME] [-wait DURATION] [-json] TOOL [INPUT | -]")
		return exitUsage
	}
	tool := fs.Arg(0)
	input := "{}"
	if fs.NArg() == 2 {
		input = fs.Arg(1)
		if input == "-" {
			// Bounded: Host.Call refuses anything over max_input_bytes, whose
			// largest setting this is, so more would only be held to be refused.
			b, err := io.ReadAll(io.LimitReader(stdin, config.MaxMaxInputBytes+1))
			if err != nil {
				return callFailed(stdout, stderr, *asJSON, tool, maiden.KindConfig, "read input from stdin: "+err.Error())
			}
			input = string(b)
		}
	}
	h, err := c.host(stderr)
	if err != nil {
		if *asJSON {
			return callFailed(stdout, stderr, true, tool, maiden.KindConfig, err.Error())
		}
		printConfigErrors(stderr, err)
		return exitUsage
	}
	defer h.Close(context.Background())
	approvalWait := *wait
	if approvalWait <= 0 {
		approvalWait = -1
	}
	res, err := h.Call(ctx, maiden.Call{Tool: tool, Input: input, Agent: *agent, ApprovalWait: approvalWait,
		OnApproval: func(r maiden.ApprovalRequest) {
			if approvalWait > 0 {
				fmt.Fprintf(stderr, "maiden: waiting up to %v for a human to approve request %s (%s): maiden approve %s, or maiden deny %s\n",
					approvalWait, r.ID, r.Reason, r.ID, r.ID)
			}
		}})
	if err != nil {
		return callFailed(stdout, stderr, *asJSON, tool, maiden.KindConfig, err.Error())
	}
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		// The tool's words on the operator's terminal, escaped: a log line
		// or an error is not to set the title, hide or clear text, or
		// start a line that reads as maiden's own. The output on stdout is
		// the tool's data, as it gave it (-json escapes it all).
		for _, l := range res.Logs {
			fmt.Fprintf(stderr, "[%s] %s\n", l.Level, terminalSafe(l.Message))
		}
		if res.OK {
			fmt.Fprint(stdout, res.Output)
			if !strings.HasSuffix(res.Output, "\n") {
				fmt.Fprintln(stdout)
			}
		} else {
			fmt.Fprintf(stderr, "maiden: %s failed (%s): %s\n", tool, res.Error.Kind, indentedSafe(res.Error.Message))
		}
	}
	if res.OK {
		return exitOK
	}
	return exitCode(res.Error.Kind)
}

// callFailed reports a call that could not be made.
func callFailed(stdout, stderr io.Writer, asJSON bool, tool string, kind maiden.ErrorKind, msg string) int {
	if asJSON {
		b, _ := json.Marshal(maiden.Result{Tool: tool, Error: &maiden.ToolError{Kind: kind, Message: msg}})
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stderr, "maiden: %s\n", msg)
	}
	return exitCode(kind)
}

func exitCode(k maiden.ErrorKind) int {
	switch k {
	case maiden.KindTool:
		return exitTool
	case maiden.KindDeadline:
		return exitDeadline
	case maiden.KindMemory:
		return exitMemory
	case maiden.KindTrap, maiden.KindInvalid:
		return exitTrap
	case maiden.KindDenied:
		return exitDenied
	case maiden.KindPending:
		return exitPending
	case maiden.KindUnavailable:
		return exitUnavail
	default:
		return exitUsage
	}
}

// indentedSafe is an error message for the terminal: each line escaped
// (terminalSafe), and lines after the first indented by two spaces, so a
// multi-line report (an input's problems, one a line) stays readable while
// no line of a tool's text can start where maiden's own lines do.
func indentedSafe(msg string) string {
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = terminalSafe(l)
	}
	return strings.Join(lines, "\n  ")
}
