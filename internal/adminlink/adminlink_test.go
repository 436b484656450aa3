package adminlink

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// sameJSON: the api view prints exactly what the internal value printed
// (scripts read maiden cards show -json, sessions show -json, audit tail
// -json, pending ID -json), indented as the CLI prints it.
func sameJSON(t *testing.T, name string, internal, view any) {
	t.Helper()
	a, err := json.MarshalIndent(internal, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(view, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("%s: the api view's JSON differs\ninternal: %s\nview:     %s", name, a, b)
	}
}

func mustGrant(t *testing.T, s string) grant.Grant {
	t.Helper()
	g, err := grant.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestViewsPrintTheSameJSON: every api view of a stored record, and the
// boundary back, marshals to the bytes the internal record did.
func TestViewsPrintTheSameJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	full := cards.Card{ID: "c1", Holder: "a", Parents: []string{"c0"}, Spec: cards.Spec{
		LowerPos: []cards.Grant{{Grant: mustGrant(t, "tool:invoke echo --message=<h*>&")}, {Grant: mustGrant(t, "fs:read /srv/**"), Recipient: "b"}},
		LowerNeg: cards.Any(mustGrant(t, "tool:invoke echo --message=x")),
		UpperPos: cards.Any(mustGrant(t, "tool:invoke *")),
		UpperNeg: cards.Any(mustGrant(t, "network:connect evil.example")),
		Expires:  at, Bound: "tool=sha256:ab policy=sha256:cd",
	}, System: true, Manager: "operator", Created: at, Revoked: at}
	for name, c := range map[string]cards.Card{"full": full, "bare": {ID: "c2", Holder: "a", Spec: cards.Spec{LowerPos: cards.Any(mustGrant(t, "tool:invoke echo"))}}} {
		sameJSON(t, "card "+name, c, Card(c))
		// maiden cards ls and show embed the card and add its state.
		sameJSON(t, "card view "+name, struct {
			cards.Card
			State string `json:"state"`
		}{c, "live"}, struct {
			api.Card
			State string `json:"state"`
		}{Card(c), "live"})
	}
	for i, c := range []cards.Card{full} {
		v := Card(c)
		if got, want := v.LowerPos[1].String(), c.LowerPos[1].String(); got != want {
			t.Errorf("card %d: grant text %q, want %q", i, got, want)
		}
	}

	x, err := boundary.Validate([]byte(`{"filesystem":{"entries":[{"path":"/srv/a<b>","access":"read","scope":"subtree"}]},"network":{"enabled":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	bs := []boundary.Boundary{
		{Kind: boundary.Managed, Filesystem: boundary.Restricted},
		{Kind: boundary.Managed, Revision: 3, Filesystem: boundary.WorkspaceWrite, Workspace: "/w", Entries: []boundary.Entry{}, Deny: []string{}, Protected: []string{}},
		{Kind: boundary.Bypass, Filesystem: boundary.Unrestricted, Entries: []boundary.Entry{{Path: "/x", Access: boundary.Write, Match: boundary.Exact}},
			Deny: []string{"/srv/locked"}, Protected: []string{".git"}, Network: true},
	}
	for i, b := range bs {
		sameJSON(t, "boundary", b, Boundary(b))
		if back := FromBoundary(Boundary(b)); !jsonEqual(t, back, b) {
			t.Errorf("boundary %d does not come back from api: %+v", i, back)
		}
	}
	s := store.Session{ID: "s1", Agent: "a", Created: at, LastUsed: at, Ended: at, Boundary: bs[2]}
	revs := []store.SessionRevision{{Session: "s1", Revision: 1, Boundary: bs[0], At: at, Why: "initial"}}
	reqs := []store.BoundaryRequest{
		{Handle: "bnd_1", Session: "s1", Agent: "a", Created: at, Expires: at, Decided: at, DecidedBy: "cli:root",
			Request: boundary.Request{ID: "r1", Status: boundary.Approved, BaseRevision: 1, BaseKind: boundary.Managed, Expansion: x, Justification: "j", Reason: "applied", Revision: 2}},
		{Handle: "bnd_2", Session: "s1", Agent: "a", Created: at, Expires: at,
			Request: boundary.Request{ID: "r2", Status: boundary.Pending, BaseKind: boundary.Managed, Expansion: boundary.Expansion{Network: true}, Justification: "k"}},
	}
	// What LookupSession returned before (the store's records as they
	// are), and since the idle expiry of modern handles its last use.
	type sessionInfo struct {
		ID        string                  `json:"id"`
		Agent     string                  `json:"agent"`
		Created   time.Time               `json:"created"`
		LastUsed  time.Time               `json:"last_used,omitzero"`
		Ended     time.Time               `json:"ended,omitzero"`
		Boundary  boundary.Boundary       `json:"boundary"`
		Revisions []store.SessionRevision `json:"revisions,omitempty"`
		Requests  []store.BoundaryRequest `json:"requests,omitempty"`
	}
	view := Session(s)
	view.Revisions, view.Requests = Revisions(revs), BoundaryRequests(reqs)
	sameJSON(t, "session", sessionInfo{s.ID, s.Agent, s.Created, s.LastUsed, s.Ended, s.Boundary, revs, reqs}, view)
	sameJSON(t, "session without history", sessionInfo{ID: s.ID, Agent: s.Agent, Created: s.Created, Boundary: s.Boundary}, Session(store.Session{ID: "s1", Agent: "a", Created: at, Boundary: bs[2]}))
	if got := string(BoundaryRequests(reqs)[0].Request.Expansion); got != mustJSON(t, x) {
		t.Errorf("expansion text %s, want %s", got, mustJSON(t, x))
	}

	rec := store.AuditRecord{Seq: 7, At: at, Kind: "call-admitted", Actor: "agent:a", Agent: "a", Tool: "t", Body: json.RawMessage(`{"x":"<&>"}`), Prev: "p", Hash: "h"}
	sameJSON(t, "audit record", rec, Audit(rec))
	sameJSON(t, "audit record, null body", store.AuditRecord{Seq: 1}, Audit(store.AuditRecord{Seq: 1}))
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	return mustJSON(t, a) == mustJSON(t, b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
