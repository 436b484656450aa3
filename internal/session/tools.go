package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the session built-ins (config.BuiltinTools) as tools: what
// tools/list shows of each, and the work of the two that are more than an
// operation of internal/builtin (request_sandbox_boundary, web_fetch). The
// root's built-in backend runs them in the call's session, through the
// same binding, cards (tool:invoke NAME with their rendered arguments),
// middleware and audit as any tool.

// Tool is what tools/list shows of one session built-in.
type Tool struct {
	Description, Input, Output        string // Input, Output: JSON Schema
	ReadOnly, Destructive, Idempotent bool
}

// Tools are the session built-ins by name.
var Tools = map[string]Tool{
	"request_sandbox_boundary": {
		Description: "Ask a human to widen this session's sandbox boundary: filesystem entries (path, access read or write, scope exact or subtree) and/or network. " +
			"Use the requiredExpansion of a sandbox_boundary_required error as the expansion, and say why in justification. " +
			"The call waits for the decision; the same id is the same request (repeat it to keep waiting). " +
			"The result's status is approved, denied or conflict, with a reason.",
		Input: `{"type":"object","properties":{` +
			`"id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,128}$","description":"your ID for this request; the same ID in the same session is the same request (without one, the same expansion and justification are); a new ID asks anew"},` +
			`"expansion":{"type":"object","description":"what to add: {\"filesystem\":{\"entries\":[{\"path\":\"/abs\",\"access\":\"read|write\",\"scope\":\"exact|subtree\"}]},\"network\":{\"enabled\":true}}",` +
			`"properties":{"filesystem":{"type":"object","properties":{"entries":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},"access":{"enum":["read","write"]},"scope":{"enum":["exact","subtree"]}},"required":["path","access","scope"]}}}},` +
			`"network":{"type":"object","properties":{"enabled":{"const":true}}}}},` +
			`"justification":{"type":"string","description":"why the task needs it, for the human who decides (1 to 2000 characters)"}},` +
			`"required":["expansion","justification"],"additionalProperties":false}`,
		Output: `{"type":"object","properties":{"status":{"type":"string"},"reason":{"type":"string"},"requestId":{"type":"string"},"handle":{"type":"string"},"revision":{"type":"integer"}},"required":["status","reason","requestId"]}`,
	},
	"session_open": {
		Description: "Open a new maiden session for this agent and return its ID. Name it in a request's _meta as \"maiden/session\" to run the call in that session (its own sandbox boundary); calls that name none run in a default session (over HTTP, one per token).",
		Input:       `{"type":"object","properties":{},"additionalProperties":false}`,
		Output:      `{"type":"object","properties":{"session":{"type":"string"}},"required":["session"]}`,
	},
	hostfs.ToolFSRead: {
		Description: "Read a file inside this session's sandbox boundary: its text, or base64 with encoding \"base64\" (binary files). A path outside the boundary fails with sandbox_boundary_required and the requiredExpansion to ask for with request_sandbox_boundary; " +
			"one the agent's cards do not let it read fails kind denied, which no boundary request changes.",
		Input: hostfs.FSReadInputSchema, Output: hostfs.FSReadOutputSchema,
		ReadOnly: true, Idempotent: true, Destructive: false,
	},
	hostfs.ToolFSWrite: {
		Description: "Write (create or replace, atomically) a file inside this session's sandbox boundary; content is text, or base64 with encoding \"base64\". A path outside the boundary, or read-only in it, fails with sandbox_boundary_required and the requiredExpansion; " +
			"one the agent's cards do not let it write fails kind denied, which no boundary request changes.",
		Input: hostfs.FSWriteInputSchema, Output: hostfs.FSWriteOutputSchema,
		ReadOnly: false, Idempotent: true, Destructive: true,
	},
	hostfs.ToolFSList: {
		Description: "List a directory inside this session's sandbox boundary: each entry's name, type (file, dir, symlink, other) and size.",
		Input:       hostfs.FSListInputSchema, Output: hostfs.FSListOutputSchema,
		ReadOnly: true, Idempotent: true, Destructive: false,
	},
	hostfs.ToolWebFetch: {
		Description: "Fetch a URL over HTTPS through maiden's egress gate (the hosts this agent's web_fetch binding allows; no redirects followed; the body capped). " +
			"Needs network enabled in this session's sandbox boundary: otherwise it fails with sandbox_boundary_required and the requiredExpansion to ask for.",
		Input: hostfs.WebFetchInputSchema, Output: hostfs.WebFetchOutputSchema,
		ReadOnly: false, Idempotent: false,
	},
}

// DefaultRequestExpiry is how long a boundary request waits for a
// decision before it counts as denied.
const DefaultRequestExpiry = store.DefaultBoundaryRequestExpiry

// Request stores request_sandbox_boundary's request in session s (or finds
// it again: the same id in the same session is the same request; without
// an id, the same expansion and justification are), logging a new one. A
// request the boundary model refuses, a session of another agent, or one
// beyond the agent's maxPending requests waiting (config.Config.MaxPending)
// is the answer; an error is the store's (wrapped with errState).
func Request(ctx context.Context, st store.Store, s store.Session, id string, expansion []byte, justification string, maxPending int, log *slog.Logger, errState error) (store.BoundaryRequest, *api.ToolError, error) {
	if maxPending <= 0 {
		maxPending = store.DefaultMaxPending
	}
	if id == "" {
		// A repeated call, a 2026-era client's retry after the inbox
		// page, finds it again instead of asking twice; a new id asks
		// anew.
		sum := sha256.Sum256([]byte(string(expansion) + "\x00" + justification))
		id = fmt.Sprintf("auto_%x", sum[:16])
	}
	r, created, err := st.RequestBoundary(ctx, s.ID, id, expansion, justification, time.Now().Add(DefaultRequestExpiry), maxPending)
	var ve *boundary.ValidationError
	switch {
	case errors.As(err, &ve):
		return r, Outcome("invalid", ve.Reason, id, "", fmt.Sprintf("the request is not valid: %s", ve.Error())), nil
	case errors.Is(err, store.ErrNotAllowed):
		return r, &api.ToolError{Kind: api.KindDenied, Message: fmt.Sprintf("session %q belongs to another agent", s.ID)}, nil
	case errors.Is(err, store.ErrTooManyPending):
		return r, &api.ToolError{Kind: api.KindDenied, Message: fmt.Sprintf("agent %s already has %d boundary requests waiting for a human, the most one agent may have (its max_pending): nothing was asked. Repeat the call once the operator has decided some of them (maiden pending lists them) or they have expired",
			s.Agent, maxPending)}, nil
	case err != nil:
		return r, nil, fmt.Errorf("%w: storing the boundary request: %v", errState, err)
	}
	if created {
		log.Info("boundary request", "handle", r.Handle, "agent", s.Agent, "session", s.ID, "request", r.Request.ID)
	}
	return r, nil, nil
}

// WebFetch is the web_fetch built-in's run and what it needs: the egress
// gate every request goes through, the host's secrets, each session's
// material, and the observer of fetch decisions (nil: none).
type WebFetch struct {
	Gate      *egress.Gate
	Lookup    func(name string) (string, bool)
	Materials *Materials
	Observer  api.Observer
	// Send, if not nil, sends each request in place of Gate.Fetch: the
	// host's audit wraps the gate with it (its own Authorizer noting the
	// cards' decisions, a record per request). The request arrives with
	// Authorize and Caller set as Run would send them.
	Send func(ctx context.Context, p *egress.Policy, r egress.Request) (*egress.Response, *egress.FetchError)
	// Mark is Materials.Mark taken before the session given to Run was
	// read, so that material dropped since is not resolved again.
	Mark uint64
}

// Run fetches input for agent in session s under its web_fetch binding b
// (cfg's), each request decided by authz (the agent's cards, nil for the
// implicit agent) as well as the binding's policy.
func (w *WebFetch) Run(ctx context.Context, cfg *config.Config, agent string, s store.Session, authz egress.Authorizer, input []byte) (any, *api.ToolError) {
	b, _, _ := cfg.AgentBinding(agent, hostfs.ToolWebFetch)
	m, terr := w.Materials.ResolveSince(w.Mark, s, b, w.Lookup)
	if terr != nil {
		return nil, terr
	}
	pol, err := egress.NewPolicy(hostfs.ToolWebFetch, WebFetchRules(cfg, b))
	if err != nil {
		return nil, &api.ToolError{Kind: api.KindConfig, Message: "web_fetch's policy: " + err.Error()}
	}
	// The policy, and with it its connection pool, is this call's alone:
	// nothing can reuse a connection it leaves idle, which would hold a
	// socket and two goroutines for the pool's idle timeout (30 s) after
	// the call, one per call an agent makes.
	defer pol.CloseIdleConnections()
	fetch := func(ctx context.Context, r egress.Request) (*egress.Response, *egress.FetchError) {
		r.Authorize, r.Caller = authz, agent
		send := w.Gate.Fetch
		if w.Send != nil {
			send = w.Send
		}
		resp, ferr := send(ctx, pol, r)
		if w.Observer != nil {
			ev := api.FetchEvent{Tool: hostfs.ToolWebFetch, Allowed: true, Rule: egress.RuleAllowed}
			if ferr != nil {
				ev.Allowed, ev.Rule = ferr.Kind != egress.FetchDenied, ferr.Rule
			}
			w.Observer.Fetch(ev)
		}
		return resp, ferr
	}
	out, err := hostfs.WebFetch(ctx, s.Boundary, input, fetch, m)
	if err != nil {
		return nil, Failure(err)
	}
	return out, nil
}
