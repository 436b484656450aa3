// Package adminlink is what the root package and the public admin package
// share below their public surfaces: the api views of the state store's
// records (approvals, boundary requests, cards, sessions, audit records),
// and the links by which the root gets an *admin.State over the store its
// Host already holds (Over; As, acting as an agent for its card built-ins) (so that the operators' work an inbox page or a
// built-in does runs the same code as `maiden approve`, on the same store
// connection and audit journal). admin's exported functions name no
// internal type, so an embedder can call every one of them; the root,
// which must not open a second store for the same work, goes through Over and As.
//
//	s := adminlink.Over(st, cfg).(*admin.State)   // package admin sets Over and As in its init
//	a := adminlink.As(st, cfg, wallet).(*admin.AgentState) // acting as the wallet's agent: its card operations only
package adminlink

import (
	"encoding/json"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/store"
)

// Over returns an *admin.State working on st, whose configuration is cfg
// (nil: a store without one, for the audit trail), without opening or
// syncing anything; closing the State does not close st. Package admin
// sets it when it is initialised: a package that imports admin (the root
// does) can call it.
var Over func(st store.Store, cfg *config.Config) any

// As returns an *admin.AgentState over st acting as w's agent (admin.State.As),
// deciding what the agent may see on w, the wallet its call was authorized
// on: the cards_* built-ins' card operations. Package admin sets it with
// Over.
var As func(st store.Store, cfg *config.Config, w *cards.Wallet) any

// Approval is the human view of stored request a under cfg: what the
// human is shown, with the policy the call asked under as stored with the
// request (what an approval is bound to), not agent.toml as it is now.
func Approval(a store.Approval, cfg *config.Config) api.ApprovalRequest {
	r := api.ApprovalRequest{
		ID: a.ID, Agent: a.Agent, Session: a.Session, Tool: a.Tool, Rendered: a.Rendered, Digest: a.Digest,
		Rule: a.Middleware, Reason: a.Reason, Created: a.Created, Expires: a.Expires, State: a.State,
		DecidedBy: a.DecidedBy, Decided: a.Decided, DecisionReason: a.DecisionReason,
		Hosts: []string{}, Secrets: []string{}, Kind: api.RequestCall, ToolDigest: a.ToolDigest,
	}
	var p api.ApprovalPolicy
	if a.Policy != "" && json.Unmarshal([]byte(a.Policy), &p) == nil {
		r.Policy = &p
		r.Hosts = append(r.Hosts, p.Hosts...)
		r.Secrets = append(r.Secrets, p.Secrets...)
	}
	// "Always" needs both the rule as it asked (stored with the request)
	// and the approve rule of that name now: a rule is named by its
	// position, so once agent.toml's rules are reordered the name can
	// stand for another rule, whose allow_always says nothing about this
	// request; and a rule changed to allow_always = false since holds
	// from then on.
	if cfg != nil && a.AllowAlways {
		if rule, ok := cfg.MiddlewareRule(a.Middleware); ok && rule.Use == config.UseApprove {
			r.AllowAlways = rule.AllowAlways
		}
	}
	r.AlwaysGrant = AlwaysGrant(a.Tool, a.Rendered)
	return r
}

// AlwaysGrant is the approve:always grant for exactly one call.
func AlwaysGrant(tool, rendered string) string {
	g := "approve:always " + tool
	if rendered != "" {
		g += " " + rendered
	}
	return g
}

// BoundaryApproval is a boundary request as the humans who decide see it,
// beside the calls waiting for approval.
func BoundaryApproval(r store.BoundaryRequest) api.ApprovalRequest {
	x, _ := json.Marshal(r.Request.Expansion)
	reason := ""
	if r.Request.Status != boundary.Pending {
		reason = r.Request.Reason
	}
	rev := r.Request.BaseRevision
	if r.Request.Status == boundary.Approved {
		rev = r.Request.Revision
	}
	return api.ApprovalRequest{
		ID: r.Handle, Kind: api.RequestBoundary, Agent: r.Agent, Session: r.Session, Tool: "request_sandbox_boundary",
		Rendered: string(x), Expansion: x, Revision: rev, Rule: "request " + r.Request.ID, Reason: r.Request.Justification,
		Hosts: []string{}, Secrets: []string{}, Created: r.Created, Expires: r.Expires, State: string(r.Request.Status),
		DecidedBy: r.DecidedBy, Decided: r.Decided, DecisionReason: reason,
	}
}

// IsBoundaryHandle tells a boundary request's handle from an approval's
// ID. (The store makes handles "bnd_" + hex; approvals' IDs never start
// so.)
func IsBoundaryHandle(id string) bool { return strings.HasPrefix(id, "bnd_") }

// Card is c as operators and agents see it.
func Card(c cards.Card) api.Card {
	return api.Card{
		ID: c.ID, Holder: c.Holder, Parents: c.Parents,
		LowerPos: grants(c.LowerPos), LowerNeg: grants(c.LowerNeg), UpperPos: grants(c.UpperPos), UpperNeg: grants(c.UpperNeg),
		Expires: c.Expires, Bound: c.Bound, System: c.System, Manager: c.Manager, Created: c.Created, Revoked: c.Revoked,
		Budgets: budgets(c),
	}
}

// budgets is c's budgets with what it spent, in cards.BudgetKeys order.
func budgets(c cards.Card) []api.CardBudget {
	var out []api.CardBudget
	left := cards.Left(c.Budget, c.Spent)
	for _, k := range cards.BudgetKeys {
		if limit, ok := c.Budget[k]; ok {
			out = append(out, api.CardBudget{Key: k, Limit: limit, Spent: c.Spent[k], Left: left[k]})
		}
	}
	return out
}

// Cards is Card of each (never nil).
func Cards(list []cards.Card) []api.Card {
	out := make([]api.Card, len(list))
	for i, c := range list {
		out[i] = Card(c)
	}
	return out
}

func grants(gs []cards.Grant) []api.CardGrant {
	if gs == nil {
		return nil
	}
	out := make([]api.CardGrant, len(gs))
	for i, g := range gs {
		out[i] = api.CardGrant{Grant: g.Grant.String(), Recipient: g.Recipient}
	}
	return out
}

// Boundary is b in api's words (nil lists stay nil: the JSON is the same).
func Boundary(b boundary.Boundary) api.Boundary {
	out := api.Boundary{
		Kind: string(b.Kind), Revision: b.Revision, Filesystem: string(b.Filesystem), Workspace: b.Workspace,
		Deny: b.Deny, Protected: b.Protected, Network: b.Network,
	}
	if b.Entries != nil {
		out.Entries = make([]api.BoundaryEntry, len(b.Entries))
		for i, e := range b.Entries {
			out.Entries[i] = api.BoundaryEntry{Path: e.Path, Access: string(e.Access), Match: string(e.Match)}
		}
	}
	return out
}

// FromBoundary is b in the boundary model's words, for the store (which
// validates it).
func FromBoundary(b api.Boundary) boundary.Boundary {
	out := boundary.Boundary{
		Kind: boundary.Kind(b.Kind), Revision: b.Revision, Filesystem: boundary.FSKind(b.Filesystem), Workspace: b.Workspace,
		Deny: b.Deny, Protected: b.Protected, Network: b.Network,
	}
	if b.Entries != nil {
		out.Entries = make([]boundary.Entry, len(b.Entries))
		for i, e := range b.Entries {
			out.Entries[i] = boundary.Entry{Path: e.Path, Access: boundary.Access(e.Access), Match: boundary.Match(e.Match)}
		}
	}
	return out
}

// Session is s without its revisions and requests.
func Session(s store.Session) api.SessionInfo {
	return api.SessionInfo{ID: s.ID, Agent: s.Agent, Created: s.Created, LastUsed: s.LastUsed, Ended: s.Ended, Boundary: Boundary(s.Boundary), Credential: s.Credential}
}

// Revisions is each revision in api's words (nil stays nil).
func Revisions(list []store.SessionRevision) []api.SessionRevision {
	if list == nil {
		return nil
	}
	out := make([]api.SessionRevision, len(list))
	for i, r := range list {
		out[i] = api.SessionRevision{Session: r.Session, Revision: r.Revision, Boundary: Boundary(r.Boundary), At: r.At, Why: r.Why}
	}
	return out
}

// BoundaryRequests is each request in api's words (nil stays nil).
func BoundaryRequests(list []store.BoundaryRequest) []api.BoundaryRequest {
	if list == nil {
		return nil
	}
	out := make([]api.BoundaryRequest, len(list))
	for i, r := range list {
		x, _ := r.Request.Expansion.MarshalJSON()
		q := r.Request
		out[i] = api.BoundaryRequest{
			Handle: r.Handle, Session: r.Session, Agent: r.Agent, Created: r.Created, Expires: r.Expires,
			Decided: r.Decided, DecidedBy: r.DecidedBy,
			Request: api.BoundaryRequestDetail{
				ID: q.ID, Status: string(q.Status), BaseRevision: q.BaseRevision, BaseKind: string(q.BaseKind),
				Expansion: x, Justification: q.Justification, Reason: q.Reason, Revision: q.Revision,
			},
		}
	}
	return out
}

// Audit is r in api's words.
func Audit(r store.AuditRecord) api.AuditRecord {
	return api.AuditRecord{Seq: r.Seq, At: r.At, Kind: r.Kind, Actor: r.Actor, Agent: r.Agent, Tool: r.Tool, Body: r.Body, Prev: r.Prev, Hash: r.Hash}
}

// Audits is Audit of each (nil stays nil).
func Audits(list []store.AuditRecord) []api.AuditRecord {
	if list == nil {
		return nil
	}
	out := make([]api.AuditRecord, len(list))
	for i, r := range list {
		out[i] = Audit(r)
	}
	return out
}
