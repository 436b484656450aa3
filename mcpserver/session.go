package mcpserver

import (
	"context"
	"errors"
	"fmt"

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
// request's _meta, which must be a live session of the same agent (else the
// call fails here), or the agent's default session when it names none. A
// failure is returned as the call's result.
func (s *Server) callSession(ctx context.Context, req *mcp.CallToolRequest, agent string, modern bool) (string, *mcp.CallToolResult) {
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
		case errors.Is(err, maiden.ErrUnknownSession), err == nil && info.Agent != agent:
			// One answer for both: an agent learns nothing of others' sessions.
			return "", errorResult(maiden.KindInput, fmt.Sprintf("_meta[%q]: no session %q of this agent; open one with session_open", MetaSession, id))
		case err != nil:
			return "", errorResult(maiden.KindUnavailable, "looking up the session: "+err.Error())
		case !info.Ended.IsZero():
			return "", errorResult(maiden.KindInput, fmt.Sprintf("_meta[%q]: session %q has ended; open another with session_open", MetaSession, id))
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
