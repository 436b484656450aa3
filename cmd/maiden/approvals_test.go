package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/statetest"
	"github.com/maiden-run/maiden/internal/testkit"
)

// approvalsConfig writes an agent.toml with the echo tool, agents research
// and coder, operator alice, and two approve rules: middleware[1] (always
// allowed) and middleware[2] (allow_always = false). It returns the file
// and its state store's path.
func approvalsConfig(t *testing.T) (cfg, state string) {
	t.Helper()
	src := fmt.Sprintf(`version = 1

[tools.echo]
path = %q

[agents.research]
tools = ["echo"]

[agents.coder]
tools = ["echo"]

[operators.alice]

[[middleware]]
use  = "approve"
when = 'args.message == "hi"'

[[middleware]]
use  = "approve"
when = 'args.message == "wire money"'
allow_always = false
`, testkit.Component(t, "echo"))
	dir := t.TempDir()
	cfg = filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "maiden-state.db")
}

// request persists a pending approval request in the store at state, as
// the approve middleware does before anything runs, and returns it.
func request(t *testing.T, state, agent, rendered, rule string) api.ApprovalRequest {
	t.Helper()
	return requestBound(t, state, agent, rendered, rule, "", "")
}

// requestBound is request with the tool's code identity and the policy
// the human is shown, as the approve middleware records them.
func requestBound(t *testing.T, state, agent, rendered, rule, toolDigest, policy string) api.ApprovalRequest {
	t.Helper()
	return statetest.Approval(t, state, statetest.Request{Agent: agent, Session: "s1", Tool: "echo", Rendered: rendered,
		Digest: strings.Repeat("ab", 32), Rule: rule, Reason: "asks a human: " + rule, ToolDigest: toolDigest, Policy: policy,
		AllowAlways: true, ExpiresIn: time.Hour})
}

// approvalIn reads request id back from the store at state, as operators
// see it.
func approvalIn(t *testing.T, state, id string) api.ApprovalRequest {
	t.Helper()
	st, err := admin.OpenStore(context.Background(), state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := st.Approval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPendingJSONShape: pending -json is an array ([] when nothing waits)
// of objects with exactly the keys the issue names, oldest first; the
// table lists the same requests.
func TestPendingJSONShape(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	if r := op(t, exitOK, cfg, "pending", "-json"); r.stdout != "[]\n" {
		t.Fatalf("pending -json with nothing waiting: %q", r.stdout)
	}
	if r := op(t, exitOK, cfg, "pending"); !strings.Contains(r.stdout, "no approval requests are waiting") {
		t.Fatalf("pending with nothing waiting: %q", r.stdout)
	}
	a := request(t, state, "research", "--message=hi", "middleware[1]")
	b := request(t, state, "coder", `--message="wire money"`, "middleware[2]")

	var got []map[string]any
	out := op(t, exitOK, cfg, "pending", "-json").stdout
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("pending -json: %v\n%s", err, out)
	}
	if len(got) != 2 {
		t.Fatalf("pending -json: %d entries, want 2:\n%s", len(got), out)
	}
	keys := []string{"agent", "created", "expires", "id", "reason", "rendered", "tool"}
	for i, want := range []api.ApprovalRequest{a, b} {
		var have []string
		for k := range got[i] {
			have = append(have, k)
		}
		slices.Sort(have)
		if !slices.Equal(have, keys) {
			t.Errorf("entry %d has keys %v, want exactly %v", i, have, keys)
		}
		for k, v := range map[string]string{"id": want.ID, "agent": want.Agent, "tool": "echo", "rendered": want.Rendered, "reason": want.Reason} {
			if got[i][k] != v {
				t.Errorf("entry %d: %s = %v, want %q", i, k, got[i][k], v)
			}
		}
		for k, v := range map[string]time.Time{"created": want.Created, "expires": want.Expires} {
			s, _ := got[i][k].(string)
			if tm, err := time.Parse(time.RFC3339Nano, s); err != nil || !tm.Equal(v) {
				t.Errorf("entry %d: %s = %v (%v), want %s", i, k, got[i][k], err, v)
			}
		}
	}

	text := op(t, exitOK, cfg, "pending").stdout
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) < 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID AGENT TOOL RENDERED REASON EXPIRES IN" {
		t.Fatalf("pending table:\n%s", text)
	}
	for i, want := range []api.ApprovalRequest{a, b} {
		f := lines[1+i]
		if !strings.HasPrefix(f, want.ID+"  ") || !strings.Contains(f, want.Agent) || !strings.Contains(f, want.Rendered) ||
			!strings.Contains(f, want.Reason) || !strings.Contains(f, "1h0m0s") && !strings.Contains(f, "59m0s") {
			t.Errorf("table row %d: %q", i, f)
		}
	}

	// Decided requests leave the list.
	op(t, exitOK, cfg, "deny", a.ID)
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "pending", "-json").stdout), &got); err != nil || len(got) != 1 || got[0]["id"] != b.ID {
		t.Fatalf("after a denial: %v %v", got, err)
	}
}

// TestPendingEscapesAgentText: what an agent supplied (its arguments, as
// rendered) cannot drive the operator's terminal: escape sequences,
// carriage returns and bidirectional overrides come out escaped in the
// table and in approve's answer, and unchanged in -json.
func TestPendingEscapesAgentText(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	evil := "--message=\"hi\x1b[2J\x1b]0;pwned\x07\rAPPROVED \u202edenied\u009b\""
	a := request(t, state, "research", evil, "middleware[1]")
	text := op(t, exitOK, cfg, "pending").stdout
	for _, raw := range []string{"\x1b", "\x07", "\r", "\u202e", "\u009b"} {
		if strings.Contains(text, raw) {
			t.Errorf("the table passes %q raw:\n%q", raw, text)
		}
	}
	for _, esc := range []string{`\x1b[2J`, `\x1b]0;pwned\a`, `\rAPPROVED`, `\u202edenied`, `\u009b`} {
		if !strings.Contains(text, esc) {
			t.Errorf("the table lacks %q:\n%s", esc, text)
		}
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "pending", "-json").stdout), &got); err != nil || len(got) != 1 || got[0]["rendered"] != evil {
		t.Fatalf("-json must carry the rendering exactly: %v %v", got, err)
	}
	r := op(t, exitOK, cfg, "approve", a.ID)
	if strings.ContainsAny(r.stdout, "\x1b\x07\r\u202e") || !strings.Contains(r.stdout, `\x1b[2J`) {
		t.Errorf("approve's answer: %q", r.stdout)
	}
}

// TestApproveDeny: approve and deny record the decision by the OS user,
// audited; an unknown ID and a second decision exit 2 naming the ID and the
// state, and change nothing.
func TestApproveDeny(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	a := request(t, state, "research", "--message=hi", "middleware[1]")
	b := request(t, state, "coder", "--message=hi", "middleware[1]")

	r := op(t, exitUsage, cfg, "approve", "apr_nope")
	if !strings.Contains(r.stderr, `"apr_nope"`) || !strings.Contains(r.stderr, "no approval request") {
		t.Errorf("approve of an unknown ID: %q", r.stderr)
	}
	op(t, exitUsage, cfg, "deny", "apr_nope")
	op(t, exitUsage, cfg, "approve")
	op(t, exitUsage, cfg, "approve", a.ID, b.ID)

	r = op(t, exitOK, cfg, "approve", a.ID)
	if r.stdout != fmt.Sprintf("approved %s: agent \"research\" may run echo --message=hi once\n", a.ID) {
		t.Errorf("approve: %q", r.stdout)
	}
	user := "cli:" + osUser()
	if got := approvalIn(t, state, a.ID); got.State != "approved" || got.DecidedBy != user {
		t.Fatalf("after approve: %+v", got)
	}
	for _, again := range [][]string{{"approve", a.ID}, {"deny", a.ID}, {"approve", a.ID, "-always"}} {
		r = op(t, exitUsage, cfg, again...)
		if !strings.Contains(r.stderr, a.ID) || !strings.Contains(r.stderr, "is approved (by "+user+")") {
			t.Errorf("%v after approval: %q", again, r.stderr)
		}
	}

	r = op(t, exitOK, cfg, "deny", b.ID, "-reason", "not on a Sunday")
	if r.stdout != fmt.Sprintf("denied %s: agent \"coder\" may not run echo --message=hi (reason: not on a Sunday)\n", b.ID) {
		t.Errorf("deny: %q", r.stdout)
	}
	got := approvalIn(t, state, b.ID)
	if got.State != "denied" || got.DecisionReason != "not on a Sunday" || got.DecidedBy != user {
		t.Fatalf("after deny: %+v", got)
	}
	if r := op(t, exitUsage, cfg, "approve", b.ID); !strings.Contains(r.stderr, b.ID) || !strings.Contains(r.stderr, "is denied") {
		t.Errorf("approve after deny: %q", r.stderr)
	}

	// Both decisions are in the audit trail, by the OS user, and it verifies.
	var recs []api.AuditRecord
	for _, l := range strings.Split(strings.TrimSpace(op(t, exitOK, cfg, "audit", "tail", "-json").stdout), "\n") {
		var rec api.AuditRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("audit tail -json line %q: %v", l, err)
		}
		recs = append(recs, rec)
	}
	var decisions []string
	for _, rec := range recs {
		if rec.Kind == admin.AuditApproval || rec.Kind == admin.AuditDenial {
			decisions = append(decisions, rec.Kind+" "+rec.Actor+" "+rec.Agent)
		}
	}
	if want := []string{"approval " + user + " research", "denial " + user + " coder"}; !slices.Equal(decisions, want) {
		t.Errorf("audited decisions %v, want %v", decisions, want)
	}
	if r := op(t, exitOK, cfg, "audit", "verify"); !strings.HasPrefix(r.stdout, fmt.Sprintf("ok: %d records\n", len(recs))) {
		t.Errorf("audit verify: %q", r.stdout)
	}
}

// TestApproveAlways: -always installs an approve:always card for exactly
// the approved call, listed by cards ls; -grant edits it (it must still
// cover the call and name the same tool); a rule with allow_always = false
// refuses -always with exit 6 and decides nothing.
func TestApproveAlways(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	a := request(t, state, "research", "--message=hi", "middleware[1]")
	r := op(t, exitOK, cfg, "approve", a.ID, "-always")
	if !strings.Contains(r.stdout, `card "approve:always echo --message=hi" installed in agent "research"'s wallet`) {
		t.Errorf("approve -always: %q", r.stdout)
	}
	alwaysCards := func(agent string) []string {
		var list []struct {
			LowerPositive []struct{ Grant string } `json:"lower_positive"`
		}
		if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "cards", "ls", "-agent", agent, "-json").stdout), &list); err != nil {
			t.Fatal(err)
		}
		var gs []string
		for _, c := range list {
			for _, g := range c.LowerPositive {
				gs = append(gs, g.Grant)
			}
		}
		return gs
	}
	if gs := alwaysCards("research"); !slices.Equal(gs, []string{"approve:always echo --message=hi"}) {
		t.Errorf("research's cards after approve -always: %v", gs)
	}

	// allow_always = false: refused, nothing decided, no card.
	b := request(t, state, "coder", `--message="wire money"`, "middleware[2]")
	r = op(t, exitDenied, cfg, "approve", b.ID, "-always")
	if !strings.Contains(r.stderr, "middleware[2]") || !strings.Contains(r.stderr, "nothing decided") {
		t.Errorf("-always on a rule that forbids it: %q", r.stderr)
	}
	if got := approvalIn(t, state, b.ID); got.State != "pending" {
		t.Errorf("the refused request is %s", got.State)
	}
	if gs := alwaysCards("coder"); len(gs) != 0 {
		t.Errorf("coder got cards: %v", gs)
	}
	op(t, exitOK, cfg, "approve", b.ID) // once is allowed

	// -grant: widened with a wildcard is fine; another tool or a grant that
	// does not cover the call is refused; -grant needs -always.
	c := request(t, state, "coder", "--message=hi", "middleware[1]")
	op(t, exitUsage, cfg, "approve", c.ID, "-grant", "approve:always echo --message=*")
	for _, bad := range []string{"approve:always other --message=hi", "approve:always echo --message=bye", "tool:invoke echo --message=hi"} {
		if r := op(t, exitDenied, cfg, "approve", c.ID, "-always", "-grant", bad); !strings.Contains(r.stderr, "nothing decided") {
			t.Errorf("-grant %q: %q", bad, r.stderr)
		}
	}
	if got := approvalIn(t, state, c.ID); got.State != "pending" {
		t.Fatalf("refused -grant decided the request: %s", got.State)
	}
	op(t, exitOK, cfg, "approve", c.ID, "-always", "-grant", "approve:always echo --message=*")
	if gs := alwaysCards("coder"); !slices.Equal(gs, []string{"approve:always echo --message=*"}) {
		t.Errorf("coder's cards after -grant: %v", gs)
	}
}

// TestDecideWithoutAgents: approvals exist without [agents] (the implicit
// agent); pending, approve and deny work on such a configuration too.
func TestDecideWithoutAgents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	src := fmt.Sprintf("version = 1\n\n[tools.echo]\npath = %q\n\n[[middleware]]\nuse = \"approve\"\n", testkit.Component(t, "echo"))
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	a := request(t, filepath.Join(dir, "maiden-state.db"), "default", "--message=hi", "middleware[1]")
	if out := op(t, exitOK, cfg, "pending").stdout; !strings.Contains(out, a.ID) {
		t.Fatalf("pending: %q", out)
	}
	op(t, exitOK, cfg, "approve", a.ID)
}

// TestApprovalEndToEnd: a real call (maiden call, in this process, as an
// agent holding a card for it) waits for a human; maiden pending shows it;
// maiden approve, through its own store handle as another process would,
// lets it finish with the tool's output. deny ends another with kind
// denied carrying the reason; approve -always lets the next identical call
// run without asking, and revoking that card makes it ask again.
func TestApprovalEndToEnd(t *testing.T) {
	t.Parallel()
	cfg, _ := approvalsConfig(t)
	src, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	grants := strings.NewReplacer("[agents.research]\ntools = [\"echo\"]\n", "[agents.research]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n",
		"[agents.coder]\ntools = [\"echo\"]\n", "[agents.coder]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n")
	if err := os.WriteFile(cfg, []byte(grants.Replace(string(src))), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	hi := `{"message":"hi"}`

	// call starts maiden call as agent in the background.
	call := func(agent string) <-chan cliResult {
		done := make(chan cliResult, 1)
		go func() {
			var out, errb syncBuffer
			code := run(context.Background(), []string{"call", "-config", cfg, "-cache", cache, "-isolation", "process", "-agent", agent, "echo", hi},
				strings.NewReader(""), &out, &errb)
			done <- cliResult{code, out.String(), errb.String()}
		}()
		return done
	}
	// waiting returns the one pending request, once it is there.
	waiting := func(agent string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			var list []map[string]any
			if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "pending", "-json").stdout), &list); err != nil {
				t.Fatal(err)
			}
			if len(list) == 1 && list[0]["agent"] == agent && list[0]["tool"] == "echo" && list[0]["rendered"] == "--message=hi" {
				return list[0]["id"].(string)
			}
			if len(list) > 1 {
				t.Fatalf("more than one request waits: %v", list)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no request of %s appeared in maiden pending", agent)
		return ""
	}
	result := func(done <-chan cliResult) cliResult {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(30 * time.Second):
			t.Fatal("the call did not finish after the decision")
		}
		return cliResult{}
	}

	done := call("research")
	id := waiting("research")
	select {
	case r := <-done:
		t.Fatalf("the call finished before any decision: %+v", r)
	default:
	}
	op(t, exitOK, cfg, "approve", id)
	if r := result(done); r.code != exitOK || r.stdout != hi+"\n" {
		t.Fatalf("the approved call: %+v", r)
	}
	if got := approvalIn(t, filepath.Join(filepath.Dir(cfg), "maiden-state.db"), id); got.State != "done" {
		t.Errorf("the approved request is %s after its call, want done", got.State)
	}

	done = call("coder")
	id = waiting("coder")
	op(t, exitOK, cfg, "deny", id, "-reason", "not on a Sunday")
	if r := result(done); r.code != exitDenied || !strings.Contains(r.stderr, "not on a Sunday") || !strings.Contains(r.stderr, id) {
		t.Fatalf("the denied call: %+v", r)
	}

	done = call("research")
	id = waiting("research")
	op(t, exitOK, cfg, "approve", id, "-always")
	if r := result(done); r.code != exitOK {
		t.Fatalf("the call approved always: %+v", r)
	}
	if r := result(call("research")); r.code != exitOK || r.stdout != hi+"\n" {
		t.Fatalf("the next identical call under the always-card: %+v", r)
	}
	if out := op(t, exitOK, cfg, "pending", "-json").stdout; out != "[]\n" {
		t.Fatalf("the always-approved call asked: %s", out)
	}
	var list []struct {
		ID            string
		LowerPositive []struct{ Grant string } `json:"lower_positive"`
	}
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "cards", "ls", "-agent", "research", "-json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	card := ""
	for _, c := range list {
		if len(c.LowerPositive) == 1 && c.LowerPositive[0].Grant == "approve:always echo --message=hi" {
			card = c.ID
		}
	}
	if card == "" {
		t.Fatalf("no always-card in %+v", list)
	}
	op(t, exitOK, cfg, "cards", "revoke", card)
	done = call("research")
	id = waiting("research")
	op(t, exitOK, cfg, "deny", id)
	if r := result(done); r.code != exitDenied {
		t.Fatalf("after the always-card's revocation: %+v", r)
	}

	// The trail holds every decision, by the OS user, and verifies.
	user := "cli:" + osUser()
	var decisions []string
	for _, l := range strings.Split(strings.TrimSpace(op(t, exitOK, cfg, "audit", "tail", "-n", "1000", "-json").stdout), "\n") {
		var rec api.AuditRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Actor == user {
			decisions = append(decisions, rec.Kind+" "+rec.Agent)
		}
	}
	if want := []string{"approval research", "denial coder", "approval research", "denial research"}; !slices.Equal(decisions, want) {
		t.Errorf("decisions in the audit trail: %v, want %v", decisions, want)
	}
	if r := op(t, exitOK, cfg, "audit", "verify"); !strings.HasPrefix(r.stdout, "ok: ") {
		t.Errorf("audit verify: %q", r.stdout)
	}
}

// TestPendingShowOne: pending ID shows one request with everything to
// decide on (the hosts and credential names from the tool's policy, the
// session, the rule), in any state; -json is the whole request.
func TestPendingShowOne(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	src, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	withPolicy := strings.Replace(string(src), "[agents.research]", "http_allow = [\"api.example.com\"]\nsecrets = [\"API_TOKEN\"]\n\n[agents.research]", 1)
	if err := os.WriteFile(cfg, []byte(withPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	// The policy shown is the one stored with the request (what the
	// approval is bound to), not agent.toml's as it is now.
	bound := struct{ ToolDigest, Policy string }{"sha256:" + strings.Repeat("ef", 32),
		`{"network":true,"hosts":["api.example.com"],"secrets":["API_TOKEN"],"timeout_ms":10000,"memory_mb":64}`}
	a := requestBound(t, state, "research", "--message=hi", "middleware[1]", bound.ToolDigest, bound.Policy)
	b := request(t, state, "research", `--message="wire money"`, "middleware[2]")
	text := op(t, exitOK, cfg, "pending", a.ID).stdout
	for _, want := range []string{"request    " + a.ID + "\n", "state      pending\n", "agent      research\n", "session    s1\n", "tool       echo\n",
		"arguments  --message=hi\n", "rendering  sha256:" + renderingSum("--message=hi") + " (the inbox page shows the same)\n", "input      sha256:" + a.Digest + "\n", "hosts      api.example.com\n", "secrets    API_TOKEN\n",
		"code       " + bound.ToolDigest + "\n", "limits     timeout 10000 ms, memory 64 MB\n", "asked by   middleware[1]\n", "reason     " + a.Reason + "\n", `always     may be approved always, installing "approve:always echo --message=hi"`} {
		if !strings.Contains(text, want) {
			t.Errorf("pending ID lacks %q:\n%s", want, text)
		}
	}
	if text := op(t, exitOK, cfg, "pending", b.ID).stdout; !strings.Contains(text, "may not be approved always (allow_always = false)") ||
		!strings.Contains(text, "hosts      none\n") || !strings.Contains(text, "code       not recorded: an approval of it runs nothing\n") {
		t.Errorf("pending ID of a rule without always:\n%s", text)
	}
	op(t, exitOK, cfg, "deny", a.ID, "-reason", "no")
	text = op(t, exitOK, cfg, "pending", a.ID).stdout
	if !strings.Contains(text, "state      denied by cli:"+osUser()+" at ") || !strings.Contains(text, ": no\n") {
		t.Errorf("pending ID of a denied request:\n%s", text)
	}
	var full map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "pending", a.ID, "-json").stdout), &full); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"id": a.ID, "state": "denied", "session": "s1", "rule": "middleware[1]", "decision_reason": "no",
		"hosts": []any{"api.example.com"}, "secrets": []any{"API_TOKEN"}, "allow_always": true} {
		if fmt.Sprint(full[k]) != fmt.Sprint(v) {
			t.Errorf("pending ID -json: %s = %v, want %v", k, full[k], v)
		}
	}
	if r := op(t, exitUsage, cfg, "pending", "apr_nope"); !strings.Contains(r.stderr, `no approval request "apr_nope"`) {
		t.Errorf("pending of an unknown ID: %q", r.stderr)
	}
	op(t, exitUsage, cfg, "pending", a.ID, b.ID)
}

// renderingSum is the SHA-256 of a rendering's bytes, computed here rather
// than by the code under test.
func renderingSum(r string) string {
	sum := sha256.Sum256([]byte(r))
	return hex.EncodeToString(sum[:])
}

// TestApproveExpired: a request past its expiry is not listed, and
// approving it exits 2 saying it expired (expiry is a denial).
func TestApproveExpired(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	a := statetest.Approval(t, state, statetest.Request{Agent: "research", Tool: "echo", Rendered: "--message=hi",
		Digest: strings.Repeat("cd", 32), Rule: "middleware[1]", Reason: "r", ExpiresIn: 300 * time.Millisecond})
	time.Sleep(400 * time.Millisecond)
	if out := op(t, exitOK, cfg, "pending", "-json").stdout; out != "[]\n" {
		t.Errorf("an expired request is listed: %s", out)
	}
	r := op(t, exitUsage, cfg, "approve", a.ID)
	if !strings.Contains(r.stderr, a.ID) || !strings.Contains(r.stderr, "expired") {
		t.Errorf("approve of an expired request: %q", r.stderr)
	}
	if got := approvalIn(t, state, a.ID); got.State != "expired" {
		t.Errorf("the expired request is %s", got.State)
	}
	if r := op(t, exitUsage, cfg, "deny", a.ID); !strings.Contains(r.stderr, "is expired") {
		t.Errorf("deny of an expired request: %q", r.stderr)
	}
}
