package main

// Pass 44 of the mutation testing (docs/security-tests.md, "Forty-fourth
// pass"): the operator's commands on authority and state. Each test pins a
// promise a planted bug broke without any other test noticing.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/testkit"
)

// m44Secret is the secret part of a token mdn_ID_SECRET (or mdo_...).
func m44Secret(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.SplitN(tok, "_", 3)
	if len(parts) != 3 || len(parts[2]) < 40 {
		t.Fatalf("token %q is not PREFIX_ID_SECRET", tok)
	}
	return parts[2]
}

// A minted token is shown once, on stdout only: stderr (which logs and
// terminals keep) names its ID, never the token or its secret.
func TestMutation44TokenOnStdoutOnly(t *testing.T) {
	t.Parallel()
	cfg, _ := approvalsConfig(t)
	for _, args := range [][]string{
		{"agents", "token", "research"},
		{"operators", "token", "alice"},
		{"operators", "token", "alice", "-role", "metrics"},
	} {
		r := op(t, exitOK, cfg, args...)
		tok := strings.TrimSpace(r.stdout)
		if strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("maiden %s: stdout %q; want the token alone on one line", strings.Join(args, " "), r.stdout)
		}
		if secret := m44Secret(t, tok); strings.Contains(r.stderr, secret) {
			t.Errorf("maiden %s: stderr %q holds the token's secret; want only its ID there", strings.Join(args, " "), r.stderr)
		}
		if !strings.Contains(r.stderr, "shown once") {
			t.Errorf("maiden %s: stderr %q", strings.Join(args, " "), r.stderr)
		}
	}
}

// operators token -json says the role the token was minted with, and a
// role other than operator or metrics is refused, naming it.
func TestMutation44OperatorTokenRole(t *testing.T) {
	t.Parallel()
	cfg, _ := approvalsConfig(t)
	var minted struct{ Operator, Token, Role string }
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "operators", "token", "alice", "-role", "metrics", "-json").stdout), &minted); err != nil {
		t.Fatal(err)
	}
	if minted.Role != "metrics" || minted.Operator != "alice" {
		t.Errorf("operators token -role metrics -json = %+v; want role metrics", minted)
	}
	var ls []struct {
		Name   string
		Tokens []struct{ Role string }
	}
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "operators", "ls", "-json").stdout), &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || len(ls[0].Tokens) != 1 || ls[0].Tokens[0].Role != "metrics" {
		t.Errorf("operators ls -json after minting a metrics token: %+v", ls)
	}
	for _, role := range []string{"admin", "Operator", ""} {
		r := op(t, exitUsage, cfg, "operators", "token", "alice", "-role", role)
		if !strings.Contains(r.stderr, "want operator or metrics") {
			t.Errorf("operators token -role %q: stderr %q; want the role named and refused", role, r.stderr)
		}
	}
}

// A card's expiry is what the operator typed: -expires 0s is refused (it
// would read as never), a granted and a derived card expire when asked.
func TestMutation44GrantExpiry(t *testing.T) {
	t.Parallel()
	cfg := agentsConfig(t)
	for _, d := range []string{"0s", "-1h", "0"} {
		r := op(t, exitUsage, cfg, "cards", "grant", "-agent", "research", "-expires", d, "tool:invoke echo --...")
		if !strings.Contains(r.stderr, "-expires") {
			t.Errorf("cards grant -expires %s: stderr %q; want -expires named", d, r.stderr)
		}
	}
	expires := func(id string) time.Time {
		t.Helper()
		var c struct{ Expires time.Time }
		if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "cards", "show", id, "-json").stdout), &c); err != nil {
			t.Fatal(err)
		}
		return c.Expires
	}
	before := time.Now()
	parent := jsonID(t, op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-expires", "2h", "-json", "tool:invoke echo --...").stdout)
	child := jsonID(t, op(t, exitOK, cfg, "cards", "derive", parent, "-to", "helper", "-expires", "30m", "-json", "tool:invoke echo --...").stdout)
	after := time.Now()
	for _, c := range []struct {
		id string
		d  time.Duration
	}{{parent, 2 * time.Hour}, {child, 30 * time.Minute}} {
		got := expires(c.id)
		if got.Before(before.Add(c.d).Add(-time.Second)) || got.After(after.Add(c.d).Add(time.Second)) {
			t.Errorf("card %s typed with -expires %s expires %v; want between %v and %v", c.id, c.d, got, before.Add(c.d), after.Add(c.d))
		}
	}
}

// verify -head takes a record's hash as verify prints it (64 lowercase hex
// digits) and is satisfied only by a record with exactly that hash: the
// empty trail's head of 64 zeros is the one hash every trail extends.
func TestMutation44VerifyHeadForm(t *testing.T) {
	t.Parallel()
	path := auditStore(t, 3)
	for _, bad := range []string{strings.Repeat("g", 64), strings.Repeat("a", 63) + "z"} {
		r := cli(t, "", "audit", "verify", "-state", path, "-head", bad)
		if r.code != exitUsage || !strings.Contains(r.stderr, "is not a record hash") {
			t.Errorf("verify -head %s: exit %d, stderr %q; want exit %d: not a record hash", bad, r.code, r.stderr, exitUsage)
		}
	}
	zeros := "0000" + strings.Repeat("a", 60)
	r := cli(t, "", "audit", "verify", "-state", path, "-head", zeros)
	if r.code != exitState || !strings.Contains(r.stderr, "no record has the head "+zeros) {
		t.Errorf("verify -head %s (no record's hash): exit %d, stdout %q, stderr %q; want exit %d: no record has the head", zeros, r.code, r.stdout, r.stderr, exitState)
	}
	if r := cli(t, "", "audit", "verify", "-state", path, "-head", strings.Repeat("0", 64)); r.code != exitOK {
		t.Errorf("verify -head of the empty trail's head: %+v; want ok", r)
	}
}

// serve -auth-token-env naming an empty or unset variable is refused, not
// read as "no token": the server would otherwise take requests without
// the authentication the operator asked for. (The context bounds a serve
// that wrongly starts; the real code returns before it is used.)
func TestMutation44ServeEmptyTokenEnv(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"serve", "-config", cfg, "-http", "127.0.0.1:0", "-auth-token-env", "MAIDEN_M44_NEVER_SET_TOKEN"}, strings.NewReader(""), &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "-auth-token-env MAIDEN_M44_NEVER_SET_TOKEN: the variable is empty or unset") {
		t.Errorf("serve -auth-token-env of an unset variable: exit %d (context %v), stderr %q; want exit %d naming the variable", code, ctx.Err(), errb.String(), exitUsage)
	}
}

// m44Evil is a rendering of call arguments an agent wrote to move the
// cursor, retitle the window, return the carriage and reverse the text.
func m44Evil(t *testing.T) string {
	t.Helper()
	args, err := grant.Render([]byte(`{"message": "hi\u001b[2J\u001b]0;pwned\u0007\rNOTHING \u202eyreve\u009b"}`))
	if err != nil {
		t.Fatal(err)
	}
	return grant.Rendering(args)
}

// m44NoRaw fails when text passes a control an agent wrote raw.
func m44NoRaw(t *testing.T, name, text string) {
	t.Helper()
	for _, raw := range []string{"\x1b", "\x07", "\r", "\u202e", "\u009b"} {
		if strings.Contains(text, raw) {
			t.Errorf("%s passes %q raw:\n%q", name, raw, text)
		}
	}
}

// What the human deciding reads is escaped everywhere the agent's words
// reach it: pending's list and its view of one request (with what
// approving would newly allow), and approve's and deny's answers.
func TestMutation44DecisionTextEscaped(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	evil := m44Evil(t)
	a := request(t, state, "research", evil, "middleware[1]")
	b := request(t, state, "coder", evil, "middleware[1]")
	m44NoRaw(t, "pending", op(t, exitOK, cfg, "pending").stdout)
	show := op(t, exitOK, cfg, "pending", a.ID).stdout
	m44NoRaw(t, "pending ID", show)
	// The digest is of the rendering as recorded (the inbox page shows
	// the same), not of its escaped form.
	if want := "sha256:" + grant.RenderingDigest(evil) + " "; !strings.Contains(show, want) {
		t.Errorf("pending ID lacks the rendering's digest %s:\n%s", want, show)
	}
	m44NoRaw(t, "approve -always", op(t, exitOK, cfg, "approve", a.ID, "-always").stdout)
	m44NoRaw(t, "deny", op(t, exitOK, cfg, "deny", b.ID, "-reason", "no").stdout)
}

// approve -always -grant says the card it installed: the edited grant the
// operator typed, not the default one it replaced.
func TestMutation44ApproveShowsEditedGrant(t *testing.T) {
	t.Parallel()
	cfg, state := approvalsConfig(t)
	a := request(t, state, "coder", "--message=hi", "middleware[1]")
	r := op(t, exitOK, cfg, "approve", a.ID, "-always", "-grant", "approve:always echo --message=*")
	if !strings.Contains(r.stdout, `card "approve:always echo --message=*" installed in agent "coder"'s wallet`) {
		t.Errorf("approve -always -grant: stdout %q; want the edited grant named as the card installed", r.stdout)
	}
}

// serve -approval-wait 0 is refused, not read as the default wait: the
// flag is how long a call holds for a human, and 0 is no such time.
func TestMutation44ServeApprovalWaitZero(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	r := cli(t, "", "serve", "-config", cfg, "-isolation", "process", "-approval-wait", "0s")
	if r.code != exitUsage || !strings.Contains(r.stderr, "-approval-wait must be positive") {
		t.Errorf("serve -approval-wait 0s: exit %d, stderr %q; want exit %d: must be positive", r.code, r.stderr, exitUsage)
	}
}

// mcp accept shows a new tool's description (an upstream's words) escaped:
// the upstream must not disguise what the operator accepts.
func TestMutation44AcceptShowsNewToolEscaped(t *testing.T) {
	t.Parallel()
	bin := testkit.Binary(t, "./testdata/mcpstdio")
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	body := "version = 1\n[mcp.shop]\ncommand = [\"" + bin + "\"]\nenv = [\"MCPSTDIO_PAY=wide\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "mcp", "accept", "-config", cfg, "-dry-run", "shop")
	if r.code != exitOK || !strings.Contains(r.stdout, "new tool (never accepted)") {
		t.Fatalf("mcp accept -dry-run of a new hostile tool: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\u202e") {
		t.Errorf("mcp accept -dry-run wrote the upstream's description raw:\n%q", r.stdout)
	}
}
