package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/statetest"
)

// TestCardsGrantNewlyPossible: maiden cards grant says what the card would
// newly allow before it installs it (each grant against the agent's wallet,
// and the agent's refused calls of the last week it would have allowed);
// -dry-run says it and installs nothing (the wallet is unchanged, read back
// from the store); -json keeps stdout {"id": ID} and says it on stderr.
func TestCardsGrantNewlyPossible(t *testing.T) {
	t.Parallel()
	cfg, cache := agentsConfig(t), t.TempDir()
	state := filepath.Join(filepath.Dir(cfg), "maiden-state.db")

	r := op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "tool:invoke echo --message=hi")
	if want := "tool:invoke echo with --message=hi (today nothing of echo)"; !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "card c") {
		t.Fatalf("grant: stdout lacks %q or the card:\n%s", want, r.stdout)
	}
	if r := callAs(t, cfg, cache, "research", `{"message":"bob"}`); r.code != exitDenied {
		t.Fatalf("a call the card does not allow: exit %d, stderr %q", r.code, r.stderr)
	}
	before, ls := storeCards(t, state), op(t, exitOK, cfg, "cards", "ls", "-json").stdout

	r = op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-dry-run", "tool:invoke echo --message=*")
	for _, want := range []string{
		"what would newly be possible, beyond what agent \"research\"'s wallet allows today:\n",
		"  tool:invoke echo with any --message= (today only --message=hi)\n",
		"of the calls recorded in the last 7 days, 1 refused or asked would have been allowed:\n",
		"research  tool:invoke echo --message=bob (refused)\n",
		"dry run: no card was installed\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("grant -dry-run: stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if after := storeCards(t, state); after != before || op(t, exitOK, cfg, "cards", "ls", "-json").stdout != ls {
		t.Fatalf("grant -dry-run installed something: %d cards before, %d after", before, after)
	}

	var np api.NewlyPossible
	r = op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-dry-run", "-json", "tool:invoke echo --message=*")
	if err := json.Unmarshal([]byte(r.stdout), &np); err != nil || np.Calls != 1 || len(np.Examples) != 1 ||
		np.Examples[0].Target != "tool:invoke echo --message=bob" || np.Redundant || np.Until.Sub(np.Since).Round(time.Minute) != 7*24*time.Hour {
		t.Fatalf("grant -dry-run -json: %+v (%v) from %s", np, err, r.stdout)
	}
	if storeCards(t, state) != before {
		t.Fatal("grant -dry-run -json installed a card")
	}

	r = op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-dry-run", "tool:invoke echo --message=hi")
	if !strings.Contains(r.stdout, "redundant: agent \"research\"'s wallet allows all of it already\n") ||
		!strings.Contains(r.stdout, "nothing new: tool:invoke echo --message=hi is covered by tool:invoke echo --message=hi") {
		t.Errorf("a grant the wallet covers should be said redundant:\n%s", r.stdout)
	}

	// Installed with -json: stdout stays {"id": ID}, the summary is on stderr.
	r = op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-json", "tool:invoke echo --message=*")
	jsonID(t, r.stdout)
	if !strings.Contains(r.stderr, "tool:invoke echo --message=bob (refused)") {
		t.Errorf("grant -json: the summary should be on stderr, got %q", r.stderr)
	}
	if storeCards(t, state) != before+1 {
		t.Fatal("grant -json did not install the card")
	}
}

// TestPendingShowsNewlyPossible: maiden pending ID, for a call that may be
// approved always, says what its always-card would newly allow and which
// asked calls of the last week of the same tool version it would have let
// through; for a boundary request, what the expansion adds to the
// session's boundary and the session's refused calls it would have let
// run; nothing for a rule that may not be approved always.
func TestPendingShowsNewlyPossible(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	policy := `{"hosts":[],"timeout_ms":1000}`
	a := requestBound(t, state, "research", "--message=hi", "middleware[1]", "sha256:aaaa", policy)
	b := request(t, state, "research", `--message="wire money"`, "middleware[2]")
	asked := func(rendered, toolDigest string) api.AuditRecord {
		body, _ := json.Marshal(map[string]any{"event": "requested", "approval": "apr_earlier", "rule": "middleware[1]", "rendered": rendered,
			"tool_digest": toolDigest, "policy": json.RawMessage(policy)})
		return api.AuditRecord{At: time.Now().Add(-time.Hour), Kind: "approval", Actor: "agent:research", Agent: "research", Tool: "echo", Body: body}
	}
	statetest.AppendAudit(t, state,
		asked("--message=hi", "sha256:aaaa"),    // the same call, asked before: the card would have let it through
		asked("--message=hi", "sha256:bbbb"),    // another version of the tool: the card is not for it
		asked("--message=other", "sha256:aaaa")) // another call
	text := op(t, exitOK, cfg, "pending", a.ID).stdout
	for _, want := range []string{
		`what would newly be possible, beyond what agent "research"'s wallet (approving always installs "approve:always echo --message=hi") allows today:`,
		"  approve:always echo with --message=hi (today nothing of echo)\n",
		"of the calls recorded in the last 7 days, 1 refused or asked would have been allowed:\n",
		"research  approve:always echo --message=hi (asked a human)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("pending ID lacks %q:\n%s", want, text)
		}
	}
	if text := op(t, exitOK, cfg, "pending", b.ID).stdout; strings.Contains(text, "newly") {
		t.Errorf("a request that may not be approved always has nothing to install:\n%s", text)
	}

	// A boundary request: session s9 was refused a write its expansion allows.
	bb := api.Boundary{Kind: api.BoundaryManaged, Filesystem: api.FSRestricted,
		Entries: []api.BoundaryEntry{{Path: "/srv", Access: "read", Match: "subtree"}}, Deny: []string{}, Protected: []string{".git"}}
	h := statetest.BoundaryRequest(t, state, "coder", "s9", bb, "r1", `{"filesystem":{"entries":[{"path":"/srv/app","access":"write","scope":"subtree"}]}}`,
		"needs to write", time.Now().Add(time.Hour))
	failed := func(session, rendered string, rev any) api.AuditRecord {
		m := map[string]any{"session": session, "rendered": rendered, "kind": "tool_error", "message": "outside the boundary"}
		if rev != nil {
			m["boundary_revision"] = rev
		}
		body, _ := json.Marshal(m)
		return api.AuditRecord{At: time.Now().Add(-time.Minute), Kind: "call-failed", Actor: "agent:coder", Agent: "coder", Tool: "fs_write", Body: body}
	}
	// The last record names no revision of the boundary it ran under (as
	// records made before maiden recorded it): not replayable, and said.
	statetest.AppendAudit(t, state, failed("s9", "--content=x --path=/srv/app/a.txt", 0), failed("other", "--content=x --path=/srv/app/b.txt", 0),
		failed("s9", "--content=x --path=/srv/app/c.txt", nil))
	text = op(t, exitOK, cfg, "pending", h).stdout
	for _, want := range []string{
		"what would newly be possible, beyond what session s9's boundary allows today:\n",
		"  write under /srv/app/** (today read only)\n",
		"of the calls recorded in the last 7 days, 1 refused or asked would have been allowed:\n",
		"coder  fs_write: write /srv/app/a.txt (refused)\n",
		"1 more recorded calls of the window could not be replayed (not replayable: the call's record names no revision of the boundary it ran under",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("pending of a boundary request lacks %q:\n%s", want, text)
		}
	}
}
