package maiden_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/testkit"
)

// sessionHost is a Host whose agent coder has the session built-ins and
// the boundary of issue 14's interface, over a real directory: work (read
// subtree), work/secrets (explicit deny), .git protected.
func sessionHost(t *testing.T, grants string) (*maiden.Host, string) {
	t.Helper()
	return sessionHostWith(t, grants, "")
}

// sessionHostWith is sessionHost with more keys of [agents.coder] (lines
// of TOML).
func sessionHostWith(t *testing.T, grants, agentKeys string) (*maiden.Host, string) {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	for _, d := range []string{work, filepath.Join(work, "secrets"), filepath.Join(dir, "other")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"work/a.txt": "alpha", "work/secrets/key": "hunter2", "other/b.txt": "beta"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if grants == "" {
		// fs cards over everything: the boundary decides (CARDS.md: the
		// file built-ins need fs:read / fs:write cards besides tool:invoke).
		grants = `"tool:invoke fs_read --...", "tool:invoke fs_write --...", "tool:invoke fs_list --...", "tool:invoke request_sandbox_boundary --...", "tool:invoke session_open --...", "fs:read /**", "fs:write /**"`
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[agents.coder]
tools = ["fs_read", "fs_write", "fs_list", "request_sandbox_boundary", "session_open", "echo"]
grants = [`+grants+`]
`+agentKeys+`
[agents.coder.boundary]
network = false
fs      = [{ path = "`+work+`", access = "read", match = "subtree" }]
deny    = ["`+filepath.Join(work, "secrets")+`"]
protected = [".git"]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond}, "echo")
	return h, dir
}

// structured decodes a failure's structured error.
func structured(t *testing.T, res maiden.Result) map[string]any {
	t.Helper()
	if res.OK || res.Error == nil {
		t.Fatalf("call succeeded: %+v", res)
	}
	var m map[string]any
	if err := json.Unmarshal(res.Error.Structured, &m); err != nil {
		t.Fatalf("no structured error on %+v: %v", res.Error, err)
	}
	return m
}

func sessCall(t *testing.T, h *maiden.Host, session, tool string, input any) maiden.Result {
	t.Helper()
	raw, _ := json.Marshal(input)
	res, err := h.Call(context.Background(), maiden.Call{Agent: "coder", Tool: tool, Input: string(raw), Session: session})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// TestSessionBoundaryFlow is issue 14's flow through the Host: a read
// outside the boundary fails with sandbox_boundary_required and the exact
// requiredExpansion; the session asks for it; a human approves; the retried
// read succeeds in that session only; a denial carries the human's reason;
// an explicit deny is never offered an expansion. (BOUNDARIES.md B13, B8.)
func TestSessionBoundaryFlow(t *testing.T) {
	t.Parallel()
	h, dir := sessionHost(t, "")
	inside := filepath.Join(dir, "work", "a.txt")
	outside := filepath.Join(dir, "other", "b.txt")

	res := sessCall(t, h, "s1", "fs_read", map[string]any{"path": inside})
	if !res.OK || !strings.Contains(res.Output, "alpha") {
		t.Fatalf("read inside: %+v", res)
	}
	res = sessCall(t, h, "s1", "fs_read", map[string]any{"path": outside})
	e := structured(t, res)
	if e["code"] != boundary.ErrorCode || e["reason"] != boundary.ReasonBoundaryRequired {
		t.Fatalf("outside: %v", e)
	}
	want := map[string]any{"filesystem": map[string]any{"entries": []any{map[string]any{"path": outside, "access": "read", "scope": "exact"}}}}
	if fmt.Sprint(e["requiredExpansion"]) != fmt.Sprint(want) {
		t.Fatalf("requiredExpansion %v, want %v", e["requiredExpansion"], want)
	}
	if res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "request_sandbox_boundary") {
		t.Errorf("message %+v", res.Error)
	}

	// Explicit deny: refused, and no expansion is offered.
	res = sessCall(t, h, "s1", "fs_read", map[string]any{"path": filepath.Join(dir, "work", "secrets", "key")})
	if e := structured(t, res); e["requiredExpansion"] != nil || strings.Contains(res.Error.Message, "hunter2") {
		t.Errorf("deny: %v %+v", e, res.Error)
	}

	// Ask for exactly the required expansion; approve it through the Host.
	out := requestAndDecide(t, h, "s1", map[string]any{"id": "r1", "expansion": e0(want), "justification": "the task reads b.txt"},
		maiden.Answer{Approve: true, By: "test"})
	if !out.OK || !strings.Contains(out.Output, `"status":"approved"`) || !strings.Contains(out.Output, `"revision":1`) {
		t.Fatalf("request: %+v", out)
	}
	res = sessCall(t, h, "s1", "fs_read", map[string]any{"path": outside})
	if !res.OK || !strings.Contains(res.Output, "beta") {
		t.Fatalf("retried read: %+v", res)
	}
	// Another session of the same agent keeps the old boundary.
	res = sessCall(t, h, "s2", "fs_read", map[string]any{"path": outside})
	if e := structured(t, res); e["reason"] != boundary.ReasonBoundaryRequired {
		t.Errorf("second session: %v", e)
	}
	// The same request ID again is the same request: answered at once.
	again := sessCall(t, h, "s1", "request_sandbox_boundary", map[string]any{"id": "r1", "expansion": map[string]any{"network": map[string]any{"enabled": true}}, "justification": "x"})
	if !again.OK || !strings.Contains(again.Output, `"status":"approved"`) {
		t.Errorf("idempotent id: %+v", again)
	}

	// A denial makes the waiting call fail with the structured error.
	denied := requestAndDecide(t, h, "s2", map[string]any{"id": "r2", "expansion": map[string]any{"network": map[string]any{"enabled": true}}, "justification": "fetch docs"},
		maiden.Answer{Approve: false, By: "test", Reason: "not today"})
	d := structured(t, denied)
	if d["status"] != "denied" || d["code"] != boundary.ErrorCode || d["requestId"] != "r2" {
		t.Errorf("denied: %v", d)
	}

	// Without an id, the same expansion and justification are the same
	// request: a repeated call (or a client's retry) does not ask twice.
	noID := func() *maiden.ToolError {
		res, err := h.Call(context.Background(), maiden.Call{Agent: "coder", Tool: "request_sandbox_boundary", Session: "s3", ApprovalWait: -1,
			Input: `{"expansion":{"network":{"enabled":true}},"justification":"same words"}`})
		if err != nil || res.OK || res.Error.Kind != maiden.KindPending || !strings.HasPrefix(res.Error.Approval, "bnd_") {
			t.Fatalf("request without id: %+v %v", res, err)
		}
		return res.Error
	}
	if a, b := noID(), noID(); a.Approval != b.Approval {
		t.Errorf("the same request without id asked twice: %s, %s", a.Approval, b.Approval)
	}

	// A validation failure carries the exact reason of BOUNDARIES.md (B1).
	bad := sessCall(t, h, "s1", "request_sandbox_boundary", map[string]any{"expansion": map[string]any{}, "justification": "x"})
	if b := structured(t, bad); b["reason"] != "empty_expansion" || b["status"] != "invalid" {
		t.Errorf("empty expansion: %v", b)
	}

	// The session shows both revisions and both requests.
	info, err := h.Session(context.Background(), "s1")
	if err != nil || info.Boundary.Revision != 1 || len(info.Revisions) != 2 || len(info.Requests) != 1 {
		t.Errorf("session s1: %+v, %v", info, err)
	}
}

func e0(m map[string]any) map[string]any { return m }

// requestAndDecide calls request_sandbox_boundary, decides the request as
// d once it waits, and returns the call's result.
func requestAndDecide(t *testing.T, h *maiden.Host, session string, input map[string]any, d maiden.Answer) maiden.Result {
	t.Helper()
	return requestAndDecideAs(t, h, "coder", session, input, d)
}

func requestAndDecideAs(t *testing.T, h *maiden.Host, agent, session string, input map[string]any, d maiden.Answer) maiden.Result {
	t.Helper()
	raw, _ := json.Marshal(input)
	var (
		req  maiden.ApprovalRequest
		once sync.Once
		got  = make(chan struct{})
	)
	type out struct {
		res maiden.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := h.Call(context.Background(), maiden.Call{Agent: agent, Tool: "request_sandbox_boundary", Input: string(raw), Session: session,
			ApprovalWait: 20 * time.Second, OnApproval: func(r maiden.ApprovalRequest) { req = r; once.Do(func() { close(got) }) }})
		done <- out{res, err}
	}()
	select {
	case <-got:
	case o := <-done:
		t.Fatalf("request ended without waiting: %+v %v", o.res, o.err)
	}
	if req.Kind != maiden.RequestBoundary || req.Session != session || !strings.HasPrefix(req.ID, "bnd_") {
		t.Errorf("the request as humans see it: %+v", req)
	}
	pending, err := h.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pending {
		found = found || p.ID == req.ID
	}
	if !found {
		t.Errorf("request %s not in Pending: %+v", req.ID, pending)
	}
	if _, err := h.Decide(context.Background(), req.ID, d); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Decide(context.Background(), req.ID, d); !errors.Is(err, maiden.ErrApprovalDecided) {
		t.Errorf("second decision (settle once, B14): %v", err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.res
}

// TestSessionBuiltinsNeedCards: a session built-in is not a bypass: a card
// must allow tool:invoke NAME with its arguments; and a file built-in needs
// a card for the read too, which does not grant calling the tool (CARDS.md:
// "Resource grants are separate from tool grants").
func TestSessionBuiltinsNeedCards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, grants, want string }{
		{"no tool:invoke card for its arguments", `"tool:invoke fs_read --path=/nowhere/*", "fs:read /**"`, "allows tool:invoke fs_read --path="},
		{"no fs:read card", `"tool:invoke fs_read --..."`, "allows fs:read "},
		{"an fs:read card only", `"fs:read /**"`, "allows tool:invoke fs_read --path="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, dir := sessionHost(t, tc.grants)
			res := sessCall(t, h, "s1", "fs_read", map[string]any{"path": filepath.Join(dir, "work", "a.txt")})
			if res.OK || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, tc.want) || strings.Contains(res.Output, "alpha") {
				t.Errorf("fs_read: %+v, want denied saying %q", res, tc.want)
			}
		})
	}
}

// TestSessionOfAnotherAgent: a session ID belongs to the agent that opened
// it; another agent naming it is refused, and an ended session takes no
// more calls.
func TestSessionOfAnotherAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[agents.a]
tools = ["fs_list"]
grants = ["tool:invoke fs_list --...", "fs:read /**"]
[agents.a.boundary]
fs = [{ path = "`+dir+`", access = "read", match = "subtree" }]
[agents.b]
tools = ["fs_list"]
grants = ["tool:invoke fs_list --...", "fs:read /**"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	id, err := h.OpenSession(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	in := `{"path":"` + dir + `"}`
	res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "fs_list", Input: in, Session: id})
	if err != nil || !res.OK {
		t.Fatalf("a in its session: %+v %v", res, err)
	}
	res, err = h.Call(ctx, maiden.Call{Agent: "b", Tool: "fs_list", Input: in, Session: id})
	if err != nil || res.OK || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "another agent") {
		t.Errorf("b naming a's session: %+v %v", res, err)
	}
	if err := h.EndSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if info, _ := h.Session(ctx, id); info.Ended.IsZero() {
		t.Error("EndSession did not end it")
	}
	res, err = h.Call(ctx, maiden.Call{Agent: "a", Tool: "fs_list", Input: in, Session: id})
	if err != nil || res.OK {
		t.Errorf("a call in an ended session: %+v %v", res, err)
	}
}

// TestBoundaryRequestHostRestarted: BOUNDARIES.md B16 with real processes.
// A process waits on a boundary request; another Host opening the same
// store meanwhile leaves it pending (the process is alive: several
// processes share a store); once the waiting process is killed (-9), the
// next Host to open the store denies it with host_restarted.
func TestBoundaryRequestHostRestarted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.toml")
	writeConfigAt(t, cfgPath, `version = 1
[tools.echo]
path = %q
[agents.a]
tools = ["request_sandbox_boundary"]
grants = ["tool:invoke request_sandbox_boundary --..."]
`, "echo")
	c := startChild(t, cfgPath, `{"id":"r1","expansion":{"network":{"enabled":true}},"justification":"docs"}`, 50*time.Millisecond, time.Minute,
		"MAIDEN_TEST_APPROVAL_TOOL=request_sandbox_boundary", "MAIDEN_TEST_APPROVAL_SESSION=s1")
	handle := c.next(t, "asked")
	if !strings.HasPrefix(handle, "bnd_") {
		t.Fatalf("asked %q", handle)
	}
	open := func() *maiden.Host {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(context.Background()) })
		return h
	}
	other := open()
	r, err := other.Approval(context.Background(), handle)
	if err != nil || r.State != "pending" {
		t.Fatalf("with the waiting process alive, another Host sees %+v, %v; want pending", r, err)
	}
	c.kill(t)
	restarted := open()
	r, err = restarted.Approval(context.Background(), handle)
	if err != nil || r.State != "denied" || r.DecisionReason != boundary.ReasonHostRestarted {
		t.Fatalf("after the kill, a new Host sees %+v, %v; want denied, host_restarted", r, err)
	}
	if p, _ := restarted.Pending(context.Background()); len(p) != 0 {
		t.Errorf("still pending: %+v", p)
	}
}

// TestPreopensFollowTheSession: a WebAssembly tool with fs = "write" gets
// the session boundary's subtree entries as WASI preopens, intersected
// with the agent's fs cards: it reads and writes inside an entry its cards
// allow, sees nothing of an entry they do not, writes nowhere read-only;
// a directory the boundary gains by an approved request is preopened in
// that session only. The tool is built the default way, pre-initialised
// (go/fsprobesnap): its init ran at build time, with no directory.
func TestPreopensFollowTheSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work, more, nocard := filepath.Join(dir, "work"), filepath.Join(dir, "more"), filepath.Join(dir, "nocard")
	for _, d := range []string{work, more, nocard} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f.txt"), []byte("in "+filepath.Base(d)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.fsprobe]
path = %q
fs = "write"
timeout_ms = 20000
[agents.coder]
tools = ["fsprobe", "request_sandbox_boundary"]
grants = ["tool:invoke fsprobe --...", "tool:invoke request_sandbox_boundary --...",
  "fs:read `+work+`/**", "fs:write `+work+`/**", "fs:read `+more+`/**"]
[agents.coder.boundary]
fs = [{ path = "`+work+`", access = "write", match = "subtree" },
      { path = "`+nocard+`", access = "read", match = "subtree" }]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond}, "go/fsprobesnap")
	probe := func(session string, in map[string]any) maiden.Result {
		return sessCall(t, h, session, "fsprobe", in)
	}
	// Pre-initialised (init saw no directory), and the call sees its own.
	if res := probe("s1", map[string]any{"op": "wd", "path": ""}); !res.OK || res.Output != `"init= call=`+work+`"` {
		t.Fatalf("wd: %+v, want init= call=%s", res, work)
	}
	if res := probe("s1", map[string]any{"op": "read", "path": filepath.Join(work, "f.txt")}); !res.OK || !strings.Contains(res.Output, "in work") {
		t.Fatalf("read in work: %+v", res)
	}
	if res := probe("s1", map[string]any{"op": "write", "path": filepath.Join(work, "new.txt"), "content": "x"}); !res.OK {
		t.Fatalf("write in work: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(work, "new.txt")); err != nil || string(b) != "x" {
		t.Fatalf("the write did not reach the host: %q %v", b, err)
	}
	if res := probe("s1", map[string]any{"op": "read", "path": filepath.Join(nocard, "f.txt")}); res.OK {
		t.Errorf("read in a boundary entry no card allows: %+v", res)
	}
	if res := probe("s1", map[string]any{"op": "read", "path": filepath.Join(more, "f.txt")}); res.OK {
		t.Errorf("read outside the boundary: %+v", res)
	}
	out := requestAndDecideAs(t, h, "coder", "s1", map[string]any{"id": "more", "expansion": map[string]any{"filesystem": map[string]any{"entries": []any{
		map[string]any{"path": more, "access": "write", "scope": "subtree"}}}}, "justification": "more files"}, maiden.Answer{Approve: true, By: "test"})
	if !out.OK {
		t.Fatalf("request: %+v", out.Error)
	}
	if res := probe("s1", map[string]any{"op": "read", "path": filepath.Join(more, "f.txt")}); !res.OK || !strings.Contains(res.Output, "in more") {
		t.Errorf("read in the new entry: %+v", res)
	}
	// The boundary allows writing there, the cards only reading.
	if res := probe("s1", map[string]any{"op": "write", "path": filepath.Join(more, "w.txt"), "content": "x"}); res.OK {
		t.Errorf("write where only fs:read is carded: %+v", res)
	}
	if res := probe("s2", map[string]any{"op": "read", "path": filepath.Join(more, "f.txt")}); res.OK {
		t.Errorf("another session reads the new entry: %+v", res)
	}
	// A boundary directory replaced by a symlink is refused before the
	// tool runs, naming it (never followed).
	if err := os.RemoveAll(more); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(nocard, more); err != nil {
		t.Fatal(err)
	}
	res := probe("s1", map[string]any{"op": "read", "path": filepath.Join(more, "f.txt")})
	if res.OK || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "cannot be given to the tool") || strings.Contains(res.Output, "in nocard") {
		t.Errorf("a boundary directory swapped for a symlink: %+v %+v", res, res.Error)
	}
}

// TestWrappedCLIWritesNarrowedToTheSession: a wrapped CLI's write_paths
// are narrowed by Landlock to what its session's boundary lets it write
// (for an agent with a declared boundary): touch succeeds in the
// boundary's write entry, is refused elsewhere under the same write_paths
// and in an explicit deny root, and a directory gained by an approved
// request becomes writable in that session only.
func TestWrappedCLIWritesNarrowedToTheSession(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ok, other, later, denied := filepath.Join(root, "ok"), filepath.Join(root, "other"), filepath.Join(root, "later"), filepath.Join(root, "locked")
	for _, d := range []string{ok, other, later, denied} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.touch]
path = "/usr/bin/touch"
command = '{"maiden_command": 1, "name": "touch", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["`+root+`"]
[agents.coder]
tools = ["touch", "request_sandbox_boundary"]
grants = ["tool:invoke touch --... -- ...", "tool:invoke request_sandbox_boundary --...", "fs:read `+root+`/**", "fs:write `+root+`/**"]
[agents.coder.boundary]
fs = [{ path = "`+ok+`", access = "write", match = "subtree" }]
deny = ["`+denied+`"]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond}, "echo")
	touch := func(session, path string) maiden.Result {
		res := sessCall(t, h, session, "touch", map[string]any{"files": []string{path}})
		_, err := os.Stat(path)
		if res.OK != (err == nil) {
			t.Fatalf("touch %s: result %+v but stat says %v", path, res, err)
		}
		return res
	}
	if res := touch("s1", filepath.Join(ok, "a")); !res.OK {
		t.Fatalf("in the boundary's write entry: %+v", res.Error)
	}
	for _, p := range []string{filepath.Join(other, "b"), filepath.Join(root, "c"), filepath.Join(denied, "d"), filepath.Join(later, "e")} {
		if res := touch("s1", p); res.OK {
			t.Errorf("touch %s outside the boundary succeeded", p)
		}
	}
	out := requestAndDecideAs(t, h, "coder", "s1", map[string]any{"id": "later", "expansion": map[string]any{"filesystem": map[string]any{"entries": []any{
		map[string]any{"path": later, "access": "write", "scope": "subtree"}}}}, "justification": "write there"}, maiden.Answer{Approve: true, By: "test"})
	if !out.OK {
		t.Fatalf("request: %+v", out.Error)
	}
	if res := touch("s1", filepath.Join(later, "f")); !res.OK {
		t.Errorf("in the approved entry: %+v", res.Error)
	}
	if res := touch("s2", filepath.Join(later, "g")); res.OK {
		t.Error("another session writes in s1's approved entry")
	}
}

// TestWrappedCLIReadsHeldToTheBoundary: a wrapped CLI's write path that
// the session's boundary does not let it write is read-only only where
// the boundary lets the session read: not in a deny root inside it, nor
// outside every entry of a restricted boundary, as fs_read is refused
// there. Before the review of the CLIs' reads, the whole write path was
// left read-only, so cat printed the deny root's secret (and one outside
// the boundary) although the session could not fs_read it.
func TestWrappedCLIReadsHeldToTheBoundary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ok, locked, other := filepath.Join(root, "ok"), filepath.Join(root, "locked"), filepath.Join(root, "other")
	files := map[string]string{filepath.Join(ok, "note"): "fine", filepath.Join(locked, "secret"): "s3cret-behind-deny", filepath.Join(other, "secret"): "s3cret-outside"}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.cat]
path = "/usr/bin/cat"
command = '{"maiden_command": 1, "name": "cat", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["`+root+`"]
[agents.coder]
tools = ["cat"]
grants = ["tool:invoke cat -- ...", "fs:read `+root+`/**", "fs:write `+root+`/**"]
[agents.coder.boundary]
fs = [{ path = "`+ok+`", access = "write", match = "subtree" }]
deny = ["`+locked+`"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	cat := func(path string) maiden.Result {
		t.Helper()
		return sessCall(t, h, "s1", "cat", map[string]any{"files": []string{path}})
	}
	if res := cat(filepath.Join(ok, "note")); !res.OK || res.Output != "fine" {
		t.Fatalf("cat in the boundary's write entry: %+v %+v", res, res.Error)
	}
	for _, p := range []string{filepath.Join(locked, "secret"), filepath.Join(other, "secret")} {
		res := cat(p)
		if b, _ := json.Marshal(res); strings.Contains(string(b), "s3cret") {
			t.Errorf("cat %s printed what the boundary does not let the session read: %s", p, b)
			continue
		}
		if res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "Permission denied") {
			t.Errorf("cat %s: %+v %+v, want refused by Landlock (Permission denied)", p, res, res.Error)
		}
	}
}

// TestWrappedCLIWritesNeedFSCards: a wrapped CLI writes only where its
// agent's cards allow fs:write of the whole directory, as a WebAssembly
// tool's preopen stays writable (CARDS.md: resource grants are separate
// from tool grants): of two write_paths, both readable (fs:read, see
// TestWrappedCLIWritePathsNeedFSRead), touch succeeds in the one the
// agent's fs:write card covers and is refused by Landlock in the other
// (left read-only), with or without a declared boundary; the call's audit
// record holds the four decisions (each path's fs:read, then its fs:write).
func TestWrappedCLIWritesNeedFSCards(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mine, theirs := filepath.Join(root, "mine"), filepath.Join(root, "theirs")
	for _, d := range []string{mine, theirs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, boundaryTable := range []string{"", "[agents.coder.boundary]\nfs = [{ path = \"" + root + "\", access = \"write\", match = \"subtree\" }]\n"} {
		name := map[bool]string{true: "no boundary", false: "a boundary allowing both"}[boundaryTable == ""]
		t.Run(name, func(t *testing.T) {
			h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.touch]
path = "/usr/bin/touch"
command = '{"maiden_command": 1, "name": "touch", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["`+mine+`", "`+theirs+`"]
[agents.coder]
tools = ["touch"]
grants = ["tool:invoke touch --... -- ...", "fs:read `+root+`/**", "fs:write `+mine+`/**"]
`+boundaryTable, maiden.Options{Isolation: maiden.InProcess}, "echo")
			touch := func(path string) maiden.Result {
				t.Helper()
				res := sessCall(t, h, "s1", "touch", map[string]any{"files": []string{path}})
				if _, err := os.Stat(path); res.OK != (err == nil) {
					t.Fatalf("touch %s: result %+v but stat says %v", path, res, err)
				}
				return res
			}
			a, b := filepath.Join(mine, name), filepath.Join(theirs, name)
			if res := touch(a); !res.OK {
				t.Fatalf("touch where the card allows writing: %+v", res.Error)
			}
			if res := touch(b); res.OK || !strings.Contains(res.Error.Message, "Permission denied") {
				t.Errorf("touch where no card allows writing: %+v, want refused (Permission denied)", res.Error)
			}
			recs, err := h.AuditTail(context.Background(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				FS []struct {
					Allow  bool
					Target string
				}
			}
			n := 0
			for _, r := range recs {
				if r.Kind != "call-admitted" {
					continue
				}
				n++
				if err := json.Unmarshal(r.Body, &body); err != nil {
					t.Fatal(err)
				}
				if len(body.FS) != 4 || !body.FS[0].Allow || body.FS[0].Target != "fs:read "+mine+"/**" || !body.FS[1].Allow || body.FS[1].Target != "fs:write "+mine+"/**" ||
					!body.FS[2].Allow || body.FS[2].Target != "fs:read "+theirs+"/**" || body.FS[3].Allow || body.FS[3].Target != "fs:write "+theirs+"/**" {
					t.Errorf("record %d: fs %+v, want fs:read and fs:write %s/** allowed, then fs:read %s/** allowed and fs:write %s/** denied", r.Seq, body.FS, mine, theirs, theirs)
				}
			}
			if n != 2 {
				t.Errorf("%d call-admitted records, want 2", n)
			}
		})
	}
}

// TestWrappedCLIWritePathsNeedFSRead (found by a review): a wrapped CLI's
// write_paths are held to the agent's cards as a WebAssembly tool's
// preopens are (CARDS.md: permission to call a tool does not grant the
// filesystem access it then performs): each is given to Landlock only
// under fs:read DIR/**, and writable only under fs:write DIR/** too. An
// agent with tool:invoke cat and fs:write of the write path but no
// fs:read of it cannot cat the secret there (nor write there: the path is
// left out of the sandbox); with fs:read alone it reads it but its touch
// is refused (read-only); with both it does both. With or without a
// declared boundary; the call's audit record holds the fs:read decision.
func TestWrappedCLIWritePathsNeedFSRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const key = "s3cret-in-the-write-path"
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, withBoundary := range []bool{false, true} {
		name := map[bool]string{false: "no boundary", true: "a boundary allowing writing"}[withBoundary]
		t.Run(name, func(t *testing.T) {
			var cfg strings.Builder
			cfg.WriteString(`version = 1
[tools.echo]
path = %q
[clis.cat]
path = "/usr/bin/cat"
command = '{"maiden_command": 1, "name": "cat", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["` + dir + `"]
[clis.touch]
path = "/usr/bin/touch"
command = '{"maiden_command": 1, "name": "touch", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["` + dir + `"]
`)
			for _, a := range []string{"writer", "reader", "both"} {
				g := map[string]string{"writer": `"fs:write ` + dir + `/**"`, "reader": `"fs:read ` + dir + `/**"`, "both": `"fs:read ` + dir + `/**", "fs:write ` + dir + `/**"`}[a]
				fmt.Fprintf(&cfg, "[agents.%s]\ntools = [\"cat\", \"touch\"]\ngrants = [\"tool:invoke cat -- ...\", \"tool:invoke touch -- ...\", %s]\n", a, g)
				if withBoundary {
					fmt.Fprintf(&cfg, "[agents.%s.boundary]\nfs = [{ path = %q, access = \"write\", match = \"subtree\" }]\n", a, root)
				}
			}
			h := newHostWith(t, cfg.String(), maiden.Options{Isolation: maiden.InProcess}, "echo")
			call := func(agent, tool, path string) maiden.Result {
				t.Helper()
				raw, _ := json.Marshal(map[string]any{"files": []string{path}})
				res, err := h.Call(context.Background(), maiden.Call{Agent: agent, Tool: tool, Input: string(raw), Session: agent + "-s"})
				if err != nil {
					t.Fatalf("%s %s: %v", agent, tool, err)
				}
				return res
			}
			refused := func(res maiden.Result) bool {
				return !res.OK && res.Error != nil && strings.Contains(res.Error.Message, "Permission denied")
			}
			// fs:write without fs:read: the write path is not in the
			// sandbox at all.
			res := call("writer", "cat", secret)
			if b, _ := json.Marshal(res); strings.Contains(string(b), key) {
				t.Fatalf("cat %s without fs:read printed the secret: %s", secret, b)
			}
			if !refused(res) {
				t.Errorf("cat %s without fs:read: %+v %+v, want refused (Permission denied)", secret, res, res.Error)
			}
			w := filepath.Join(dir, "writer-"+map[bool]string{false: "a", true: "b"}[withBoundary])
			if res := call("writer", "touch", w); !refused(res) {
				t.Errorf("touch %s without fs:read: %+v %+v, want refused (Permission denied)", w, res, res.Error)
			}
			if _, err := os.Lstat(w); !os.IsNotExist(err) {
				t.Errorf("touch without fs:read created %s (%v)", w, err)
			}
			// fs:read without fs:write: read-only.
			if res := call("reader", "cat", secret); !res.OK || res.Output != key {
				t.Errorf("cat %s with fs:read: %+v %+v, want %q", secret, res, res.Error, key)
			}
			r := filepath.Join(dir, "reader-"+map[bool]string{false: "a", true: "b"}[withBoundary])
			if res := call("reader", "touch", r); !refused(res) {
				t.Errorf("touch %s with fs:read alone: %+v %+v, want refused (Permission denied)", r, res, res.Error)
			}
			if _, err := os.Lstat(r); !os.IsNotExist(err) {
				t.Errorf("touch with fs:read alone created %s (%v)", r, err)
			}
			// Both: reads and writes.
			if res := call("both", "cat", secret); !res.OK || res.Output != key {
				t.Errorf("cat %s with fs:read and fs:write: %+v %+v, want %q", secret, res, res.Error, key)
			}
			bw := filepath.Join(dir, "both-"+map[bool]string{false: "a", true: "b"}[withBoundary])
			if res := call("both", "touch", bw); !res.OK {
				t.Errorf("touch %s with fs:read and fs:write: %+v", bw, res.Error)
			}
			if _, err := os.Lstat(bw); err != nil {
				t.Errorf("touch with fs:read and fs:write: %v", err)
			}
			// The records: the writer's cat asked fs:read DIR/** (refused)
			// and nothing more; the reader's touch fs:read (allowed), then
			// fs:write (refused).
			recs, err := h.AuditTail(context.Background(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"writer cat":   "[fs:read " + dir + "/**=false]",
				"reader touch": "[fs:read " + dir + "/**=true fs:write " + dir + "/**=false]",
				"both touch":   "[fs:read " + dir + "/**=true fs:write " + dir + "/**=true]",
			}
			for _, rec := range recs {
				if rec.Kind != "call-admitted" {
					continue
				}
				k := rec.Agent + " " + rec.Tool
				if _, ok := want[k]; !ok {
					continue
				}
				var body struct {
					FS []struct {
						Allow  bool
						Target string
					}
				}
				if err := json.Unmarshal(rec.Body, &body); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, d := range body.FS {
					got = append(got, fmt.Sprintf("%s=%v", d.Target, d.Allow))
				}
				if fmt.Sprint(got) != want[k] {
					t.Errorf("%s: recorded fs %v, want %s", k, got, want[k])
				}
				delete(want, k)
			}
			if len(want) > 0 {
				t.Errorf("no call-admitted record for %v", want)
			}
		})
	}
}

// TestWrappedCLIWritePathThroughSymlink (security review of the fs
// cards): a wrapped CLI's write_paths are decided by name (the session's
// boundary, the agent's fs:read and fs:write DIR/** cards), and Landlock's rule binds
// what the name resolves to when the run starts. An agent whose cards and
// boundary let it write mine only has ln (writing mine) make
// mine/cache a symlink to theirs; touch, whose write_paths name
// mine/cache, must then not write in theirs (the run is refused, naming
// the path and its symlink), nor record a decision on mine/cache/** for a
// write that landed elsewhere.
func TestWrappedCLIWritePathThroughSymlink(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := filepath.Join(root, "mine"), filepath.Join(root, "theirs")
	for _, d := range []string{mine, theirs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache := filepath.Join(mine, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`+swapCLIs(mine)+`[clis.touch]
path = "/usr/bin/touch"
command = '{"maiden_command": 1, "name": "touch", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["`+cache+`"]
[agents.coder]
tools = ["ln", "rmdir", "touch"]
grants = ["tool:invoke ln --... -- ...", "tool:invoke rmdir -- ...", "tool:invoke touch -- ...", "fs:read `+mine+`/**", "fs:write `+mine+`/**"]
[agents.coder.boundary]
fs = [{ path = "`+mine+`", access = "write", match = "subtree" }]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	if res := sessCall(t, h, "s1", "touch", map[string]any{"files": []string{filepath.Join(cache, "before")}}); !res.OK {
		t.Fatalf("touch in the write path while it is a directory: %+v", res.Error)
	}
	if err := os.Remove(filepath.Join(cache, "before")); err != nil {
		t.Fatal(err)
	}
	swapForLink(t, h, cache, "../theirs")
	planted := filepath.Join(cache, "planted")
	res := sessCall(t, h, "s1", "touch", map[string]any{"files": []string{planted}})
	if _, err := os.Lstat(filepath.Join(theirs, "planted")); !os.IsNotExist(err) {
		t.Fatalf("touch %s wrote %s/planted (%v), where neither the cards nor the boundary let the agent write", planted, theirs, err)
	}
	if res.OK || !strings.Contains(res.Error.Message, cache) || !strings.Contains(res.Error.Message, "symlink") {
		t.Errorf("touch through the symlinked write path: %+v, want the run refused naming %s and its symlink", res.Error, cache)
	}
}

// TestWrappedCLIReadPathThroughSymlink (security review of the fs cards,
// its read half): a wrapped CLI's read_paths are the operator's names,
// and Landlock's rule binds what a name resolves to when the run starts.
// A read path beneath a directory the agent may write (another CLI's
// write_paths) the agent can turn into a symlink to anything maiden can
// read: here rmdir and ln (write_paths mine) make mine/ref a link to
// secret; cat, whose read_paths name mine/ref, must then not print
// secret/key: the run is refused, naming the path and its symlink.
func TestWrappedCLIReadPathThroughSymlink(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mine, secret := filepath.Join(root, "mine"), filepath.Join(root, "secret")
	ref := filepath.Join(mine, "ref")
	for _, d := range []string{ref, secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const key = "s3cret-key-material"
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ref, "key"), []byte("public"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`+swapCLIs(mine)+`[clis.cat]
path = "/usr/bin/cat"
command = '{"maiden_command": 1, "name": "cat", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
read_paths = ["`+ref+`"]
[agents.coder]
tools = ["ln", "rmdir", "cat"]
grants = ["tool:invoke ln --... -- ...", "tool:invoke rmdir -- ...", "tool:invoke cat -- ...", "fs:read `+mine+`/**", "fs:write `+mine+`/**"]
[agents.coder.boundary]
fs = [{ path = "`+mine+`", access = "write", match = "subtree" }]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	// The controls: cat reads its read path while it is a directory, and
	// not the secret beside it.
	if res := sessCall(t, h, "s1", "cat", map[string]any{"files": []string{filepath.Join(ref, "key")}}); !res.OK || res.Output != "public" {
		t.Fatalf("cat in the read path while it is a directory: %+v %+v", res, res.Error)
	}
	if res := sessCall(t, h, "s1", "cat", map[string]any{"files": []string{filepath.Join(secret, "key")}}); res.OK || strings.Contains(res.Output, key) {
		t.Fatalf("cat outside its read path: %+v", res)
	}
	if err := os.Remove(filepath.Join(ref, "key")); err != nil {
		t.Fatal(err)
	}
	swapForLink(t, h, ref, "../secret")
	res := sessCall(t, h, "s1", "cat", map[string]any{"files": []string{filepath.Join(ref, "key")}})
	if b, _ := json.Marshal(res); strings.Contains(string(b), key) {
		t.Fatalf("cat %s/key printed %s/key through the link, which the operator never let it read: %s", ref, secret, b)
	}
	if res.OK || !strings.Contains(res.Error.Message, ref) || !strings.Contains(res.Error.Message, "symlink") {
		t.Errorf("cat through the symlinked read path: %+v %+v, want the run refused naming %s and its symlink", res, res.Error, ref)
	}
}

// swapCLIs are the wrapped CLIs rmdir and ln, both writing dir: what an
// agent needs to turn a directory beneath dir into a symlink (swapForLink).
func swapCLIs(dir string) string {
	return `[clis.ln]
path = "/usr/bin/ln"
command = '{"maiden_command": 1, "name": "ln", "end_of_options": "--", "options": [{"name": "symbolic", "kind": "bool"}, {"name": "no-target-directory", "kind": "bool"}, {"name": "force", "kind": "bool"}], "positionals": [{"name": "args", "variadic": true}]}'
write_paths = ["` + dir + `"]
[clis.rmdir]
path = "/usr/bin/rmdir"
command = '{"maiden_command": 1, "name": "rmdir", "end_of_options": "--", "positionals": [{"name": "dirs", "variadic": true}]}'
write_paths = ["` + dir + `"]
`
}

// swapForLink has the agent of session s1 replace the empty directory path
// with a symlink to target, with swapCLIs, within what its cards and
// boundary allow.
func swapForLink(t *testing.T, h *maiden.Host, path, target string) {
	t.Helper()
	if res := sessCall(t, h, "s1", "rmdir", map[string]any{"dirs": []string{path}}); !res.OK {
		t.Fatalf("rmdir %s: %+v", path, res.Error)
	}
	if res := sessCall(t, h, "s1", "ln", map[string]any{"symbolic": true, "args": []string{target, path}}); !res.OK {
		t.Fatalf("ln -s %s %s: %+v", target, path, res.Error)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s: %v, %v: want the symlink the agent made", path, fi, err)
	}
}

// TestBoundaryRecheckedAfterApproval (found by a security review): the
// session's boundary is read again after the approval wait, so a downgrade
// (network off) or the session's end while a human decides stops the
// approved call before it runs.
func TestBoundaryRecheckedAfterApproval(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"reset", "end"} {
		t.Run(mode, func(t *testing.T) {
			var hits atomic.Int64
			srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				fmt.Fprint(w, "ok")
			}), "api.example.com")
			u, _ := url.Parse(srv.URL)
			port := u.Port()
			h := newHostWith(t, `version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]

[[middleware]]
use = "approve"
when = 'args.url.startsWith("https")'
reason = "check"

[agents.a]
grants = ["tool:invoke fetcher --...", "network:connect api.example.com"]
[agents.a.boundary]
network = true
[agents.a.tools.fetcher]
`, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com"), ApprovalPoll: 20 * time.Millisecond}, "js/fetcher")
			ctx := context.Background()
			target := "https://api.example.com:" + port + "/"
			res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "fetcher", Session: "s1", Input: `{"url":"` + target + `"}`, ApprovalWait: 20 * time.Second,
				OnApproval: func(r maiden.ApprovalRequest) {
					go func() {
						if mode == "reset" {
							if _, err := h.ResetSession(ctx, "s1", api.Boundary{Kind: api.BoundaryManaged, Filesystem: api.FSRestricted}, "test"); err != nil {
								t.Error(err)
							}
						} else if err := h.EndSession(ctx, "s1"); err != nil {
							t.Error(err)
						}
						if _, err := h.Decide(ctx, r.ID, maiden.Answer{Approve: true, By: "operator:test"}); err != nil {
							t.Error(err)
						}
					}()
				}})
			if err != nil {
				t.Fatal(err)
			}
			info, _ := h.Session(ctx, "s1")
			if hits.Load() > 0 {
				t.Fatalf("%s: the server was reached with session s1 now network=%v ended=%v; result ok=%v %+v", mode, info.Boundary.Network, !info.Ended.IsZero(), res.OK, res.Error)
			}
			if res.OK || res.Error == nil {
				t.Fatalf("%s: the approved call ran: %+v", mode, res)
			}
		})
	}
}

// TestWrappedCLINeverWritesProtected (found by a security review): a
// wrapped CLI cannot write under a protected name (.git) inside its write
// path, as fs_write cannot: with protected names, its write paths are
// read-only (Landlock cannot carve .git out of a writable directory).
func TestWrappedCLINeverWritesProtected(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.touch]
path = "/usr/bin/touch"
command = '{"maiden_command": 1, "name": "touch", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["`+ws+`"]
[agents.coder]
tools = ["touch", "fs_write"]
grants = ["tool:invoke touch --... -- ...", "tool:invoke fs_write --...", "fs:read /**", "fs:write /**"]
[agents.coder.boundary]
fs = [{ path = "`+ws+`", access = "write", match = "subtree" }]
protected = [".git"]
`, maiden.Options{Isolation: maiden.InProcess, ApprovalPoll: 20 * time.Millisecond}, "echo")
	hook := filepath.Join(ws, ".git", "hooks", "pre-commit")
	res := sessCall(t, h, "s1", "fs_write", map[string]any{"path": hook, "content": "x"})
	if res.OK {
		t.Fatalf("fs_write under .git: %+v", res)
	}
	res = sessCall(t, h, "s1", "touch", map[string]any{"files": []string{hook}})
	if _, err := os.Stat(hook); err == nil {
		t.Fatalf("the CLI created %s under the protected .git (result ok=%v)", hook, res.OK)
	}
}

// TestBoundaryRequestsBoundedThroughTheHost: an agent asking to widen its
// sessions' boundaries with ever new requests is stopped at its bound
// (config.DefaultMaxPending, or its max_pending): request_sandbox_boundary
// answers denied, naming the bound; nothing new is stored for a human.
func TestBoundaryRequestsBoundedThroughTheHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		keys  string
		bound int
	}{{"", config.DefaultMaxPending}, {"max_pending = 4", 4}} {
		t.Run(fmt.Sprintf("bound %d", tc.bound), func(t *testing.T) {
			t.Parallel()
			h, dir := sessionHostWith(t, "", tc.keys)
			ask := func(i int) maiden.Result {
				in, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("r%d", i), "justification": "more",
					"expansion": map[string]any{"filesystem": map[string]any{"entries": []any{map[string]any{"path": filepath.Join(dir, "other", strconv.Itoa(i)), "access": "read", "scope": "exact"}}}}})
				res, err := h.Call(context.Background(), maiden.Call{Agent: "coder", Tool: "request_sandbox_boundary", Session: "s1", ApprovalWait: -1, Input: string(in)})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			for i := range tc.bound {
				if res := ask(i); res.OK || res.Error.Kind != maiden.KindPending {
					t.Fatalf("request %d: %+v", i+1, res.Error)
				}
			}
			res := ask(tc.bound)
			if res.OK || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, fmt.Sprintf("already has %d boundary requests waiting", tc.bound)) {
				t.Fatalf("request %d: %+v, want denied naming the bound", tc.bound+1, res.Error)
			}
			pend, err := h.Pending(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(pend) != tc.bound {
				t.Errorf("%d requests pending, want %d: the refused one was stored", len(pend), tc.bound)
			}
		})
	}
}
