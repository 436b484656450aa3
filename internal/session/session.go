// Package session is maiden's sessions in the call path (issue 14, K1–K3):
// every call runs in a session of its agent, kept in the state store, whose
// ExecutionBoundary (internal/boundary) says which paths the session's calls
// may read or write and whether they may use the network. A call that needs
// more fails before running with the structured error (code
// SANDBOX_COMMAND_EXECUTION_FAILED, reason sandbox_boundary_required and the
// requiredExpansion); the model asks for exactly that with the
// request_sandbox_boundary built-in, which waits for a human like an
// approval; an approval is a new revision of that session's boundary only.
//
// This package owns the session stages' work (Gate: which session a call
// runs in, its boundary held before the run and again after a human's
// wait), what a boundary gives a tool (WASI preopens, a wrapped CLI's
// writable paths), the web_fetch secret material of each session
// (Materials), and the answers of the session built-ins. The call
// pipeline calls it with what each stage needs, given explicitly (host.go):
//
//	g := &session.Gate{State: st.get, ErrState: pipeline.ErrState} // st: internal/pipeline's stateHolder
//	dirs, refusal, err := g.Hold(ctx, &session.Call{Cfg: cfg, Agent: "a", Tool: &t, Preopens: true, Wallet: w})
//
// Session IDs: the MCP front end passes the stdio process's session, the
// 2025-era HTTP Mcp-Session-Id, or (2026 era) the ID a client got from
// session_open and names in its request's _meta; embedders pass one on
// Call. A call without one runs in the default session of its agent and
// credential (DefaultIDFor: over HTTP, one per token).
// A session belongs to the agent that opened it: another agent naming its
// ID is refused.
package session

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// DefaultID is the ID of agent's default session: the one its calls run
// in when they name none and carry no credential (DefaultIDFor).
func DefaultID(agent string) string { return "default-" + agent }

// DefaultIDFor is the ID of the session a call of agent authenticated
// with credential (Call.Credential) runs in when it names none: the
// agent's default session without a credential (an embedder's call, HTTP
// without [agents]), else that credential's own ("default-AGENT/token:ID"
// over HTTP). One default per token, not per agent, because a boundary is
// widened for a session: a human approving a widening asked for in a
// token's handle-less calls widens it for that token, and another token
// of the same agent (one handed to a less trusted sub-agent) does not
// inherit it, as it inherits no session_open handle's
// (ARCHITECTURE.md, "two protocol eras"). No agent name holds a '/', so
// no agent's default is another's.
func DefaultIDFor(agent, credential string) string {
	if credential == "" {
		return DefaultID(agent)
	}
	return DefaultID(agent) + "/" + credential
}

// NewID makes a fresh session ID.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("ses_%x", b)
}

// Initial is the boundary a new session of agent starts with.
func Initial(cfg *config.Config, agent string) boundary.Boundary {
	if a, ok := cfg.Agent(agent); ok {
		return a.Boundary
	}
	return config.DefaultBoundary()
}

// Gate is the session stages' work and what they need: the store of a
// configuration (the Host's), the sessions calls ran in, and the error a
// store that cannot answer is reported as.
type Gate struct {
	// State is the state store of cfg, opened on first need; its errors
	// are returned as they are.
	State func(ctx context.Context, cfg *config.Config) (store.Store, error)
	// ErrState wraps the store's own failures (maiden.ErrState).
	ErrState error
	cache    cache
}

// Call is what the session stages read of a call, and the session they
// looked up for it.
type Call struct {
	Cfg   *config.Config
	Agent string
	// ID is the session the caller named; "" is the default session of
	// Agent and Credential (DefaultIDFor).
	ID string
	// Credential is the credential the caller authenticated with beyond
	// its agent (api.Call.Credential; "" for none): only which default
	// session a call naming none runs in.
	Credential string
	// Tool is the tool as the agent's binding narrows it (the caller's,
	// not copied).
	Tool *config.Tool
	// Preopens: the tool's kind takes the session's directories as WASI
	// preopens (WebAssembly).
	Preopens bool
	// Wallet is the wallet the call was authorized on (nil for the
	// implicit agent, which holds every card).
	Wallet *cards.Wallet
	// Sess is the call's session once looked up (Session), read again
	// when Recheck clears it.
	Sess *store.Session
	// Files: the call is a file built-in (fs_read, fs_write, fs_list),
	// whose path, as the tool resolves Input's in the session's boundary,
	// the wallet's fs cards decide before it runs (Hold: FileDecision).
	Files bool
	// Input is the call's input as the tool will receive it (read when
	// Files).
	Input string
	// FS are the decisions of the wallet's fs cards Hold made about the
	// directories it returns (CardPreopens), or about a file built-in's
	// path (FileDecision), for the call's audit record; nil when it asked
	// none.
	FS []cards.Decision
}

// SessionID is the session c runs in.
func (c *Call) SessionID() string {
	if c.ID != "" {
		return c.ID
	}
	return DefaultIDFor(c.Agent, c.Credential)
}

// Hold is the first session stage: the call held to its session's boundary
// before it runs. It reads c's tool policy, kind and wallet and the
// session (setting c.Sess when it looks it up); it returns the directories
// a tool with fs gets (the tool's fs ∩ the boundary ∩ the wallet's fs
// cards), or the refusal: network first (a tool whose policy reaches the
// network needs a boundary with network enabled). A file built-in's path
// is decided by the wallet's fs cards (FileDecision): a path they do not
// allow is refused here, before the boundary is asked about it.
func (g *Gate) Hold(ctx context.Context, c *Call) ([]sandbox.Preopen, *api.ToolError, error) {
	if UsesNetwork(*c.Tool) {
		s, terr, err := g.Session(ctx, c)
		if err != nil || terr != nil {
			return nil, terr, err
		}
		if terr := NetworkRefusal(s, *c.Tool); terr != nil {
			return nil, terr, nil
		}
	}
	if c.Files {
		s, terr, err := g.Session(ctx, c)
		if err != nil || terr != nil {
			return nil, terr, err
		}
		d, p, ok := FileDecision(c.Tool.Name, s.Boundary, c.Input, c.Wallet)
		if !ok {
			return nil, nil, nil // the tool refuses the input itself, touching nothing
		}
		c.FS = []cards.Decision{d}
		if !d.Allow {
			return nil, &api.ToolError{Kind: api.KindDenied, Message: c.Tool.Name + " " + p + ": " + d.Reason}, nil
		}
		return nil, nil, nil
	}
	if c.Tool.CLI != nil {
		// A wrapped CLI's write_paths: the cards' decisions (fs:read
		// DIR/** of each, fs:write DIR/** of a readable one the
		// boundary lets it write), for the call's record (the run
		// narrows them again, CLIWritable, on the same pinned wallet
		// and the session kept in c.Sess).
		_, _, ds, terr, err := g.CLIWritable(ctx, c)
		c.FS = ds
		return nil, terr, err
	}
	if c.Tool.FS == config.FSNone || !c.Preopens {
		return nil, nil, nil
	}
	s, terr, err := g.Session(ctx, c)
	if err != nil || terr != nil {
		return nil, terr, err
	}
	dirs, fs := CardPreopens(PreopensFor(*c.Tool, s.Boundary), c.Wallet)
	c.FS = fs
	return dirs, nil, nil
}

// Recheck is the second session stage: the call held to its session's
// boundary again after the middleware chain, which may have waited minutes
// for a human, so that a boundary reset (network off, entries gone) or a
// session ended meanwhile counts for this call, not only for the next one.
// A call that needed nothing of its session (c.Sess nil) needs nothing
// now (nil, nil, nil; the caller may skip the call); otherwise it is Hold
// on the session read again (a cache hit while the store's generation is
// unchanged).
func (g *Gate) Recheck(ctx context.Context, c *Call) ([]sandbox.Preopen, *api.ToolError, error) {
	if c.Sess == nil {
		return nil, nil, nil
	}
	c.Sess, c.FS = nil, nil
	return g.Hold(ctx, c)
}

// Session opens (first use) or finds the call's session and returns it
// with its current boundary (kept in c.Sess for the rest of the call). A
// session of another agent is a denial.
func (g *Gate) Session(ctx context.Context, c *Call) (store.Session, *api.ToolError, error) {
	if c.Sess != nil {
		return *c.Sess, nil, nil
	}
	st, err := g.State(ctx, c.Cfg)
	if err != nil {
		return store.Session{}, nil, err
	}
	s, terr, err := g.cache.lookup(ctx, st, c.SessionID(), c.Agent, Initial(c.Cfg, c.Agent))
	if err != nil {
		return store.Session{}, nil, fmt.Errorf("%w: %v", g.ErrState, err)
	}
	if terr == nil {
		c.Sess = &s
	}
	return s, terr, nil
}

// cache keeps the sessions calls ran in, each with the store's sessions
// generation it was read at: a session read while that is unchanged is
// still the session (every change to it, in any process, moves it; on
// PostgreSQL it is read with no round trip while nothing changed), as
// for wallets.
type cache struct {
	mu sync.Mutex
	m  map[string]cachedSession
}

type cachedSession struct {
	gen int64
	s   store.Session
}

const maxCachedSessions = 4096

func (c *cache) lookup(ctx context.Context, st store.Store, id, agent string, initial boundary.Boundary) (store.Session, *api.ToolError, error) {
	gen, err := sessionsGeneration(ctx, st)
	if err != nil {
		return store.Session{}, nil, err
	}
	c.mu.Lock()
	got, ok := c.m[id]
	c.mu.Unlock()
	if ok && got.gen == gen && got.s.Agent == agent && got.s.Live() {
		return got.s, nil, nil
	}
	s, _, err := st.OpenSession(ctx, id, agent, initial)
	switch {
	case errors.Is(err, store.ErrNotAllowed):
		return store.Session{}, &api.ToolError{Kind: api.KindDenied, Message: fmt.Sprintf("session %q belongs to another agent", id)}, nil
	case errors.Is(err, store.ErrBadInput), errors.Is(err, store.ErrSessionEnded):
		return store.Session{}, &api.ToolError{Kind: api.KindInput, Message: fmt.Sprintf("session %q: %v", id, err)}, nil
	case err != nil:
		return store.Session{}, nil, fmt.Errorf("opening session %q: %v", id, err)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSessions {
		c.m = map[string]cachedSession{} // many sessions over months: start over
	}
	c.m[id] = cachedSession{gen: gen, s: s}
	c.mu.Unlock()
	return s, nil, nil
}

// BoundaryError is a ToolError carrying the structured error: the message
// for people, the JSON for the model (MCP structuredContent).
func BoundaryError(e *boundary.CommandError) *api.ToolError {
	raw, _ := json.Marshal(e)
	msg := e.Message
	if msg == "" {
		msg = e.Reason
	}
	if e.RequiredExpansion != nil {
		x, _ := json.Marshal(e.RequiredExpansion)
		msg += fmt.Sprintf(" (%s: ask for it with request_sandbox_boundary, expansion %s)", e.Reason, x)
	} else if !strings.Contains(msg, e.Reason) {
		msg += " (" + e.Reason + ")"
	}
	return &api.ToolError{Kind: api.KindDenied, Message: msg, Structured: raw}
}

// NetworkRefusal refuses, before it runs, a call of tool t, which may use
// the network, when session s's boundary has network disabled, even for
// hosts the tool's policy allows; nil when the boundary allows it.
func NetworkRefusal(s store.Session, t config.Tool) *api.ToolError {
	ok, x := boundary.Check(s.Boundary, boundary.Need{Network: true})
	switch {
	case ok:
		return nil
	case x == nil:
		return BoundaryError(boundary.Refused(boundary.DomainNetwork, boundary.StageValidation, "network_not_allowed",
			fmt.Sprintf("%s may use the network, and session %s's boundary cannot allow it", t.Name, s.ID)))
	}
	return BoundaryError(boundary.Required(boundary.DomainNetwork, boundary.StageValidation, *x,
		fmt.Sprintf("%s may use the network (http allowlist %s), and session %s's boundary has network disabled", t.Name, strings.Join(t.HTTPAllow, ", "), s.ID)))
}

// UsesNetwork reports whether t's policy lets it reach the network.
func UsesNetwork(t config.Tool) bool {
	return len(t.HTTPAllow) > 0 || len(t.HTTPAllowCIDRs) > 0
}

// sessionsGeneration is the store's SessionsGeneration where it has one (a
// value that moves only when a session or a boundary request changes),
// else its Generation.
func sessionsGeneration(ctx context.Context, st store.Store) (int64, error) {
	if s, ok := st.(interface {
		SessionsGeneration(context.Context) (int64, error)
	}); ok {
		return s.SessionsGeneration(ctx)
	}
	return st.Generation(ctx)
}
