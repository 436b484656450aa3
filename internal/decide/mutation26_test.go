package decide_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
)

// The tests of this file hold promises of Decide that the twenty-sixth
// mutation pass (docs/security-tests.md) found no test holding.

// TestDecideWalletBeforeImplicit: a wallet, when there is one, decides;
// the implicit flag beside it never widens it (the call path gives the
// implicit agent no wallet, and a declared agent's wallet must not be
// bypassed by a basis that also says implicit).
func TestDecideWalletBeforeImplicit(t *testing.T) {
	b := decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke y")})), Implicit: true}
	for _, tc := range []struct {
		q    decide.Question
		want api.Decision
	}{
		{decide.Invoke(call(t, "x", `{}`)),
			api.Decision{Reason: `no card of agent "research" allows tool:invoke x (grant it: maiden cards grant -agent research 'tool:invoke x')`,
				Rule: "no card", Target: "tool:invoke x", Fix: "maiden cards grant -agent research 'tool:invoke x'"}},
		{decide.AccessTree("read", "/srv"),
			api.Decision{Reason: `no card of agent "research" allows all of fs:read /srv/**, without an exception that may reach inside it, so the directory is not handed over whole`,
				Rule: "no card", Target: "fs:read /srv/**"}},
	} {
		if diff := cmp.Diff(tc.want, withoutWallet(t, b, decide.Decide(b, tc.q).API())); diff != "" {
			t.Errorf("a wallet and Implicit: Decide(%+v) (-want +got):\n%s", tc.q, diff)
		}
	}
}

// TestKindString: each kind is named as the grant language names it; the
// name is in the refusal of a question whose target is of another class.
func TestKindString(t *testing.T) {
	for k, want := range map[decide.Kind]string{
		decide.Tool: "tool:invoke", decide.Always: "approve:always", decide.Network: "network:connect",
		decide.SecretUse: "secret:use", decide.SecretReveal: "secret:reveal", decide.FS: "fs",
		decide.CardOp: "card", decide.Subtree: "fs subtree", 0: "Kind(0)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
	b := decide.Basis{Wallet: wallet(card("c1", cards.Spec{LowerPos: gs(t, "tool:invoke pay --...")}))}
	d := decide.Decide(b, decide.AlwaysApprove(call(t, "pay", `{}`))).API()
	want := api.Decision{Reason: `the call cannot be checked against the agent's cards: a approve:always question with a "tool" target`, Rule: decide.PolicyTarget, Target: "tool:invoke pay"}
	if diff := cmp.Diff(want, withoutWallet(t, b, d)); diff != "" {
		t.Errorf("an approve:always question with a tool:invoke target (-want +got):\n%s", diff)
	}
}

// subtreeCase is one AccessTree question and its whole decision.
type subtreeCase struct {
	name string
	w    *cards.Wallet
	verb string
	dir  string
	want api.Decision
}

func runSubtree(t *testing.T, cases []subtreeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := decide.Basis{Wallet: tc.w}
			if diff := cmp.Diff(tc.want, withoutWallet(t, b, decide.Decide(b, decide.AccessTree(tc.verb, tc.dir)).API())); diff != "" {
				t.Errorf("AccessTree(%s, %q) (-want +got):\n%s", tc.verb, tc.dir, diff)
			}
		})
	}
}

func allowTree(c, g, target string) api.Decision {
	return api.Decision{Allow: true, Rule: "card " + c + ": lower-positive " + g, Card: c, Bound: "lower-positive", Grant: g, Target: target}
}

// TestAccessTreeDirectoryForms: the root is handed over as /**, a trailing
// slash names the same directory, and a directory the grant language
// cannot name is refused as not a target (not as "no card").
func TestAccessTreeDirectoryForms(t *testing.T) {
	all := wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}))
	srv := wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**"), LowerNeg: gs(t, `fs:read "/srv/work/*/Login Data"`)}), card("f2", cards.Spec{LowerPos: gs(t, "fs:read /srv/work/**")}))
	runSubtree(t, []subtreeCase{
		{"the root", all, "read", "/", allowTree("f1", "fs:read /**", "fs:read /**")},
		{"a trailing slash is the same directory", srv, "read", "/srv/work/", allowTree("f2", "fs:read /srv/work/**", "fs:read /srv/work/**")},
		{"a relative directory is not a target", all, "read", "srv/work",
			api.Decision{Reason: `the directory cannot be checked against the agent's cards: malformed target: path "srv/work": must be absolute`, Rule: decide.PolicyTarget}},
	})
}

// TestAccessTreeNegativeForStar: a prohibition addressed to every agent
// (recipient "*") forbids as much as one addressed to none (CARDS.md A2,
// A4): the directory holding what it forbids is not handed over whole.
func TestAccessTreeNegativeForStar(t *testing.T) {
	star := func(s string) []cards.Grant {
		g := gs(t, s)
		g[0].Recipient = "*"
		return g
	}
	runSubtree(t, []subtreeCase{
		{"upper-negative", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /home/**")}), card("f2", cards.Spec{UpperNeg: star("fs:read /home/ann/.ssh/**")})), "read", "/home/ann",
			api.Decision{Reason: `card f2 of agent "research" may forbid part of fs:read /home/ann/** (its upper-negative grant "fs:read /home/ann/.ssh/**"), so the directory is not handed over whole`,
				Rule: "card f2: upper-negative fs:read /home/ann/.ssh/**", Card: "f2", Bound: "upper-negative", Grant: "fs:read /home/ann/.ssh/**", Target: "fs:read /home/ann/**"}},
		{"lower-negative", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /home/**"), LowerNeg: star("fs:read /home/ann/.ssh/**")})), "read", "/home/ann",
			api.Decision{Reason: `no card of agent "research" allows all of fs:read /home/ann/**, without an exception that may reach inside it, so the directory is not handed over whole`,
				Rule: "no card", Target: "fs:read /home/ann/**"}},
		{"a ceiling for every agent caps", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}), card("f2", cards.Spec{UpperPos: star("fs:read /srv/**")})), "read", "/home",
			api.Decision{Reason: `card f2 of agent "research" caps its wallet below fs:read /home/**, so the directory is not handed over whole`,
				Rule: "card f2: upper-positive", Card: "f2", Bound: "upper-positive", Target: "fs:read /home/**"}},
		{"a grant for every agent allows", wallet(card("f1", cards.Spec{LowerPos: star("fs:read /srv/**")})), "read", "/srv",
			allowTree("f1", "fs:read /srv/**", "fs:read /srv/**")},
	})
}

// TestAccessTreeNegativeOfEveryVerb: a prohibition of every verb (`fs
// PATH`) inside the directory, or of the directory itself, reaches inside
// it although fs:read DIR/** does not cover it (its verb is wider).
func TestAccessTreeNegativeOfEveryVerb(t *testing.T) {
	runSubtree(t, []subtreeCase{
		{"a file inside", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}), card("f2", cards.Spec{UpperNeg: gs(t, "fs /srv/work/secret")})), "read", "/srv",
			api.Decision{Reason: `card f2 of agent "research" may forbid part of fs:read /srv/** (its upper-negative grant "fs:* /srv/work/secret"), so the directory is not handed over whole`,
				Rule: "card f2: upper-negative fs:* /srv/work/secret", Card: "f2", Bound: "upper-negative", Grant: "fs:* /srv/work/secret", Target: "fs:read /srv/**"}},
		{"the directory itself", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /**")}), card("f2", cards.Spec{UpperNeg: gs(t, "fs /srv/work")})), "read", "/srv/work",
			api.Decision{Reason: `card f2 of agent "research" may forbid part of fs:read /srv/work/** (its upper-negative grant "fs:* /srv/work"), so the directory is not handed over whole`,
				Rule: "card f2: upper-negative fs:* /srv/work", Card: "f2", Bound: "upper-negative", Grant: "fs:* /srv/work", Target: "fs:read /srv/work/**"}},
	})
}

// TestAccessTreeNegativeElsewhere: only a prohibition that may reach
// inside the directory refuses it. One of a sibling whose name begins
// with the directory's (/srv/workshop beside /srv/work), one of another
// class, one of another verb, leave it to be handed over.
func TestAccessTreeNegativeElsewhere(t *testing.T) {
	runSubtree(t, []subtreeCase{
		{"a sibling directory with a longer name", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}), card("f2", cards.Spec{UpperNeg: gs(t, "fs /srv/workshop")})), "read", "/srv/work",
			allowTree("f1", "fs:read /srv/**", "fs:read /srv/work/**")},
		{"another file system path", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}), card("f2", cards.Spec{UpperNeg: gs(t, "fs:read /etc/shadow")})), "read", "/srv",
			allowTree("f1", "fs:read /srv/**", "fs:read /srv/**")},
		{"another class", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**"), LowerNeg: gs(t, "network:connect 169.254.169.254")}), card("f2", cards.Spec{UpperNeg: gs(t, "tool:invoke x", "card *")})), "read", "/srv",
			allowTree("f1", "fs:read /srv/**", "fs:read /srv/**")},
		{"another verb", wallet(card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**"), LowerNeg: gs(t, "fs:write /srv/work/**")}), card("f2", cards.Spec{UpperNeg: gs(t, "fs:write /srv/**")})), "read", "/srv",
			allowTree("f1", "fs:read /srv/**", "fs:read /srv/**")},
	})
}

// TestAccessTreeLaterCardsStillAsked: once a card allows the subtree, the
// cards after it are still asked for prohibitions and ceilings (CARDS.md
// A4: an upper bound spans the wallet), and the decision names the first
// allowing card and the grant of it that allowed.
func TestAccessTreeLaterCardsStillAsked(t *testing.T) {
	runSubtree(t, []subtreeCase{
		{"an upper-negative two cards later", wallet(
			card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}),
			card("f2", cards.Spec{LowerPos: gs(t, "tool:invoke x")}),
			card("f3", cards.Spec{UpperNeg: gs(t, "fs:read /srv/work/.env")})), "read", "/srv",
			api.Decision{Reason: `card f3 of agent "research" may forbid part of fs:read /srv/** (its upper-negative grant "fs:read /srv/work/.env"), so the directory is not handed over whole`,
				Rule: "card f3: upper-negative fs:read /srv/work/.env", Card: "f3", Bound: "upper-negative", Grant: "fs:read /srv/work/.env", Target: "fs:read /srv/**"}},
		{"a ceiling two cards later", wallet(
			card("f1", cards.Spec{LowerPos: gs(t, "fs:read /srv/**")}),
			card("f2", cards.Spec{LowerPos: gs(t, "tool:invoke x")}),
			card("f3", cards.Spec{UpperPos: gs(t, "fs:read /srv/work/**", "tool:invoke *")})), "read", "/srv",
			api.Decision{Reason: `card f3 of agent "research" caps its wallet below fs:read /srv/**, so the directory is not handed over whole`,
				Rule: "card f3: upper-positive", Card: "f3", Bound: "upper-positive", Target: "fs:read /srv/**"}},
		{"the first allowing card, by the grant that allowed", wallet(
			card("f1", cards.Spec{LowerPos: gs(t, "fs:read /etc/**", "fs:read /srv/**")}),
			card("f2", cards.Spec{LowerPos: gs(t, "fs:read /**")})), "read", "/srv",
			allowTree("f1", "fs:read /srv/**", "fs:read /srv/**")},
	})
}

// TestRefusalNamesItsTarget: a refusal by policy carries the target it
// refused in the decision itself, not only in its rendering: the call path
// quotes it (pipeline's credentialRefusal names the credential beside it).
func TestRefusalNamesItsTarget(t *testing.T) {
	reveal := decide.Binding{Tool: "vault", Secrets: []string{"API_KEY"}, Reveal: []string{"API_KEY"}}
	for _, tc := range []struct {
		b    decide.Basis
		q    decide.Question
		want string
	}{
		{decide.Basis{}, decide.Use("TOKEN"), "secret:use TOKEN"},
		{decide.Basis{Implicit: true, Binding: reveal}, decide.Reveal("OTHER"), "secret:reveal OTHER"},
		{decide.Basis{Implicit: true}, decide.Invoke(grant.SecretTarget("use", "KEY")), "secret:use KEY"},
	} {
		if d := decide.Decide(tc.b, tc.q); d.Allow || d.Target != tc.want {
			t.Errorf("Decide(%+v): allow %v, Target %q; want refused, Target %q", tc.q, d.Allow, d.Target, tc.want)
		}
	}
}
