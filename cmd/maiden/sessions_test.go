package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/statetest"
)

// boundaryRequest stores a session of agent coder at its initial boundary
// and a pending request in it, as request_sandbox_boundary does, and
// returns the request's handle.
func boundaryRequest(t *testing.T, state, session, id, expansion string) string {
	t.Helper()
	b := api.Boundary{Kind: api.BoundaryManaged, Filesystem: api.FSRestricted, Entries: []api.BoundaryEntry{}, Deny: []string{"/srv/locked"}, Protected: []string{".git"}}
	return statetest.BoundaryRequest(t, state, "coder", session, b, id, expansion, "the task needs \x1b[2Jit", time.Now().Add(time.Hour))
}

// TestSessionsAndBoundaryRequests: boundary requests are listed by maiden
// pending beside approvals (same -json keys), shown, approved (a new
// revision of that session only) and denied by maiden approve/deny; maiden
// sessions ls|show print the sessions, revisions and requests.
func TestSessionsAndBoundaryRequests(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	h1 := boundaryRequest(t, state, "s1", "r1", `{"filesystem":{"entries":[{"path":"/srv/data","access":"read","scope":"subtree"}]}}`)
	h2 := boundaryRequest(t, state, "s2", "r2", `{"network":{"enabled":true}}`)

	var list []map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "pending", "-json").stdout), &list); err != nil || len(list) != 2 {
		t.Fatalf("pending -json: %v %v", list, err)
	}
	for _, e := range list {
		if len(e) != 7 || e["tool"] != "request_sandbox_boundary" || !strings.HasPrefix(e["id"].(string), "bnd_") {
			t.Errorf("entry %v: want exactly the 7 keys, tool request_sandbox_boundary, a bnd_ ID", e)
		}
	}
	text := op(t, exitOK, cfg, "pending").stdout
	if !strings.Contains(text, h1) || !strings.Contains(text, "/srv/data") || strings.Contains(text, "\x1b") {
		t.Errorf("pending:\n%s", text)
	}
	// -always is not offered for a boundary request, which it cannot
	// settle (issue 27, rough edge 7).
	if !strings.HasSuffix(text, "\ndecide with: maiden approve ID (-always: tool calls only, not boundary requests)   or   maiden deny ID [-reason TEXT]\n") {
		t.Errorf("pending offers -always for boundary requests:\n%s", text)
	}
	show := op(t, exitOK, cfg, "pending", h1).stdout
	if !strings.Contains(show, "sandbox boundary request") || !strings.Contains(show, "s1") || !strings.Contains(show, `\x1b[2J`) {
		t.Errorf("pending ID:\n%s", show)
	}

	op(t, exitOK, cfg, "approve", h1)
	op(t, exitUsage, cfg, "approve", h1) // settled once (B14)
	op(t, exitOK, cfg, "deny", h2, "-reason", "no network today")

	var s1 map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "sessions", "show", "s1", "-json").stdout), &s1); err != nil {
		t.Fatal(err)
	}
	b := s1["boundary"].(map[string]any)
	if b["revision"].(float64) != 1 || !strings.Contains(jsonText(b["entries"]), "/srv/data") {
		t.Errorf("s1 after approval: %v", b)
	}
	var s2 map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "sessions", "show", "s2", "-json").stdout), &s2); err != nil {
		t.Fatal(err)
	}
	if b2 := s2["boundary"].(map[string]any); b2["revision"].(float64) != 0 || b2["network"] != false {
		t.Errorf("s2 after denial: %v", b2)
	}
	if !strings.Contains(jsonText(s2["requests"]), "no network today") {
		t.Errorf("s2's request keeps the reason: %v", s2["requests"])
	}
	ls := op(t, exitOK, cfg, "sessions", "ls").stdout
	if !strings.Contains(ls, "s1") || !strings.Contains(ls, "s2") || !strings.Contains(ls, "read subtree /srv/data") {
		t.Errorf("sessions ls:\n%s", ls)
	}
	showText := op(t, exitOK, cfg, "sessions", "show", "s2").stdout
	if !strings.Contains(showText, "denied") || !strings.Contains(showText, "no network today") {
		t.Errorf("sessions show s2:\n%s", showText)
	}
	op(t, exitUsage, cfg, "sessions", "show", "nope")
	if r := op(t, exitOK, cfg, "pending", "-json"); r.stdout != "[]\n" {
		t.Errorf("nothing pending after deciding: %q", r.stdout)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSessionsEnd: an operator ends a session with maiden sessions end:
// it shows as ended, its pending boundary request is denied
// (session_ended), the session-ended record names the operator (cli:USER),
// a second end changes nothing and says so, and an unknown ID is a usage
// error naming it.
func TestSessionsEnd(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	boundaryRequest(t, state, "s1", "r1", `{"network":{"enabled":true}}`)
	if r := op(t, exitOK, cfg, "sessions", "end", "s1"); !strings.Contains(r.stdout, "session s1 ended") {
		t.Errorf("sessions end: %q", r.stdout)
	}
	var s1 struct {
		Ended    time.Time `json:"ended"`
		Requests []struct {
			Request struct {
				Status string `json:"status"`
				Reason string `json:"reason"`
			} `json:"request"`
		} `json:"requests"`
	}
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "sessions", "show", "s1", "-json").stdout), &s1); err != nil {
		t.Fatal(err)
	}
	if s1.Ended.IsZero() || len(s1.Requests) != 1 || s1.Requests[0].Request.Status != "denied" || s1.Requests[0].Request.Reason != "session_ended" {
		t.Errorf("s1 after sessions end: %+v; want ended, its request denied session_ended", s1)
	}
	if r := op(t, exitOK, cfg, "sessions", "end", "s1"); !strings.Contains(r.stdout, "had ended already: nothing changed") {
		t.Errorf("sessions end of an ended session: %q", r.stdout)
	}
	if r := op(t, exitUsage, cfg, "sessions", "end", "nope\x1b[2J"); !strings.Contains(r.stderr, `no session nope\x1b[2J`) {
		t.Errorf("sessions end of an unknown session: %q", r.stderr)
	}
	var ends []string
	for _, l := range strings.Split(strings.TrimSpace(op(t, exitOK, cfg, "audit", "tail", "-n", "1000", "-json").stdout), "\n") {
		var rec api.AuditRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("audit tail -json line %q: %v", l, err)
		}
		if rec.Kind == "session-ended" {
			ends = append(ends, rec.Actor)
		}
	}
	if len(ends) != 1 || !strings.HasPrefix(ends[0], "cli:") {
		t.Errorf("session-ended records by %v; want one, by the operator (cli:USER)", ends)
	}
}
