package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/callaudit"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/whatif"
)

// TestRecordsReplayRewritesAndDirectories: a real Host's call-admitted
// record keeps the cards' decision on the agent's own input beside the
// one on the input a middleware rewrote it into (before_rewrite), and the
// fs decisions that gave, narrowed or withheld each directory of its
// session's boundary (fs), as internal/decide makes them; a replay of the
// trail verifies them all on the unchanged cards, and a what-if that
// revokes the card that allowed the agent's input, or a directory, flips
// the call, naming that decision.
func TestRecordsReplayRewritesAndDirectories(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"data", "other", "work"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	body := fmt.Sprintf(`version = 1
[tools.echo]
path = %[1]q
fs = "write"
[middleware.city]
path = %[2]q
[[middleware]]
use = "city"
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --city=paris --message=*", "tool:invoke echo --city=Paris --message=*", "fs:read %[3]s/data/**", "fs:read %[3]s/work/**", "fs:write %[3]s/work/**"]
[agents.narrow]
tools = ["echo"]
grants = ["tool:invoke echo --city=paris --message=*"]
[agents.a.boundary]
fs = [{ path = "%[3]s/work", access = "write", match = "subtree" }, { path = "%[3]s/data", access = "write", match = "subtree" }, { path = "%[3]s/other", access = "read", match = "subtree" }]
`, testkit.Component(t, "echo"), testkit.Middleware(t, "city"), dir)
	h, cfg := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: filepath.Join(dir, "state.db")})
	defer h.Close(context.Background())
	ctx := context.Background()
	res, err := h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: `{"message":"x","city":"paris"}`})
	if err != nil || !res.OK {
		t.Fatalf("call: %+v %v", res.Error, err)
	}
	// The cards of narrow refuse the rewritten call.
	if res, err := h.Call(ctx, Call{Agent: "narrow", Tool: "echo", Input: `{"message":"x","city":"paris"}`}); err != nil || res.Error == nil || res.Error.Kind != KindDenied {
		t.Fatalf("narrow's call: %+v %v, want denied", res.Error, err)
	}
	st, err := h.state(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Cards(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cardOf := map[string]string{} // a's system cards' IDs by their one grant
	for _, c := range all {
		if c.Holder == "a" {
			cardOf[c.LowerPos[0].Grant.String()] = c.ID
		}
	}
	recs, err := auditTail(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var rec, refused callRecord
	for _, r := range recs {
		into := map[string]*callRecord{store.AuditCallAdmitted: &rec, store.AuditCallRefused: &refused}[r.Kind]
		if into != nil {
			if err := json.Unmarshal(r.Body, into); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A rewrite the cards refuse: the record names the refused input and
	// its denial, the agent's input and its decision before it.
	if refused.Rendered != "--city=Paris --message=x" || refused.Decision == nil || refused.Decision.Allow ||
		len(refused.BeforeRewrite) != 1 || refused.BeforeRewrite[0].Rendered != "--city=paris --message=x" || !refused.BeforeRewrite[0].Decision.Allow {
		t.Fatalf("the refused rewrite's record: %q decided %+v, before %+v", refused.Rendered, refused.Decision, refused.BeforeRewrite)
	}
	if rec.Rendered != "--city=Paris --message=x" || rec.Decision == nil || rec.Decision.Card != cardOf["tool:invoke echo --city=Paris --message=*"] {
		t.Fatalf("the record names the rewritten call %q decided by %+v", rec.Rendered, rec.Decision)
	}
	if len(rec.BeforeRewrite) != 1 || rec.BeforeRewrite[0].Rendered != "--city=paris --message=x" || rec.BeforeRewrite[0].Decision == nil ||
		rec.BeforeRewrite[0].Decision.Card != cardOf["tool:invoke echo --city=paris --message=*"] || !rec.BeforeRewrite[0].Decision.Allow {
		t.Fatalf("before_rewrite %+v: want the agent's input, allowed by its card", rec.BeforeRewrite)
	}
	// The fs decisions, in the order the session stage asked them, as
	// decide makes them on the agent's wallet.
	w, err := h.wallet(ctx, cfg, "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		verb, dir string
		allow     bool
	}{{"read", dir + "/data", true}, {"write", dir + "/data", false}, {"read", dir + "/other", false}, {"read", dir + "/work", true}, {"write", dir + "/work", true}}
	if len(rec.FS) != len(want) || rec.FSTruncated {
		t.Fatalf("fs %+v (truncated %v): want %d decisions", rec.FS, rec.FSTruncated, len(want))
	}
	for i, x := range want {
		d := decide.Decide(decide.Basis{Wallet: w}, decide.AccessTree(x.verb, x.dir)).API()
		if d.Allow {
			d.Rule = ""
		}
		if rec.FS[i] != d || d.Allow != x.allow {
			t.Errorf("fs[%d] = %+v, want %+v (allowed %v)", i, rec.FS[i], d, x.allow)
		}
	}

	replay := func(change api.WhatIfChange) api.WhatIfReport {
		return replayTrail(t, []string{"a", "narrow"}, all, recs, change)
	}
	if rep := replay(api.WhatIfChange{}); rep.Replayed != 2 || rep.Verified != 2 || rep.Flips != 0 {
		t.Fatalf("unchanged: replayed %d, verified %d, flips %d, inexact %+v: want 2, 2, 0", rep.Replayed, rep.Verified, rep.Flips, rep.Inexact)
	}
	// Granting narrow the rewritten call flips its refusal.
	rep := replay(api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "narrow", Grant: "tool:invoke echo --city=Paris --message=*"}}})
	if rep.Flips != 1 || rep.Groups[0].Agent != "narrow" || rep.Groups[0].DeniedToAllowed != 1 {
		t.Errorf("granting narrow the rewritten call: flips %d, groups %+v; want its call denied -> allowed", rep.Flips, rep.Groups)
	}
	for _, tc := range []struct{ revoke, target string }{
		{"tool:invoke echo --city=paris --message=*", "tool:invoke echo --city=paris --message=x"},
		{"fs:read " + dir + "/data/**", "fs:read " + dir + "/data/**"},
	} {
		rep := replay(api.WhatIfChange{Revoke: []string{cardOf[tc.revoke]}})
		if rep.Flips != 1 || rep.Groups[0].AllowedToDenied != 1 || rep.Groups[0].Examples[0].Target != tc.target {
			t.Errorf("revoking %s: flips %d, groups %+v; want the call allowed -> denied at %s", tc.revoke, rep.Flips, rep.Groups, tc.target)
		}
	}
}

// replayTrail is what-if change replayed over the records recs, with the
// agents' cards all as today's.
func replayTrail(t *testing.T, agents []string, all []cards.Card, recs []AuditRecord, change api.WhatIfChange) api.WhatIfReport {
	t.Helper()
	r, err := whatif.New(whatif.State{Now: time.Now(), Agents: agents, Cards: all}, change)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		r.Add(rec)
	}
	return r.Report()
}

// TestRecordedFSCapped: a record keeps at most callaudit.MaxFSDecisions
// fs decisions, the first ones, and says when it cut the list (a call may
// be given sandbox.MaxPreopens directories, each asking read and write).
func TestRecordedFSCapped(t *testing.T) {
	var ds []cards.Decision
	for i := range 2 * sandbox.MaxPreopens {
		ds = append(ds, cards.Decision{Allow: i%3 != 0, Target: fmt.Sprintf("fs:read /d%d/**", i), Reason: "r"})
	}
	for _, n := range []int{0, 1, callaudit.MaxFSDecisions, callaudit.MaxFSDecisions + 1, len(ds)} {
		got, cut := recordedFS(ds[:n])
		want := min(n, callaudit.MaxFSDecisions)
		if len(got) != want || cut != (n > callaudit.MaxFSDecisions) {
			t.Errorf("%d decisions: kept %d, cut %v; want %d, cut %v", n, len(got), cut, want, n > callaudit.MaxFSDecisions)
		}
		for i := range got {
			if got[i].Target != ds[i].Target || got[i].Allow != ds[i].Allow || got[i].Allow && got[i].Rule != "" || !got[i].Allow && got[i].Rule == "" {
				t.Errorf("%d decisions: [%d] = %+v, want %s in order (an allowed one without its rule)", n, i, got[i], ds[i].Target)
			}
		}
	}
}
