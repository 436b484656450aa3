package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestOperatorsTokens: operators token mints for a declared operator only;
// the token signs in as that operator (Host.AuthenticateOperator) and never
// as an agent (Host.Authenticate), and an agent token minted by agents
// token never signs in as an operator; ls lists IDs, never secrets;
// revoke-token ends it, and each kind's revoke-token refuses the other
// kind's ID. Every mint and revocation is in the audit trail.
func TestOperatorsTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, state := approvalsConfig(t)

	r := op(t, exitUsage, cfg, "operators", "token", "research")
	if !strings.Contains(r.stderr, `unknown operator "research"`) || !strings.Contains(r.stderr, "its operators: alice") {
		t.Errorf("operators token for an agent's name: %q", r.stderr)
	}
	op(t, exitUsage, cfg, "operators", "token")
	if r := op(t, exitUsage, cfg, "agents", "token", "alice"); !strings.Contains(r.stderr, `unknown agent "alice"`) {
		t.Errorf("agents token for an operator: %q", r.stderr)
	}

	var minted struct{ Operator, Token string }
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "operators", "token", "alice", "-json").stdout), &minted); err != nil ||
		minted.Operator != "alice" || !strings.HasPrefix(minted.Token, "mdo_") {
		t.Fatalf("operators token -json: %+v %v", minted, err)
	}
	r = op(t, exitOK, cfg, "operators", "token", "alice")
	plain := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(plain, "mdo_") || !strings.Contains(r.stderr, "shown once") {
		t.Fatalf("operators token: %+v", r)
	}
	agentTok := strings.TrimSpace(op(t, exitOK, cfg, "agents", "token", "research").stdout)

	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := maiden.New(c, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), StatePath: state})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	for _, tok := range []string{minted.Token, plain} {
		if n, err := h.AuthenticateOperator(ctx, tok); err != nil || n != "alice" {
			t.Fatalf("AuthenticateOperator(operator token) = %q, %v", n, err)
		}
		if a, err := h.Authenticate(ctx, tok); !errors.Is(err, maiden.ErrBadToken) || a != "" {
			t.Fatalf("an operator token authenticated as agent %q (%v)", a, err)
		}
	}
	if n, err := h.AuthenticateOperator(ctx, agentTok); !errors.Is(err, maiden.ErrBadOperatorToken) || n != "" {
		t.Fatalf("an agent token authenticated as operator %q (%v)", n, err)
	}
	if a, err := h.Authenticate(ctx, agentTok); err != nil || a != "research" {
		t.Fatalf("the agent token: %q %v", a, err)
	}

	// ls: IDs, never secrets.
	ls := op(t, exitOK, cfg, "operators", "ls", "-json").stdout
	var list []struct {
		Name     string
		Declared bool
		Tokens   []admin.OperatorTokenInfo
	}
	if err := json.Unmarshal([]byte(ls), &list); err != nil || len(list) != 1 || list[0].Name != "alice" || !list[0].Declared || len(list[0].Tokens) != 2 {
		t.Fatalf("operators ls -json: %s (%v)", ls, err)
	}
	text := op(t, exitOK, cfg, "operators", "ls").stdout
	for _, secret := range []string{minted.Token, plain, minted.Token[len("mdo_")+17:]} {
		if strings.Contains(ls+text, secret) {
			t.Fatalf("operators ls shows a secret:\n%s\n%s", ls, text)
		}
	}
	first, second := list[0].Tokens[0].ID, list[0].Tokens[1].ID
	if !strings.Contains(text, "alice  declared in "+cfg) || !strings.Contains(text, "token "+first) || !strings.Contains(text, "live") {
		t.Errorf("operators ls:\n%s", text)
	}

	// Each kind's revoke-token refuses the other kind's IDs.
	agentID := strings.TrimPrefix(agentTok, "mdn_")[:16]
	if r := op(t, exitUsage, cfg, "operators", "revoke-token", agentID); !strings.Contains(r.stderr, "no operator token has that ID") {
		t.Errorf("operators revoke-token of an agent token's ID: %q", r.stderr)
	}
	if r := op(t, exitUsage, cfg, "agents", "revoke-token", first); r.stderr != fmt.Sprintf("maiden agents revoke-token: %q is a token of operator \"alice\", not of an agent: revoke it with maiden operators revoke-token %s\n", first, first) {
		t.Errorf("agents revoke-token of an operator token's ID (issue 27, rough edge 7): %q", r.stderr)
	}
	if n, err := h.AuthenticateOperator(ctx, minted.Token); err != nil || n != "alice" {
		t.Fatalf("after the refused revocations: %q %v", n, err)
	}
	r = op(t, exitOK, cfg, "operators", "revoke-token", first)
	if r.stdout != "revoked operator token "+first+" of \"alice\"\n" {
		t.Errorf("revoke-token: %q", r.stdout)
	}
	if _, err := h.AuthenticateOperator(ctx, minted.Token); !errors.Is(err, maiden.ErrBadOperatorToken) {
		t.Fatalf("a revoked operator token: %v", err)
	}
	if n, err := h.AuthenticateOperator(ctx, plain); err != nil || n != "alice" {
		t.Fatalf("the other token after one's revocation: %q %v", n, err)
	}
	if !strings.Contains(op(t, exitOK, cfg, "operators", "ls").stdout, "revoked ") {
		t.Error("operators ls does not show the revocation")
	}
	var rj struct{ Revoked, Operator string }
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "operators", "revoke-token", second, "-json").stdout), &rj); err != nil || rj.Revoked != second || rj.Operator != "alice" {
		t.Errorf("revoke-token -json: %+v %v", rj, err)
	}

	// Audited: three mints (two operator, one agent), two revocations.
	var ops []string
	for _, l := range strings.Split(strings.TrimSpace(op(t, exitOK, cfg, "audit", "tail", "-json").stdout), "\n") {
		var rec api.AuditRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind != admin.AuditTokenChange {
			continue
		}
		var body map[string]string
		json.Unmarshal(rec.Body, &body)
		ops = append(ops, body["op"]+" "+body["principal"]+body["operator"]+rec.Agent)
	}
	want := "mint operatoralice,mint operatoralice,mint research,revoke operatoralice,revoke operatoralice"
	if strings.Join(ops, ",") != want {
		t.Errorf("token-change records %q, want %q", strings.Join(ops, ","), want)
	}

	// An operator removed from agent.toml: listed as store-only, its
	// tokens sign in nobody, and no new token is minted for it.
	src, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(src), "[operators.alice]\n", "[operators.bob]\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := op(t, exitOK, cfg, "operators", "ls"); !strings.Contains(r.stdout, "alice  only in the state store") || !strings.Contains(r.stdout, "bob  declared") {
		t.Errorf("operators ls after alice's removal:\n%s", r.stdout)
	}
	op(t, exitUsage, cfg, "operators", "token", "alice")
}

// TestOperatorsNone: without [operators] there is nothing to mint for,
// and the message says how to declare one.
func TestOperatorsNone(t *testing.T) {
	t.Parallel()
	cfg := agentsConfig(t)
	if r := op(t, exitUsage, cfg, "operators", "token", "alice"); !strings.Contains(r.stderr, "add an [operators.NAME] table") {
		t.Errorf("operators token without [operators]: %q", r.stderr)
	}
	if r := op(t, exitOK, cfg, "operators", "ls"); !strings.Contains(r.stdout, "no operators") {
		t.Errorf("operators ls without [operators]: %q", r.stdout)
	}
	if r := op(t, exitOK, cfg, "operators", "ls", "-json"); r.stdout != "[]\n" {
		t.Errorf("operators ls -json without [operators]: %q", r.stdout)
	}
}
