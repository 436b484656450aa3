package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	maiden "github.com/maiden-run/maiden"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaSession is the _meta key in which a 2026-07-28 client names the
// maiden session a request runs in: an ID the session_open built-in gave
// the same agent. (That protocol has no sessions of its own.)
const MetaSession = "maiden/session"

// callSession is the maiden session a tools/call runs in (issue 14, K1):
// over stdio, the process's; over HTTP on the 2025-11-25 protocol, the
// Mcp-Session-Id; on the 2026-07-28 protocol, the one named in the
// request's _meta, which must be a live session of the same agent opened
// with the same credential (cred: the token's over HTTP, StdioCredential
// over stdio; else the call fails here), or, when it names none, "" for
// the default session of its agent and credential (the pipeline's: one
// per token, one for stdio). A failure is returned as the call's result.
func (s *Server) callSession(ctx context.Context, req *mcp.CallToolRequest, agent, cred string, modern bool) (string, *mcp.CallToolResult) {
	if modern && req.Session != nil && req.Session.ID() != "" {
		// A request of a session that claims the sessionless protocol in
		// its _meta (the HTTP front end refuses it first: mixedEra).
		return "", errorResult(maiden.KindInput, fmt.Sprintf("this request belongs to a %s-era session but names protocol %s in _meta: a request is of one protocol era; drop one", legacyEra, req.ProtocolVersion()))
	}
	if modern {
		v, named := req.Params.GetMeta()[MetaSession]
		if !named {
			return "", nil
		}
		id, ok := v.(string)
		if !ok || id == "" {
			return "", errorResult(maiden.KindInput, fmt.Sprintf("_meta[%q] must be a session ID string from session_open", MetaSession))
		}
		info, err := s.host.Session(ctx, id)
		switch {
		case errors.Is(err, maiden.ErrUnknownSession), err == nil && (info.Agent != agent || info.Credential != cred):
			// One answer for all three: an agent learns nothing of others'
			// sessions, nor a token of its agent's other tokens' (a
			// sub-agent given a second token does not inherit a boundary a
			// human widened for the first's session). A session bound to
			// no credential (a token's default, opened by an embedder, or
			// a 2025-11-25 session's) is no token's handle, nor stdio's.
			return "", errorResult(maiden.KindInput, fmt.Sprintf("_meta[%q]: no session %q of this agent; open one with session_open", MetaSession, id))
		case err != nil:
			return "", errorResult(maiden.KindUnavailable, "looking up the session: "+err.Error())
		case !info.Ended.IsZero():
			return "", errorResult(maiden.KindInput, fmt.Sprintf("_meta[%q]: session %q has ended; open another with session_open", MetaSession, id))
		}
		if s.handleExpired(ctx, id, info) {
			// Idle past -session-idle, as a legacy session would have been
			// closed: its boundary stops applying.
			if err := s.host.EndSession(context.WithoutCancel(ctx), id); err != nil && !errors.Is(err, maiden.ErrUnknownSession) {
				s.log.Warn("could not end an idle session", "session", id, "err", err)
			}
			return "", errorResult(maiden.KindInput, fmt.Sprintf("_meta[%q]: session %q has expired (no request named it for %v); open another with session_open", MetaSession, id, time.Duration(s.handleIdle.Load())))
		}
		return id, nil
	}
	if req.Session != nil && req.Session.ID() != "" {
		return req.Session.ID(), nil
	}
	if s.stdio.Load() {
		return s.stdioSession, nil
	}
	return "", nil
}

// handleUse is when a modern session handle was last named in this
// process, and when this process last recorded a use in the store.
type handleUse struct{ used, stored time.Time }

// handleExpired reports whether the modern session handle id (its session
// info) has gone unnamed longer than the HTTP front end's session idle
// time (never, without one), and otherwise records its use now. Its last
// use is the latest of its creation, its last use in this process, and the
// last use the store holds (which every instance sharing the store records,
// to within a minute: Host.TouchSession), so a handle named on another
// instance, or before a restart, is not ended here for being unseen. A
// live legacy session named as a handle is left to its own expiry.
func (s *Server) handleExpired(ctx context.Context, id string, info maiden.SessionInfo) bool {
	idle := time.Duration(s.handleIdle.Load())
	if idle <= 0 || id == s.stdioSession {
		return false
	}
	if _, legacy := s.sessionAgent(id); legacy {
		return false
	}
	now := time.Now()
	s.handleMu.Lock()
	u := s.handleUsed[id]
	last := info.Created
	for _, t := range []time.Time{info.LastUsed, u.used} {
		if t.After(last) {
			last = t
		}
	}
	if now.Sub(last) > idle {
		delete(s.handleUsed, id)
		s.handleMu.Unlock()
		return true
	}
	s.handleMu.Unlock()
	s.touchHandle(ctx, id)
	return false
}

// maxHandleUses bounds the handles whose last use touchHandle keeps.
const maxHandleUses = 4096

// touchHandle records that modern session handle id was used now (a
// request named it, or a call in it ended: a session with a call in
// flight does not count as idle), in this process and, at most once a
// minute per handle, in the store.
func (s *Server) touchHandle(ctx context.Context, id string) {
	idle := time.Duration(s.handleIdle.Load())
	if id == "" || idle <= 0 {
		return
	}
	now := time.Now()
	s.handleMu.Lock()
	if s.handleUsed == nil {
		s.handleUsed = map[string]handleUse{}
	}
	if len(s.handleUsed) >= maxHandleUses {
		for k, h := range s.handleUsed {
			if now.Sub(h.used) > idle {
				delete(s.handleUsed, k)
			}
		}
		// Still full: the handles are in use (an agent may open as many
		// as it likes with session_open and name each). Kept whole, the
		// map grew without bound, and every touch from then on scanned
		// it all under this lock. Some are forgotten instead, down to
		// three quarters, so the next sweep is a quarter of the bound of
		// touches away. A forgotten handle's last use falls back to the
		// store's, recorded within a minute of it (as a handle used on
		// another instance does): it can expire up to a minute early.
		for k := range s.handleUsed {
			if len(s.handleUsed) <= maxHandleUses-maxHandleUses/4 {
				break
			}
			delete(s.handleUsed, k)
		}
	}
	u := s.handleUsed[id]
	u.used = now
	store := now.Sub(u.stored) >= time.Minute
	if store {
		u.stored = now
	}
	s.handleUsed[id] = u
	s.handleMu.Unlock()
	if store {
		if err := s.host.TouchSession(context.WithoutCancel(ctx), id); err != nil {
			s.log.Debug("could not record a session's use", "session", id, "err", err)
		}
	}
}
