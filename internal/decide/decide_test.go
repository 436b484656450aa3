package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func gs(t testing.TB, ss ...string) []cards.Grant {
	t.Helper()
	var out []cards.Grant
	for _, s := range ss {
		g, err := grant.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		out = append(out, cards.Grant{Grant: g})
	}
	return out
}

func call(t testing.TB, tool, input string) grant.Target {
	t.Helper()
	args, err := grant.Render([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	return grant.ToolTarget(tool, args)
}

func wallet(cs ...cards.Card) *cards.Wallet { return cards.NewWallet("research", t0, cs) }

func card(id string, s cards.Spec) cards.Card { return cards.Card{ID: id, Spec: s} }

// TestDecide is the one decision over every kind of question, allowed and
// denied, with the CARDS.md scenario each row stands for. Each row pins
// the whole Decision as the audit trail records it (api.Decision), so a
// decision that answers right for the wrong reason (another card, another
// bound) fails too.
func TestDecide(t *testing.T) {
	reveal := decide.Binding{Tool: "vault", Secrets: []string{"API_KEY", "OTHER"}, Reveal: []string{"API_KEY"}}
	for _, tc := range []struct {
		name  string
		basis decide.Basis
		q     decide.Question
		want  api.Decision
	}{
		// --- fs paths ---
		{"A1 lower-positive fs:read /data/** allows read /data/a",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "fs:read /data/**")}))},
			decide.Access("read", "/data/a"),
			api.Decision{Allow: true, Rule: "card c1: lower-positive fs:read /data/**", Card: "c1", Bound: "lower-positive", Grant: "fs:read /data/**", Target: "fs:read /data/a"}},
		{"A2 lower-negative of the same card denies read /data/s/x",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "fs:read /data/**"), LowerNeg: gs(t, "fs:read /data/s/**")}))},
			decide.Access("read", "/data/s/x"),
			api.Decision{Reason: `no card of agent "research" allows fs:read /data/s/x: card c1 excepts it (its lower-negative grant "fs:read /data/s/**") (grant it: maiden cards grant -agent research 'fs:read /data/s/x')`,
				Rule: "card c1: lower-negative fs:read /data/s/**", Card: "c1", Bound: "lower-negative", Grant: "fs:read /data/s/**", Target: "fs:read /data/s/x",
				Fix: "maiden cards grant -agent research 'fs:read /data/s/x'"}},
		{"fs:write is not fs:read",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "fs:read /data/**")}))},
			decide.Access("write", "/data/a"),
			api.Decision{Reason: `no card of agent "research" allows fs:write /data/a (grant it: maiden cards grant -agent research 'fs:write /data/a')`,
				Rule: "no card", Target: "fs:write /data/a", Fix: "maiden cards grant -agent research 'fs:write /data/a'"}},
		{"a path that is not clean is refused, not cleaned",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "fs:read /**")}))},
			decide.Access("read", "/data/../etc/passwd"),
			api.Decision{Reason: `the path cannot be checked against the agent's cards: malformed target: path "/data/../etc/passwd": must be clean (no empty, "." or ".." segments)`, Rule: decide.PolicyTarget}},
		{"an fs verb that is neither read nor write is refused",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "fs /**")}))},
			decide.Access("exec", "/bin/sh"),
			api.Decision{Reason: `the path cannot be checked against the agent's cards: verb "exec" is not read or write`, Rule: decide.PolicyTarget}},

		// --- card operations ---
		{"card:revoke on a card allows revoking it",
			decide.Basis{Wallet: wallet(card("k1", cards.Spec{LowerPos: gs(t, "card:revoke k2")}))},
			decide.Operate("revoke", "k2"),
			api.Decision{Allow: true, Rule: "card k1: lower-positive card:revoke k2", Card: "k1", Bound: "lower-positive", Grant: "card:revoke k2", Target: "card:revoke k2"}},
		{"card:revoke is not card:derive",
			decide.Basis{Wallet: wallet(card("k1", cards.Spec{LowerPos: gs(t, "card:revoke k2")}))},
			decide.Operate("derive", "k2"),
			api.Decision{Reason: `no card of agent "research" allows card:derive k2 (grant it: maiden cards grant -agent research 'card:derive k2')`,
				Rule: "no card", Target: "card:derive k2", Fix: "maiden cards grant -agent research 'card:derive k2'"}},
		{"A4 card: an upper-negative spans the wallet",
			decide.Basis{Wallet: wallet(card("k1", cards.Spec{LowerPos: gs(t, "card:inspect *")}), card("k3", cards.Spec{UpperNeg: gs(t, "card:inspect k2")}))},
			decide.Operate("inspect", "k2"),
			api.Decision{Reason: `card k3 of agent "research" forbids card:inspect k2 (its upper-negative grant "card:inspect k2"; only revoking that card lifts it: maiden cards revoke k3)`,
				Rule: "card k3: upper-negative card:inspect k2", Card: "k3", Bound: "upper-negative", Grant: "card:inspect k2", Target: "card:inspect k2", Fix: "maiden cards revoke k3"}},
		{"a verb that is not a card verb is refused",
			decide.Basis{Wallet: wallet(card("k1", cards.Spec{LowerPos: gs(t, "card *")}))},
			decide.Operate("delete", "k2"),
			api.Decision{Reason: `the card operation cannot be checked against the agent's cards: verb "delete" is not a card verb`, Rule: decide.PolicyTarget}},

		// --- tool invocations ---
		{"A10 tool:invoke search --pattern=cart allows --pattern=cart",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke search --pattern=cart")}))},
			decide.Invoke(call(t, "search", `{"pattern":"cart"}`)),
			api.Decision{Allow: true, Rule: "card c1: lower-positive tool:invoke search --pattern=cart", Card: "c1", Bound: "lower-positive", Grant: "tool:invoke search --pattern=cart", Target: "tool:invoke search --pattern=cart"}},
		{"A10 and denies --pattern=x, naming the grant to paste",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke search --pattern=cart")}))},
			decide.Invoke(call(t, "search", `{"pattern":"x"}`)),
			api.Decision{Reason: `no card of agent "research" allows tool:invoke search --pattern=x (grant it: maiden cards grant -agent research 'tool:invoke search --pattern=x')`,
				Rule: "no card", Target: "tool:invoke search --pattern=x", Fix: "maiden cards grant -agent research 'tool:invoke search --pattern=x'"}},
		{`A11 an escaped \* is a literal asterisk: --pattern=cart denied`,
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, `tool:invoke search --pattern=\*`)}))},
			decide.Invoke(call(t, "search", `{"pattern":"cart"}`)),
			api.Decision{Reason: `no card of agent "research" allows tool:invoke search --pattern=cart (grant it: maiden cards grant -agent research 'tool:invoke search --pattern=cart')`,
				Rule: "no card", Target: "tool:invoke search --pattern=cart", Fix: "maiden cards grant -agent research 'tool:invoke search --pattern=cart'"}},
		{"A11 (extension) an unescaped * is a glob: --pattern=cart allowed",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke search --pattern=*")}))},
			decide.Invoke(call(t, "search", `{"pattern":"cart"}`)),
			api.Decision{Allow: true, Rule: "card c1: lower-positive tool:invoke search --pattern=*", Card: "c1", Bound: "lower-positive", Grant: "tool:invoke search --pattern=*", Target: "tool:invoke search --pattern=cart"}},
		{"A12 a bound tool with no card is denied",
			decide.Basis{Wallet: wallet()},
			decide.Invoke(call(t, "search", `{}`)),
			api.Decision{Reason: `no card of agent "research" allows tool:invoke search (grant it: maiden cards grant -agent research 'tool:invoke search')`,
				Rule: "no card", Target: "tool:invoke search", Fix: "maiden cards grant -agent research 'tool:invoke search'"}},
		{"A3 a lower-negative is per card: another card's exception does not deny",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke x")}), card("c2", cards.Spec{LowerPos: gs(t, "tool:invoke y"), LowerNeg: gs(t, "tool:invoke x")}))},
			decide.Invoke(call(t, "x", `{}`)),
			api.Decision{Allow: true, Rule: "card c1: lower-positive tool:invoke x", Card: "c1", Bound: "lower-positive", Grant: "tool:invoke x", Target: "tool:invoke x"}},
		{"A4 an upper-negative spans the wallet",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke x")}), card("c2", cards.Spec{UpperNeg: gs(t, "tool:invoke x")}))},
			decide.Invoke(call(t, "x", `{}`)),
			api.Decision{Reason: `card c2 of agent "research" forbids tool:invoke x (its upper-negative grant "tool:invoke x"; only revoking that card lifts it: maiden cards revoke c2)`,
				Rule: "card c2: upper-negative tool:invoke x", Card: "c2", Bound: "upper-negative", Grant: "tool:invoke x", Target: "tool:invoke x", Fix: "maiden cards revoke c2"}},
		{"A4 an upper-positive ceiling spans the wallet",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke x")}), card("c2", cards.Spec{UpperPos: gs(t, "tool:invoke y")}))},
			decide.Invoke(call(t, "x", `{}`)),
			api.Decision{Reason: `card c2 of agent "research" caps its wallet at "tool:invoke y", which does not cover tool:invoke x (only revoking that card lifts it: maiden cards revoke c2)`,
				Rule: "card c2: upper-positive", Card: "c2", Bound: "upper-positive", Target: "tool:invoke x", Fix: "maiden cards revoke c2"}},
		{"approve:always is its own class: a tool:invoke card does not approve always",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...")}))},
			decide.AlwaysApprove(grant.AlwaysTarget("pay", nil)),
			api.Decision{Reason: `no card of agent "research" allows approve:always pay (grant it: maiden cards grant -agent research 'approve:always pay')`,
				Rule: "no card", Target: "approve:always pay", Fix: "maiden cards grant -agent research 'approve:always pay'"}},
		{"an approve:always card approves always",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "approve:always pay --...")}))},
			decide.AlwaysApprove(grant.AlwaysTarget("pay", nil)),
			api.Decision{Allow: true, Rule: "card c1: lower-positive approve:always pay --...", Card: "c1", Bound: "lower-positive", Grant: "approve:always pay --...", Target: "approve:always pay"}},
		{"a tool question with another class's target is refused",
			decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "secret:use *")}))},
			decide.Invoke(grant.SecretTarget("use", "KEY")),
			api.Decision{Reason: `the call cannot be checked against the agent's cards: a tool:invoke question with a "secret" target`, Rule: decide.PolicyTarget, Target: "secret:use KEY"}},

		// --- network destinations ---
		{"network:connect *.example.com:443 allows api.example.com:443",
			decide.Basis{Wallet: wallet(card("n1", cards.Spec{LowerPos: gs(t, "network:connect *.example.com:443")}))},
			decide.Connect("api.example.com", 443),
			api.Decision{Allow: true, Rule: "card n1: lower-positive network:connect *.example.com:443", Card: "n1", Bound: "lower-positive", Grant: "network:connect *.example.com:443", Target: "network:connect api.example.com:443"}},
		{"network: the host is normalised as grants are (case)",
			decide.Basis{Wallet: wallet(card("n1", cards.Spec{LowerPos: gs(t, "network:connect api.example.com")}))},
			decide.Connect("API.Example.COM", 8443),
			api.Decision{Allow: true, Rule: "card n1: lower-positive network:connect api.example.com", Card: "n1", Bound: "lower-positive", Grant: "network:connect api.example.com", Target: "network:connect api.example.com:8443"}},
		{"network: another port is denied",
			decide.Basis{Wallet: wallet(card("n1", cards.Spec{LowerPos: gs(t, "network:connect *.example.com:443")}))},
			decide.Connect("api.example.com", 80),
			api.Decision{Reason: `no card of agent "research" allows network:connect api.example.com:80 (grant it: maiden cards grant -agent research 'network:connect api.example.com:80')`,
				Rule: "no card", Target: "network:connect api.example.com:80", Fix: "maiden cards grant -agent research 'network:connect api.example.com:80'"}},
		{"A4 network: an upper-negative spans the wallet",
			decide.Basis{Wallet: wallet(card("n1", cards.Spec{LowerPos: gs(t, "network:connect *")}), card("n2", cards.Spec{UpperNeg: gs(t, "network:connect 169.254.169.254")}))},
			decide.Connect("169.254.169.254", 80),
			api.Decision{Reason: `card n2 of agent "research" forbids network:connect 169.254.169.254:80 (its upper-negative grant "network:connect 169.254.169.254"; only revoking that card lifts it: maiden cards revoke n2)`,
				Rule: "card n2: upper-negative network:connect 169.254.169.254", Card: "n2", Bound: "upper-negative", Grant: "network:connect 169.254.169.254", Target: "network:connect 169.254.169.254:80", Fix: "maiden cards revoke n2"}},
		{"network: a wildcard is not a host",
			decide.Basis{Wallet: wallet(card("n1", cards.Spec{LowerPos: gs(t, "network:connect *")}))},
			decide.Connect("*.example.com", 443),
			api.Decision{Reason: `the destination cannot be checked against the agent's cards: malformed target: host "*.example.com": a wildcard is not a host`, Rule: decide.PolicyTarget}},

		// --- secrets: use and reveal ---
		{"secret:use API_KEY allows using it",
			decide.Basis{Wallet: wallet(card("s1", cards.Spec{LowerPos: gs(t, "secret:use API_KEY")}))},
			decide.Use("API_KEY"),
			api.Decision{Allow: true, Rule: "card s1: lower-positive secret:use API_KEY", Card: "s1", Bound: "lower-positive", Grant: "secret:use API_KEY", Target: "secret:use API_KEY"}},
		{"secret:use does not reveal (A17: no secret:reveal card, denied)",
			decide.Basis{Wallet: wallet(card("s1", cards.Spec{LowerPos: gs(t, "secret:use API_KEY")})), Binding: reveal},
			decide.Reveal("API_KEY"),
			api.Decision{Reason: `no card of agent "research" allows secret:reveal API_KEY (grant it: maiden cards grant -agent research 'secret:reveal API_KEY')`,
				Rule: "no card", Target: "secret:reveal API_KEY", Fix: "maiden cards grant -agent research 'secret:reveal API_KEY'"}},
		{"A17 a secret:reveal card and the binding's reveal allow it",
			decide.Basis{Wallet: wallet(card("s1", cards.Spec{LowerPos: gs(t, "secret:reveal API_KEY")})), Binding: reveal},
			decide.Reveal("API_KEY"),
			api.Decision{Allow: true, Rule: "card s1: lower-positive secret:reveal API_KEY", Card: "s1", Bound: "lower-positive", Grant: "secret:reveal API_KEY", Target: "secret:reveal API_KEY"}},
		{"reveal: a secret the binding does not reveal is refused before the cards",
			decide.Basis{Wallet: wallet(card("s1", cards.Spec{LowerPos: gs(t, "secret:reveal *")})), Binding: reveal},
			decide.Reveal("OTHER"),
			api.Decision{Reason: "revealing OTHER is not allowed for tool vault: it is not in reveal (tools.vault.reveal in agent.toml, as the agent's binding narrows it)",
				Rule: "tools.vault.reveal", Target: "secret:reveal OTHER"}},
		{"reveal: in reveal but not in the tool's secrets is refused",
			decide.Basis{Wallet: wallet(card("s1", cards.Spec{LowerPos: gs(t, "secret:reveal *")})), Binding: decide.Binding{Tool: "vault", Reveal: []string{"API_KEY"}}},
			decide.Reveal("API_KEY"),
			api.Decision{Reason: "revealing API_KEY is not allowed for tool vault: it is not in reveal (tools.vault.reveal in agent.toml, as the agent's binding narrows it)",
				Rule: "tools.vault.reveal", Target: "secret:reveal API_KEY"}},
		{"reveal: the implicit agent holds every card",
			decide.Basis{Implicit: true, Binding: reveal},
			decide.Reveal("API_KEY"),
			api.Decision{Allow: true, Rule: decide.PolicyImplicit, Target: "secret:reveal API_KEY"}},
		{"reveal: the implicit agent is still bound by its binding",
			decide.Basis{Implicit: true, Binding: reveal},
			decide.Reveal("OTHER"),
			api.Decision{Reason: "revealing OTHER is not allowed for tool vault: it is not in reveal (tools.vault.reveal in agent.toml, as the agent's binding narrows it)",
				Rule: "tools.vault.reveal", Target: "secret:reveal OTHER"}},
		{"a declared agent without its wallet is refused, never guessed",
			decide.Basis{Binding: reveal},
			decide.Reveal("API_KEY"),
			api.Decision{Reason: "the agent's cards are not known to this call", Rule: decide.PolicyNoWallet, Target: "secret:reveal API_KEY"}},
		{"an unknown kind of question is refused",
			decide.Basis{Implicit: true},
			decide.Question{},
			api.Decision{Reason: "unknown question (kind 0)", Rule: decide.PolicyTarget}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withoutWallet(t, tc.basis, decide.Decide(tc.basis, tc.q).API())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// withoutWallet checks that d names the revision of the wallet that
// decided (a replay compares it with the wallet it replays on), and
// returns d without it, for a table that pins everything else.
func withoutWallet(t *testing.T, b decide.Basis, d api.Decision) api.Decision {
	t.Helper()
	cardsAsked := d.Card != "" || d.Rule == "no card"
	switch {
	case cardsAsked && (b.Wallet == nil || d.Wallet != b.Wallet.RevisionText()):
		t.Errorf("decision %+v: wallet %q, want the deciding wallet's revision", d, d.Wallet)
	case !cardsAsked && d.Wallet != "":
		t.Errorf("decision %+v: no wallet decided, yet it names wallet %q", d, d.Wallet)
	}
	d.Wallet = ""
	return d
}

// TestDecideLongTarget: a call with a huge input is not quoted in full; the
// fix names the command to write a pattern with.
func TestDecideLongTarget(t *testing.T) {
	d := decide.Decide(decide.Basis{Wallet: wallet()}, decide.Invoke(call(t, "search", `{"q":"`+strings.Repeat("a", 5000)+`"}`)))
	if d.Allow || d.Fix != "maiden cards grant -agent research" || len(d.Reason) > 500 || !strings.Contains(d.Reason, "grant a pattern with "+d.Fix) {
		t.Fatalf("long target: allow %v, fix %q, reason %q", d.Allow, d.Fix, d.Reason)
	}
}

// TestDecideAllowedAllocatesNothing: the call path decides once per call
// and again per http-fetch; the answer is rendered only when recorded. A
// destination allocates only what normalising its host does.
func TestDecideAllowedAllocatesNothing(t *testing.T) {
	b := decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke search --...", "network:connect *.example.com:443", "secret:use API_KEY")}))}
	normalise := testing.AllocsPerRun(100, func() { _, _ = grant.NetworkTarget("api.example.com", 443) })
	for _, tc := range []struct {
		name string
		q    decide.Question
		max  float64
	}{
		{"tool", decide.Invoke(call(t, "search", `{"pattern":"cart"}`)), 0},
		{"network", decide.Connect("api.example.com", 443), normalise},
		{"secret", decide.Use("API_KEY"), 0},
	} {
		if n := testing.AllocsPerRun(100, func() {
			if !decide.Decide(b, tc.q).Allow {
				t.Fatal("denied")
			}
		}); n > tc.max {
			t.Errorf("%s: an allowed decision allocates %v times, want at most %v", tc.name, n, tc.max)
		}
	}
	// What the trail records of an allowed call (its grant's text) is
	// rendered once per pinned wallet, not once per call.
	d := decide.Decide(b, decide.Use("API_KEY"))
	if g := d.GrantText(); g != "secret:use API_KEY" {
		t.Fatalf("GrantText = %q", g)
	}
	if n := testing.AllocsPerRun(100, func() { _ = decide.Decide(b, decide.Use("API_KEY")).GrantText() }); n != 0 {
		t.Errorf("the text of an allowing grant allocates %v times per decision after the first", n)
	}
}

// BenchmarkDecide is one allowed tool decision through the one function,
// against the wallet's own Decide in the same run (the ratio is the cost
// of the seam).
func BenchmarkDecide(b *testing.B) {
	w := wallet(card("c1", cards.Spec{LowerPos: gs(b, "tool:invoke search --...")}))
	tg := call(b, "search", `{"pattern":"cart","n":3}`)
	b.Run("wallet", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !w.Decide(tg).Allow {
				b.Fatal("denied")
			}
		}
	})
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		basis := decide.Basis{Wallet: w}
		for b.Loop() {
			if !decide.Decide(basis, decide.Invoke(tg)).Allow {
				b.Fatal("denied")
			}
		}
	})
}

// TestOperateVerbs: every card verb of the grant language is a card
// question, so Operate refuses only what no grant could allow.
func TestOperateVerbs(t *testing.T) {
	b := decide.Basis{Wallet: wallet(card("k1", cards.Spec{LowerPos: gs(t, "card *")}))}
	for _, v := range grant.Verbs(grant.Card) {
		if d := decide.Decide(b, decide.Operate(v, "k2")).API(); !d.Allow || d.Target != "card:"+v+" k2" {
			t.Errorf("card:%s: %+v", v, d)
		}
	}
}

// TestAccessTree: a directory handed over whole needs its whole subtree,
// with no exception or prohibition that may reach inside it; the denial
// names the card that refused.
func TestAccessTree(t *testing.T) {
	for _, tc := range []struct {
		name  string
		basis decide.Basis
		q     decide.Question
		want  api.Decision
	}{
		{"fs:read /srv/** hands over /srv/work",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}))},
			decide.AccessTree("read", "/srv/work"),
			api.Decision{Allow: true, Rule: "card f1: lower-positive fs:read /srv/**", Card: "f1", Bound: "lower-positive", Grant: "fs:read /srv/**", Target: "fs:read /srv/work/**"}},
		{"the directory alone is not its subtree",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/work", "fs:read /srv/work/*")}))},
			decide.AccessTree("read", "/srv/work"),
			api.Decision{Reason: `no card of agent "research" allows all of fs:read /srv/work/**, without an exception that may reach inside it, so the directory is not handed over whole`,
				Rule: "no card", Target: "fs:read /srv/work/**"}},
		{"read is not write",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}))},
			decide.AccessTree("write", "/srv/work"),
			api.Decision{Reason: `no card of agent "research" allows all of fs:write /srv/work/**, without an exception that may reach inside it, so the directory is not handed over whole`,
				Rule: "no card", Target: "fs:write /srv/work/**"}},
		{"an exception inside the subtree of the allowing card refuses it",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**"), LowerNeg: gs(t, "fs:read /srv/work/secret")}))},
			decide.AccessTree("read", "/srv/work"),
			api.Decision{Reason: `no card of agent "research" allows all of fs:read /srv/work/**, without an exception that may reach inside it, so the directory is not handed over whole`,
				Rule: "no card", Target: "fs:read /srv/work/**"}},
		{"another card allows it without the exception",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**"), LowerNeg: gs(t, "fs:read /srv/work/secret")}), card("f2", cards.Spec{LowerPos: gs(t, "fs /srv/work/**")}))},
			decide.AccessTree("read", "/srv/work"),
			api.Decision{Allow: true, Rule: "card f2: lower-positive fs:* /srv/work/**", Card: "f2", Bound: "lower-positive", Grant: "fs:* /srv/work/**", Target: "fs:read /srv/work/**"}},
		{"A4 an upper-negative that may reach inside refuses it",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}), card("f3", cards.Spec{UpperNeg: gs(t, "fs:read /srv/work/*/key")}))},
			decide.AccessTree("read", "/srv"),
			api.Decision{Reason: `card f3 of agent "research" may forbid part of fs:read /srv/** (its upper-negative grant "fs:read /srv/work/*/key"), so the directory is not handed over whole`,
				Rule: "card f3: upper-negative fs:read /srv/work/*/key", Card: "f3", Bound: "upper-negative", Grant: "fs:read /srv/work/*/key", Target: "fs:read /srv/**"}},
		{"a negative grant whose wildcard may reach inside counts against it",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}), card("f3", cards.Spec{UpperNeg: gs(t, "fs:read /srv/*/key")}))},
			decide.AccessTree("read", "/srv/work"),
			api.Decision{Reason: `card f3 of agent "research" may forbid part of fs:read /srv/work/** (its upper-negative grant "fs:read /srv/*/key"), so the directory is not handed over whole`,
				Rule: "card f3: upper-negative fs:read /srv/*/key", Card: "f3", Bound: "upper-negative", Grant: "fs:read /srv/*/key", Target: "fs:read /srv/work/**"}},
		{"A4 a ceiling that does not cover the subtree refuses it",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}), card("f3", cards.Spec{UpperPos: gs(t, "fs:read /srv/work/**")}))},
			decide.AccessTree("read", "/srv"),
			api.Decision{Reason: `card f3 of agent "research" caps its wallet below fs:read /srv/**, so the directory is not handed over whole`,
				Rule: "card f3: upper-positive", Card: "f3", Bound: "upper-positive", Target: "fs:read /srv/**"}},
		{"the implicit agent holds every card",
			decide.Basis{Implicit: true},
			decide.AccessTree("write", "/srv/"),
			api.Decision{Allow: true, Rule: decide.PolicyImplicit, Target: "fs:write /srv/**"}},
		{"a declared agent without its wallet is refused",
			decide.Basis{},
			decide.AccessTree("read", "/srv"),
			api.Decision{Reason: "the agent's cards are not known to this call", Rule: decide.PolicyNoWallet}},
		{"a verb that is neither read nor write is refused",
			decide.Basis{Wallet: wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs /**")}))},
			decide.AccessTree("exec", "/srv"),
			api.Decision{Reason: `the directory cannot be checked against the agent's cards: verb "exec" is not read or write`, Rule: decide.PolicyTarget}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, withoutWallet(t, tc.basis, decide.Decide(tc.basis, tc.q).API())); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}
