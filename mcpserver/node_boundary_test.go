package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/maiden-run/maiden/internal/testkit"
)

// browserPath is headless Chromium's path. Without one the test is
// skipped, except in CI (make test installs Debian's chromium, .ci/run sets
// MAIDEN_CI), where a missing browser is a failure. (The same rule as
// internal/inbox's browser test.)
func browserPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MAIDEN_CI") != "" || os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: make test installs it (scripts/deps; apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); the browser test runs in CI")
	return ""
}

// TestNodeClientBoundaryInbox is issue 14's end-to-end test: the official
// TypeScript SDK as the model's client of `maiden serve -http` (protocol
// 2025-11-25, where each client connection's Mcp-Session-Id is a maiden
// session; the SDK does not speak 2026-07-28), an operator deciding in the
// inbox page in headless Chromium. fs_read of a file outside the agent's
// boundary fails with sandbox_boundary_required and the requiredExpansion;
// request_sandbox_boundary with exactly that waits until the operator, logged
// in with an operator token, approves the bnd_ request in the inbox (which
// shows it as a boundary request: the paths asked for and the agent's
// justification, no "always", no input digest); the retried read returns the
// file. A second connection (another session of the same agent) still gets
// sandbox_boundary_required; its request denied in the inbox, and another
// with maiden deny -reason, fail with status denied and the reason.
func TestNodeClientBoundaryInbox(t *testing.T) {
	t.Parallel()
	exe := browserPath(t)
	bin := buildMaiden(t)
	dir := npmDir(t, "node-client", "boundary.mjs")

	root := t.TempDir()
	work, other := filepath.Join(root, "work"), filepath.Join(root, "other")
	for _, d := range []string{work, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(other, "b.txt")
	const content = "beta: outside the boundary"
	if err := os.WriteFile(outside, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, "agent.toml")
	toml := fmt.Sprintf(`version = 1

[agents.coder]
tools = ["fs_read", "request_sandbox_boundary"]
grants = ["tool:invoke fs_read --...", "tool:invoke request_sandbox_boundary --...", "fs:read /**"]

[agents.coder.boundary]
network = false
fs = [{ path = %q, access = "read", match = "subtree" }]

[operators.alice]
`, work)
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("maiden %s: %v\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String()
	}
	agentToken := strings.TrimSpace(run(t, "agents", "token", "-config", cfg, "coder"))
	operatorToken := strings.TrimSpace(run(t, "operators", "token", "-config", cfg, "alice"))
	srv := startInspected(t, bin, os.Environ(), "-config", cfg, "-cache", testkit.CompileCache(t))
	base := strings.TrimSuffix(srv.url, "/mcp")

	// The browser.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	bctx, cancel = context.WithTimeout(bctx, 4*time.Minute)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	var dialogs atomic.Int32
	if err := chromedp.Listen(bctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			loc, _ := chromedp.Run(bctx, chromedp.Location())
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\nthe browser is at %s:\n%s", what, err, loc, html)
		}
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}
	text := func(sel string) string {
		t.Helper()
		if count(sel) == 0 { // chromedp.Text would wait for it
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("the page has no %s:\n%s", sel, html)
		}
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	// shown checks what the inbox shows of pending boundary request id of
	// session: a boundary request, the path asked for, the agent's words
	// as text, and none of what only a tool call has.
	shown := func(id, session, justification string) {
		t.Helper()
		req := "#req-" + id
		if got := text(req + " dd.session"); !strings.Contains(got, session) {
			t.Errorf("%s: the session shown is %q, want %s", id, got, session)
		}
		if got := text(req + " .entries"); !strings.Contains(got, outside) || !strings.Contains(got, "read") || !strings.Contains(got, "exact") {
			t.Errorf("%s: the entries asked for are shown as %q, want %s read exact", id, got, outside)
		}
		if got := text(req + " dd.network"); !strings.Contains(got, "no") {
			t.Errorf("%s: network shown as %q; the request does not ask for it", id, got)
		}
		if got := text(req + " .justification"); got != justification {
			t.Errorf("%s: the justification is shown as %q, want the agent's words as text %q", id, got, justification)
		}
		if n := count(req + " .justification b"); n != 0 {
			t.Errorf("%s: the agent's justification was rendered as markup", id)
		}
		for sel, what := range map[string]string{"form.always": "an always-allow form", "dd.digest": "an input digest", "dd.hosts": "hosts a tool may reach",
			"dd.secrets": "credentials a tool may spend", "pre.args": "tool arguments"} {
			if n := count(req + " " + sel); n != 0 {
				t.Errorf("%s: a boundary request's page shows %s (%s)", id, what, sel)
			}
		}
		if n := count(req+" form.approve button") + count(req+" form.deny button"); n != 2 {
			t.Errorf("%s: %d approve/deny buttons, want one each", id, n)
		}
	}

	// Drive boundary.mjs; decide what it asks.
	decision := regexp.MustCompile(`^(APPROVE|DENY|DENYCLI) (bnd_\S+) (\S+)$`)
	ctx, cancelNode := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancelNode()
	cmd := exec.CommandContext(ctx, "node", "boundary.mjs", srv.url, agentToken, outside, content)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	var log strings.Builder
	loggedIn := false
	decided := map[string]bool{}
	sessions := map[string]string{} // APPROVE, DENY → the Mcp-Session-Id
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		m := decision.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id, session := m[2], m[3]
		decided[m[1]], sessions[m[1]] = true, session
		switch m[1] {
		case "APPROVE":
			// The operator follows the request's link (what a URL
			// elicitation opens) and logs in; an agent's token does not.
			do("open the request's page", chromedp.Navigate(base+"/ui/approvals/"+id), chromedp.WaitVisible(chromedp.ID("token")))
			if !loggedIn {
				do("log in with the agent's token",
					chromedp.SendKeys(chromedp.ID("token"), agentToken), chromedp.Click(chromedp.ID("login")),
					chromedp.WaitVisible(chromedp.CSS("p.error")))
				do("log in with the operator's token",
					chromedp.SendKeys(chromedp.ID("token"), operatorToken), chromedp.Click(chromedp.ID("login")),
					chromedp.WaitVisible(chromedp.ID("req-"+id)))
				loggedIn = true
			}
			shown(id, session, "the task needs to read <b>b.txt</b> & nothing else")
			if got := text("#req-" + id + " .badge"); got != "pending" {
				t.Errorf("the request's state before the decision: %q", got)
			}
			do("approve", chromedp.Click(chromedp.CSS("#req-"+id+" form.approve button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
			if got := text("p.notice"); !strings.Contains(got, "boundary") || !strings.Contains(got, "revision 1") {
				t.Errorf("notice after approving a boundary request: %q", got)
			}
			if got := text("#req-" + id + " dd.outcome"); !strings.Contains(got, "approved by operator:alice") {
				t.Errorf("the approved request's outcome: %q", got)
			}
		case "DENY":
			// From the pending list, with a reason the agent sees.
			do("deny",
				chromedp.Navigate(base+"/ui"), chromedp.WaitVisible(chromedp.ID("req-"+id)))
			shown(id, session, "session B wants it too")
			do("deny with a reason",
				chromedp.SendKeys(chromedp.CSS("#req-"+id+" form.deny input[name=reason]"), "not for this task"),
				chromedp.Click(chromedp.CSS("#req-"+id+" form.deny button")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
			if got := text("#req-" + id + " dd.outcome"); !strings.Contains(got, "denied by operator:alice") || !strings.Contains(got, "not for this task") {
				t.Errorf("the denied request's outcome: %q", got)
			}
		case "DENYCLI":
			// Listed beside approvals by maiden pending, denied by maiden deny.
			if out := run(t, "pending", "-config", cfg); !strings.Contains(out, id) {
				t.Errorf("maiden pending does not list %s:\n%s", id, out)
			}
			run(t, "deny", "-config", cfg, "-reason", "denied from the command line", id)
		}
		io.WriteString(stdin, "go\n")
	}
	err = cmd.Wait()
	t.Logf("node boundary.mjs:\n%s", log.String())
	if err != nil || !regexp.MustCompile(`[1-9]\d* passed, 0 failed`).MatchString(log.String()) {
		t.Fatalf("node boundary.mjs: %v", err)
	}
	for _, d := range []string{"APPROVE", "DENY", "DENYCLI"} {
		if !decided[d] {
			t.Errorf("the script never asked to %s", d)
		}
	}
	if dialogs.Load() != 0 {
		t.Error("a script ran in the inbox page")
	}

	// The store agrees: each connection was a session of coder; only the
	// approved one's boundary has the file, at revision 1.
	var list []struct {
		ID       string
		Agent    string
		Boundary struct {
			Revision int64
			Entries  []struct{ Path, Access, Match string }
		}
	}
	out := run(t, "sessions", "ls", "-config", cfg, "-json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("maiden sessions ls -json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range list {
		got[s.ID] = fmt.Sprintf("%s r%d %v", s.Agent, s.Boundary.Revision, s.Boundary.Entries)
	}
	want := map[string]string{
		sessions["APPROVE"]: fmt.Sprintf("coder r1 [{%s read exact} {%s read subtree}]", outside, work),
		sessions["DENY"]:    fmt.Sprintf("coder r0 [{%s read subtree}]", work),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("maiden sessions ls -json:\n got %v\nwant %v", got, want)
	}
	srv.stop(t)
}
