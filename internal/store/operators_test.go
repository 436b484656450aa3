package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestOperatorTokens: an operator token authenticates its operator, and
// no way of presenting it as (or turning it into) an agent token works,
// nor the reverse: the prefix differs and the rows are in another table.
// Mints and revocations are audited; only hashes are stored.
func TestOperatorTokens(t *testing.T) {
	t.Parallel()
	eachBackend(t, testOperatorTokens)
}

func testOperatorTokens(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	mustAgents(t, s, "alice", "research")

	op, info, err := s.MintOperatorToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if info.Operator != "alice" || !strings.HasPrefix(op, "mdo_"+info.ID+"_") {
		t.Fatalf("operator token %q, info %+v", op, info)
	}
	if name, err := s.AuthenticateOperator(ctx, op); err != nil || name != "alice" {
		t.Fatalf("AuthenticateOperator = %q, %v", name, err)
	}
	// An agent named like the operator: its token is still an agent's.
	ag, agInfo, err := s.MintToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if name, err := s.AuthenticateOperator(ctx, ag); !errors.Is(err, ErrBadToken) || name != "" {
		t.Fatalf("an agent token authenticated as operator %q (%v)", name, err)
	}
	if a, err := s.Authenticate(ctx, op); !errors.Is(err, ErrBadToken) || a != "" {
		t.Fatalf("an operator token authenticated as agent %q (%v)", a, err)
	}
	// Swapping the prefixes finds no row: the principals are in two tables.
	asAgent := "mdn_" + strings.TrimPrefix(op, "mdo_")
	if a, err := s.Authenticate(ctx, asAgent); !errors.Is(err, ErrBadToken) {
		t.Fatalf("an operator token relabelled mdn_ authenticated as agent %q (%v)", a, err)
	}
	asOperator := "mdo_" + strings.TrimPrefix(ag, "mdn_")
	if name, err := s.AuthenticateOperator(ctx, asOperator); !errors.Is(err, ErrBadToken) {
		t.Fatalf("an agent token relabelled mdo_ authenticated as operator %q (%v)", name, err)
	}
	secret := op[len("mdo_"+info.ID+"_"):]
	other, bobInfo, err := s.MintOperatorToken(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"empty":             "",
		"no prefix":         strings.TrimPrefix(op, "mdo_"),
		"wrong secret":      op[:len(op)-2] + "xx",
		"secret of another": "mdo_" + info.ID + "_" + other[len(other)-len(secret):],
		"unknown id":        "mdo_0000000000000000_" + secret,
		"short id":          "mdo_00_" + secret,
		"no secret":         "mdo_" + info.ID + "_",
	} {
		if n, err := s.AuthenticateOperator(ctx, bad); !errors.Is(err, ErrBadToken) || n != "" {
			t.Errorf("%s: AuthenticateOperator(%q) = %q, %v; want ErrBadToken", name, bad, n, err)
		}
	}
	if _, _, err := s.MintOperatorToken(ctx, "bad\nname"); !errors.Is(err, ErrBadInput) {
		t.Fatalf("a name with a newline: %v", err)
	}

	// Only hashes are stored.
	for f, b := range stored(t, s) {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the operator token's secret", f)
		}
	}

	// Revocation: by its own kind's command only.
	if err := s.RevokeToken(ctx, info.ID); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("RevokeToken(operator token ID) = %v; want ErrUnknownToken", err)
	}
	if err := s.RevokeOperatorToken(ctx, agInfo.ID); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("RevokeOperatorToken(agent token ID) = %v; want ErrUnknownToken", err)
	}
	if _, err := s.Authenticate(ctx, ag); err != nil {
		t.Fatalf("the agent token stopped working after a refused operator revocation: %v", err)
	}
	if err := s.RevokeOperatorToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateOperator(ctx, op); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a revoked operator token: %v", err)
	}
	if err := s.RevokeOperatorToken(ctx, info.ID); err != nil {
		t.Fatalf("revoking twice: %v", err)
	}
	if _, err := s.AuthenticateOperator(ctx, other); err != nil {
		t.Fatalf("bob's token after alice's revocation: %v", err)
	}

	ops, err := s.Operators(ctx)
	if err != nil || len(ops) != 2 || ops[0].Name != "alice" || ops[1].Name != "bob" {
		t.Fatalf("Operators = %+v, %v", ops, err)
	}
	ts, err := s.OperatorTokens(ctx, "alice")
	if err != nil || len(ts) != 1 || ts[0].ID != info.ID || ts[0].Revoked.IsZero() {
		t.Fatalf("OperatorTokens(alice) = %+v, %v", ts, err)
	}
	if all, err := s.OperatorTokens(ctx, ""); err != nil || len(all) != 2 {
		t.Fatalf("OperatorTokens(\"\") = %+v, %v", all, err)
	}
	if agents, err := s.Tokens(ctx, ""); err != nil || len(agents) != 1 || agents[0].ID != agInfo.ID {
		t.Fatalf("agent Tokens lists %+v, %v; want only the agent's", agents, err)
	}

	// Audited: alice's mint, the agent's mint, bob's mint, alice's
	// revocation (once: the second revocation changed nothing).
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		var b map[string]string
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		if r.Kind != AuditTokenChange {
			continue
		}
		got = append(got, r.Actor+" "+b["op"]+" "+b["principal"]+" "+b["operator"]+" "+r.Agent+" "+b["token"])
	}
	want := []string{
		"operator mint operator alice  " + info.ID,
		"operator mint   alice " + agInfo.ID,
		"operator mint operator bob  " + bobInfo.ID,
		"operator revoke operator alice  " + info.ID,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("token-change records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	verifyOK(t, s, int64(len(recs)))
}

// TestMetricsTokens: a metrics token (a scraper's) authenticates with its
// role for /metrics, never as an operator (no inbox, no decisions) nor as
// an agent; an operator's token keeps the operator role; revoking a
// metrics token ends it.
func TestMetricsTokens(t *testing.T) {
	t.Parallel()
	eachBackend(t, testMetricsTokens)
}

func testMetricsTokens(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	m, info, err := s.MintOperatorTokenRole(ctx, "prom", RoleMetrics)
	if err != nil {
		t.Fatal(err)
	}
	if info.Role != RoleMetrics {
		t.Fatalf("minted %+v, want role %q", info, RoleMetrics)
	}
	if name, role, err := s.AuthenticateOperatorRole(ctx, m); err != nil || name != "prom" || role != RoleMetrics {
		t.Fatalf("AuthenticateOperatorRole(metrics token) = %q, %q, %v", name, role, err)
	}
	if name, err := s.AuthenticateOperator(ctx, m); !errors.Is(err, ErrBadToken) || name != "" {
		t.Fatalf("a metrics token authenticated as operator %q (%v): it must not sign in to the inbox", name, err)
	}
	if a, err := s.Authenticate(ctx, m); !errors.Is(err, ErrBadToken) || a != "" {
		t.Fatalf("a metrics token authenticated as agent %q (%v)", a, err)
	}
	op, _, err := s.MintOperatorToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if name, role, err := s.AuthenticateOperatorRole(ctx, op); err != nil || name != "alice" || role != RoleOperator {
		t.Fatalf("AuthenticateOperatorRole(operator token) = %q, %q, %v", name, role, err)
	}
	if _, _, err := s.MintOperatorTokenRole(ctx, "alice", "admin"); err == nil {
		t.Fatal("minted a token of an unknown role")
	}
	list, err := s.OperatorTokens(ctx, "")
	if err != nil || len(list) != 2 || list[0].Role != RoleMetrics || list[1].Role != RoleOperator {
		t.Fatalf("OperatorTokens = %+v, %v: want the metrics token, then the operator's", list, err)
	}
	if err := s.RevokeOperatorToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AuthenticateOperatorRole(ctx, m); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a revoked metrics token: %v", err)
	}
}
