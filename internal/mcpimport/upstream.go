//lint:file-ignore SA1019 MCP logging is deprecated upstream (SEP-2577) but still how upstream servers send logs, which maiden relays

// Package mcpimport makes maiden an MCP client of upstream MCP servers (issue
// 13, "MCP imports"): it starts a stdio server (a command) or connects to a
// streamable HTTP one (a URL, with a credential attached to every request),
// lists its tools, calls them, relays the upstream's log messages and progress
// notifications to the caller, follows notifications/tools/list_changed, and
// restarts an upstream that dies, with capped exponential backoff.
//
// It knows nothing of maiden's policy: the host decides which agent may call
// what (cards, middleware, audit, limits) and exposes each tool as NAME.TOOL;
// ExposedNames gives the TOOL part. See docs/mcp-imports.md.
package mcpimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure one upstream. Exactly one of Command and URL is set.
type Options struct {
	// Name is the upstream's name (the NAME of [mcp.NAME]); it appears in
	// errors and log lines.
	Name string

	// Command is the stdio server's argv; Command[0] is run as it is (no
	// shell, no PATH search beyond exec.Command's). Env is its complete
	// environment: nothing of maiden's own environment is inherited. Dir is
	// its working directory ("" = maiden's).
	Command []string
	Env     []string
	Dir     string
	// Start starts the command (default: (*exec.Cmd).Start). The host puts
	// the wrapped-CLI confinement here. The command arrives with its pipes
	// set and SysProcAttr.Setpgid true (the upstream gets its own process
	// group, which Close and a restart kill whole); Start may add to
	// SysProcAttr but must keep Setpgid and must not touch Stdin, Stdout,
	// Stderr.
	Start func(*exec.Cmd) error

	// URL is a streamable HTTP endpoint: https, or http to a loopback
	// address only (a credential never crosses a network in the clear).
	URL string
	// Credential returns the value of CredentialHeader for each HTTP request
	// to the URL's origin (and to no other origin; redirects are not
	// followed). The value is never logged nor put in an error.
	Credential func(ctx context.Context) (string, error)
	// CredentialHeader is the header Credential fills (default
	// "Authorization"; a bearer token's value is then "Bearer ...").
	CredentialHeader string
	// HTTPClient's Transport, if set, carries the requests (for tests and
	// proxies); its CheckRedirect is replaced.
	HTTPClient *http.Client

	// Logger receives the operator's view: starts, exits, restarts, the
	// upstream's stderr lines and log messages no single call owns. Nil
	// discards.
	Logger *slog.Logger

	// Backoff between restarts: Initial doubles after each failed start or
	// short-lived session up to Max; a session that lived StableAfter resets
	// it. Defaults 250ms, 30s, 30s.
	BackoffInitial, BackoffMax, StableAfter time.Duration
	// ConnectTimeout bounds starting, initialising and listing (default 30s).
	ConnectTimeout time.Duration
	// MaxMessageBytes caps one message from the upstream (a stdio line, an
	// SSE event); default 4 MiB. A larger one ends the session (the
	// upstream is restarted) and fails the call in flight as unavailable.
	MaxMessageBytes int

	// Redact, if set, is applied to the upstream's log messages that go to
	// Logger (those no single call owns), and to the text of the errors
	// that say why it is down or could not list its tools (a JSON-RPC
	// error it answered initialize or tools/list with, an HTTP status):
	// Logger's warnings, Start's error, Down and a call's
	// UnavailableError. The upstream holds the Credential maiden sends
	// it, and what it echoes of it must reach neither the operator's log
	// nor an agent.
	Redact func(string) string
}

// Tool is one tool as the upstream lists it.
type Tool struct {
	Name         string          // the upstream's own name (not sanitised)
	Title        string          // optional
	Description  string          // optional
	InputSchema  json.RawMessage // a JSON Schema object; "{"type":"object"}" when the upstream gave none
	OutputSchema json.RawMessage // nil when the upstream declares none
	Annotations  *Annotations    // nil when the upstream gave none
	// Available is false while the upstream is down: the list is the last
	// one it gave, kept so that the host can still describe the tools and
	// answer calls with "unavailable".
	Available bool
}

// Annotations are the upstream's behaviour hints (untrusted: they are the
// upstream's claims about itself).
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Result is a call's outcome as the upstream gave it.
type Result struct {
	// Text is the text of the upstream's text content blocks, joined by
	// newlines; other blocks (images, audio, resources) are in Content only.
	Text string
	// Content is the upstream's content array, as JSON.
	Content json.RawMessage
	// Structured is the upstream's structuredContent (nil if none).
	Structured json.RawMessage
	// IsError: the tool itself reported failure (a result, not a protocol
	// error: Text says why, in the upstream's words).
	IsError bool
}

// Progress is one progress notification of a call, as the upstream sent it
// (its message capped at 16 KiB): the values are the upstream's claims, not
// checked here (the host drops those that do not increase and coalesces a
// flood).
type Progress struct {
	Progress float64
	Total    float64 // 0: unknown
	Message  string
}

// ErrUnavailable is what errors.Is finds in a call refused or broken because
// the upstream is down or restarting (an *UnavailableError).
var ErrUnavailable = errors.New("mcp upstream unavailable")

// UnavailableError is a call's failure while the upstream is down. The host
// maps it to an "unavailable" failure; its message is meant for the agent
// (it names the upstream and the next attempt, not the upstream's stderr).
type UnavailableError struct {
	Upstream string
	// Cause: why it is down (exit status, connection error).
	Cause error
	// NextAttempt: when the next start is due (zero if one is under way).
	NextAttempt time.Time
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("MCP upstream %q is unavailable", e.Upstream)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	if !e.NextAttempt.IsZero() {
		if d := time.Until(e.NextAttempt); d > 0 {
			return msg + fmt.Sprintf("; maiden restarts it (next attempt in %s)", d.Round(time.Millisecond))
		}
	}
	return msg + "; maiden is restarting it"
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Cause }

// JSON-RPC codes the SDK uses for its own transport failures (a request the
// transport could not deliver, a closing client): not the upstream's answer.
const (
	codeRejected      = -32005
	codeClientClosing = -32003
)

type call struct {
	gen        uint64 // the session it was made on
	onLog      func(api.LogEntry)
	onProgress func(Progress)
}

// Upstream is one upstream server, kept running. Its methods are safe for
// concurrent use.
type Upstream struct {
	opts   Options
	log    *slog.Logger
	client *mcp.Client
	http   *http.Client // URL upstreams

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	done   chan struct{}  // closed when the supervisor has stopped
	bg     sync.WaitGroup // the relisters, which Close waits for

	// opLog paces the upstream's log messages to Logger (opLogPerSecond).
	opLog opLogPace

	mu        sync.Mutex
	started   bool
	sess      *mcp.ClientSession // nil while down
	proc      *exec.Cmd          // the running command (stdio)
	tools     []Tool
	downCause error
	nextTry   time.Time
	// stderrTail: the last lines of the stdio command's stderr (command.go)
	stderrTail []string
	onChange   []func()
	calls      map[string]*call // by progress token
	seq        uint64
	relist     chan struct{} // the current session's re-list signal
	gen        uint64        // the current (or next) session's number

	// notifyMu guards the OnChange runner (changed): notifying while a
	// run is under way, notifyDue when another is due after it.
	notifyMu             sync.Mutex
	notifying, notifyDue bool
}

// New checks the options and returns an Upstream that is not started yet.
func New(o Options) (*Upstream, error) {
	if o.Name == "" {
		return nil, errors.New("mcpimport: Options.Name is empty")
	}
	if (len(o.Command) == 0) == (o.URL == "") {
		return nil, fmt.Errorf("MCP upstream %q: set exactly one of a command and a URL", o.Name)
	}
	u := &Upstream{opts: o, log: o.Logger, calls: map[string]*call{}, done: make(chan struct{})}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	u.log = u.log.With("upstream", o.Name)
	if o.URL != "" {
		if o.Credential != nil && len(o.Env) > 0 {
			return nil, fmt.Errorf("MCP upstream %q: Env is for a command, not a URL", o.Name)
		}
		hc, err := newHTTPClient(o)
		if err != nil {
			return nil, err
		}
		u.http = hc
	} else if o.Credential != nil {
		return nil, fmt.Errorf("MCP upstream %q: a credential is for a URL; a command gets its secrets through Env", o.Name)
	}
	if u.opts.BackoffInitial <= 0 {
		u.opts.BackoffInitial = 250 * time.Millisecond
	}
	if u.opts.BackoffMax <= 0 {
		u.opts.BackoffMax = 30 * time.Second
	}
	if u.opts.BackoffMax < u.opts.BackoffInitial {
		u.opts.BackoffMax = u.opts.BackoffInitial
	}
	if u.opts.StableAfter <= 0 {
		u.opts.StableAfter = 30 * time.Second
	}
	if u.opts.ConnectTimeout <= 0 {
		u.opts.ConnectTimeout = 30 * time.Second
	}
	if u.opts.MaxMessageBytes <= 0 {
		u.opts.MaxMessageBytes = 4 << 20
	}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "maiden", Version: "mcpimport"}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: maiden offers the upstream
		// nothing but answers to its calls.
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: u.onToolListChanged,
		// Progress and log notifications are taken where they are read
		// (tap.go), not through the SDK's handlers.
	})
	u.downCause = errors.New("not started")
	return u, nil
}

// OnChange registers f, called (from a goroutine of its own, never while a
// lock is held) after the tool list changed: an upstream list_changed (after
// the re-list), a (re)start that listed tools, and the upstream going down
// (the tools then report Available false). Calls are coalesced: the
// callbacks of one upstream never run concurrently, and changes that come
// while they run are told by one more run after it.
func (u *Upstream) OnChange(f func()) {
	u.mu.Lock()
	u.onChange = append(u.onChange, f)
	u.mu.Unlock()
}

// Start connects (starting the command) and lists the tools, within
// ctx and Options.ConnectTimeout. Whatever the first attempt's outcome, a
// supervisor keeps the upstream up from then on until Close: a failed first
// attempt is returned (so that the host can report it) and retried with
// backoff. Start may be called once.
func (u *Upstream) Start(ctx context.Context) error {
	u.mu.Lock()
	if u.started {
		u.mu.Unlock()
		return fmt.Errorf("MCP upstream %q: already started", u.opts.Name)
	}
	u.started = true
	u.ctx, u.cancel = context.WithCancel(context.Background())
	u.mu.Unlock()
	first := make(chan error, 1)
	go u.supervise(first)
	select {
	case err := <-first:
		if err != nil {
			return fmt.Errorf("MCP upstream %q: %w", u.opts.Name, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("MCP upstream %q: start: %w", u.opts.Name, ctx.Err())
	}
}

// Tools returns the last tool list (copies of the entries; schemas shared,
// not to be modified).
func (u *Upstream) Tools() []Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	avail := u.sess != nil
	out := make([]Tool, len(u.tools))
	for i, t := range u.tools {
		t.Available = avail
		out[i] = t
	}
	return out
}

// PID is the process ID of the running stdio command (0 when down or for a
// URL upstream).
func (u *Upstream) PID() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess == nil || u.proc == nil || u.proc.Process == nil {
		return 0
	}
	return u.proc.Process.Pid
}

// Down returns the *UnavailableError a call would get now (why the
// upstream is down and when it is tried next), or nil while it is up.
func (u *Upstream) Down() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != nil {
		return nil
	}
	return &UnavailableError{Upstream: u.opts.Name, Cause: u.downCause, NextAttempt: u.nextTry}
}

// Available reports whether the upstream is up.
func (u *Upstream) Available() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess != nil
}

// Call calls the upstream tool named tool (the upstream's own name) with
// args (a JSON object; nil means {}). onLog receives the upstream's log
// messages while this is the only call in flight on this upstream (MCP gives
// a log message no request of its own; when calls overlap, messages go to
// Options.Logger so that one agent never sees another's); onProgress
// receives the call's own progress notifications (matched by progress
// token). Either may be nil; both are called from the connection's goroutine
// and must not block.
//
// The error is: an *UnavailableError (errors.Is ErrUnavailable) when the
// upstream is down or dies during the call; ctx's error when ctx ended it
// (the upstream is sent notifications/cancelled); api.ErrClosed after Close; or
// a protocol error from the upstream (an unknown tool, invalid arguments as
// the upstream's SDK reports them), wrapped with the upstream's name. A tool
// that ran and failed is not an error: Result.IsError.
func (u *Upstream) Call(ctx context.Context, tool string, args json.RawMessage, onLog func(api.LogEntry), onProgress func(Progress)) (Result, error) {
	u.mu.Lock()
	if !u.started || u.ctx.Err() != nil {
		u.mu.Unlock()
		if !u.started {
			return Result{}, fmt.Errorf("MCP upstream %q: not started", u.opts.Name)
		}
		return Result{}, api.ErrClosed
	}
	sess := u.sess
	if sess == nil {
		err := &UnavailableError{Upstream: u.opts.Name, Cause: u.downCause, NextAttempt: u.nextTry}
		u.mu.Unlock()
		return Result{}, err
	}
	u.seq++
	token := "maiden-" + strconv.FormatUint(u.seq, 10)
	u.calls[token] = &call{gen: u.gen, onLog: onLog, onProgress: onProgress}
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		delete(u.calls, token)
		u.mu.Unlock()
	}()

	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if onProgress != nil {
		params.SetProgressToken(token)
	}
	res, err := sess.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("MCP upstream %q, tool %q: %w", u.opts.Name, tool, ctx.Err())
		}
		u.mu.Lock()
		same := u.sess == sess
		closed := u.ctx.Err() != nil
		cause := u.downCause
		next := u.nextTry
		u.mu.Unlock()
		if closed {
			return Result{}, api.ErrClosed
		}
		var rpcErr *jsonrpc.Error
		if same && errors.As(err, &rpcErr) && rpcErr.Code != codeRejected && rpcErr.Code != codeClientClosing {
			// The upstream answered with an error (an unknown tool,
			// arguments its SDK refused): the upstream is fine.
			return Result{}, fmt.Errorf("MCP upstream %q, tool %q: %w", u.opts.Name, tool, err)
		}
		// Anything else is the connection failing (closed, a message over
		// the cap, a broken stream): the session is ended, and restarted.
		if same {
			// The SDK's error may quote the upstream's own words (a
			// JSON-RPC error of the transport's code), so redacted as
			// Options.Redact promises for an UnavailableError.
			cause = u.redactErr(fmt.Errorf("the connection failed during the call: %w", err))
			go func() { _ = sess.Close() }()
		}
		return Result{}, &UnavailableError{Upstream: u.opts.Name, Cause: cause, NextAttempt: next}
	}
	return convertResult(res)
}

func convertResult(res *mcp.CallToolResult) (Result, error) {
	out := Result{IsError: res.IsError}
	content := res.Content
	if content == nil {
		content = []mcp.Content{}
	}
	b, err := json.Marshal(content)
	if err != nil {
		return Result{}, fmt.Errorf("MCP result content: %w", err)
	}
	out.Content = b
	var text []byte
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if len(text) > 0 {
				text = append(text, '\n')
			}
			text = append(text, t.Text...)
		}
	}
	out.Text = string(text)
	if res.StructuredContent != nil {
		s, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return Result{}, fmt.Errorf("MCP result structuredContent: %w", err)
		}
		out.Structured = s
	}
	return out, nil
}

// Close stops the supervisor, ends the session and the command (stdin
// closed, then the process group killed after a grace period). Calls in
// flight fail; later calls return api.ErrClosed.
func (u *Upstream) Close() error {
	u.mu.Lock()
	if !u.started {
		u.started = true
		u.ctx, u.cancel = context.WithCancel(context.Background())
		u.cancel()
		close(u.done)
		u.mu.Unlock()
		return nil
	}
	u.cancel()
	u.mu.Unlock()
	<-u.done
	u.bg.Wait()
	return nil
}

// supervise keeps the upstream up until Close.
func (u *Upstream) supervise(first chan<- error) {
	defer close(u.done)
	delay := u.opts.BackoffInitial
	for {
		began := time.Now()
		sess, proc, exited, err := u.connect()
		err = u.redactErr(err)
		if err != nil {
			if u.ctx.Err() != nil {
				u.setDown(api.ErrClosed, 0)
			} else {
				u.log.Warn("MCP upstream failed to start", "error", err, "retry_in", delay, "stderr", strings.Join(u.StderrTail(), "\n"))
				u.setDown(err, delay)
			}
		}
		if first != nil {
			first <- err
			first = nil
		}
		if err != nil {
			if u.ctx.Err() != nil {
				return
			}
			if !u.sleep(delay) {
				return
			}
			delay = min(2*delay, u.opts.BackoffMax)
			continue
		}
		// Up: wait for the session or the process to end, or for Close.
		ended := make(chan error, 1)
		go func() { ended <- sess.Wait() }()
		var cause error
		select {
		case <-u.ctx.Done():
			u.teardown(sess, proc, exited)
			u.setDown(api.ErrClosed, 0)
			return
		case werr := <-exited:
			exited <- werr // teardown reads it again
			cause = exitCause(werr)
		case werr := <-ended:
			cause = errors.New("the connection closed")
			if werr != nil && !errors.Is(werr, mcp.ErrConnectionClosed) {
				cause = fmt.Errorf("the connection closed: %w", werr)
			}
			if exited != nil {
				// A command that died closed its stdout first: give its
				// exit status a moment to arrive, as it says more.
				select {
				case werr := <-exited:
					exited <- werr
					cause = exitCause(werr)
				case <-time.After(500 * time.Millisecond):
				}
			}
		}
		cause = u.redactErr(cause)
		u.teardown(sess, proc, exited)
		if u.ctx.Err() != nil {
			u.setDown(api.ErrClosed, 0)
			return
		}
		if time.Since(began) >= u.opts.StableAfter {
			delay = u.opts.BackoffInitial
		}
		u.log.Warn("MCP upstream went down; restarting", "cause", cause, "retry_in", delay)
		u.setDown(cause, delay)
		if !u.sleep(delay) {
			return
		}
		delay = min(2*delay, u.opts.BackoffMax)
	}
}

// redactedError is an error whose text passed through Options.Redact: it
// quotes the upstream, which may echo the credential. Unwrap keeps
// errors.Is and errors.As working on the cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr is err with its text redacted (Options.Redact), nil for nil.
func (u *Upstream) redactErr(err error) error {
	if err == nil || u.opts.Redact == nil {
		return err
	}
	return &redactedError{msg: u.opts.Redact(err.Error()), err: err}
}

func exitCause(err error) error {
	if err == nil {
		return errors.New("it exited (status 0)")
	}
	return fmt.Errorf("it exited (%v)", err)
}

func (u *Upstream) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-u.ctx.Done():
		return false
	}
}

func (u *Upstream) setDown(cause error, retryIn time.Duration) {
	u.mu.Lock()
	wasUp := u.sess != nil
	u.sess = nil
	u.proc = nil
	u.downCause = cause
	if retryIn > 0 {
		u.nextTry = time.Now().Add(retryIn)
	} else {
		u.nextTry = time.Time{}
	}
	if u.relist != nil {
		close(u.relist)
		u.relist = nil
	}
	u.mu.Unlock()
	if wasUp {
		u.changed()
	}
}

// changed runs the OnChange callbacks on a goroutine of their own: one run
// at a time per upstream, and changes during a run coalesced into one more
// run after it. An upstream that sends list_changed as fast as it can must
// not start a callback (a front end's re-listing of every agent's tools)
// per re-list, each on a goroutine of its own, without bound.
func (u *Upstream) changed() {
	u.notifyMu.Lock()
	if u.notifying {
		u.notifyDue = true
		u.notifyMu.Unlock()
		return
	}
	u.notifying = true
	u.notifyMu.Unlock()
	go func() {
		for {
			u.mu.Lock()
			fs := append([]func(){}, u.onChange...)
			u.mu.Unlock()
			for _, f := range fs {
				f()
			}
			u.notifyMu.Lock()
			if !u.notifyDue {
				u.notifying = false
				u.notifyMu.Unlock()
				return
			}
			u.notifyDue = false
			u.notifyMu.Unlock()
		}
	}()
}

// connect starts the command (or dials the URL), initialises the session and
// lists the tools. exited receives the command's Wait result (nil channel for
// a URL).
func (u *Upstream) connect() (*mcp.ClientSession, *exec.Cmd, chan error, error) {
	ctx, cancel := context.WithTimeout(u.ctx, u.opts.ConnectTimeout)
	defer cancel()
	// The re-list signal exists before the session does, so that a
	// list_changed arriving between initialisation and the first list is
	// not lost (the relister then lists once more).
	relist := make(chan struct{}, 1)
	u.mu.Lock()
	u.gen++
	gen := u.gen
	if u.relist != nil {
		close(u.relist)
	}
	u.relist = relist
	u.mu.Unlock()
	var (
		transport mcp.Transport
		proc      *exec.Cmd
		exited    chan error
	)
	if u.opts.URL != "" {
		hc := *u.http
		hc.Transport = &sseTapTransport{base: u.http.Transport, u: u, gen: gen}
		transport = &mcp.StreamableClientTransport{Endpoint: u.opts.URL, HTTPClient: &hc, MaxRetries: -1,
			MaxEventSize: u.opts.MaxMessageBytes}
	} else {
		var err error
		proc, exited, transport, err = u.startCommand()
		if err != nil {
			return nil, nil, nil, err
		}
		transport = &tapTransport{inner: transport, u: u, gen: gen}
	}
	sess, err := u.client.Connect(ctx, transport, nil)
	if err != nil {
		if proc != nil {
			killGroup(proc, exited, 0)
		}
		return nil, nil, nil, fmt.Errorf("initialize: %w", err)
	}
	if caps := sess.InitializeResult().Capabilities; caps != nil && caps.Logging != nil {
		// Ask for everything; the host filters. An upstream that refuses
		// still works (it logs at its own level).
		_ = sess.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"})
	}
	tools, err := listTools(ctx, sess)
	if err != nil {
		_ = sess.Close()
		if proc != nil {
			killGroup(proc, exited, 0)
		}
		return nil, nil, nil, fmt.Errorf("tools/list: %w", err)
	}
	u.mu.Lock()
	u.sess = sess
	u.proc = proc
	u.tools = tools
	u.downCause = nil
	u.nextTry = time.Time{}
	u.mu.Unlock()
	u.bg.Add(1)
	go func() {
		defer u.bg.Done()
		u.relister(sess, relist)
	}()
	if proc != nil {
		u.log.Info("MCP upstream started", "pid", proc.Process.Pid, "tools", len(tools))
	} else {
		u.log.Info("MCP upstream connected", "tools", len(tools))
	}
	u.changed()
	return sess, proc, exited, nil
}

// teardown ends a session and its command.
func (u *Upstream) teardown(sess *mcp.ClientSession, proc *exec.Cmd, exited chan error) {
	closed := make(chan struct{})
	go func() { _ = sess.Close(); close(closed) }()
	if proc != nil {
		killGroup(proc, exited, 2*time.Second)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		u.log.Warn("MCP upstream session did not close in 5s; abandoned")
	}
}

// killGroup waits up to grace for the command to exit (the caller closes its
// stdin), then kills its process group and waits for it.
func killGroup(proc *exec.Cmd, exited chan error, grace time.Duration) {
	if grace > 0 { // stdin is closed by the session's Close
		select {
		case err := <-exited:
			exited <- err
			return
		case <-time.After(grace):
		}
	}
	if proc.Process != nil {
		_ = syscall.Kill(-proc.Process.Pid, syscall.SIGKILL)
	}
	err := <-exited
	exited <- err
}

// MaxTools bounds the tools of one upstream: a listing of more is refused,
// as one of more than 100 pages is (a page is bounded only by the message
// cap, which holds some 90,000 names).
const MaxTools = 1000

func listTools(ctx context.Context, sess *mcp.ClientSession) ([]Tool, error) {
	var out []Tool
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page >= 100 {
			return nil, errors.New("more than 100 pages of tools")
		}
		res, err := sess.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		if len(out)+len(res.Tools) > MaxTools {
			return nil, fmt.Errorf("more than %d tools", MaxTools)
		}
		for _, t := range res.Tools {
			tool, err := convertTool(t)
			if err != nil {
				return nil, err
			}
			out = append(out, tool)
		}
		if res.NextCursor == "" {
			return out, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

func convertTool(t *mcp.Tool) (Tool, error) {
	out := Tool{Name: t.Name, Title: t.Title, Description: t.Description, Available: true}
	var err error
	if t.InputSchema == nil {
		out.InputSchema = json.RawMessage(`{"type":"object"}`)
	} else if out.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
		return Tool{}, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	if t.OutputSchema != nil {
		if out.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return Tool{}, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
		}
	}
	if a := t.Annotations; a != nil {
		out.Annotations = &Annotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	return out, nil
}

// relistInterval is the least time between two re-lists of one session:
// an upstream that sends list_changed after every tools/list answer gets
// at most ten re-lists a second, the signals meanwhile coalesced.
const relistInterval = 100 * time.Millisecond

// relister re-lists the tools on each list_changed signal of one session
// (coalesced, and at most one per relistInterval) until the session ends.
func (u *Upstream) relister(sess *mcp.ClientSession, signal chan struct{}) {
	var last time.Time
	for range signal {
		if wait := relistInterval - time.Since(last); !last.IsZero() && wait > 0 {
			if !u.sleep(wait) {
				return
			}
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(u.ctx, u.opts.ConnectTimeout)
		tools, err := listTools(ctx, sess)
		cancel()
		if err != nil {
			if u.ctx.Err() != nil {
				return
			}
			u.log.Warn("MCP upstream: re-listing tools after list_changed failed; keeping the previous list", "error", u.redactErr(err))
			continue
		}
		u.mu.Lock()
		if u.sess != sess {
			u.mu.Unlock()
			return
		}
		u.tools = tools
		u.mu.Unlock()
		u.log.Info("MCP upstream's tools changed", "tools", len(tools))
		u.changed()
	}
}

func (u *Upstream) onToolListChanged(context.Context, *mcp.ToolListChangedRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	// Only the current connection's session is live (an old one was
	// closed before the next was started), so the signal is for it.
	if u.relist == nil {
		return
	}
	select {
	case u.relist <- struct{}{}:
	default: // a re-list is already due
	}
}

// MaxLogMessage caps one of the upstream's log messages as it is logged
// or kept. The cut comes after redaction: Call hands its onLog and
// onProgress the messages whole (up to the upstream's message cap), and
// the caller redacts, then cuts; the operator's log is redacted
// (Options.Redact), then cut, here.
const MaxLogMessage = 16 << 10

func mapLevel(l mcp.LoggingLevel) api.Level {
	switch l {
	case "debug":
		return api.LevelDebug
	case "info", "notice":
		return api.LevelInfo
	case "warning":
		return api.LevelWarn
	default: // error, critical, alert, emergency, and anything unknown
		return api.LevelError
	}
}
