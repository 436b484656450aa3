package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/inbox"
	"github.com/maiden-run/maiden/internal/trace/otlp"
	"github.com/maiden-run/maiden/mcpserver"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

var _ flag.Value = (*stringList)(nil)

// cmdServe speaks MCP over stdio (default) or streamable HTTP.
func cmdServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("serve", stderr)
	addr := fs.String("http", "", "serve streamable HTTP at `ADDR` (e.g. 127.0.0.1:8700) on path /mcp instead of stdio")
	tokenEnv := fs.String("auth-token-env", "", "require Authorization: Bearer <token> on every request, the `NAME` of the environment variable holding the token (required to bind a non-loopback address)")
	var origins stringList
	fs.Var(&origins, "allow-origin", "an `ORIGIN` (e.g. https://app.example) whose browser pages may call the server; repeatable")
	maxConc := fs.Int("max-concurrent", 0, "calls running at once, all sessions together (default: 4 per CPU)")
	maxQueued := fs.Int("max-queued", 0, "calls waiting for a turn before new ones are refused (default 1024; -1: none)")
	watch := fs.Bool("watch", true, "reload agent.toml and tell clients when it or a tool file changes")
	idle := fs.Duration("session-idle", mcpserver.DefaultSessionIdle, "with -http: close a session after this long without a request (0: never)")
	publicURL := fs.String("public-url", "", "the `URL` clients reach this server at (https://maiden.example:8700): the base of the inbox links approvals send (default: the request's own address on loopback; none over stdio)")
	approvalWait := fs.Duration("approval-wait", maiden.DefaultApprovalWait, "how long a call waits for a human when an approve rule asks, before it returns pending")
	// -agent and -state may become common flags (newFlags); defined here
	// only if they are not, so both can coexist.
	if fs.Lookup("agent") == nil {
		fs.String("agent", "", "stdio: the `NAME` of the agent the whole session runs as (required when agent.toml declares [agents]); over -http each request's agent token names it")
	}
	if fs.Lookup("state") == nil {
		fs.String("state", "", "the state store `FILE` (default: agent.toml's [state] path, or maiden.db next to it)")
	}
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "maiden serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	tuneGC(os.Getenv)
	// In stdio mode stdout is the protocol: diagnostics go to stderr only.
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	token := ""
	if *tokenEnv != "" {
		token = os.Getenv(*tokenEnv)
		if token == "" {
			fmt.Fprintf(stderr, "maiden serve: -auth-token-env %s: the variable is empty or unset\n", *tokenEnv)
			return exitUsage
		}
	}

	cfg, err := config.Load(c.config)
	if err != nil {
		printConfigErrors(stderr, err)
		return exitUsage
	}
	agent, statePath := fs.Lookup("agent").Value.String(), fs.Lookup("state").Value.String()
	if msg := serveIdentity(cfg, *addr, agent, *tokenEnv); msg != "" {
		fmt.Fprintln(stderr, "maiden serve:", msg)
		return exitUsage
	}
	if *addr != "" && !mcpserver.IsLoopback(*addr) && token == "" && cfg.Implicit() {
		fmt.Fprintf(stderr, "maiden serve: refusing to serve %s without authentication: it is reachable beyond this machine; set -auth-token-env NAME, or bind 127.0.0.1\n", *addr)
		return exitUsage
	}
	mx := serveMetrics(*addr)
	// Traces: exported over OTLP when the OTEL_EXPORTER_OTLP_* variables
	// or agent.toml's [trace] ask for it (internal/trace/otlp; the
	// environment wins), else off. Read at start: a reload that changes
	// [trace] says it applies at the next start.
	tr := cfg.Trace()
	tp, stopTraces, err := otlp.New(ctx, otlp.Settings{Endpoint: tr.Endpoint, Protocol: tr.Protocol}, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "maiden serve:", err)
		return exitUsage
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTraces(sctx); err != nil {
			logger.Warn("traces not all exported", "error", err)
		}
	}()
	h, err := maiden.New(cfg, &maiden.Options{Logger: logger, CacheDir: c.cache, StatePath: statePath, MaxConcurrent: *maxConc, MaxQueued: *maxQueued, Isolation: c.isolation.value(), Observer: mx.Observer(), WorkerCommand: workerArgv(c.isolation.value()),
		TracerProvider: tp, TracePropagateTo: otlp.PropagateTo(os.Getenv, tr.PropagateTo),
		// A component's first compile (a JS tool's: 10-20 s) is logged, so
		// the wait before the first call or a reload is explained.
		OnCompile: func(path string) {
			logger.Info("compiling component for this machine (its first use; the result is cached)", "path", path)
		}})
	if err != nil {
		fmt.Fprintln(stderr, "maiden serve:", err)
		return exitUsage
	}
	defer h.Close(context.Background())
	if *approvalWait <= 0 {
		fmt.Fprintln(stderr, "maiden serve: -approval-wait must be positive")
		return exitUsage
	}
	srv := mcpserver.New(h, &mcpserver.Options{Logger: logger, Version: moduleVersion(), Agent: agent, PublicURL: *publicURL, ApprovalWait: *approvalWait})
	// Sync logs each tool it cannot serve, once (not again at every reload
	// while the problem stays the same).
	if _, err := srv.Sync(ctx); err != nil {
		fmt.Fprintln(stderr, "maiden serve:", err)
		return exitUsage
	}
	// The state store is opened now rather than at the first call that
	// needs it: a shared PostgreSQL store gets its schema before any call
	// (maiden state check sees it), and one that cannot be opened is said
	// at once.
	if h.Config().UsesState() || c.state != "" || h.Config().StateURL() != "" {
		if err := h.OpenState(ctx); err != nil {
			fmt.Fprintln(stderr, "maiden serve:", err)
			return exitState
		}
	}
	if *watch {
		// The watch logs one line per reload itself.
		srv.Watch(ctx, c.config, mcpserver.WatchOptions{})
	}

	if *addr == "" {
		if err := srv.RunStdio(ctx, io.NopCloser(stdin), nopWriteCloser{stdout}); err != nil {
			fmt.Fprintln(stderr, "maiden serve:", err)
			return exitUsage
		}
		return exitOK
	}
	o := mcpserver.HTTPOptions{AllowedOrigins: origins, AuthToken: token, SessionIdle: *idle}
	o.Health, o.Metrics = monitorHandlers(ctx, mx)
	if *idle <= 0 {
		o.SessionIdle = -1 // HTTPOptions' "never"; its 0 is the default
	}
	return serveHTTP(ctx, srv, h, *addr, o, stderr, logger)
}

// serveIdentity checks who the server's callers are, before anything
// starts: "" if fine, else what is wrong. Over stdio the process is one
// agent (-agent, required with [agents]); over HTTP each request's token
// names its agent, and with [agents] only agent tokens count.
func serveIdentity(cfg *config.Config, addr, agent, tokenEnv string) string {
	if cfg.Implicit() {
		if agent != "" && agent != maiden.DefaultAgent {
			return fmt.Sprintf("-agent %s: %s declares no [agents], so every call runs as %q", agent, cfg.File(), maiden.DefaultAgent)
		}
		return ""
	}
	if addr != "" {
		if agent != "" {
			return fmt.Sprintf("-agent %s: over -http each request's bearer token names its agent (mint one with maiden agents token %s); -agent is for stdio", agent, agent)
		}
		if tokenEnv != "" {
			return fmt.Sprintf("-auth-token-env %s: %s declares [agents], so each client authenticates with its agent's own token (use maiden agents token NAME), not a shared static one; drop -auth-token-env", tokenEnv, cfg.File())
		}
		return ""
	}
	var names []string
	for _, a := range cfg.Agents() {
		names = append(names, a.Name)
	}
	if agent == "" {
		return fmt.Sprintf("%s declares agents (%s): name the one this stdio session runs as with -agent NAME", cfg.File(), strings.Join(names, ", "))
	}
	if _, ok := cfg.Agent(agent); !ok {
		return fmt.Sprintf("-agent %s: no such agent in %s (agents: %s)", agent, cfg.File(), strings.Join(names, ", "))
	}
	return ""
}

// httpTimeouts bound what a client may hold open without sending. There
// is no WriteTimeout: it would cut off long-lived SSE streams (a client's
// GET for notifications never ends) and calls that legitimately run up to
// a tool's timeout (ten minutes at most); ReadTimeout does not touch them,
// since net/http clears the read deadline once a request has been read.
// A variable so tests can shorten them.
var httpTimeouts = struct{ readHeader, read, idle time.Duration }{
	readHeader: 10 * time.Second, // the headers of a request
	read:       60 * time.Second, // a whole request, body included (up to max_input_bytes)
	idle:       2 * time.Minute,  // a kept-alive connection between requests
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveHTTP serves until ctx ends (SIGINT/SIGTERM), then stops accepting and
// lets running calls finish within the longest tool timeout.
func serveHTTP(ctx context.Context, srv *mcpserver.Server, h *maiden.Host, addr string, o mcpserver.HTTPOptions, stderr io.Writer, logger *slog.Logger) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "maiden serve:", err)
		return exitUsage
	}
	answering := newAnswering()
	hs := &http.Server{
		Handler:           answering.wrap(srv.HTTPHandler(o)),
		ReadHeaderTimeout: httpTimeouts.readHeader,
		ReadTimeout:       httpTimeouts.read,
		IdleTimeout:       httpTimeouts.idle,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnContext:       answering.connContext,
		ConnState:         answering.connState,
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stderr, "maiden serve: MCP over streamable HTTP at %s%s; operators' inbox %s%s; health %s%s; metrics %s%s\n",
		base, mcpserver.Path, base, inbox.Path, base, mcpserver.HealthPath, base, mcpserver.MetricsPath)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintln(stderr, "maiden serve:", err)
		return exitUsage
	case <-ctx.Done():
	}
	grace := 2 * time.Second
	for _, t := range h.Config().Tools() {
		grace = max(grace, t.Timeout+2*time.Second)
	}
	logger.Info("shutting down: no new connections; waiting for running calls", "calls", h.Active(), "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// Shutdown stops the listener at once, but would also wait for clients'
	// long-lived notification streams, which never end by themselves; so
	// wait for the calls instead, then close everything.
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(sctx) }()
	// Calls waiting for a human answer pending now, with their request IDs
	// (the requests stay for an operator); running calls finish.
	srv.Drain(sctx)
	// Every call arrives in a request (POST); its connection goes idle
	// once the response is written whole, so closing after that cuts no
	// answer short.
	answering.wait(sctx)
	hs.Close()
	cancel()
	// Closing is how Shutdown is meant to end here (the streams), so its
	// context errors are the plan, not a problem worth a warning.
	if err := <-shut; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("shutdown", "error", err)
	}
	logger.Info("stopped", "calls still running", h.Active())
	return exitOK
}

// answering counts the requests being answered other than the clients'
// notification streams (GET, which never end by themselves): a request
// counts from its handler's start until its connection is idle or closed
// again, that is until the response has been written whole, which
// http.Server reports through ConnState after the handler returns.
type answering struct {
	mu    sync.Mutex
	n     int
	zero  chan struct{} // closed when n reaches 0; nil while nobody waits
	conns map[net.Conn]*answeringConn
}

type answeringConn struct{ busy bool }

type answeringKey struct{}

func newAnswering() *answering { return &answering{conns: map[net.Conn]*answeringConn{}} }

func (a *answering) connContext(ctx context.Context, c net.Conn) context.Context {
	ac := &answeringConn{}
	a.mu.Lock()
	a.conns[c] = ac
	a.mu.Unlock()
	return context.WithValue(ctx, answeringKey{}, ac)
}

func (a *answering) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ac, ok := r.Context().Value(answeringKey{}).(*answeringConn); ok && r.Method != http.MethodGet {
			a.mu.Lock()
			if !ac.busy {
				ac.busy = true
				a.n++
			}
			a.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (a *answering) connState(c net.Conn, st http.ConnState) {
	if st != http.StateIdle && st != http.StateClosed && st != http.StateHijacked {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ac := a.conns[c]
	if st != http.StateIdle {
		delete(a.conns, c)
	}
	if ac == nil || !ac.busy {
		return
	}
	ac.busy = false
	a.n--
	if a.n == 0 && a.zero != nil {
		close(a.zero)
		a.zero = nil
	}
}

// wait returns once no request is being answered, or when ctx ends.
func (a *answering) wait(ctx context.Context) {
	a.mu.Lock()
	if a.n == 0 {
		a.mu.Unlock()
		return
	}
	if a.zero == nil {
		a.zero = make(chan struct{})
	}
	z := a.zero
	a.mu.Unlock()
	select {
	case <-z:
	case <-ctx.Done():
	}
}

// serveGCPercent is the garbage collector's target in `maiden serve` when
// GOGC is not set: a server's live heap is small and every request
// allocates the MCP SDK's decoding buffers, so at Go's default (100) the
// collector ran every few dozen calls and took about a quarter of the
// server's CPU (perf record of bench/compare's stdio row). At 400 the
// server's CPU per tools/call was ~0.6x and its peak RSS ~11 MiB more
// (bench/README.md, "The server's garbage collector").
const serveGCPercent = 400

// tuneGC sets serveGCPercent unless the environment sets GOGC (an
// operator's own setting, GOGC=off included, is kept).
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
}
