// Package mcpserver serves a maiden Host over the Model Context Protocol,
// using the official Go SDK: tools/list from the tools' own describe() and
// schema(), tools/call through Host.Call, tool logs as logging
// notifications, progress for long calls, cancellation that interrupts the
// running tool, and a tool list that follows agent.toml and the .wasm files
// on disk.
//
//	srv := mcpserver.New(host, nil)
//	if _, err := srv.Sync(ctx); err != nil { ... }
//	err := srv.RunStdio(ctx, os.Stdin, os.Stdout)
//
// A tool's own failure (its error, a deadline, the memory ceiling, a trap,
// input that does not fit its schema) is a tools/call result with isError
// set, its text naming maiden's error kind; an unknown tool or an overloaded
// host is a JSON-RPC error.
//
// Client input is bounded before it is parsed: tools/call arguments over
// the configuration's max_input_bytes are an isError result of kind input,
// and a message beyond that plus EnvelopeAllowance is refused by the
// transport (a JSON-RPC error on stdio, 413 over HTTP). A stdio line that is
// not a JSON-RPC message is answered with -32700 or -32600 and the session
// goes on. A request the client cancels gets no response, as the spec says.
// Idle HTTP sessions expire (HTTPOptions.SessionIdle).
//
// Both eras of the protocol are served: 2025-11-25 and older with initialize
// and sessions, 2026-07-28 statelessly (over HTTP on the same endpoint; see
// HTTPHandler). A client that never chose a log level gets DefaultLogLevel
// (legacy era; the modern one forbids logs a request did not ask for).
//
// Every call has an agent (maiden.Call.Agent): Options.Agent over stdio;
// over HTTP the agent whose token the request carries (checked with the
// state store at every request when agent.toml declares [agents]; see
// HTTPOptions.AuthToken otherwise), and a session answers only the token
// that opened it. Each agent gets its own tools/list: the tools bound to
// it, and the card built-ins (cards_list, ...) its cards allow.
//
// Of the rest of MCP, maiden serves tools only: it has no resources or
// prompts to offer, and it never asks the client for sampling or form
// elicitation (a tool cannot reach the agent's model; that would be a road
// out of the sandbox that no policy governs). The one thing it asks of a
// client is a URL elicitation opening the inbox page of a call that waits
// for a human's approval (see approval.go); the answer is never consent.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a Server. nil means defaults.
type Options struct {
	// Logger receives the server's own diagnostics; nil discards them. In
	// stdio mode it must not write to stdout.
	Logger *slog.Logger
	// ProgressEvery is how often a running call reports progress when the
	// client asked for it (a progress token); the first report comes after
	// one interval. 0 means one second.
	ProgressEvery time.Duration
	// Version is reported to clients as the server version; "" means "dev".
	Version string
	// Agent is the agent of a stdio session (maiden serve -agent), and the
	// one MCP returns the server of; "" means maiden.DefaultAgent, the
	// implicit agent of a configuration without [agents]. Over HTTP each
	// request's bearer token names its agent instead.
	Agent string
	// PublicURL is the base URL ("https://maiden.example:8700", no
	// trailing slash) at which a human reaches this maiden's HTTP server
	// and its inbox (PublicURL + InboxPath + ID is an approval's page). ""
	// means: over HTTP, the request's own scheme and Host when that host is
	// loopback, else none; over stdio, none. Without one, a call waiting
	// for approval sends no URL elicitation, only progress.
	PublicURL string
	// ApprovalWait is how long a call that a rule sends to a human waits
	// for the decision before it returns pending (2025-11-25 era, and a
	// 2026-07-28 retry after the client opened the inbox page); 0 means
	// the host's default. A first 2026-07-28 call never waits.
	ApprovalWait time.Duration
}

// Server is an MCP server over one Host. It serves each agent its own tool
// list: one SDK server per agent (the SDK's server holds a single list),
// made when the agent first connects and kept in step by Sync.
type Server struct {
	host *maiden.Host
	log  *slog.Logger
	opts Options

	mu       sync.Mutex
	agents   map[string]*agentServer // by agent name
	reported map[string]string       // tools not served: the problem last logged, by name

	bindMu   sync.Mutex
	sessions map[string]sessionOwner // HTTP session ID -> who opened it
	perAgent map[string]int          // agent -> its sessions in sessions
	opening  map[string]int          // agent -> its session-less POSTs in flight (reserveSession)

	httpCalls inflight     // requests in flight over HTTP, by session
	calls     callHandlers // running tools/call handlers: by HTTP session (DELETE), all (Drain)

	states *stateKey // signs the request state of input-required results

	draining atomic.Bool // Drain ran: a wait that begins now ends at once as pending

	warm *warmRunners // the goroutines Host.Call runs on

	// handleIdle is the HTTP front end's session idle time (ns; 0: none),
	// after which a modern _meta["maiden/session"] handle no request named
	// expires, and handleUsed when each handle was last named (and
	// recorded in the store).
	handleIdle atomic.Int64
	handleMu   sync.Mutex
	handleUsed map[string]handleUse

	// stdioSession is the maiden session of a stdio client: the process.
	stdioSession string
	stdio        atomic.Bool // RunStdio is serving
}

// agentServer is the SDK server of one agent and what its clients were
// last told.
type agentServer struct {
	agent string
	mcp   *mcp.Server
	// filled is done once the first sync of the agent's tools has run:
	// every request waits for it, so none sees a half-filled list.
	filled sync.Once

	mu     sync.Mutex
	served map[string]servedTool // by tool name
}

// servedTool is the part of a tool's listing that, when it changes, must
// reach clients (a new digest alone also counts: the code changed).
type servedTool struct {
	title, description, schema, outputSchema, digest string
	hints                                            maiden.Hints
	provenance                                       maiden.Provenance // zero for a tool not from a registry
}

// New creates a server. Call Sync before serving so the tool list is
// filled.
func New(h *maiden.Host, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Agent == "" {
		o.Agent = maiden.DefaultAgent
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	s := &Server{host: h, log: o.Logger, opts: o, agents: map[string]*agentServer{}, reported: map[string]string{}, sessions: map[string]sessionOwner{}, perAgent: map[string]int{}, opening: map[string]int{},
		states: newStateKey(), warm: newWarmRunners(), stdioSession: maiden.NewSessionID()}
	s.agents[o.Agent] = s.newAgentServer(o.Agent)
	// An imported MCP server's tool list changed: list again, which tells
	// the clients (notifications/tools/list_changed) when it differs.
	if h != nil {
		h.OnToolsChanged(func() {
			if _, err := s.Sync(context.Background()); err != nil {
				s.log.Warn("re-listing tools after an imported server's change", "err", err)
			}
		})
	}
	return s
}

// newAgentServer makes the (empty) SDK server of one agent.
func (s *Server) newAgentServer(agent string) *agentServer {
	as := &agentServer{agent: agent, served: map[string]servedTool{}}
	as.mcp = mcp.NewServer(&mcp.Implementation{Name: "maiden", Version: s.opts.Version}, &mcp.ServerOptions{
		// The SDK narrates every session at info level; only its warnings
		// and errors are worth an operator's attention.
		Logger: slog.New(minLevel{s.log.Handler(), slog.LevelWarn}),
		Instructions: "Tools served by maiden run in a WebAssembly sandbox with a deadline and a memory ceiling. " +
			"A failed call's text starts with its kind: tool, deadline, memory, trap, invalid, input or denied; " +
			"for input, fix the arguments as the message says and call again.",
		Capabilities: &mcp.ServerCapabilities{
			//lint:ignore SA1019 logging is deprecated upstream (SEP-2577) but clients still use it for tool logs
			Logging: &mcp.LoggingCapabilities{},
			Tools:   &mcp.ToolCapabilities{ListChanged: true},
		},
	})
	as.mcp.AddReceivingMiddleware(s.middleware(as))
	return as
}

// serverFor returns agent's SDK server, making and filling it the first
// time the agent connects.
func (s *Server) serverFor(ctx context.Context, agent string) *agentServer {
	s.mu.Lock()
	as, ok := s.agents[agent]
	if !ok {
		as = s.newAgentServer(agent)
		s.agents[agent] = as
	}
	s.mu.Unlock()
	// Outside s.mu (the sync reads tools and the store); a second request
	// of the same agent meanwhile waits here rather than seeing an empty
	// server.
	as.filled.Do(func() {
		if err := s.syncAgent(ctx, as); err != nil {
			s.log.Error("could not list the tools of an agent", "agent", agent, "error", err)
		}
	})
	return as
}

// DefaultLogLevel is the level from which tool logs reach a client that
// never chose one (2025-11-25 and older: it sent no logging/setLevel). Info,
// because that is what a tool says to its user (warnings and errors too);
// debug is the author's narration, and a client wanting it asks for it.
// Modern (2026-07-28) requests are different: the spec forbids log
// notifications for a request that does not name a level in its _meta.
const DefaultLogLevel = "info"

// notAdvertised are the methods of capabilities maiden does not declare
// (resources, prompts, completions). The SDK would answer them with empty
// lists; the spec's answer to an unknown method is -32601.
var notAdvertised = map[string]bool{
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true,
}

// middleware refuses the methods of capabilities not advertised, gives a
// session that has just been initialized the default log level and binds
// it to the agent, and brings the agent's built-in tools up to date with
// its cards before a tools/list or a call of one.
func (s *Server) middleware(as *agentServer) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if notAdvertised[method] {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: fmt.Sprintf("method not found: %s (maiden serves tools only; it has no resources, prompts or completions)", method)}
			}
			switch method {
			case "tools/list":
				s.syncBuiltins(ctx, as)
			case "tools/call":
				if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
					if isBuiltin(r.Params.Name) {
						s.syncBuiltins(ctx, as)
					}
					s.recordUnknown(ctx, as, r)
				}
			}
			res, err := next(ctx, method, req)
			if method == "initialize" && err == nil {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
					s.bindSession(ss, sessionOwner{agent: as.agent, credential: requestExtraCredential(req)})
					// What logging/setLevel would do; a later setLevel from the
					// client replaces it.
					//lint:ignore SA1019 logging is deprecated upstream (SEP-2577) but clients still use it for tool logs
					lreq := &mcp.ServerRequest[*mcp.SetLoggingLevelParams]{Session: ss, Params: &mcp.SetLoggingLevelParams{Level: DefaultLogLevel}}
					if _, lerr := next(ctx, "logging/setLevel", lreq); lerr != nil {
						s.log.Debug("could not set the default log level", "error", lerr)
					}
				}
			}
			return res, err
		}
	}
}

// recordUnknown has the host record the refusal of a tools/call of a name
// this agent is not served (the SDK answers it "unknown tool" without a
// handler of ours running), so that an agent probing for tools shows in
// the audit trail. A name the host resolves after all (a list not yet in
// step) is left to the SDK's answer too.
func (s *Server) recordUnknown(ctx context.Context, as *agentServer, r *mcp.CallToolRequest) {
	as.mu.Lock()
	_, served := as.served[r.Params.Name]
	as.mu.Unlock()
	if served {
		return
	}
	err := s.host.RefuseUnknownTool(ctx, maiden.Call{Agent: as.agent, Tool: r.Params.Name, Credential: s.callCredential(r)})
	switch {
	case err == nil, errors.Is(err, maiden.ErrUnknownTool), errors.Is(err, maiden.ErrClosed):
	case errors.Is(err, maiden.ErrOverloaded):
		s.log.Debug("a call of a tool not served was not recorded: no admission turn", "agent", as.agent)
	default:
		s.log.Warn("a call of a tool not served could not be checked", "agent", as.agent, "error", err)
	}
}

// sessionOwner is who opened an HTTP session (2025-11-25 era): the agent,
// and the credential its initialize was authenticated with
// (maiden.TokenCredential: "token:" and the token's ID; "" without
// [agents], where one credential serves all).
type sessionOwner struct{ agent, credential string }

// requestExtraCredential is the credential the HTTP front end
// authenticated for req (credentialHeader, which it sets itself), "" over
// stdio.
func requestExtraCredential(req mcp.Request) string {
	if x := req.GetExtra(); x != nil && x.Header != nil {
		return x.Header.Get(credentialHeader)
	}
	return ""
}

// bindSession records who opened an HTTP session, until it ends, so that
// a request on it with another agent's token, or another token of its
// agent, is refused (sessionOwned). The binding lives here, in memory,
// because the transport session does: only this process's SDK handler
// can serve the Mcp-Session-Id, and another instance sharing the store
// answers it 404 as a session it never bound. The store's session of the
// same ID is left bound to no credential, which no token can name as a
// 2026-07-28 handle (callSession).
func (s *Server) bindSession(ss *mcp.ServerSession, owner sessionOwner) {
	id := ss.ID()
	if id == "" {
		return // stdio: the process is the agent
	}
	agent := owner.agent
	s.bindMu.Lock()
	_, known := s.sessions[id]
	if !known {
		s.sessions[id] = owner
		s.perAgent[agent]++
	}
	s.bindMu.Unlock()
	if known {
		// initialize again on the same session (which sessionOwned let
		// through only with its own token): one watcher is enough, and
		// the session keeps its first owner.
		return
	}
	go func() {
		ss.Wait()
		s.bindMu.Lock()
		delete(s.sessions, id)
		if s.perAgent[agent]--; s.perAgent[agent] <= 0 {
			delete(s.perAgent, agent)
		}
		s.bindMu.Unlock()
		// The maiden session of the MCP session ends with it: its
		// boundary stops applying and its secret material is dropped.
		if err := s.host.EndSession(context.Background(), id); err != nil && !errors.Is(err, maiden.ErrUnknownSession) {
			s.log.Warn("could not end the session", "session", id, "err", err)
		}
	}()
}

// reserveSession holds one of agent's max session places for a request
// that may open a session (a POST without Mcp-Session-Id), until release:
// the places are agent's bound sessions and such requests in flight. A
// max of 0 or below bounds nothing.
func (s *Server) reserveSession(agent string, max int) (release func(), ok bool) {
	if max <= 0 {
		return func() {}, true
	}
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	if s.perAgent[agent]+s.opening[agent] >= max {
		return nil, false
	}
	s.opening[agent]++
	return func() {
		s.bindMu.Lock()
		defer s.bindMu.Unlock()
		if s.opening[agent]--; s.opening[agent] <= 0 {
			delete(s.opening, agent)
		}
	}, true
}

// sessionAgent returns the agent that opened HTTP session id.
func (s *Server) sessionAgent(id string) (string, bool) {
	o, ok := s.sessionOwnerOf(id)
	return o.agent, ok
}

// sessionOwnerOf returns who opened HTTP session id.
func (s *Server) sessionOwnerOf(id string) (sessionOwner, bool) {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	o, ok := s.sessions[id]
	return o, ok
}

// MCP exposes the underlying SDK server of Options.Agent (for transports
// this package does not wrap).
func (s *Server) MCP() *mcp.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agents[s.opts.Agent].mcp
}

// Problem is a configured tool that is not served, and why.
type Problem struct {
	Tool string
	Err  *maiden.ToolError
}

// Sync makes the served tool lists match the host's configuration: tools
// added, changed (description, schema or code) or removed, for every agent
// served so far, each seeing only the tools bound to it (Host.ToolsFor) and
// the built-ins its cards allow (Host.BuiltinsFor). A tool that cannot be
// served (it fails to load, or its schema is unusable) is left out and
// returned as a Problem, and logged (a warning) the first time it is seen,
// not at every Sync. Clients are sent notifications/tools/list_changed when
// their list changed.
func (s *Server) Sync(ctx context.Context) ([]Problem, error) {
	infos, err := s.host.Tools(ctx)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	s.mu.Lock()
	for _, info := range infos {
		if info.Error != nil {
			problems = append(problems, Problem{Tool: info.Name, Err: info.Error})
			if msg := string(info.Error.Kind) + ": " + info.Error.Message; s.reported[info.Name] != msg {
				s.reported[info.Name] = msg
				what := "tool not served"
				if servedDespite(info) {
					what = "tool listed, its calls refused"
				}
				s.log.Warn(what, "tool", info.Name, "kind", info.Error.Kind, "error", info.Error.Message)
			}
			continue
		}
		if _, ok := s.reported[info.Name]; ok {
			delete(s.reported, info.Name)
			s.log.Info("tool served again", "tool", info.Name)
		}
	}
	for name := range s.reported {
		if !slices.ContainsFunc(infos, func(i maiden.ToolInfo) bool { return i.Name == name }) {
			delete(s.reported, name) // no longer configured
		}
	}
	all := make([]*agentServer, 0, len(s.agents))
	for _, as := range s.agents {
		all = append(all, as)
	}
	s.mu.Unlock()
	for _, as := range all {
		if err := s.syncAgent(ctx, as); err != nil {
			return problems, err
		}
	}
	return problems, nil
}

// syncAgent brings one agent's tool list up to date. An agent the
// configuration no longer declares sees no tools.
func (s *Server) syncAgent(ctx context.Context, as *agentServer) error {
	infos, err := s.host.ToolsFor(ctx, as.agent)
	if errors.Is(err, maiden.ErrUnknownAgent) {
		infos, err = nil, nil
	}
	if err != nil {
		return err
	}
	s.apply(as, infos, func(name string) bool { return !isBuiltin(name) }, s.handler)
	s.syncBuiltins(ctx, as)
	return nil
}

// syncBuiltins brings one agent's built-in tools up to date with its
// bindings and cards. If the store cannot answer, the agent keeps the
// built-ins it had (a call of one still goes through the store).
func (s *Server) syncBuiltins(ctx context.Context, as *agentServer) {
	infos, err := s.host.BuiltinsFor(ctx, as.agent)
	if errors.Is(err, maiden.ErrUnknownAgent) {
		infos, err = nil, nil
	}
	if err != nil {
		s.log.Error("could not list the built-in tools of an agent", "agent", as.agent, "error", err)
		return
	}
	s.apply(as, infos, isBuiltin, s.builtinHandler)
}

func isBuiltin(name string) bool { return slices.Contains(config.BuiltinTools, name) }

// apply makes the tools of as in one group (the tools of agent.toml, or the
// built-ins) exactly infos.
func (s *Server) apply(as *agentServer, infos []maiden.ToolInfo, group func(string) bool, handler func(agent, name string) mcp.ToolHandler) {
	as.mu.Lock()
	defer as.mu.Unlock()
	keep := map[string]bool{}
	for _, info := range infos {
		if !group(info.Name) || info.Error != nil && !servedDespite(info) {
			continue
		}
		keep[info.Name] = true
		now := servedTool{title: info.Title, description: info.Description, schema: info.InputSchema, outputSchema: info.OutputSchema, digest: info.Digest, hints: info.Hints}
		if info.Provenance != nil {
			now.provenance = *info.Provenance
		}
		if old, ok := as.served[info.Name]; ok && old == now {
			continue
		}
		// The host derives the hints from the policy (see maiden.Hints);
		// agent.toml may override them.
		hints := info.Hints
		tool := &mcp.Tool{
			Name:        info.Name,
			Title:       info.Title,
			Description: info.Description,
			InputSchema: json.RawMessage(info.InputSchema),
			Annotations: &mcp.ToolAnnotations{
				Title:           info.Title,
				ReadOnlyHint:    hints.ReadOnly,
				DestructiveHint: &hints.Destructive,
				IdempotentHint:  hints.Idempotent,
				OpenWorldHint:   &hints.OpenWorld,
			},
		}
		if p := info.Provenance; p != nil {
			tool.Meta = mcp.Meta{MetaProvenance: provenanceMeta(p)}
		}
		if info.OutputSchema != "" {
			// The host holds every successful output to it (kind tool
			// otherwise), so structuredContent always matches it; the
			// served schema also admits a failure's structured error.
			tool.OutputSchema = json.RawMessage(servedOutputSchema(info.OutputSchema))
		}
		as.mcp.AddTool(tool, handler(as.agent, info.Name))
		as.served[info.Name] = now
	}
	var gone []string
	for name := range as.served {
		if group(name) && !keep[name] {
			gone = append(gone, name)
			delete(as.served, name)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		as.mcp.RemoveTools(gone...)
	}
}

// RunStdio serves one client over r and w (a desktop agent's pipes) until
// the client disconnects or ctx ends. A line that is not a JSON-RPC message,
// or is longer than max_input_bytes plus EnvelopeAllowance, is answered with
// a JSON-RPC error and skipped; the session goes on.
func (s *Server) RunStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	// Not mcp.Server.Run: it logs an error when ctx ends, and a client
	// leaving or a SIGINT is how a stdio server is meant to stop.
	s.stdio.Store(true)
	defer func() {
		if err := s.host.EndSession(context.WithoutCancel(ctx), s.stdioSession); err != nil && !errors.Is(err, maiden.ErrUnknownSession) {
			s.log.Warn("could not end the session", "session", s.stdioSession, "err", err)
		}
	}()
	ss, err := s.serverFor(ctx, s.opts.Agent).mcp.Connect(ctx, &stdioTransport{r: r, w: w, maxLine: s.maxMessage, drainFor: s.longestCall, log: s.log}, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-ended
		return nil
	case err := <-ended:
		if errors.Is(err, io.EOF) || (err != nil && ctx.Err() != nil) {
			return nil
		}
		return err
	}
}

// handler runs one tools/call of the named tool for agent.
func (s *Server) handler(agent, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// The size is checked once, by Host.Call, before anything parses
		// the arguments (a 20 MB array of small numbers took 860 MB to
		// parse); the transport has bounded the whole message already.
		input := string(req.Params.Arguments)
		if len(req.Params.Arguments) == 0 || string(req.Params.Arguments) == "null" {
			input = "{}"
		}
		logs := startLogForwarder(ctx, req.Session, name, s.log)
		res, err := s.runCall(ctx, req, maiden.Call{Agent: agent, Tool: name, Input: input, OnLog: logs.send})
		logs.finish()
		return s.fitOutputSchema(agent, name, res), err
	}
}

// builtinHandler runs one tools/call of a built-in tool for agent.
func (s *Server) builtinHandler(agent, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		input := string(req.Params.Arguments)
		if len(req.Params.Arguments) == 0 || input == "null" {
			input = "{}"
		}
		// Through runCall like a tool's call: its session, and a wait for
		// a human (request_sandbox_boundary) with progress and the inbox.
		res, err := s.runCall(ctx, req, maiden.Call{Agent: agent, Tool: name, Input: input})
		return s.fitOutputSchema(agent, name, res), err
	}
}

// structuredErrorSchema is what a failed call's structuredContent holds:
// a session boundary's structured error (code SANDBOX_COMMAND_EXECUTION_FAILED,
// reason, requiredExpansion, ...) or a built-in's own (tool, target, reason).
const structuredErrorSchema = `{"type":"object","required":["reason"],` +
	`"description":"A failed call (isError): maiden's structured error.",` +
	`"properties":{"code":{"type":"string"},"reason":{"type":"string"},"message":{"type":"string"},"requiredExpansion":{"type":"object"}}}`

// servedOutputSchema is the outputSchema tools/list shows for a tool that
// declares schema: the declared schema or the structured error. Clients
// hold every structuredContent to the outputSchema, an error result's too
// (the TypeScript SDK throws on a mismatch, so the model would never see
// the requiredExpansion of a sandbox_boundary_required error). A schema
// with $-keywords ($ref, $defs, $id, $schema...) is served as declared,
// since nesting it would change what its references point to; such a
// tool's failures go without structuredContent (fitOutputSchema).
func servedOutputSchema(schema string) string {
	if !admitsErrors(schema) {
		return schema
	}
	return `{"type":"object","anyOf":[` + schema + `,` + structuredErrorSchema + `]}`
}

// admitsErrors reports whether the schema served for a tool that declares
// schema admits the structured error.
func admitsErrors(schema string) bool {
	return schema != "" && !strings.Contains(schema, `"$`) && json.Valid([]byte(schema))
}

// servedDespite: a tool with an Error that is still listed, so that its
// calls reach the host and get the host's reason rather than "unknown
// tool": an imported tool whose upstream is restarting (kind unavailable),
// or whose upstream changed it since an operator accepted it (kind denied,
// listed with the accepted definition). An imported tool never accepted
// comes without a definition and is not listed.
func servedDespite(info maiden.ToolInfo) bool {
	return info.InputSchema != "" && (info.Error.Kind == maiden.KindUnavailable || info.Error.Kind == maiden.KindDenied)
}

// fitOutputSchema drops the structured error of a failed result when the
// tool's served outputSchema does not admit it (the text still says it
// all), so that no client is shown structuredContent that breaks the schema.
func (s *Server) fitOutputSchema(agent, tool string, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || !res.IsError || res.StructuredContent == nil {
		return res
	}
	s.mu.Lock()
	as := s.agents[agent]
	s.mu.Unlock()
	if as == nil {
		return res
	}
	as.mu.Lock()
	schema := as.served[tool].outputSchema
	as.mu.Unlock()
	if schema != "" && !admitsErrors(schema) {
		res.StructuredContent = nil
	}
	return res
}

// protocolError turns a call that could not be made into a JSON-RPC error.
func (s *Server) protocolError(tool string, err error) error {
	switch {
	case errors.Is(err, maiden.ErrUnknownTool):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	case errors.Is(err, maiden.ErrOverloaded):
		// -32000..-32099 are for implementation-defined server errors.
		return &jsonrpc.Error{Code: CodeOverloaded, Message: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	default:
		s.log.Error("call failed in the host", "tool", tool, "error", err)
		msg := err.Error()
		if !strings.HasPrefix(msg, "maiden: ") {
			msg = "maiden: " + msg // the host's own errors (ErrState) already say so
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	}
}

// CodeOverloaded is the JSON-RPC error code of a call refused because the
// host is at its concurrency and queue limits. Clients may retry later.
const CodeOverloaded = -32001

// MetaErrorKind is the _meta key of a failed result that carries maiden's
// error kind, for clients that want it without parsing the text.
const MetaErrorKind = "maiden/error-kind"

// MetaProvenance is the _meta key of a tools/list entry whose component
// came from an OCI registry (docs/oci.md): an object naming its pinned
// reference ("ref"), the component's manifest digest ("component"), the
// key that verified its signature ("signer", absent when unsigned), the
// hash of the definition it reports ("schema", SEP-1766 style) and whether
// agent.toml pins that hash ("schema_pinned": then a component reporting
// another is not served at all).
const MetaProvenance = "run.maiden/provenance"

// provenanceMeta is MetaProvenance's value.
func provenanceMeta(p *maiden.Provenance) map[string]any {
	m := map[string]any{"ref": p.Ref, "component": p.Component, "schema": p.Schema, "schema_pinned": p.SchemaPinned}
	if p.Signer != "" {
		m["signer"] = p.Signer
	}
	return m
}

// MetaUnconfined is the _meta key set (true) on every result of a wrapped
// CLI that ran without Landlock (unconfined = true in agent.toml).
const MetaUnconfined = "maiden/unconfined"

// toolResult renders a Result for the agent. Output that is a JSON object is
// also returned as structured content.
func toolResult(res maiden.Result) *mcp.CallToolResult {
	var out *mcp.CallToolResult
	if !res.OK {
		out = errorResult(res.Error.Kind, res.Error.Message)
		var obj map[string]any
		if len(res.Error.Structured) > 0 && json.Unmarshal(res.Error.Structured, &obj) == nil && obj != nil {
			// The structured error (a session boundary's) for the model.
			out.StructuredContent = obj
		}
	} else {
		out = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Output}}}
		var obj map[string]any
		if json.Unmarshal([]byte(res.Output), &obj) == nil && obj != nil {
			out.StructuredContent = obj
		}
	}
	if res.Unconfined {
		if out.Meta == nil {
			out.Meta = mcp.Meta{}
		}
		out.Meta[MetaUnconfined] = true
	}
	return out
}

// errorResult is a failed call's result: its text starts with the kind.
func errorResult(kind maiden.ErrorKind, msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Meta:    mcp.Meta{MetaErrorKind: string(kind)},
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %s", kind, msg)}},
	}
}

// maxMessage is the largest JSON-RPC message a transport accepts: the host's
// input limit (Options.MaxInputBytes, else the configuration's) plus the
// envelope around it.
func (s *Server) maxMessage() int64 {
	return s.host.MaxInputBytes() + EnvelopeAllowance
}

// longestCall is how long the slowest configured call may take, plus a
// margin for its answer to be written.
func (s *Server) longestCall() time.Duration {
	d := config.DefaultTimeout
	for _, t := range s.host.Config().Tools() {
		d = max(d, t.Timeout)
	}
	return d + 5*time.Second
}

// startProgress tells the client how the call goes, if it gave a progress
// token. Until the tool reports progress of its own, a ticker does, every
// interval: the value is the seconds elapsed, the total unknown, and while
// the call waits for a human's approval (w) the message says so. Once the
// tool reports (report, which never blocks: the host hands it the tool's
// reports, already coalesced, checked and redacted), its reports are sent
// instead, with the client's token; the ticker sends no more. Values on the
// token always increase, as MCP requires: when the ticker has already sent
// some, the tool's are shifted by the last value sent (progress and total
// alike), and any value not above the last one sent is dropped. stop sends
// the report still pending, so that every notification precedes the result.
func (s *Server) startProgress(ctx context.Context, req *mcp.CallToolRequest, tool string, w *approvalWatch) (stop func(), report func(maiden.Progress)) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}, nil
	}
	pr := &progressSender{wake: make(chan struct{}, 1)}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.opts.ProgressEvery)
		defer t.Stop()
		start := time.Now()
		send := func(p *mcp.ProgressNotificationParams) {
			p.ProgressToken = token
			if err := req.Session.NotifyProgress(ctx, p); err != nil {
				s.log.Debug("progress notification failed", "tool", tool, "error", err)
			}
		}
		for {
			select {
			case <-done:
				if p := pr.next(); p != nil {
					send(p)
				}
				return
			case <-ctx.Done():
				return
			case <-pr.wake:
				if p := pr.next(); p != nil {
					send(p)
				}
			case <-t.C:
				elapsed := time.Since(start)
				msg := w.waiting()
				if msg == "" {
					msg = fmt.Sprintf("%s running for %s", tool, elapsed.Round(100*time.Millisecond))
				}
				if p := pr.tick(elapsed.Seconds(), msg); p != nil {
					send(p)
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}, pr.report
}

// progressSender is what one call's progress notifications have said: the
// last value sent on the client's token, and the tool's report waiting to
// be sent.
type progressSender struct {
	wake chan struct{}

	mu      sync.Mutex
	sent    bool
	last    float64
	own     bool    // the tool has reported: the ticker is silent
	base    float64 // added to the tool's values (the ticker's last value)
	pending *maiden.Progress
}

// report takes the tool's newest report (never blocks).
func (p *progressSender) report(r maiden.Progress) {
	p.mu.Lock()
	if !p.own {
		p.own = true
		if p.sent {
			p.base = p.last
		}
	}
	p.pending = &r
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// next is the pending report of the tool as it is to be sent, or nil.
func (p *progressSender) next() *mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.pending
	p.pending = nil
	if r == nil {
		return nil
	}
	out := &mcp.ProgressNotificationParams{Progress: p.base + r.Progress, Message: r.Message}
	if r.Total > 0 {
		out.Total = p.base + r.Total
	}
	return p.sendable(out)
}

// tick is the ticker's notification, or nil once the tool reports.
func (p *progressSender) tick(elapsed float64, msg string) *mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.own {
		return nil
	}
	return p.sendable(&mcp.ProgressNotificationParams{Progress: elapsed, Message: msg})
}

// sendable records n as sent, or drops it (nil) if its value does not
// increase; p.mu is held.
func (p *progressSender) sendable(n *mcp.ProgressNotificationParams) *mcp.ProgressNotificationParams {
	if p.sent && n.Progress <= p.last {
		return nil
	}
	p.sent, p.last = true, n.Progress
	return n
}

// minLevel drops records below a level, whatever the wrapped handler allows.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

// Handle turns the SDK's warning that a notification found no stream to
// send on ("calling notifications/tools/list_changed: rejected by
// transport": a client between requests, with no notification stream
// open) into a debug record: nothing is wrong, and a reload would otherwise
// log one per connected session.
func (h minLevel) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "calling notifications/") && strings.Contains(r.Message, ": rejected by transport") {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
