// Package statetest is test-only: it plants in a state store what only the
// call path writes (approval requests, sessions and their boundary
// requests, call audit records) and asks what only the call path asks (a
// token's agent), so that the command line's tests set up and check their
// stores through public types and import no internal/store. Operators'
// reads and writes go through package admin, as the command line's do.
//
//	r := statetest.Approval(t, "maiden-state.db", statetest.Request{Agent: "research", Tool: "echo", Rule: "middleware[1]"})
//	// maiden approve r.ID ...
package statetest

import (
	"context"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
)

// ErrBadToken: Authenticate refused the token (errors.Is).
var ErrBadToken = store.ErrBadToken

// open opens the store at path for one helper; the test fails if it cannot.
func open(t testing.TB, path string) *store.DB {
	t.Helper()
	st, err := store.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Request is an approval request as the approve middleware stores it
// before anything runs (Rule is the middleware that asked, Digest the
// input's SHA-256 in hex).
type Request struct {
	Agent, Session, Tool, Rendered, Digest, Rule, Reason string
	// ToolDigest and Policy are the binding the human is shown (the
	// tool's code identity, its effective policy as JSON); empty: a
	// request from before maiden recorded them.
	ToolDigest, Policy string
	// AllowAlways is the asking rule's allow_always as it was when it
	// asked (store.Approval.AllowAlways); the rule of that name in the
	// configuration must allow it too.
	AllowAlways bool
	// ExpiresIn is its lifetime from when it is stored (opening the store
	// may take a while on a loaded machine).
	ExpiresIn time.Duration
}

// Approval stores r (and its agent) in the store at path and returns the
// request as operators see it.
func Approval(t testing.TB, path string, r Request) api.ApprovalRequest {
	t.Helper()
	ctx := context.Background()
	st := open(t, path)
	defer st.Close()
	if err := st.EnsureAgent(ctx, r.Agent); err != nil {
		t.Fatal(err)
	}
	a, err := st.CreateApproval(ctx, store.Approval{Agent: r.Agent, Session: r.Session, Tool: r.Tool, Rendered: r.Rendered,
		Digest: r.Digest, Middleware: r.Rule, Reason: r.Reason, Binding: store.Binding{ToolDigest: r.ToolDigest, Policy: r.Policy},
		AllowAlways: r.AllowAlways, Expires: time.Now().Add(r.ExpiresIn)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return adminlink.Approval(a, nil)
}

// AppendAudit appends records to the trail of the store at path, as the
// call path does; Seq, Prev and Hash are the store's.
func AppendAudit(t testing.TB, path string, recs ...api.AuditRecord) {
	t.Helper()
	st := open(t, path)
	defer st.Close()
	for _, r := range recs {
		if _, err := st.AppendAudit(context.Background(), store.AuditRecord{At: r.At, Kind: r.Kind, Actor: r.Actor,
			Agent: r.Agent, Tool: r.Tool, Body: r.Body}); err != nil {
			t.Fatal(err)
		}
	}
}

// BoundaryRequest opens session of agent at boundary b (and the agent)
// in the store at path, and stores a pending request in it to widen it by
// expansion (JSON), as request_sandbox_boundary does; it returns the
// request's handle.
func BoundaryRequest(t testing.TB, path, agent, session string, b api.Boundary, id, expansion, justification string, expires time.Time) string {
	t.Helper()
	ctx := context.Background()
	st := open(t, path)
	defer st.Close()
	if err := st.EnsureAgent(ctx, agent); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.OpenSession(ctx, session, agent, adminlink.FromBoundary(b)); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.RequestBoundary(ctx, session, id, []byte(expansion), justification, expires, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r.Handle
}

// Authenticate is the agent the store at path says a bearer token belongs
// to, as a Host asks it for every request; a refusal is ErrBadToken.
func Authenticate(t testing.TB, path, token string) (string, error) {
	t.Helper()
	st := open(t, path)
	defer st.Close()
	return st.Authenticate(context.Background(), token)
}
