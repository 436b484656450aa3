package maiden

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/session"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the session built-ins (config.BuiltinTools): tools that run
// inside maiden in the call's session, yet pass through the same binding,
// cards (tool:invoke NAME with their rendered arguments), middleware and
// audit as any tool. request_sandbox_boundary asks a human to widen the
// session's boundary and waits for the answer like an approval;
// session_open gives a 2026-era client a session ID to name in _meta.

func init() {
	builtins["request_sandbox_boundary"] = builtin{
		session: true,
		description: "Ask a human to widen this session's sandbox boundary: filesystem entries (path, access read or write, scope exact or subtree) and/or network. " +
			"Use the requiredExpansion of a sandbox_boundary_required error as the expansion, and say why in justification. " +
			"The call waits for the decision; the same id is the same request (repeat it to keep waiting). " +
			"The result's status is approved, denied or conflict, with a reason.",
		input: `{"type":"object","properties":{` +
			`"id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,128}$","description":"your ID for this request; the same ID in the same session is the same request (without one, the same expansion and justification are); a new ID asks anew"},` +
			`"expansion":{"type":"object","description":"what to add: {\"filesystem\":{\"entries\":[{\"path\":\"/abs\",\"access\":\"read|write\",\"scope\":\"exact|subtree\"}]},\"network\":{\"enabled\":true}}",` +
			`"properties":{"filesystem":{"type":"object","properties":{"entries":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},"access":{"enum":["read","write"]},"scope":{"enum":["exact","subtree"]}},"required":["path","access","scope"]}}}},` +
			`"network":{"type":"object","properties":{"enabled":{"const":true}}}}},` +
			`"justification":{"type":"string","description":"why the task needs it, for the human who decides (1 to 2000 characters)"}},` +
			`"required":["expansion","justification"],"additionalProperties":false}`,
		output: `{"type":"object","properties":{"status":{"type":"string"},"reason":{"type":"string"},"requestId":{"type":"string"},"handle":{"type":"string"},"revision":{"type":"integer"}},"required":["status","reason","requestId"]}`,
		runInv: (*Host).builtinRequestBoundary,
	}
	builtins["session_open"] = builtin{
		session:     true,
		description: "Open a new maiden session for this agent and return its ID. Name it in a request's _meta as \"maiden/session\" to run the call in that session (its own sandbox boundary); calls that name none run in the agent's default session.",
		input:       `{"type":"object","properties":{},"additionalProperties":false}`,
		output:      `{"type":"object","properties":{"session":{"type":"string"}},"required":["session"]}`,
		runInv:      (*Host).builtinSessionOpen,
	}
}

func (h *Host) builtinSessionOpen(ctx context.Context, inv *invocation, st store.Store) (any, *ToolError, error) {
	var in struct{}
	if terr := decodeInput("session_open", []byte(inv.call.Input), &in); terr != nil {
		return nil, terr, nil
	}
	id := session.NewID()
	if _, _, err := st.OpenSession(ctx, id, inv.agent, session.Initial(inv.cfg, inv.agent)); err != nil {
		return nil, nil, fmt.Errorf("%w: opening a session: %v", ErrState, err)
	}
	return map[string]any{"session": id}, nil, nil
}

// DefaultBoundaryRequestExpiry is how long a boundary request waits for a
// decision before it counts as denied.
const DefaultBoundaryRequestExpiry = store.DefaultBoundaryRequestExpiry

func (h *Host) builtinRequestBoundary(ctx context.Context, inv *invocation, st store.Store) (any, *ToolError, error) {
	var in struct {
		ID            string          `json:"id"`
		Expansion     json.RawMessage `json:"expansion"`
		Justification string          `json:"justification"`
	}
	if terr := decodeInput("request_sandbox_boundary", []byte(inv.call.Input), &in); terr != nil {
		return nil, terr, nil
	}
	if in.ID == "" {
		// No id: the same expansion and justification are the same
		// request in this session (a repeated call, a 2026-era client's
		// retry after the inbox page, find it again instead of asking
		// twice); a new id asks anew.
		sum := sha256.Sum256([]byte(string(in.Expansion) + "\x00" + in.Justification))
		in.ID = fmt.Sprintf("auto_%x", sum[:16])
	}
	s, terr, err := h.session(ctx, inv)
	if err != nil || terr != nil {
		return nil, terr, err
	}
	r, created, err := st.RequestBoundary(ctx, s.ID, in.ID, in.Expansion, in.Justification, time.Now().Add(DefaultBoundaryRequestExpiry))
	var ve *boundary.ValidationError
	switch {
	case errors.As(err, &ve):
		return nil, session.Outcome("invalid", ve.Reason, in.ID, "", fmt.Sprintf("the request is not valid: %s", ve.Error())), nil
	case errors.Is(err, store.ErrNotAllowed):
		return nil, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("session %q belongs to another agent", s.ID)}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("%w: storing the boundary request: %v", ErrState, err)
	}
	if created {
		h.log.Info("boundary request", "handle", r.Handle, "agent", inv.agent, "session", s.ID, "request", r.Request.ID)
	}
	if r.Request.Status == boundary.Pending {
		r, terr, err = h.awaitBoundary(ctx, inv, st, r)
		if err != nil || terr != nil {
			return nil, terr, err
		}
	}
	return session.Settled(r)
}

// awaitBoundary waits for a human to settle request r, giving the call's
// admission turn back meanwhile (like an approval's wait). The wait ends
// at the decision, at Options.ApprovalWait, or when the caller gives up:
// then the result is kind pending with the request's handle, and
// repeating the call with the same id waits for the same request again.
func (h *Host) awaitBoundary(ctx context.Context, inv *invocation, st store.Store, r store.BoundaryRequest) (store.BoundaryRequest, *ToolError, error) {
	cur := r
	decided := h.waitForHuman(ctx, inv, r.Handle, boundaryApprovalView(r), func(ctx context.Context) (bool, error) {
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
	if !decided {
		return r, &ToolError{Kind: KindPending, Approval: r.Handle,
			Message: fmt.Sprintf("boundary request %s (id %s) is waiting for a human's decision (maiden approve %s, or the inbox); repeat the call with the same id to wait again", r.Handle, r.Request.ID, r.Handle)}, nil
	}
	return cur, nil, inv.resume(ctx, h)
}

func init() {
	fsTool := func(name, description string, in, out string, readOnly bool, op func(context.Context, boundary.Boundary, []byte) (any, error)) builtin {
		return builtin{
			session: true, description: description, input: in, output: out,
			readOnly: readOnly, idempotent: true, destructive: !readOnly,
			runInv: func(h *Host, ctx context.Context, inv *invocation, _ store.Store) (any, *ToolError, error) {
				s, terr, err := h.session(ctx, inv)
				if err != nil || terr != nil {
					return nil, terr, err
				}
				res, err := op(ctx, s.Boundary, []byte(inv.call.Input))
				if err != nil {
					return nil, session.Failure(err), nil
				}
				return res, nil, nil
			},
		}
	}
	builtins[hostfs.ToolFSRead] = fsTool(hostfs.ToolFSRead,
		"Read a file inside this session's sandbox boundary: its text, or base64 with encoding \"base64\" (binary files). A path outside the boundary fails with sandbox_boundary_required and the requiredExpansion to ask for with request_sandbox_boundary.",
		hostfs.FSReadInputSchema, hostfs.FSReadOutputSchema, true, hostfs.FSRead)
	builtins[hostfs.ToolFSWrite] = fsTool(hostfs.ToolFSWrite,
		"Write (create or replace, atomically) a file inside this session's sandbox boundary; content is text, or base64 with encoding \"base64\". A path outside the boundary, or read-only in it, fails with sandbox_boundary_required and the requiredExpansion.",
		hostfs.FSWriteInputSchema, hostfs.FSWriteOutputSchema, false, hostfs.FSWrite)
	builtins[hostfs.ToolFSList] = fsTool(hostfs.ToolFSList,
		"List a directory inside this session's sandbox boundary: each entry's name, type (file, dir, symlink, other) and size.",
		hostfs.FSListInputSchema, hostfs.FSListOutputSchema, true, hostfs.FSList)
}
