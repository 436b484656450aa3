package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/internal/statetest"
	"github.com/maiden-run/maiden/internal/testkit"
)

// agentsConfig writes an agent.toml with the echo and toolerr test tools
// and three agents: research (echo), coder (echo, toolerr; a system grant)
// and helper (echo). The state store is the default file next to it.
func agentsConfig(t *testing.T) string {
	t.Helper()
	src := fmt.Sprintf(`version = 1

[tools.echo]
path = %q

[tools.toolerr]
path = %q

[agents.research]
tools = ["echo"]

[agents.coder]
tools = ["echo", "toolerr"]
grants = ["tool:invoke toolerr --..."]

[agents.helper]
tools = ["echo"]
`, testkit.Component(t, "echo"), testkit.Component(t, "toolerr"))
	path := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// op runs an agents or cards command on cfg and fails the test unless it
// exits with want.
func op(t *testing.T, want int, cfg string, args ...string) cliResult {
	t.Helper()
	r := cli(t, "", append(args, "-config", cfg)...)
	if r.code != want {
		t.Fatalf("maiden %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// jsonID is the "id" of a -json answer that must hold exactly that key.
func jsonID(t *testing.T, out string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %q: %v", out, err)
	}
	id, ok := m["id"].(string)
	if !ok || id == "" || len(m) != 1 {
		t.Fatalf(`want {"id": ID}, got %s`, out)
	}
	return id
}

func callAs(t *testing.T, cfg, cache, agent, input string, extra ...string) cliResult {
	t.Helper()
	args := append([]string{"call", "-config", cfg, "-cache", cache, "-isolation", "process", "-agent", agent}, extra...)
	return cli(t, "", append(args, "echo", input)...)
}

// storeCards lists the cards of the store next to cfg (or at path), read
// directly from the store.
func storeCards(t *testing.T, path string) int {
	t.Helper()
	st, err := admin.OpenStore(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, err := st.Cards(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// TestCardsGrantCallDeriveRevoke is an operator's day: a declared agent is
// denied with a message to paste; pasting it allows the call; a derive chain
// A → B → C; revoking A revokes all three (CARDS.md A8) and the next call is
// denied again; revoking A again is card-revoked.
func TestCardsGrantCallDeriveRevoke(t *testing.T) {
	t.Parallel()
	cfg, cache := agentsConfig(t), t.TempDir()
	hi := `{"message":"hi"}`

	r := callAs(t, cfg, cache, "research", hi)
	paste := `maiden cards grant -agent research 'tool:invoke echo --message=hi'`
	if r.code != exitDenied || !strings.Contains(r.stderr, "(denied)") || !strings.Contains(r.stderr, paste) {
		t.Fatalf("before any card: exit %d, stderr %q; want exit 6, kind denied and %q", r.code, r.stderr, paste)
	}
	r = callAs(t, cfg, cache, "research", hi, "-json")
	var res struct {
		OK    bool
		Error struct{ Kind, Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != exitDenied || res.OK || res.Error.Kind != "denied" {
		t.Fatalf("call -json: exit %d, %q (%v)", r.code, r.stdout, err)
	}

	a := jsonID(t, op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-json", "tool:invoke echo --message=hi").stdout)
	if r := callAs(t, cfg, cache, "research", hi); r.code != exitOK || r.stdout != hi+"\n" {
		t.Fatalf("after the grant: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := callAs(t, cfg, cache, "research", `{"message":"other"}`); r.code != exitDenied {
		t.Fatalf("an argument the grant does not allow: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := callAs(t, cfg, cache, "helper", hi); r.code != exitDenied {
		t.Fatalf("another agent, no card: exit %d", r.code)
	}

	b := jsonID(t, op(t, exitOK, cfg, "cards", "derive", a, "-to", "coder", "-json", "tool:invoke echo --message=hi").stdout)
	r = op(t, exitOK, cfg, "cards", "derive", b, "-to", "helper", "-expires", "1h", "tool:invoke echo --message=hi")
	m := regexp.MustCompile(`^card (\S+) derived from (\S+) for agent "helper", expires `).FindStringSubmatch(r.stdout)
	if m == nil || m[2] != b {
		t.Fatalf("derive text: %q", r.stdout)
	}
	c := m[1]
	if r := callAs(t, cfg, cache, "helper", hi); r.code != exitOK {
		t.Fatalf("helper with the derived card: exit %d, stderr %q", r.code, r.stderr)
	}

	// show: text and JSON.
	var shown map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "cards", "show", c, "-json").stdout), &shown); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"id": c, "agent": "helper", "state": "live", "manager": "operator",
		"parents": []any{b}, "lower_positive": []any{map[string]any{"grant": "tool:invoke echo --message=hi"}}} {
		if !reflect.DeepEqual(shown[k], want) {
			t.Errorf("show -json: %s = %#v, want %#v", k, shown[k], want)
		}
	}
	if _, ok := shown["expires"].(string); !ok {
		t.Errorf("show -json: no expires in %v", shown)
	}
	text := op(t, exitOK, cfg, "cards", "show", b).stdout
	for _, want := range []string{"card     " + b, "agent    coder", "state    live", "parents  " + a, "expires  never", "allows   tool:invoke echo --message=hi"} {
		if !strings.Contains(text, want) {
			t.Errorf("show text lacks %q:\n%s", want, text)
		}
	}

	// ls: JSON (every card, system cards included) and text.
	var list []map[string]any
	if err := json.Unmarshal([]byte(op(t, exitOK, cfg, "cards", "ls", "-json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	system := 0
	for _, card := range list {
		ids = append(ids, card["id"].(string))
		if card["system"] == true {
			system++
			if card["agent"] != "coder" {
				t.Errorf("system card of %v", card["agent"])
			}
		}
	}
	if system != 1 || len(list) != 4 || !slices.Contains(ids, a) || !slices.Contains(ids, b) || !slices.Contains(ids, c) {
		t.Fatalf("cards ls -json: %d cards (%d system): %v", len(list), system, ids)
	}
	text = op(t, exitOK, cfg, "cards", "ls", "-agent", "coder").stdout
	if !strings.Contains(text, b+"  coder") || !strings.Contains(text, "from "+a) || !strings.Contains(text, "system") ||
		strings.Contains(text, c) || strings.Contains(text, "research") {
		t.Errorf("cards ls -agent coder:\n%s", text)
	}

	// Revoke the root: the cascade takes the chain; the calls are denied.
	r = op(t, exitOK, cfg, "cards", "revoke", a, "-json")
	if strings.TrimSpace(r.stdout) != `{
  "revoked": 3
}` {
		t.Fatalf("revoke -json: %q", r.stdout)
	}
	for _, agent := range []string{"research", "helper"} {
		if r := callAs(t, cfg, cache, agent, hi); r.code != exitDenied {
			t.Errorf("%s after the revocation: exit %d", agent, r.code)
		}
	}
	if r := op(t, exitDenied, cfg, "cards", "revoke", a); !strings.Contains(r.stderr, "card-revoked") {
		t.Errorf("revoke again: %q", r.stderr)
	}
	if text := op(t, exitOK, cfg, "cards", "show", c).stdout; !strings.Contains(text, "state    revoked (revoked ") {
		t.Errorf("show of a revoked child:\n%s", text)
	}

	// Text output of revoke, with and without descendants.
	x := jsonID(t, op(t, exitOK, cfg, "cards", "grant", "-json", "-agent", "research", "tool:invoke echo --...").stdout)
	y := jsonID(t, op(t, exitOK, cfg, "cards", "derive", "-json", x, "-to", "coder", "tool:invoke echo --message=*").stdout)
	if r := op(t, exitOK, cfg, "cards", "revoke", y); r.stdout != "revoked 1 card: "+y+" (no card was derived from it)\n" {
		t.Errorf("revoke text: %q", r.stdout)
	}
	z := jsonID(t, op(t, exitOK, cfg, "cards", "derive", "-json", x, "-to", "coder", "tool:invoke echo --message=*").stdout)
	if r := op(t, exitOK, cfg, "cards", "revoke", x); r.stdout != "revoked 2 cards: "+x+" and the 1 derived from it\n" {
		t.Errorf("revoke text: %q", r.stdout)
	}
	if text := op(t, exitOK, cfg, "cards", "show", z).stdout; !strings.Contains(text, "state    revoked") {
		t.Errorf("the derived card after its parent's revocation:\n%s", text)
	}
	// And the text of grant: what the card would newly allow, then the card.
	r = op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-expires", "24h", "tool:invoke echo --message=hi")
	if !regexp.MustCompile(`(?s)^what would newly be possible, .*\ncard \S+ granted to agent "research", expires \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n$`).MatchString(r.stdout) {
		t.Errorf("grant text: %q", r.stdout)
	}
}

// TestCardsDenyAndCeiling: -deny forbids across the wallet whatever other
// cards allow; -ceiling caps the wallet; neither allows anything itself.
func TestCardsDenyAndCeiling(t *testing.T) {
	t.Parallel()
	cfg, cache := agentsConfig(t), t.TempDir()
	op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "tool:invoke echo --...")
	deny := jsonID(t, op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-deny", "-json", "tool:invoke echo --message=secret* --...",
		"-cache", cache, "-isolation", "process").stdout)
	for input, want := range map[string]int{`{"message":"hi"}`: exitOK, `{"message":"secret plans"}`: exitDenied} {
		if r := callAs(t, cfg, cache, "research", input); r.code != want {
			t.Errorf("-deny: %s: exit %d, want %d (%s)", input, r.code, want, r.stderr)
		}
	}
	// The deny card alone allows nothing.
	op(t, exitOK, cfg, "cards", "grant", "-agent", "helper", "-deny", "tool:invoke echo --...", "-cache", cache, "-isolation", "process")
	if r := callAs(t, cfg, cache, "helper", `{"message":"hi"}`); r.code != exitDenied {
		t.Errorf("a -deny card allowed a call: exit %d", r.code)
	}
	op(t, exitOK, cfg, "cards", "revoke", deny)

	op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-ceiling", "tool:invoke echo --message=ok")
	for input, want := range map[string]int{`{"message":"ok"}`: exitOK, `{"message":"secret plans"}`: exitDenied, `{"message":"hi"}`: exitDenied} {
		if r := callAs(t, cfg, cache, "research", input); r.code != want {
			t.Errorf("-ceiling: %s: exit %d, want %d (%s)", input, r.code, want, r.stderr)
		}
	}
	var shown []map[string]any
	_ = json.Unmarshal([]byte(op(t, exitOK, cfg, "cards", "ls", "-agent", "research", "-json").stdout), &shown)
	if len(shown) != 3 || shown[2]["upper_positive"] == nil || shown[2]["lower_positive"] != nil || shown[1]["upper_negative"] == nil {
		t.Errorf("the cards as stored: %v", shown)
	}
}

// TestCardsDenyEveryCall is issue 22's deny card that did not deny. A
// prohibition matches a call's arguments exactly as an allowing grant does
// (CARDS.md A4 with A10): -deny 'tool:invoke echo' would forbid only a call
// of echo without arguments, which echo's schema refuses (it requires
// message), so the CLI refuses it, nothing is written, and the message
// names the --... form; that form forbids every call of echo, and the
// refusal names the deny card to revoke.
func TestCardsDenyEveryCall(t *testing.T) {
	t.Parallel()
	cfg, cache := agentsConfig(t), t.TempDir()
	db := filepath.Join(filepath.Dir(cfg), "maiden-state.db")
	hello := `{"message":"hello"}`
	op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "tool:invoke echo --message=hello")
	if r := callAs(t, cfg, cache, "research", hello); r.code != exitOK {
		t.Fatalf("the allow card: exit %d, stderr %q", r.code, r.stderr)
	}
	before := storeCards(t, db)

	// A prohibition that can match no call echo's schema accepts.
	r := op(t, exitUsage, cfg, "cards", "grant", "-agent", "research", "-deny", "tool:invoke echo", "-cache", cache, "-isolation", "process")
	for _, want := range []string{
		`GRANT 1 "tool:invoke echo" would forbid nothing`,
		`its input schema requires the argument "message"`,
		"maiden cards grant -agent research -deny 'tool:invoke echo --...'",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("-deny 'tool:invoke echo': stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := storeCards(t, db); n != before {
		t.Errorf("a refused -deny wrote a card: %d cards, had %d", n, before)
	}
	if r := callAs(t, cfg, cache, "research", hello); r.code != exitOK {
		t.Fatalf("after the refused -deny: exit %d, stderr %q", r.code, r.stderr)
	}

	// One that a call escapes by adding an argument: installed, with a
	// warning that names the --... form.
	r = op(t, exitOK, cfg, "cards", "grant", "-agent", "helper", "-deny", "tool:invoke echo --message=hello", "-cache", cache, "-isolation", "process")
	for _, want := range []string{
		`warning: GRANT 1 "tool:invoke echo --message=hello" forbids only calls whose arguments it all names`,
		"a call of echo that also passes any argument its input schema does not list is not forbidden",
		"maiden cards grant -agent helper -deny 'tool:invoke echo --message=hello --...'",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("-deny 'tool:invoke echo --message=hello': stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	// The form the refusal named: every call of echo is forbidden, and
	// the refusal names the deny card.
	r = op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-deny", "-json", "tool:invoke echo --...", "-cache", cache, "-isolation", "process")
	deny := jsonID(t, r.stdout)
	if r.stderr != "" {
		t.Errorf("-deny 'tool:invoke echo --...' warned: %q", r.stderr)
	}
	r = callAs(t, cfg, cache, "research", hello)
	want := fmt.Sprintf(`card %s of agent "research" forbids tool:invoke echo --message=hello (its upper-negative grant "tool:invoke echo --..."; only revoking that card lifts it: maiden cards revoke %s)`, deny, deny)
	if r.code != exitDenied || !strings.Contains(r.stderr, want) {
		t.Fatalf("with the deny card: exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, exitDenied, want)
	}
}

// TestCardsRefusals: every bad input is refused with a clear message and
// exit code, and nothing is written.
func TestCardsRefusals(t *testing.T) {
	t.Parallel()
	cfg := agentsConfig(t)
	db := filepath.Join(filepath.Dir(cfg), "maiden-state.db")
	parent := jsonID(t, op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-expires", "1h", "-json", "tool:invoke echo --message=*").stdout)
	revoked := jsonID(t, op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "-json", "tool:invoke echo --...").stdout)
	op(t, exitOK, cfg, "cards", "revoke", revoked)
	before := storeCards(t, db)
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"malformed grant", []string{"cards", "grant", "-agent", "research", "tool:invoke echo", "tool:invok echo"}, exitUsage,
			[]string{"GRANT 2:", `grant "tool:invok echo": at column 6: expected`, "tool:invok echo\n       ^"}},
		{"malformed derived grant", []string{"cards", "derive", parent, "-to", "coder", "tool:invoke echo message=x"}, exitUsage,
			[]string{"GRANT 1:", "at column", "expected"}},
		{"undeclared agent", []string{"cards", "grant", "-agent", "ghost", "tool:invoke echo"}, exitUsage,
			[]string{`unknown agent "ghost": not declared in ` + cfg + " (its agents: coder, helper, research)"}},
		{"token for an undeclared agent", []string{"agents", "token", "ghost"}, exitUsage,
			[]string{`unknown agent "ghost": not declared in ` + cfg}},
		{"derive to an undeclared agent", []string{"cards", "derive", parent, "-to", "ghost", "tool:invoke echo --message=x"}, exitUsage,
			[]string{`unknown agent "ghost"`}},
		{"derive from an unknown card", []string{"cards", "derive", "nosuchcard", "-to", "coder", "tool:invoke echo --message=x"}, exitUsage,
			[]string{"unknown card"}},
		{"derive that broadens", []string{"cards", "derive", parent, "-to", "coder", "tool:invoke echo --..."}, exitDenied,
			[]string{"lower-bound-too-broad"}},
		{"derive that outlives its parent", []string{"cards", "derive", parent, "-to", "coder", "-expires", "2h", "tool:invoke echo --message=x"}, exitDenied,
			[]string{"card-expired"}},
		{"derive from a revoked card", []string{"cards", "derive", revoked, "-to", "coder", "tool:invoke echo --message=x"}, exitDenied,
			[]string{"card-revoked"}},
		{"revoke an unknown card", []string{"cards", "revoke", "nosuchcard"}, exitUsage, []string{"unknown card"}},
		{"show an unknown card", []string{"cards", "show", "nosuchcard"}, exitUsage, []string{"unknown card"}},
		{"ls of an unknown agent", []string{"cards", "ls", "-agent", "ghost"}, exitUsage, []string{`unknown agent "ghost"`}},
		{"revoke an unknown token", []string{"agents", "revoke-token", "0123456789abcdef"}, exitUsage, []string{"unknown token"}},
		{"-deny with -ceiling", []string{"cards", "grant", "-agent", "research", "-deny", "-ceiling", "tool:invoke echo"}, exitUsage,
			[]string{"exclude each other"}},
		{"no grant", []string{"cards", "grant", "-agent", "research"}, exitUsage, []string{"usage: maiden cards grant"}},
		{"no agent", []string{"cards", "grant", "tool:invoke echo"}, exitUsage, []string{"usage: maiden cards grant"}},
		{"bad expiry", []string{"cards", "grant", "-agent", "research", "-expires", "-1h", "tool:invoke echo"}, exitUsage,
			[]string{"must be positive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := op(t, tc.code, cfg, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout %q", r.stdout)
			}
			if n := storeCards(t, db); n != before {
				t.Errorf("%d cards after a refusal, %d before", n, before)
			}
		})
	}

	// A configuration without [agents] has no cards to give.
	plain := agentTOML(t, map[string]string{"echo": ""})
	r := op(t, exitUsage, plain, "cards", "ls")
	if !strings.Contains(r.stderr, `declares no [agents]: every call runs as the implicit agent "default", allowed everything`) {
		t.Errorf("cards ls without [agents]: %q", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(plain), "maiden-state.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a store was created for a file without agents: %v", err)
	}
}

// TestAgentsTokens: a token is printed once, listed by ID only, and stops
// authenticating when revoked.
func TestAgentsTokens(t *testing.T) {
	t.Parallel()
	cfg := agentsConfig(t)
	db := filepath.Join(filepath.Dir(cfg), "maiden-state.db")
	var minted struct{ Agent, Token string }
	r := op(t, exitOK, cfg, "agents", "token", "research", "-json")
	var keys map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil || len(keys) != 2 {
		t.Fatalf(`token -json: want {"agent", "token"}, got %q`, r.stdout)
	}
	_ = json.Unmarshal([]byte(r.stdout), &minted)
	text := op(t, exitOK, cfg, "agents", "token", "coder")
	second := strings.TrimSpace(text.stdout)
	if strings.Count(text.stdout, "\n") != 1 || !strings.Contains(text.stderr, "shown once") {
		t.Errorf("token text: stdout %q, stderr %q", text.stdout, text.stderr)
	}

	for tok, agent := range map[string]string{minted.Token: "research", second: "coder"} {
		if got, err := statetest.Authenticate(t, db, tok); err != nil || got != agent {
			t.Fatalf("Authenticate(minted token) = %q, %v; want %q", got, err, agent)
		}
	}

	var ls []struct {
		Name     string
		Declared bool
		Tokens   []admin.TokenInfo
	}
	out := op(t, exitOK, cfg, "agents", "ls", "-json").stdout
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 || ls[0].Name != "coder" || ls[2].Name != "research" || len(ls[2].Tokens) != 1 || len(ls[1].Tokens) != 0 || !ls[2].Declared {
		t.Fatalf("agents ls -json: %s", out)
	}
	id := ls[2].Tokens[0].ID
	// mdn_ID_SECRET, where SECRET is base64url and may itself hold "_":
	// the secret is all after the second "_", not after the last.
	secretOf := func(tok string) string {
		parts := strings.SplitN(tok, "_", 3)
		if len(parts) != 3 || len(parts[2]) < 40 {
			t.Fatalf("token %q is not mdn_ID_SECRET", tok)
		}
		return parts[2]
	}
	lsText := op(t, exitOK, cfg, "agents", "ls").stdout
	for _, o := range []string{out, lsText} {
		if strings.Contains(o, secretOf(minted.Token)) || strings.Contains(o, secretOf(second)) {
			t.Fatalf("agents ls shows a secret:\n%s", o)
		}
	}
	if !strings.Contains(lsText, "research  declared in ") || !strings.Contains(lsText, "token "+id+"  created ") || !strings.Contains(lsText, "helper  declared in "+cfg+"\n  no tokens") {
		t.Errorf("agents ls:\n%s", lsText)
	}

	if r := op(t, exitOK, cfg, "agents", "revoke-token", id); r.stdout != fmt.Sprintf("revoked token %s of agent \"research\"\n", id) {
		t.Errorf("revoke-token text: %q", r.stdout)
	}
	if _, err := statetest.Authenticate(t, db, minted.Token); !errors.Is(err, statetest.ErrBadToken) {
		t.Fatalf("a revoked token still authenticates: %v", err)
	}
	if got, err := statetest.Authenticate(t, db, second); err != nil || got != "coder" {
		t.Fatalf("revoking one token ended another: %q, %v", got, err)
	}
	if !strings.Contains(op(t, exitOK, cfg, "agents", "ls").stdout, "token "+id) || !strings.Contains(op(t, exitOK, cfg, "agents", "ls").stdout, "revoked ") {
		t.Errorf("agents ls does not show the revocation")
	}
	// An agent removed from agent.toml is still listed, as the store's only.
	src, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(src), "[agents.helper]\ntools = [\"echo\"]\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if lsText := op(t, exitOK, cfg, "agents", "ls").stdout; !strings.Contains(lsText, "helper  only in the state store") {
		t.Errorf("agents ls after removing helper:\n%s", lsText)
	}
}

// TestStateFlagAndAgentFlag: -state names the store the CLI and the call
// path both use; tools -agent lists what that agent sees; check says what
// the file declares.
func TestStateFlagAndAgentFlag(t *testing.T) {
	t.Parallel()
	cfg, cache := agentsConfig(t), t.TempDir()
	other := filepath.Join(t.TempDir(), "other.db")
	op(t, exitOK, cfg, "cards", "grant", "-state", other, "-agent", "research", "tool:invoke echo --...")
	if r := callAs(t, cfg, cache, "research", `{"message":"hi"}`, "-state", other); r.code != exitOK {
		t.Fatalf("call with -state: exit %d, %s", r.code, r.stderr)
	}
	if r := callAs(t, cfg, cache, "research", `{"message":"hi"}`); r.code != exitDenied {
		t.Fatalf("call on the default store, which holds no card: exit %d", r.code)
	}
	if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-isolation", "process", "echo", "{}"); r.code != exitUsage || !strings.Contains(r.stderr, "needs an agent") {
		t.Errorf("call without -agent: exit %d, %q", r.code, r.stderr)
	}

	r := cli(t, "", "tools", "-config", cfg, "-cache", cache, "-isolation", "process", "-agent", "research", "-json")
	var tools []struct{ Name string }
	if err := json.Unmarshal([]byte(r.stdout), &tools); err != nil || len(tools) != 1 || tools[0].Name != "echo" {
		t.Errorf("tools -agent research: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "tools", "-config", cfg, "-cache", cache, "-isolation", "process", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &tools); err != nil || len(tools) != 2 {
		t.Errorf("tools: %s", r.stdout)
	}
	if r := cli(t, "", "tools", "-config", cfg, "-cache", cache, "-agent", "ghost"); r.code != exitUsage || !strings.Contains(r.stderr, "ghost") {
		t.Errorf("tools -agent ghost: exit %d, %q", r.code, r.stderr)
	}

	r = cli(t, "", "check", "-config", cfg, "-cache", cache, "-isolation", "process", "-state", other)
	if r.code != exitOK || !strings.Contains(r.stdout, "agents coder, helper, research; state store "+other) {
		t.Errorf("check: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	plain := agentTOML(t, map[string]string{"echo": ""})
	r = cli(t, "", "check", "-config", plain, "-cache", cache, "-isolation", "process")
	if r.code != exitOK || !strings.Contains(r.stdout, `no [agents]: every call runs as the implicit agent "default", allowed everything`) {
		t.Errorf("check without agents: exit %d, %q", r.code, r.stdout)
	}
}
