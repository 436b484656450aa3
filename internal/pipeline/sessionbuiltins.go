package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// This file wires the session built-ins (internal/session.Tools: fs_read,
// fs_write, fs_list, web_fetch, request_sandbox_boundary, session_open)
// into the built-in backend: each runs in the call's session, yet passes
// through the same binding, cards (tool:invoke NAME with their rendered
// arguments), middleware and audit as any tool. request_sandbox_boundary
// asks a human to widen the session's boundary and waits for the answer
// like an approval; session_open gives a 2026-era client a session ID to
// name in _meta.

func init() {
	runs := map[string]sessionRun{
		"request_sandbox_boundary": (*builtinDeps).requestBoundary,
		"session_open":             (*builtinDeps).sessionOpen,
		hostfs.ToolFSRead:          fsTool(hostfs.FSRead),
		hostfs.ToolFSWrite:         fsTool(hostfs.FSWrite),
		hostfs.ToolFSList:          fsTool(hostfs.FSList),
		hostfs.ToolWebFetch:        (*builtinDeps).webFetch,
	}
	for name, t := range session.Tools {
		if runs[name] == nil {
			panic("maiden: session built-in " + name + " has no run")
		}
		builtins[name] = builtin{session: true, description: t.Description, input: t.Input, output: t.Output,
			readOnly: t.ReadOnly, destructive: t.Destructive, idempotent: t.Idempotent, runInv: runs[name],
			files: name == hostfs.ToolFSRead || name == hostfs.ToolFSWrite || name == hostfs.ToolFSList}
	}
}

// fsTool runs a file built-in of internal/builtin on the session's boundary,
// with the call's pinned wallet deciding where the path led (the session
// stage decided the path as asked: session.Gate.Hold).
func fsTool(op func(context.Context, boundary.Boundary, hostfs.Allow, []byte) (any, error)) sessionRun {
	return func(d *builtinDeps, ctx context.Context, inv *invocation, _ store.Store) (any, *store.Session, *ToolError, error) {
		s, found, terr, err := lookupSession(ctx, d.sessions, inv)
		if err != nil || terr != nil {
			return nil, found, terr, err
		}
		res, err := op(ctx, s.Boundary, session.FileAllow(inv.wallet), []byte(inv.call.Input))
		if err != nil {
			return nil, found, session.Failure(err), nil
		}
		return res, found, nil, nil
	}
}

// sessionOpen opens a new session of the call's agent, bound to the
// call's credential, within the agent's bound of live sessions
// (store.OpenSessionWithin): each is a row in the state store that an
// agent calling session_open in a loop would otherwise add without end.
func (d *builtinDeps) sessionOpen(ctx context.Context, inv *invocation, st store.Store) (any, *store.Session, *ToolError, error) {
	var in struct{}
	if terr := decodeInput("session_open", []byte(inv.call.Input), &in); terr != nil {
		return nil, nil, terr, nil
	}
	bound := d.maxSessions
	if bound <= 0 {
		bound = store.DefaultMaxSessions
	}
	// Bound to the caller's credential as it is created, before anyone
	// learns the ID: a front end refuses the handle to another token of
	// the same agent.
	id := session.NewID()
	_, _, err := st.OpenSessionWithin(ctx, id, inv.agent, inv.call.Credential, session.Initial(inv.cfg, inv.agent), bound)
	if errors.Is(err, store.ErrTooManySessions) {
		hours := store.SessionCountedFor.Hours()
		return nil, nil, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("session_open: agent %q already holds %d live sessions opened or used in the last %g hours, the most one agent may: nothing was opened. "+
			"Run further calls in a session it holds (name it in _meta[%q]) rather than opening another, or end some first "+
			"(a 2025-11-25 session ends with its MCP session, a session_open handle when a request names it after the server's -session-idle, any session through its embedder's EndSession); "+
			"a session unused for %g hours stops counting", inv.agent, bound, hours, "maiden/session", hours)}, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: opening a session: %v", ErrState, err)
	}
	return map[string]any{"session": id}, nil, nil, nil
}

// DefaultBoundaryRequestExpiry is how long a boundary request waits for a
// decision before it counts as denied.
const DefaultBoundaryRequestExpiry = session.DefaultRequestExpiry

func (d *builtinDeps) requestBoundary(ctx context.Context, inv *invocation, st store.Store) (any, *store.Session, *ToolError, error) {
	var in struct {
		ID            string          `json:"id"`
		Expansion     json.RawMessage `json:"expansion"`
		Justification string          `json:"justification"`
	}
	if terr := decodeInput("request_sandbox_boundary", []byte(inv.call.Input), &in); terr != nil {
		return nil, nil, terr, nil
	}
	s, found, terr, err := lookupSession(ctx, d.sessions, inv)
	if err != nil || terr != nil {
		return nil, found, terr, err
	}
	r, terr, err := session.Request(ctx, st, s, in.ID, in.Expansion, in.Justification, inv.maxPending(), d.log, ErrState)
	if err != nil || terr != nil {
		return nil, found, terr, err
	}
	if r.Request.Status == boundary.Pending {
		r, terr, err = d.awaitBoundary(ctx, inv, st, r)
		if err != nil || terr != nil {
			return nil, found, terr, err
		}
	}
	out, terr, err := session.Settled(r)
	return out, found, terr, err
}

// awaitBoundary waits for a human to settle request r, giving the call's
// admission turn back meanwhile (like an approval's wait). The wait ends
// at the decision, at Options.ApprovalWait, or when the caller gives up:
// then the result is kind pending with the request's handle, and
// repeating the call with the same id waits for the same request again.
// It ends denied at the poll after the caller's token is revoked or its
// agent removed (humanWait.wait), the request left pending.
func (d *builtinDeps) awaitBoundary(ctx context.Context, inv *invocation, st store.Store, r store.BoundaryRequest) (store.BoundaryRequest, *ToolError, error) {
	cur := r
	decided, refused := d.human.wait(ctx, inv, r.Handle, boundaryApprovalView(r), func(ctx context.Context) (bool, error) {
		got, err := st.BoundaryRequest(ctx, r.Handle)
		if err != nil {
			return false, err
		}
		cur = got
		if cur.Request.Status != boundary.Pending {
			return true, nil
		}
		if !time.Now().Before(cur.Expires) {
			// Settling an expired request records the expiry's denial
			// and returns it (with ErrApprovalState): use it either way.
			if settled, _, err := st.SettleBoundaryRequest(ctx, r.Handle, boundary.Deny(store.BoundaryReasonExpired), "maiden"); err == nil || settled.Handle != "" {
				cur = settled
			}
			return cur.Request.Status != boundary.Pending, nil
		}
		return false, nil
	})
	if refused != "" {
		// The caller lost its token or its agent while nobody had
		// answered: the request stays pending for a human; this caller
		// stops waiting for it.
		return cur, &ToolError{Kind: KindDenied, Approval: r.Handle, Message: refused}, nil
	}
	if !decided {
		return r, &ToolError{Kind: KindPending, Approval: r.Handle,
			Message: fmt.Sprintf("boundary request %s (id %s) is waiting for a human's decision (maiden approve %s, or the inbox); repeat the call with the same id to wait again", r.Handle, r.Request.ID, r.Handle)}, nil
	}
	refused, err := d.human.resume(ctx, inv)
	if err != nil {
		return cur, nil, err
	}
	if refused != "" {
		// The caller lost its token or its agent while the human decided:
		// the decision stands in the store, but this caller is not told.
		return cur, &ToolError{Kind: KindDenied, Approval: r.Handle, Message: refused}, nil
	}
	return cur, nil, nil
}
