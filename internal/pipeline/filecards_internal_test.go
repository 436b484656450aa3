package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/store"
)

// TestFileBuiltinsNeedFSCards: CARDS.md, "Resource grants are separate
// from tool grants: permission to call files read /reports/q3.csv does not
// grant the filesystem read that the tool then performs". An agent whose
// tool:invoke cards allow every call of fs_read, fs_write and fs_list, and
// whose boundary allows the whole directory, reads, lists and writes only
// where its fs:read / fs:write cards allow: the path as asked is refused
// before the call runs (the call-refused record names the fs decision),
// and a symlink beneath the boundary's directory that leads to a path the
// cards do not allow is refused as the tool opens it (no_card), nothing
// read or created. A what-if replay of the trail decides those paths
// again: revoking the fs:read card flips the reads it allowed, granting
// the private directory flips the refused read.
func TestFileBuiltinsNeedFSCards(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	for _, d := range []string{"pub/w", "private"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"pub/a.txt": "alpha", "private/key": "hunter2"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Both stay beneath the boundary's directory (work), so the boundary
	// alone lets them through; the cards do not.
	for link, target := range map[string]string{"pub/link": "../private/key", "pub/w/esc": "../../private"} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	pub := work + "/pub"
	body := `version = 1
[agents.a]
tools = ["fs_read", "fs_write", "fs_list"]
grants = ["tool:invoke fs_read --...", "tool:invoke fs_write --...", "tool:invoke fs_list --...", "fs:read ` + pub + `/**", "fs:write ` + pub + `/w/**"]
[agents.a.boundary]
fs = [{ path = "` + work + `", access = "write", match = "subtree" }]
`
	h, cfg := testHost(t, dir, body, &Options{Isolation: api.InProcess, StatePath: filepath.Join(dir, "state.db")})
	defer h.Close(context.Background())
	ctx := context.Background()
	call := func(tool string, in map[string]any) Result {
		t.Helper()
		raw, _ := json.Marshal(in)
		res, err := h.Call(ctx, Call{Agent: "a", Tool: tool, Input: string(raw)})
		if err != nil {
			t.Fatalf("%s %s: %v", tool, raw, err)
		}
		if strings.Contains(res.Output, "hunter2") || res.Error != nil && strings.Contains(res.Error.Message, "hunter2") {
			t.Fatalf("%s %s: the private file's content came back: %+v", tool, raw, res)
		}
		return res
	}
	// refusedBefore: refused by the cards on the path as asked, before
	// the call ran (kind denied, the decision's words).
	refusedBefore := func(res Result, verb, p string) {
		t.Helper()
		want := "no card of agent \"a\" allows fs:" + verb + " " + p + " (grant it:"
		// Not the tool's own refusal (a structured no_card): the session
		// stage's, before the tool ran.
		if res.OK || res.Error == nil || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, want) || len(res.Error.Structured) != 0 {
			t.Errorf("got %+v, want kind denied saying %q, before the tool ran", res.Error, want)
		}
	}
	// refusedAtOpen: refused by the cards on where the path led (the
	// built-in's no_card, naming the path it resolved to).
	refusedAtOpen := func(res Result, verb, p string) {
		t.Helper()
		var e hostfs.Error
		if res.OK || res.Error == nil || res.Error.Kind != KindDenied || json.Unmarshal(res.Error.Structured, &e) != nil ||
			e.Reason != hostfs.ReasonNoCard || !strings.Contains(e.Message, "allows fs:"+verb+" "+p+" (grant it:") {
			t.Errorf("got %+v, want kind denied, reason %s, naming fs:%s %s", res.Error, hostfs.ReasonNoCard, verb, p)
		}
	}

	if res := call("fs_read", map[string]any{"path": pub + "/a.txt"}); !res.OK || !strings.Contains(res.Output, "alpha") {
		t.Fatalf("reading what the cards allow: %+v", res)
	}
	refusedBefore(call("fs_read", map[string]any{"path": work + "/private/key"}), "read", work+"/private/key")
	refusedAtOpen(call("fs_read", map[string]any{"path": pub + "/link"}), "read", work+"/private/key")
	if res := call("fs_list", map[string]any{"path": pub}); !res.OK || !strings.Contains(res.Output, `"a.txt"`) {
		t.Errorf("listing what the cards allow: %+v", res)
	}
	refusedBefore(call("fs_list", map[string]any{"path": work}), "read", work)
	if res := call("fs_write", map[string]any{"path": pub + "/w/new.txt", "content": "n"}); !res.OK {
		t.Errorf("writing what the cards allow: %+v", res)
	}
	refusedBefore(call("fs_write", map[string]any{"path": pub + "/x.txt", "content": "x"}), "write", pub+"/x.txt")
	refusedAtOpen(call("fs_write", map[string]any{"path": pub + "/w/esc/new", "content": "x"}), "write", work+"/private/new")
	for _, p := range []string{pub + "/x.txt", work + "/private/new"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it never created", p, err)
		}
	}

	// The trail: each call's fs decision, replayed.
	st, err := h.state(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Cards(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cardOf := map[string]string{}
	for _, c := range all {
		cardOf[c.LowerPos[0].Grant.String()] = c.ID
	}
	recs, err := auditTail(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var refused callRecord
	for _, r := range recs {
		if r.Kind == store.AuditCallRefused && r.Tool == "fs_read" {
			if err := json.Unmarshal(r.Body, &refused); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(refused.FS) != 1 || refused.FS[0].Allow || refused.FS[0].Target != "fs:read "+work+"/private/key" {
		t.Fatalf("the refused read's record: fs %+v, want its one denied fs:read decision", refused.FS)
	}
	replay := func(change api.WhatIfChange) api.WhatIfReport {
		return replayTrail(t, []string{"a"}, all, recs, change)
	}
	// 8 calls, each with its tool:invoke and fs decisions.
	if rep := replay(api.WhatIfChange{}); rep.Replayed != 8 || rep.Verified != 8 || rep.Flips != 0 {
		t.Fatalf("unchanged: replayed %d, verified %d, flips %d, inexact %+v: want 8, 8, 0", rep.Replayed, rep.Verified, rep.Flips, rep.Inexact)
	}
	// Revoking the fs:read card: the read of a.txt, the read of the link
	// (its path as asked was allowed) and the listing are refused.
	rep := replay(api.WhatIfChange{Revoke: []string{cardOf["fs:read "+pub+"/**"]}})
	groups := map[string]api.WhatIfGroup{}
	for _, g := range rep.Groups {
		groups[g.Tool] = g
	}
	if rd, ls := groups["fs_read"], groups["fs_list"]; rep.Flips != 3 || len(rep.Groups) != 2 ||
		rd.AllowedToDenied != 2 || rd.Examples[0].Target != "fs:read "+pub+"/a.txt" || rd.Examples[1].Target != "fs:read "+pub+"/link" ||
		ls.AllowedToDenied != 1 || ls.Examples[0].Target != "fs:read "+pub {
		t.Errorf("revoking fs:read %s/**: flips %d, groups %+v; want fs_read's 2 calls (a.txt, link) and fs_list's 1 (pub) allowed -> denied", pub, rep.Flips, rep.Groups)
	}
	rep = replay(api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "a", Grant: "fs:read " + work + "/private/**"}}})
	if rep.Flips != 1 || len(rep.Groups) != 1 || rep.Groups[0].DeniedToAllowed != 1 {
		t.Errorf("granting fs:read %s/private/**: flips %d, groups %+v; want the refused read denied -> allowed", work, rep.Flips, rep.Groups)
	}
}
