package pipeline

import (
	"context"
	"fmt"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the Host's side of sessions (internal/session owns the
// rest: which session a call runs in, its boundary held before the run
// and after a human's wait, preopens, a wrapped CLI's writable paths, the
// web_fetch secret material): the session stages' adapters and the
// operators' and embedders' session methods.

// DefaultSession is the ID of agent's default session: the one its calls
// run in when they name none and carry no Credential (a call with one runs
// in that credential's own default: session.DefaultIDFor).
func DefaultSession(agent string) string { return session.DefaultID(agent) }

// NewSessionID makes a fresh session ID for OpenSession.
func NewSessionID() string { return session.NewID() }

// sessionCall is what the session stages read of the call.
func (inv *invocation) sessionCall() session.Call {
	c := session.Call{Cfg: inv.cfg, Agent: inv.agent, ID: inv.call.Session, Credential: inv.call.Credential, Tool: inv.tool,
		Preopens: inv.backend.preopens(), Wallet: inv.wallet, Sess: inv.sess}
	if inv.backend.files() {
		c.Files, c.Input = true, inv.call.Input
	}
	return c
}

// sessionID is the session a call runs in.
func (inv *invocation) sessionID() string {
	return (&session.Call{Agent: inv.agent, ID: inv.call.Session, Credential: inv.call.Credential}).SessionID()
}

// lookupSession is the call's session (session.Gate.Session, over the
// Host's gate), and the record of it to keep in inv.sess (the run stage
// writes what run returns), so it is looked up once.
func lookupSession(ctx context.Context, gate *session.Gate, inv *invocation) (store.Session, *store.Session, *ToolError, error) {
	c := inv.sessionCall()
	s, terr, err := gate.Session(ctx, &c)
	return s, c.Sess, terr, err
}

// sessionStages are the session stages as the pipeline runs them: a value
// holding what they need (the Host's session.Gate), not the Host.
type sessionStages struct{ gate *session.Gate }

// hold is the stage session.Gate.Hold: reads inv.tool, its backend's
// preopens(), inv.wallet and the call's session; writes inv.sess,
// inv.preopens and the fs decisions that made them (inv.fsDecisions), or
// refuses (the boundary's structured error).
func (s sessionStages) hold(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		c := inv.sessionCall()
		dirs, terr, err := s.gate.Hold(ctx, &c)
		inv.sess, inv.preopens, inv.fsDecisions = c.Sess, dirs, c.FS
		if terr != nil {
			inv.res.Error = terr
		}
		if err != nil || terr != nil {
			return err
		}
		return next(ctx, inv)
	}
}

// recheck is the stage session.Gate.Recheck, after the middleware chain:
// reads and writes what hold does, again, for a call that used its
// session.
func (s sessionStages) recheck(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.sess == nil {
			return next(ctx, inv) // the call needs nothing of its session (Recheck checks nothing)
		}
		c := inv.sessionCall()
		dirs, terr, err := s.gate.Recheck(ctx, &c)
		inv.sess, inv.preopens, inv.fsDecisions = c.Sess, dirs, c.FS
		if terr != nil {
			inv.res.Error = terr
		}
		if err != nil || terr != nil {
			return err
		}
		return next(ctx, inv)
	}
}

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
	if _, _, err := st.OpenSession(ctx, id, agent, session.Initial(cfg, agent)); err != nil {
		return "", fmt.Errorf("%w: opening a session: %v", ErrState, err)
	}
	return id, nil
}

// TouchSession records in the store that session id was used now, to
// within a minute (the store writes only when its record is older): the
// last use a front end that expires idle session handles reads back
// (SessionInfo.LastUsed), whichever instance sharing the store saw the
// use. An unknown session is store.ErrUnknownSession, an ended one
// store.ErrSessionEnded; with no store opened by a call of this Host yet,
// there is nothing to record and it returns nil.
func (h *Host) TouchSession(ctx context.Context, id string) error {
	h.stateHolder.mu.Lock()
	st := h.stateHolder.st
	h.stateHolder.mu.Unlock()
	if st == nil {
		return nil // no call of this Host has opened the store
	}
	return st.TouchSession(ctx, id)
}

// EndSession ends session id in the store and drops its secret material.
func (h *Host) EndSession(ctx context.Context, id string) error {
	h.stateHolder.mu.Lock()
	st := h.stateHolder.st
	h.stateHolder.mu.Unlock()
	if st == nil {
		h.material.Drop(id)
		return nil // no call of this Host has opened the store: no session to end
	}
	err := st.EndSession(ctx, id)
	// Dropped once the session is ended in the store, so that its next
	// call finds the session ended; a web_fetch that read the session
	// before the end and resolves after this drop is refused by the drop's
	// generation (session.Materials.ResolveSince).
	h.material.Drop(id)
	return err // store.ErrUnknownSession for an unknown ID: the root says it as admin's
}

// DropMaterial drops the web_fetch secret material session id holds (the
// root's ResetSession, for a downgraded boundary).
func (h *Host) DropMaterial(id string) { h.material.Drop(id) }
