// Package mcphub holds a host's imported MCP servers ([mcp.NAME]): each
// upstream (internal/mcpimport) is started on first need and kept while
// the configuration's table for it is unchanged. A reload that removes or
// changes the table retires the upstream: no new call reaches it, and it is
// closed (its process stopped) as soon as the calls running on it have
// returned, each within its deadline. A stdio server is someone else's
// program, so it starts under the confinement of wrapped CLIs
// (internal/confine), proven by the host's probe first.
//
// The root's import backend (imports.go) owns one Hub:
//
//	hub := mcphub.New(mcphub.Options{Current: inForce, Secret: lookup, Confinement: probe, Logger: log})
//	up, release, err := hub.Acquire(ctx, "files", t.MCP) // a call: not closed before release
//	defer release()
package mcphub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/maiden-run/maiden/internal/progress"
)

var (
	// ErrRetired: the import a call (or a listing) was made for is no
	// longer the configuration's: a reload removed or changed its
	// [mcp.NAME] table.
	ErrRetired = errors.New("removed or changed by a configuration reload")
)

// Options are a Hub's dependencies on its host.
type Options struct {
	// Current reports whether imp is import name's table in the
	// configuration in force. The hub asks it under its lock, so a host
	// that stores a new configuration before calling Retire never has an
	// upstream of the old one started after the retirement.
	Current func(name string, imp *config.MCPImport) bool
	// Secret is the value of a credential named in [mcp.NAME].
	Secret func(name string) (string, bool)
	// Confinement is the proof that confinement is in force, asked before
	// a stdio server starts (nil: in force).
	Confinement func(ctx context.Context) error
	Logger      *slog.Logger
}

// Hub is a host's imported servers. It is safe for concurrent use.
type Hub struct {
	o       Options
	mu      sync.Mutex
	byName  map[string]*entry
	closed  bool
	changed func() // set by front ends: an upstream's tool list changed
	// retired are the upstreams retired and not yet closed; retiring
	// counts their closers, which Close waits for; stop ends their wait
	// for calls in flight.
	retired  map[*entry]bool
	retiring sync.WaitGroup
	stop     chan struct{}
}

type entry struct {
	imp *config.MCPImport
	up  *mcpimport.Upstream
	// inflight counts the calls running on it (Acquire); once retired,
	// drained is closed when it reaches 0.
	inflight int
	retired  bool
	drained  chan struct{}
}

// New makes an empty hub.
func New(o Options) *Hub {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{o: o}
}

// Get returns the running upstream of import name, started if need be.
// imp must be the table of the configuration in force (ErrRetired
// otherwise), so that a call that began before a reload never starts a
// server the reload removed.
func (u *Hub) Get(ctx context.Context, name string, imp *config.MCPImport) (*mcpimport.Upstream, error) {
	e, err := u.entry(ctx, name, imp, false)
	if err != nil {
		return nil, err
	}
	return e.up, nil
}

// Acquire is Get for a call: the upstream is not closed by a reload before
// release is called.
func (u *Hub) Acquire(ctx context.Context, name string, imp *config.MCPImport) (*mcpimport.Upstream, func(), error) {
	e, err := u.entry(ctx, name, imp, true)
	if err != nil {
		return nil, nil, err
	}
	return e.up, func() {
		u.mu.Lock()
		e.inflight--
		if e.retired && e.inflight == 0 {
			close(e.drained)
		}
		u.mu.Unlock()
	}, nil
}

func (u *Hub) entry(ctx context.Context, name string, imp *config.MCPImport, acquire bool) (*entry, error) {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil, api.ErrClosed
	}
	if !u.o.Current(name, imp) {
		u.mu.Unlock()
		return nil, fmt.Errorf("the MCP server %q: %w", name, ErrRetired)
	}
	if cur, ok := u.byName[name]; ok && reflect.DeepEqual(cur.imp, imp) {
		if acquire {
			cur.inflight++
		}
		u.mu.Unlock()
		return cur, nil
	} else if ok {
		u.retireLocked(name, cur) // its table changed: a new one
	}
	opts := mcpimport.Options{Name: name, Command: imp.Command, Dir: imp.Dir, URL: imp.URL, Logger: u.o.Logger}
	for _, e := range imp.Env {
		if strings.Contains(e, "=") {
			opts.Env = append(opts.Env, e)
		} else if v, ok := os.LookupEnv(e); ok {
			opts.Env = append(opts.Env, e+"="+v)
		}
	}
	if imp.Credential != "" {
		secret := imp.Credential
		opts.Credential = func(context.Context) (string, error) {
			v, ok := u.o.Secret(secret)
			if !ok {
				return "", fmt.Errorf("secret %s has no value: set MAIDEN_SECRET_%s", secret, secret)
			}
			return "Bearer " + v, nil
		}
		// What the upstream echoes of it in log messages no call owns
		// (those go to the operator's log).
		opts.Redact = func(s string) string {
			v, _ := u.o.Secret(secret)
			return RedactCredential(s, secret, v)
		}
	}
	if len(imp.Command) > 0 {
		// A stdio server is someone else's program: it runs under the
		// confinement of wrapped CLIs (Landlock to its paths, no network,
		// rlimits, its own process group), proven by the probe first.
		// Its read_paths and dir, as its write_paths, are named by their
		// real path: confine refuses to start it with a symlink on one
		// (the agent may have made it, writing the parent through a CLI).
		spec := confine.Spec{ReadOnly: imp.ReadPaths, Writable: imp.WritePaths, Unconfined: imp.Unconfined}
		if imp.Dir != "" {
			spec.ReadOnly = append(slices.Clone(spec.ReadOnly), imp.Dir)
		}
		if _, err := os.Stat(OpenSSLConfig); err == nil {
			// Node (and any program linked with OpenSSL 3) reads it as it
			// starts and exits if it cannot; the file only, not /etc/ssl
			// (whose private/ holds keys). A system file: it may be a link.
			spec.SystemReadOnly = []string{OpenSSLConfig}
		}
		opts.Start = func(cmd *exec.Cmd) error {
			if u.o.Confinement != nil {
				if err := u.o.Confinement(ctx); err != nil && !imp.Unconfined {
					return fmt.Errorf("confinement is not in force here (%v); set unconfined = true in [mcp.%s] to run it anyway", err, name)
				}
			}
			_, err := confine.StartCmd(cmd, spec)
			return err
		}
	}
	up, err := mcpimport.New(opts)
	if err != nil {
		u.mu.Unlock()
		return nil, err
	}
	if u.byName == nil {
		u.byName = map[string]*entry{}
	}
	e := &entry{imp: imp, up: up}
	if acquire {
		e.inflight++
	}
	u.byName[name] = e
	up.OnChange(func() {
		if f := u.Changed(); f != nil {
			f()
		}
	})
	u.mu.Unlock()
	if err := up.Start(context.WithoutCancel(ctx)); err != nil {
		u.o.Logger.Warn("MCP upstream not up yet; retrying in the background", "upstream", name, "err", err)
	}
	return e, nil
}

// OpenSSLConfig is the system's OpenSSL configuration file, which a stdio
// server may read besides its read_paths.
const OpenSSLConfig = "/etc/ssl/openssl.cnf"

// Retire retires the upstreams whose table keep no longer accepts (a
// reload, after the host stored its new configuration).
func (u *Hub) Retire(keep func(name string, imp *config.MCPImport) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for name, e := range u.byName {
		if !keep(name, e.imp) {
			u.retireLocked(name, e)
		}
	}
}

// retireLocked takes e out of service and closes it once the calls running
// on it have returned (or Close stops the wait). u.mu is held.
func (u *Hub) retireLocked(name string, e *entry) {
	delete(u.byName, name)
	e.retired = true
	e.drained = make(chan struct{})
	if e.inflight == 0 {
		close(e.drained)
	}
	if u.retired == nil {
		u.retired = map[*entry]bool{}
		u.stop = make(chan struct{})
	}
	u.retired[e] = true
	stop := u.stop
	u.retiring.Add(1)
	go func() {
		defer u.retiring.Done()
		select {
		case <-e.drained:
		case <-stop:
		}
		e.up.Close()
		u.mu.Lock()
		delete(u.retired, e)
		u.mu.Unlock()
	}()
}

// OnChange registers f, called when an upstream's tool list changes.
func (u *Hub) OnChange(f func()) {
	u.mu.Lock()
	u.changed = f
	u.mu.Unlock()
}

// Changed is the function OnChange registered (nil if none).
func (u *Hub) Changed() func() {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.changed
}

// Running is how many upstreams are in service (not retired).
func (u *Hub) Running() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.byName)
}

// Close stops every upstream, retired ones included (calls still running
// on them fail as unavailable), and waits for the retired ones' closers.
func (u *Hub) Close() {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		u.retiring.Wait()
		return
	}
	u.closed = true
	list := u.byName
	u.byName = nil
	if u.stop != nil {
		close(u.stop)
	}
	u.mu.Unlock()
	for _, e := range list {
		e.up.Close()
	}
	u.retiring.Wait()
}

// ExposedTool is an upstream's tool and the name it is served as.
type ExposedTool struct {
	mcpimport.Tool
	Full string // NAME.TOOL
}

// Exposed names import imp's tools NAME.TOOL (collisions refused and
// logged), sorted by name.
func Exposed(imp string, tools []mcpimport.Tool, log *slog.Logger) []ExposedTool {
	names := make([]string, len(tools))
	byUp := map[string]mcpimport.Tool{}
	for i, x := range tools {
		names[i] = x.Name
		byUp[x.Name] = x
	}
	exposed, problems := mcpimport.ExposedNames(names, nil)
	for _, p := range problems {
		log.Warn("MCP upstream tool not exposed", "upstream", imp, "err", p)
	}
	keys := make([]string, 0, len(exposed))
	for k := range exposed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]ExposedTool, 0, len(keys))
	for _, e := range keys {
		out = append(out, ExposedTool{Tool: byUp[exposed[e]], Full: imp + "." + e})
	}
	return out
}

// Call is one call of an imported tool, everything decided (exposure,
// cards, the upstream's schema, middleware).
type Call struct {
	Import  string            // [mcp.NAME]
	Table   *config.MCPImport // its table in the configuration the call began under
	Exposed string            // NAME.TOOL, as the caller named it
	Tool    string            // the tool's name on its server
	Input   []byte
	Timeout time.Duration // the import's timeout_ms: the call's deadline
	// Redact is applied to everything the upstream sends back (output,
	// logs, errors) before it is cut to its limit; progress messages are
	// the caller's to redact, and come whole (redact, then cut).
	Redact     func(string) string
	OnLog      func(api.LogEntry) // each log line as it arrives, redacted; may be nil
	OnProgress func(mcpimport.Progress)
}

// Failure is a call that failed, as the caller sees it.
type Failure struct {
	Kind    api.ErrorKind
	Message string
}

// Outcome is how a call ended: Output when Failure is nil. Logs is non-nil
// once the call reached its upstream.
type Outcome struct {
	Output  string
	Logs    []api.LogEntry
	Failure *Failure
}

// RetiredMessage is the failure of a call whose import a reload removed
// or changed while the call was on its way.
func RetiredMessage(imp string) string {
	return fmt.Sprintf("the MCP server %q was %v while the call was on its way; call again", imp, ErrRetired)
}

// RedactCredential is s with every copy of value, the credential NAME
// maiden sends an upstream, replaced by [REDACTED:NAME]: what the upstream
// echoes of it (output, logs, errors), in any ASCII case and in the
// encodings a tool's secrets are redacted in (base64, hex, percent and
// JSON escapes: egress.ValueRedactor), since a server echoes a header
// re-encoded as often as verbatim. A value under 4 bytes is left, as too
// short to find without mangling other text.
func RedactCredential(s, name, value string) string {
	return CredentialRedactor(name, value)(s)
}

// CredentialRedactor is RedactCredential for one credential, built once
// (for the many strings of one call).
func CredentialRedactor(name, value string) func(string) string {
	if len(value) < 4 {
		return func(s string) string { return s }
	}
	return egress.ValueRedactor(map[string]string{name: value})
}

// MaxLogBytes bounds the log lines one call keeps of its upstream's log
// messages: a WebAssembly tool's default (sandbox.DefaultMaxLogBytes).
const MaxLogBytes = 64 << 10

// logLineCost is what a log message costs the budget besides its bytes,
// and logMarkerRoom the part of the budget kept for the truncation marker:
// the rule of a WebAssembly tool's log (internal/sandbox's logbuf.go, same
// names, same values). Copied, not imported: mcphub sits beside the
// sandbox and does not import it (ARCHITECTURE.md). Without the line cost
// an upstream sending empty log messages had every one kept and relayed
// to the agent; with it a call keeps at most (MaxLogBytes-logMarkerRoom)/
// logLineCost = 4,088 of them, and the log, marker included, is within
// MaxLogBytes.
const (
	logLineCost   = 16
	logMarkerRoom = 128
)

// Call sends c to its upstream under c.Timeout (past it, the upstream is
// sent notifications/cancelled and the call is kind deadline). The error
// is ctx's, api.ErrClosed, or an upstream that could not be made.
func (u *Hub) Call(ctx context.Context, c Call) (Outcome, error) {
	up, release, err := u.Acquire(ctx, c.Import, c.Table)
	if errors.Is(err, ErrRetired) {
		return Outcome{Failure: &Failure{api.KindUnavailable, RetiredMessage(c.Import)}}, nil
	} else if err != nil {
		return Outcome{}, err
	}
	defer release()
	callCtx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	redact := c.Redact
	var logs []api.LogEntry
	var mu sync.Mutex
	used, dropped, droppedB := 0, 0, 0
	res, err := up.Call(callCtx, c.Tool, c.Input, func(e api.LogEntry) {
		// The upstream may send log messages as fast as it likes until
		// the deadline: a call keeps (and relays) them within the budget
		// of a WebAssembly tool's log, each costing its bytes and
		// logLineCost more (an empty message too), and counts the rest.
		// Redacted whole, then cut: a cut first could keep a credential's
		// beginning where redaction no longer finds it. Once the budget is
		// spent nothing is kept, so nothing more is redacted either (a
		// message may be megabytes).
		mu.Lock()
		if dropped > 0 {
			dropped++
			droppedB += len(e.Message)
			mu.Unlock()
			return
		}
		mu.Unlock()
		e.Message = progress.CapMessage(redact(e.Message), mcpimport.MaxLogMessage)
		mu.Lock()
		if dropped > 0 || used+len(e.Message)+logLineCost > MaxLogBytes-logMarkerRoom {
			dropped++
			droppedB += len(e.Message)
			mu.Unlock()
			return
		}
		used += len(e.Message) + logLineCost
		logs = append(logs, e)
		mu.Unlock()
		if c.OnLog != nil {
			c.OnLog(e)
		}
	}, c.OnProgress)
	mu.Lock()
	out := Outcome{Logs: append([]api.LogEntry{}, logs...)}
	if dropped > 0 {
		out.Logs = append(out.Logs, api.LogEntry{Level: api.LevelWarn, Source: api.SourceHost,
			Message: fmt.Sprintf("log truncated: %d more lines (%d bytes) dropped past the %d-byte limit", dropped, droppedB, MaxLogBytes)})
	}
	mu.Unlock()
	fail := func(kind api.ErrorKind, msg string) (Outcome, error) {
		out.Failure = &Failure{kind, msg}
		return out, nil
	}
	switch {
	case errors.Is(err, mcpimport.ErrUnavailable):
		return fail(api.KindUnavailable, redact(err.Error()))
	case err != nil && ctx.Err() != nil:
		return out, ctx.Err()
	case err != nil && callCtx.Err() != nil:
		return fail(api.KindDeadline, fmt.Sprintf("%s ran past its %v timeout; maiden cancelled it on the MCP server %q", c.Exposed, c.Timeout, c.Import))
	case errors.Is(err, api.ErrClosed):
		return fail(api.KindUnavailable, fmt.Sprintf("the MCP server %q was stopped during the call (maiden is closing)", c.Import))
	case err != nil:
		return fail(api.KindTool, progress.CapMessage(redact(err.Error()), MaxOutputBytes))
	case res.IsError:
		return fail(api.KindTool, progress.CapMessage(redact(res.Text), MaxOutputBytes))
	}
	text := res.Text
	if len(res.Structured) > 0 {
		text = string(res.Structured)
	}
	if len(text) > MaxOutputBytes {
		return fail(api.KindTool, fmt.Sprintf("the MCP server %q answered %s with %d bytes, over the %d-byte output limit", c.Import, c.Exposed, len(text), MaxOutputBytes))
	}
	// Measured again once redacted: a credential's "[REDACTED:NAME]" is
	// longer than a short value, so an answer made of it grows (1 MiB of a
	// 4-byte credential became 5.25 MiB).
	if text = redact(text); len(text) > MaxOutputBytes {
		return fail(api.KindTool, fmt.Sprintf("the MCP server %q answered %s with %d bytes once its credentials were redacted, over the %d-byte output limit", c.Import, c.Exposed, len(text), MaxOutputBytes))
	}
	out.Output = text
	return out, nil
}

// MaxOutputBytes bounds what a call passes on of its upstream's answer: a
// WebAssembly tool's default output limit (sandbox.DefaultMaxOutputBytes)
// and a wrapped CLI's (config.DefaultCLIOutputBytes). The upstream's own
// message cap (4 MiB) is larger, and a structuredContent re-encoded may
// grow past it.
const MaxOutputBytes = 1 << 20
