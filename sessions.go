package maiden

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is maiden's sessions (issue 14, K1–K3): every call runs in a
// session of its agent, kept in the store, whose ExecutionBoundary
// (internal/boundary) says which paths the session's calls may read or
// write and whether they may use the network. A call that needs more fails
// before running with the structured error (code
// SANDBOX_COMMAND_EXECUTION_FAILED, reason sandbox_boundary_required and
// the requiredExpansion); the model asks for exactly that with the
// request_sandbox_boundary built-in, which waits for a human like an
// approval; an approval is a new revision of that session's boundary only.
//
// Session IDs: the MCP front end passes the stdio process's session, the
// 2025-era HTTP Mcp-Session-Id, or (2026 era) the ID a client got from
// session_open and names in its request's _meta; embedders pass one on
// Call. A call without one runs in the agent's default session
// (DefaultSession). A session belongs to the agent that opened it: another
// agent naming its ID is refused.

// ErrUnknownSession: no session of that ID in the store (package admin's).
var ErrUnknownSession = admin.ErrUnknownSession

// DefaultSession is the ID of agent's default session: the one its calls
// run in when they name none.
func DefaultSession(agent string) string { return "default-" + agent }

// NewSessionID makes a fresh session ID for OpenSession.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("ses_%x", b)
}

// initialBoundary is the boundary a new session of agent starts with.
func initialBoundary(cfg *config.Config, agent string) boundary.Boundary {
	if a, ok := cfg.Agent(agent); ok {
		return a.Boundary
	}
	return config.DefaultBoundary()
}

// sessionID is the session a call runs in.
func (inv *invocation) sessionID() string {
	if inv.call.Session != "" {
		return inv.call.Session
	}
	return DefaultSession(inv.agent)
}

// session opens (first use) or finds the call's session and returns it
// with its current boundary. A session of another agent is a denial.
func (h *Host) session(ctx context.Context, inv *invocation) (store.Session, *ToolError, error) {
	if inv.sess != nil {
		return *inv.sess, nil, nil
	}
	st, err := h.state(ctx, inv.cfg)
	if err != nil {
		return store.Session{}, nil, err
	}
	// A session read while the store's generation is unchanged is still
	// the session (every change to it, in any process, moves the
	// generation), as for wallets.
	gen, err := st.Generation(ctx)
	if err != nil {
		return store.Session{}, nil, fmt.Errorf("%w: %v", ErrState, err)
	}
	key := inv.sessionID()
	h.sessCache.mu.Lock()
	c, ok := h.sessCache.m[key]
	h.sessCache.mu.Unlock()
	if ok && c.gen == gen && c.s.Agent == inv.agent && c.s.Live() {
		inv.sess = &c.s
		return c.s, nil, nil
	}
	s, _, err := st.OpenSession(ctx, key, inv.agent, initialBoundary(inv.cfg, inv.agent))
	switch {
	case errors.Is(err, store.ErrNotAllowed):
		return store.Session{}, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("session %q belongs to another agent", inv.sessionID())}, nil
	case errors.Is(err, store.ErrBadInput), errors.Is(err, store.ErrSessionEnded):
		return store.Session{}, &ToolError{Kind: KindInput, Message: fmt.Sprintf("session %q: %v", inv.sessionID(), err)}, nil
	case err != nil:
		return store.Session{}, nil, fmt.Errorf("%w: opening session %q: %v", ErrState, inv.sessionID(), err)
	}
	inv.sess = &s
	h.sessCache.mu.Lock()
	if h.sessCache.m == nil || len(h.sessCache.m) >= maxCachedSessions {
		h.sessCache.m = map[string]cachedSession{} // many sessions over months: start over
	}
	h.sessCache.m[key] = cachedSession{gen: gen, s: s}
	h.sessCache.mu.Unlock()
	return s, nil, nil
}

// sessionCache keeps the sessions calls ran in, each with the store
// generation it was read at.
type sessionCache struct {
	mu sync.Mutex
	m  map[string]cachedSession
}

type cachedSession struct {
	gen int64
	s   store.Session
}

const maxCachedSessions = 4096

// boundaryError is a ToolError carrying the structured error: the message
// for people, the JSON for the model (MCP structuredContent).
func boundaryError(e *boundary.CommandError) *ToolError {
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
	return &ToolError{Kind: KindDenied, Message: msg, Structured: raw}
}

// checkNetwork refuses, before it runs, a call of a tool that may use the
// network when its session's boundary has network disabled, even for hosts
// the tool's policy allows.
func (h *Host) checkNetwork(ctx context.Context, inv *invocation) (bool, error) {
	s, terr, err := h.session(ctx, inv)
	if err != nil || terr != nil {
		if terr != nil {
			inv.res.Error = terr
		}
		return false, err
	}
	if ok, x := boundary.Check(s.Boundary, boundary.Need{Network: true}); !ok {
		if x == nil {
			inv.res.Error = boundaryError(boundary.Refused(boundary.DomainNetwork, boundary.StageValidation, "network_not_allowed",
				fmt.Sprintf("%s may use the network, and session %s's boundary cannot allow it", inv.tool.Name, s.ID)))
			return false, nil
		}
		inv.res.Error = boundaryError(boundary.Required(boundary.DomainNetwork, boundary.StageValidation, *x,
			fmt.Sprintf("%s may use the network (http allowlist %s), and session %s's boundary has network disabled", inv.tool.Name, strings.Join(inv.tool.HTTPAllow, ", "), s.ID)))
		return false, nil
	}
	return true, nil
}

// usesNetwork reports whether t's policy lets it reach the network.
func usesNetwork(t config.Tool) bool {
	return len(t.HTTPAllow) > 0 || len(t.HTTPAllowCIDRs) > 0
}

// sessionGate is the pipeline stage that holds a call to its session's
// boundary before it runs: network first (a tool whose policy reaches the
// network needs a boundary with network enabled).
func (h *Host) sessionGate(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if usesNetwork(inv.tool) {
			ok, err := h.checkNetwork(ctx, inv)
			if err != nil || !ok {
				return err
			}
		}
		if inv.tool.FS != config.FSNone && inv.backend.preopens() {
			s, terr, err := h.session(ctx, inv)
			if err != nil || terr != nil {
				if terr != nil {
					inv.res.Error = terr
				}
				return err
			}
			inv.preopens = cardPreopens(preopensFor(inv.tool, s.Boundary), inv.wallet)
		}
		return next(ctx, inv)
	}
}

// sessionRecheck holds the call to its session's boundary again after the
// middleware chain, which may have waited minutes for a human: a boundary
// reset (network off, entries gone) or a session ended meanwhile counts
// for this call, not only for the next one. The early gate (sessionGate)
// stays, so the structured error comes before a human is asked.
func (h *Host) sessionRecheck(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.sess == nil {
			return next(ctx, inv) // the call needs nothing of its session
		}
		// Read it again: a cache hit while the store's generation is
		// unchanged, the store's answer after a change.
		inv.sess = nil
		return h.sessionGate(next)(ctx, inv)
	}
}

// cardPreopens keeps the directories whose whole subtree the agent's
// cards allow: fs:read DIR/** for each (a grant covering it, such as
// fs:read /srv/** or fs:read /srv/work/**), and fs:write DIR/** for it to
// stay writable. A directory is handed over whole, so a grant of the
// directory alone (fs:read /srv/work) or one level (fs:read /srv/*) is not
// enough, and any exception or prohibition that may reach inside it (a
// lower-negative grant of the allowing card, an upper-negative grant of any
// card) or a ceiling that does not cover the subtree drops it. A nil
// wallet (the implicit agent, which holds every card) keeps them all. The
// effective capability is the tool's policy ∩ the binding ∩ the cards ∩ the
// session's boundary ∩ the component's imports.
func cardPreopens(dirs []sandbox.Preopen, w *cards.Wallet) []sandbox.Preopen {
	if w == nil {
		return dirs
	}
	var out []sandbox.Preopen
	for _, d := range dirs {
		if !subtreeAllowed(w, "read", d.HostPath) {
			continue
		}
		if d.Write && !subtreeAllowed(w, "write", d.HostPath) {
			d.Write = false
		}
		out = append(out, d)
	}
	return out
}

// subtreeAllowed reports whether w allows fs:verb on everything beneath
// dir, conservatively: a negative grant or a ceiling that might touch the
// subtree counts against it.
func subtreeAllowed(w *cards.Wallet, verb, dir string) bool {
	want, err := grant.Parse("fs:" + verb + " " + strings.TrimSuffix(dir, "/") + "/**")
	if err != nil {
		return false // a path the grant language cannot name: no card can cover it
	}
	mine := func(g cards.Grant) bool {
		return g.Recipient == "" || g.Recipient == "*" || g.Recipient == w.Agent()
	}
	applies := func(g grant.Grant) bool {
		return g.Class == grant.FS && (g.Verb == "" || g.Verb == verb)
	}
	touches := func(g grant.Grant) bool {
		return applies(g) && (g.Covers(want) || want.Covers(g) || prefixRelated(fsLiteralPrefix(g), dir))
	}
	allowed := false
	for _, c := range w.Cards() {
		for _, n := range c.Spec.UpperNeg {
			if mine(n) && touches(n.Grant) {
				return false
			}
		}
		if len(c.Spec.UpperPos) > 0 && !slices.ContainsFunc(c.Spec.UpperPos, func(u cards.Grant) bool {
			return mine(u) && (u.Grant.Class != grant.FS || applies(u.Grant)) && u.Grant.Covers(want)
		}) {
			return false
		}
		if allowed {
			continue
		}
		if slices.ContainsFunc(c.Spec.LowerPos, func(g cards.Grant) bool { return mine(g) && applies(g.Grant) && g.Grant.Covers(want) }) &&
			!slices.ContainsFunc(c.Spec.LowerNeg, func(n cards.Grant) bool { return mine(n) && touches(n.Grant) }) {
			allowed = true
		}
	}
	return allowed
}

// fsLiteralPrefix is the path of an fs grant up to its first wildcard
// segment ("/srv/work/secret" for /srv/work/secret/**, "/" for /*/x).
func fsLiteralPrefix(g grant.Grant) string {
	f := strings.Fields(g.String())
	p := f[len(f)-1]
	var lit []string
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if strings.Contains(seg, "*") {
			break
		}
		lit = append(lit, seg)
	}
	return "/" + strings.Join(lit, "/")
}

// prefixRelated reports whether one of two clean absolute paths is within
// the other.
func prefixRelated(a, b string) bool { return pathWithin(a, b) || pathWithin(b, a) }

// SessionInfo is a session as operators see it (api.SessionInfo).
type SessionInfo = api.SessionInfo

// OpenSession opens a new session of agent, starting at the boundary
// agent.toml gives it, and returns its ID (the session_open built-in; an
// embedder's own sessions).
func (h *Host) OpenSession(ctx context.Context, agent string) (string, error) {
	cfg := h.cfg.Load()
	if !cfg.Implicit() {
		if _, ok := cfg.Agent(agent); !ok {
			return "", fmt.Errorf("%w %q in %s (%s)", ErrUnknownAgent, agent, cfg.File(), agentNames(cfg))
		}
	} else if agent == "" {
		agent = DefaultAgent
	}
	st, err := h.state(ctx, cfg)
	if err != nil {
		return "", err
	}
	id := NewSessionID()
	if _, _, err := st.OpenSession(ctx, id, agent, initialBoundary(cfg, agent)); err != nil {
		return "", fmt.Errorf("%w: opening a session: %v", ErrState, err)
	}
	return id, nil
}

// EndSession ends session id: its boundary stops applying (a later call
// naming it is refused), the secret material it held is dropped, and the
// calls waiting on its boundary requests are woken.
func (h *Host) EndSession(ctx context.Context, id string) error {
	h.stateHolder.mu.Lock()
	st := h.stateHolder.st
	h.stateHolder.mu.Unlock()
	if st == nil {
		h.material.drop(id)
		return nil // no call of this Host has opened the store: no session to end
	}
	err := st.EndSession(ctx, id)
	// Dropped once the session is ended in the store, so that a web_fetch
	// racing with the end cannot resolve it again afterwards (its next
	// call finds the session ended).
	h.material.drop(id)
	if errors.Is(err, store.ErrUnknownSession) {
		return fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	return err
}

// ResetSession replaces session id's boundary by b as the operator (by
// names who): a new revision, audited. A boundary without network, or no
// longer managed, is a downgrade: the session's secret material is dropped
// at once.
func (h *Host) ResetSession(ctx context.Context, id string, b api.Boundary, by string) (SessionInfo, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return SessionInfo{}, err
	}
	si, err := s.ResetSession(ctx, id, b, by)
	if err != nil {
		return SessionInfo{}, err
	}
	if !si.Boundary.Network || si.Boundary.Kind != api.BoundaryManaged {
		h.material.drop(id)
	}
	return si, nil
}

// Session returns one session with its revisions and boundary requests.
func (h *Host) Session(ctx context.Context, id string) (SessionInfo, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return SessionInfo{}, err
	}
	return s.Session(ctx, id)
}

// Sessions lists agent's sessions ("" for all).
func (h *Host) Sessions(ctx context.Context, agent string) ([]SessionInfo, error) {
	s, err := h.admin(ctx, h.cfg.Load())
	if err != nil {
		return nil, err
	}
	return s.Sessions(ctx, agent)
}

// materials holds the secret material resolved for each session's
// web_fetch calls (never stored, never returned): dropped when the session
// ends and when its boundary is downgraded (network disabled, or no longer
// managed).
type materials struct {
	mu sync.Mutex
	m  map[string]sessionMaterial
}

type sessionMaterial struct {
	revision int64             // the boundary revision it was last used under
	names    []string          // the secret names resolved
	values   map[string]string // secret name -> value
}

func (ms *materials) drop(session string) {
	ms.mu.Lock()
	delete(ms.m, session)
	ms.mu.Unlock()
}

// narrowWritable narrows a wrapped CLI's writable paths (its [clis.NAME]
// write_paths) to what the session's boundary lets it write: a path the
// boundary allows writing as a whole subtree stays; otherwise only the
// boundary's write entries inside it stay writable (Landlock grants
// subtrees, so an entry is kept only when it is a subtree entry, not
// inside a deny root and not containing one, and without a protected name
// on its path), and the path itself becomes read-only (returned in lost,
// for the caller's read-only list). A boundary with protected names makes
// every write path read-only (Landlock cannot carve them out). The CLI's read paths are its runtime
// (binaries, libraries, configuration) and stay as the operator declared
// them.
func narrowWritable(paths []string, b boundary.Boundary) (writable, lost []string) {
	if len(b.Protected) > 0 {
		// Landlock cannot refuse writes under a protected name inside a
		// writable directory (a .git anywhere beneath it): with protected
		// names, nothing is writable for a CLI, as for preopens; writes
		// go through fs_write, which checks each path.
		return nil, slices.Clone(paths)
	}
	for _, p := range paths {
		if boundary.Allows(b, boundary.Need{Path: p, Access: boundary.Write, Match: boundary.Subtree}) && !underProtected(p, b.Protected) {
			writable = append(writable, p)
			continue
		}
		lost = append(lost, p)
		for _, e := range b.Entries {
			if e.Access == boundary.Write && e.Match == boundary.Subtree && pathWithin(e.Path, p) && e.Path != p &&
				boundary.Allows(b, boundary.Need{Path: e.Path, Access: boundary.Write, Match: boundary.Subtree}) && !underProtected(e.Path, b.Protected) {
				writable = append(writable, e.Path)
			}
		}
	}
	return writable, lost
}

// underProtected reports whether a path component of p is a protected name.
func underProtected(p string, protected []string) bool {
	for _, c := range strings.Split(p, "/") {
		if slices.Contains(protected, c) {
			return true
		}
	}
	return false
}
