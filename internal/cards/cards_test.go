package cards

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/grant"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func gs(t testing.TB, ss ...string) []Grant {
	t.Helper()
	var out []Grant
	for _, s := range ss {
		g, err := grant.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		out = append(out, Grant{Grant: g})
	}
	return out
}

func fsT(t testing.TB, verb, p string) grant.Target {
	t.Helper()
	tg, err := grant.FSTarget(verb, p)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func toolT(t testing.TB, tool, input string) grant.Target {
	t.Helper()
	args, err := grant.Render([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	return grant.ToolTarget(tool, args)
}

// TestDecideScenarios is CARDS.md's decision scenarios, one row each.
func TestDecideScenarios(t *testing.T) {
	x := toolT(t, "x", `{}`)
	for _, tc := range []struct {
		name   string
		cards  []Card
		target grant.Target
		allow  bool
		rule   string // Decision.Rule() prefix
	}{
		{"A1 lower-positive fs:read /data/** allows /data/a",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "fs:read /data/**")}}},
			fsT(t, "read", "/data/a"), true, "card c1: lower-positive fs:read /data/**"},
		{"A2 lower-negative /data/s/** in the same card denies /data/s/x",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "fs:read /data/**"), LowerNeg: gs(t, "fs:read /data/s/**")}}},
			fsT(t, "read", "/data/s/x"), false, "card c1: lower-negative fs:read /data/s/**"},
		{"A2 the same card still allows /data/a",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "fs:read /data/**"), LowerNeg: gs(t, "fs:read /data/s/**")}}},
			fsT(t, "read", "/data/a"), true, "card c1: lower-positive"},
		{"A3 a lower-negative of another card does not deny",
			[]Card{
				{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
				{ID: "c2", Spec: Spec{LowerNeg: gs(t, "tool:invoke x")}},
			}, x, true, "card c1: lower-positive"},
		{"A3 an excepted card and a clean card: the clean one allows",
			[]Card{
				{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x"), LowerNeg: gs(t, "tool:invoke x")}},
				{ID: "c2", Spec: Spec{LowerPos: gs(t, "tool:invoke *")}},
			}, x, true, "card c2: lower-positive"},
		{"A4 an upper-negative of another card denies across the wallet",
			[]Card{
				{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
				{ID: "c2", Spec: Spec{UpperNeg: gs(t, "tool:invoke x")}},
			}, x, false, "card c2: upper-negative tool:invoke x"},
		{"A4 an upper-positive {Y} of another card is a ceiling across the wallet",
			[]Card{
				{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
				{ID: "c2", Spec: Spec{UpperPos: gs(t, "tool:invoke y")}},
			}, x, false, "card c2: upper-positive"},
		{"A4 a ceiling that covers the target lets it through",
			[]Card{
				{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
				{ID: "c2", Spec: Spec{UpperPos: gs(t, "tool:invoke y", "tool:invoke x*")}},
			}, x, true, "card c1: lower-positive"},
		// A prohibiting grant matches a call's arguments as an allowing
		// one does (A4 with A10's exact argument matching): without --...
		// it forbids only calls whose arguments it all names.
		{"A4+A10 upper-negative greet --... forbids greet --message=hello",
			[]Card{
				{ID: "allow", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --message=hello")}},
				{ID: "deny", Spec: Spec{UpperNeg: gs(t, "tool:invoke greet --...")}},
			}, toolT(t, "greet", `{"message":"hello"}`), false, "card deny: upper-negative tool:invoke greet --..."},
		{"A4+A10 upper-negative greet (no arguments) forbids only an argument-less call",
			[]Card{
				{ID: "allow", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --message=hello")}},
				{ID: "deny", Spec: Spec{UpperNeg: gs(t, "tool:invoke greet")}},
			}, toolT(t, "greet", `{"message":"hello"}`), true, "card allow: lower-positive"},
		{"A4+A10 upper-negative greet --message=hello is escaped by another argument",
			[]Card{
				{ID: "allow", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --message=hello --...")}},
				{ID: "deny", Spec: Spec{UpperNeg: gs(t, "tool:invoke greet --message=hello")}},
			}, toolT(t, "greet", `{"loud":true,"message":"hello"}`), true, "card allow: lower-positive"},
		{"A4+A10 upper-negative greet --message=hello --... is not",
			[]Card{
				{ID: "allow", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --message=hello --...")}},
				{ID: "deny", Spec: Spec{UpperNeg: gs(t, "tool:invoke greet --message=hello --...")}},
			}, toolT(t, "greet", `{"loud":true,"message":"hello"}`), false, "card deny: upper-negative"},
		{"A2+A10 lower-negative greet --... excepts every call of greet in its card",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --..."), LowerNeg: gs(t, "tool:invoke greet --...")}}},
			toolT(t, "greet", `{"message":"hello"}`), false, "card c1: lower-negative tool:invoke greet --..."},
		{"A10 tool:invoke search --pattern=cart allows --pattern=cart",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke search --pattern=cart")}}},
			toolT(t, "search", `{"pattern":"cart"}`), true, "card c1"},
		{"A10 tool:invoke search --pattern=cart denies --pattern=x",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke search --pattern=cart")}}},
			toolT(t, "search", `{"pattern":"x"}`), false, "no card"},
		{`A11 escaped --pattern=\* denies --pattern=cart`,
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, `tool:invoke search --pattern=\*`)}}},
			toolT(t, "search", `{"pattern":"cart"}`), false, "no card"},
		{"A11 unescaped --pattern=* (extension) allows --pattern=cart",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke search --pattern=*")}}},
			toolT(t, "search", `{"pattern":"cart"}`), true, "card c1"},
		{"A12 a bound tool with no card is denied",
			nil, toolT(t, "weather", `{"city":"Berlin"}`), false, "no card"},
		{"A17 no secret:reveal card: reveal denied",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "secret:use API_KEY")}}},
			grant.SecretTarget("reveal", "API_KEY"), false, "no card"},
		{"A17 secret:reveal card allows reveal",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "secret:reveal API_KEY")}}},
			grant.SecretTarget("reveal", "API_KEY"), true, "card c1"},
		{"expired card does not count",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x"), Expires: t0}}},
			x, false, "no card"},
		{"card expiring later counts",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x"), Expires: t0.Add(time.Second)}}},
			x, true, "card c1"},
		{"revoked card does not count",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}, Revoked: t0.Add(-time.Hour)}},
			x, false, "no card"},
		{"expired ceiling no longer caps",
			[]Card{
				{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
				{ID: "c2", Spec: Spec{UpperPos: gs(t, "tool:invoke y"), Expires: t0.Add(-time.Minute)}},
			}, x, true, "card c1"},
		{"grant for another recipient is ignored",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: []Grant{{Grant: gs(t, "tool:invoke x")[0].Grant, Recipient: "other"}}}}},
			x, false, "no card"},
		{"grant for this recipient counts",
			[]Card{{ID: "c1", Spec: Spec{LowerPos: []Grant{{Grant: gs(t, "tool:invoke x")[0].Grant, Recipient: "research"}}}}},
			x, true, "card c1"},
		{"upper-negative for another recipient does not forbid",
			[]Card{
				{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
				{ID: "c2", Spec: Spec{UpperNeg: []Grant{{Grant: gs(t, "tool:invoke x")[0].Grant, Recipient: "other"}}}},
			}, x, true, "card c1"},
		{"deny by default: empty wallet", nil, x, false, "no card"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWallet("research", t0, tc.cards)
			d := w.Decide(tc.target)
			if d.Allow != tc.allow || !strings.HasPrefix(d.Rule(), tc.rule) {
				t.Fatalf("Decide(%s) = allow %v, rule %q, reason %q; want allow %v, rule %q…", tc.target, d.Allow, d.Rule(), d.Reason, tc.allow, tc.rule)
			}
			if !d.Allow && (d.Reason == "" || !strings.Contains(d.Reason, tc.target.String())) {
				t.Fatalf("a denial must name the target: %q", d.Reason)
			}
		})
	}
}

// TestDenialMessage pins the message the issue specifies, and checks that
// the suggested grant, once granted, allows the call.
func TestDenialMessage(t *testing.T) {
	target := toolT(t, "weather", `{"city":"Berlin"}`)
	d := NewWallet("research", t0, nil).Decide(target)
	want := `no card of agent "research" allows tool:invoke weather --city=Berlin (grant it: maiden cards grant -agent research 'tool:invoke weather --city=Berlin')`
	if d.Reason != want {
		t.Fatalf("reason:\n got %s\nwant %s", d.Reason, want)
	}
	// The pasted grant works, for awkward inputs too.
	for _, in := range []string{`{"city":"Berlin"}`, `{"q":"it's * \"x\"","n":[1,{"b":true}],"v":false}`, `{"no-x":true,"x":""}`} {
		target := toolT(t, "weather", in)
		d := NewWallet("o'brien", t0, nil).Decide(target)
		_, quoted, ok := strings.Cut(d.Reason, "grant it: maiden cards grant -agent ")
		if !ok {
			t.Fatalf("no hint in %q", d.Reason)
		}
		words := shellSplit(t, strings.TrimSuffix(quoted, ")"))
		if len(words) != 2 || words[0] != "o'brien" {
			t.Fatalf("hint %q splits into %q", quoted, words)
		}
		g, err := grant.Parse(words[1])
		if err != nil {
			t.Fatalf("hint grant %q: %v", words[1], err)
		}
		w := NewWallet("o'brien", t0, []Card{{ID: "c", Spec: Spec{LowerPos: Any(g)}}})
		if !w.Decide(target).Allow {
			t.Fatalf("the hinted grant %q does not allow %s", words[1], in)
		}
	}
}

// shellSplit reads words the way a POSIX shell reads single quotes and
// backslash-escaped quotes (all the hint uses).
func shellSplit(t *testing.T, s string) []string {
	var out []string
	var cur strings.Builder
	in, inWord := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in && c == '\'':
			in = false
		case in:
			cur.WriteByte(c)
		case c == '\'':
			in, inWord = true, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if in {
		t.Fatalf("unterminated quote in %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

func TestDenialOfAHugeInput(t *testing.T) {
	big := `{"q":"` + strings.Repeat("x", 100_000) + `"}`
	d := NewWallet("research", t0, nil).Decide(toolT(t, "search", big))
	if d.Allow || len(d.Reason) > 4096 || !strings.Contains(d.Reason, "tool:invoke search with these 1 arguments") {
		t.Fatalf("reason (%d bytes): %.300s", len(d.Reason), d.Reason)
	}
}

func TestUpperDenialNamesCard(t *testing.T) {
	w := NewWallet("research", t0, []Card{
		{ID: "c1", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
		{ID: "cap", Spec: Spec{UpperPos: gs(t, "tool:invoke y")}},
	})
	d := w.Decide(toolT(t, "x", `{}`))
	if d.Allow || !strings.Contains(d.Reason, "card cap") || !strings.Contains(d.Reason, "maiden cards revoke cap") {
		t.Fatalf("reason %q", d.Reason)
	}
}

// TestDenyCardNamesCard: bob holds an allow card for greet --message=hello
// and a deny card for every call of greet (CARDS.md A4); the refusal names
// the deny card, its grant and how to lift it.
func TestDenyCardNamesCard(t *testing.T) {
	w := NewWallet("bob", t0, []Card{
		{ID: "allow1", Spec: Spec{LowerPos: gs(t, "tool:invoke greet --message=hello")}},
		{ID: "deny1", Spec: Spec{UpperNeg: gs(t, "tool:invoke greet --...")}},
	})
	d := w.Decide(toolT(t, "greet", `{"message":"hello"}`))
	want := `card deny1 of agent "bob" forbids tool:invoke greet --message=hello (its upper-negative grant "tool:invoke greet --..."; only revoking that card lifts it: maiden cards revoke deny1)`
	if d.Allow || d.Card != "deny1" || d.Bound != "upper-negative" || d.Reason != want {
		t.Fatalf("Decide = %+v\nwant the reason %q", d, want)
	}
}

func TestCheckDerive(t *testing.T) {
	parent := Card{ID: "P", Spec: Spec{
		LowerPos: gs(t, "fs:read /data/**", "tool:invoke search --pattern=cart*"),
		LowerNeg: gs(t, "fs:read /data/s/**"),
	}}
	capped := Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke * --..."), UpperPos: gs(t, "tool:invoke search --...")}}
	expiring := Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke x"), Expires: t0.Add(time.Hour)}}
	for _, tc := range []struct {
		name   string
		parent Card
		child  Spec
		want   error
	}{
		{"narrower child accepted", parent, Spec{LowerPos: gs(t, "fs:read /data/a/**"), LowerNeg: gs(t, "fs:read /data/s/**")}, nil},
		{"A5 lower-positive /other/f under /data/** is lower-bound-too-broad", parent,
			Spec{LowerPos: gs(t, "fs:read /other/f"), LowerNeg: gs(t, "fs:read /data/s/**")}, ErrLowerBoundTooBroad},
		{"glob broadening is lower-bound-too-broad", parent,
			Spec{LowerPos: gs(t, "tool:invoke search --pattern=*"), LowerNeg: gs(t, "fs:read /data/s/**")}, ErrLowerBoundTooBroad},
		{"dropping a parent negative is lower-bound-too-broad", parent,
			Spec{LowerPos: gs(t, "fs:read /data/a/**")}, ErrLowerBoundTooBroad},
		{"a broader negative keeps the parent's", parent,
			Spec{LowerPos: gs(t, "fs:read /data/a/**"), LowerNeg: gs(t, "fs:read /data/**")}, nil},
		{"a lower-negative moved to upper-negative is kept", parent,
			Spec{LowerPos: gs(t, "fs:read /data/a/**"), UpperNeg: gs(t, "fs:read /data/s/**")}, nil},
		{"A6 parent ceiling, child without is upper-bound-too-broad", capped,
			Spec{LowerPos: gs(t, "tool:invoke search --q=x")}, ErrUpperBoundTooBroad},
		{"A6 child ceiling over the parent's is upper-bound-too-broad", capped,
			Spec{LowerPos: gs(t, "tool:invoke search --q=x"), UpperPos: gs(t, "tool:invoke * --...")}, ErrUpperBoundTooBroad},
		{"A6 child ceiling under the parent's accepted", capped,
			Spec{LowerPos: gs(t, "tool:invoke search --q=x"), UpperPos: gs(t, "tool:invoke search --q=*")}, nil},
		{"A7 parent expires in 1h, child in 2 days is card-expired", expiring,
			Spec{LowerPos: gs(t, "tool:invoke x"), Expires: t0.Add(48 * time.Hour)}, ErrCardExpired},
		{"A7 parent expires in 1h, child never is card-expired", expiring,
			Spec{LowerPos: gs(t, "tool:invoke x")}, ErrCardExpired},
		{"A7 child expiring with the parent accepted", expiring,
			Spec{LowerPos: gs(t, "tool:invoke x"), Expires: t0.Add(time.Hour)}, nil},
		{"A7 expired parent is card-expired", Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke x"), Expires: t0}},
			Spec{LowerPos: gs(t, "tool:invoke x"), Expires: t0}, ErrCardExpired},
		{"revoked parent is card-revoked", Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}, Revoked: t0},
			Spec{LowerPos: gs(t, "tool:invoke x")}, ErrCardRevoked},
		{"empty child", parent, Spec{}, ErrEmptyCard},
		{"child recipient narrower accepted", Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke x")}},
			Spec{LowerPos: []Grant{{Grant: gs(t, "tool:invoke x")[0].Grant, Recipient: "sub"}}}, nil},
		{"a bound approve:always card's child without the binding is lower-bound-too-broad",
			Card{ID: "P", Spec: Spec{LowerPos: gs(t, "approve:always pay --to=bob"), Bound: "tool=sha256:01 policy=sha256:02"}},
			Spec{LowerPos: gs(t, "approve:always pay --to=bob")}, ErrLowerBoundTooBroad},
		{"a bound card's child with another binding is lower-bound-too-broad",
			Card{ID: "P", Spec: Spec{LowerPos: gs(t, "approve:always pay --to=bob"), Bound: "tool=sha256:01 policy=sha256:02"}},
			Spec{LowerPos: gs(t, "approve:always pay --to=bob"), Bound: "tool=sha256:03 policy=sha256:02"}, ErrLowerBoundTooBroad},
		{"a bound card's child keeping the binding accepted",
			Card{ID: "P", Spec: Spec{LowerPos: gs(t, "approve:always pay --to=bob"), Bound: "tool=sha256:01 policy=sha256:02"}},
			Spec{LowerPos: gs(t, "approve:always pay --to=bob"), Bound: "tool=sha256:01 policy=sha256:02"}, nil},
		{"dropping a parent upper-negative is lower-bound-too-broad",
			Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke * --..."), UpperNeg: gs(t, "tool:invoke shutdown --...")}},
			Spec{LowerPos: gs(t, "tool:invoke search --q=x")}, ErrLowerBoundTooBroad},
		{"a parent upper-negative kept only as a lower-negative is lower-bound-too-broad",
			Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke * --..."), UpperNeg: gs(t, "tool:invoke shutdown --...")}},
			Spec{LowerPos: gs(t, "tool:invoke search --q=x"), LowerNeg: gs(t, "tool:invoke shutdown --...")}, ErrLowerBoundTooBroad},
		{"a parent negative kept only for another agent is lower-bound-too-broad", parent,
			Spec{LowerPos: gs(t, "fs:read /data/a/**"), LowerNeg: []Grant{{Grant: gs(t, "fs:read /data/s/**")[0].Grant, Recipient: "other"}}}, ErrLowerBoundTooBroad},
		{"a parent ceiling for a named agent, child without is upper-bound-too-broad",
			Card{ID: "P", Spec: Spec{LowerPos: gs(t, "tool:invoke * --..."), UpperPos: []Grant{{Grant: gs(t, "tool:invoke search --...")[0].Grant, Recipient: "sub"}}}},
			Spec{LowerPos: gs(t, "tool:invoke rm --...")}, ErrUpperBoundTooBroad},
		{"child recipient broader is lower-bound-too-broad",
			Card{ID: "P", Spec: Spec{LowerPos: []Grant{{Grant: gs(t, "tool:invoke x")[0].Grant, Recipient: "sub"}}}},
			Spec{LowerPos: gs(t, "tool:invoke x")}, ErrLowerBoundTooBroad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckDerive(tc.parent, tc.child, t0)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckDerive = %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "P") {
				t.Fatalf("error %q does not name the parent card", err)
			}
		})
	}
}

func TestChildInherits(t *testing.T) {
	parent := Card{ID: "P", Spec: Spec{
		LowerPos: gs(t, "tool:invoke * --..."), LowerNeg: gs(t, "tool:invoke rm --..."),
		UpperPos: gs(t, "tool:invoke * --..."), UpperNeg: gs(t, "tool:invoke shutdown"), Expires: t0.Add(time.Hour),
	}}
	child := Child(parent, []grant.Grant{gs(t, "tool:invoke search --q=x")[0].Grant}, time.Time{})
	if err := CheckDerive(parent, child, t0); err != nil {
		t.Fatal(err)
	}
	if !child.Expires.Equal(parent.Expires) {
		t.Fatalf("child expires %v, want the parent's %v", child.Expires, parent.Expires)
	}
	bound := Card{ID: "B", Spec: Spec{LowerPos: gs(t, "approve:always pay --..."), Bound: "tool=sha256:01 policy=sha256:02"}}
	if c := Child(bound, []grant.Grant{gs(t, "approve:always pay --to=bob")[0].Grant}, time.Time{}); c.Bound != bound.Bound || CheckDerive(bound, c, t0) != nil {
		t.Fatalf("a bound card's child is bound to %q, want %q", c.Bound, bound.Bound)
	}
	if err := CheckDerive(parent, Child(parent, nil, t0.Add(2*time.Hour)), t0); !errors.Is(err, ErrCardExpired) {
		t.Fatalf("a later explicit expiry must be refused, not clamped: %v", err)
	}
}

func TestCheckInstall(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want error
	}{
		{"A9 a card with only lower-negative grants is install-recipient-mismatch", Spec{LowerNeg: gs(t, "tool:invoke x")}, ErrInstallRecipientMismatch},
		{"positive grant for anyone", Spec{LowerPos: gs(t, "tool:invoke x")}, nil},
		{"a ceiling card installs", Spec{UpperPos: gs(t, "tool:invoke x")}, nil},
		{"a prohibition card installs", Spec{UpperNeg: gs(t, "tool:invoke x")}, nil},
		{"a prohibition for someone else", Spec{UpperNeg: []Grant{{Grant: gs(t, "tool:invoke x")[0].Grant, Recipient: "other"}}}, ErrInstallRecipientMismatch},
		{"positive grant for someone else", Spec{LowerPos: []Grant{{Grant: gs(t, "tool:invoke x")[0].Grant, Recipient: "other"}}}, ErrInstallRecipientMismatch},
		{"empty", Spec{}, ErrEmptyCard},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckInstall(tc.spec, "research"); tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckInstall = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestCascadeA8 is CARDS.md A8's cascade (the store test covers the
// second revocation's card-revoked) and random trees against a reference.
func TestCascadeA8(t *testing.T) {
	children := map[string][]string{"A": {"B"}, "B": {"C"}}
	got, err := Cascade("A", childFunc(children))
	if err != nil || !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("Cascade(A) = %v, %v; want [A B C]", got, err)
	}
}

func TestCascadeRandomTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(60)
		children := map[string][]string{}
		parents := map[string][]string{}
		for i := 1; i < n; i++ {
			// Each card has one or (sometimes) two earlier parents: a DAG.
			p := fmt.Sprint(rng.IntN(i))
			children[p] = append(children[p], fmt.Sprint(i))
			parents[fmt.Sprint(i)] = append(parents[fmt.Sprint(i)], p)
			if rng.IntN(5) == 0 {
				q := fmt.Sprint(rng.IntN(i))
				children[q] = append(children[q], fmt.Sprint(i))
				parents[fmt.Sprint(i)] = append(parents[fmt.Sprint(i)], q)
			}
		}
		root := fmt.Sprint(rng.IntN(n))
		got, err := Cascade(root, childFunc(children))
		if err != nil {
			t.Fatal(err)
		}
		// Reference: a card is revoked iff it is root or has a revoked parent
		// (cards are numbered so parents come first).
		revoked := map[string]bool{root: true}
		for i := 0; i < n; i++ {
			for _, p := range parents[fmt.Sprint(i)] {
				if revoked[p] {
					revoked[fmt.Sprint(i)] = true
				}
			}
		}
		var want []string
		for id := range revoked {
			want = append(want, id)
		}
		slices.Sort(want)
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if diff := cmp.Diff(want, sorted); diff != "" {
			t.Fatalf("round %d: cascade from %s (-want +got):\n%s", round, root, diff)
		}
	}
}

func childFunc(children map[string][]string) func([]string) ([]string, error) {
	return func(ids []string) ([]string, error) {
		var out []string
		for _, id := range ids {
			out = append(out, children[id]...)
		}
		return out, nil
	}
}

// TestBoundToDropsOtherBindings: an approve:always card minted from an
// approval counts only for the tool and policy it was bound to; asked for
// another binding, the wallet holds it no more and the standing approval
// it gave is refused.
func TestBoundToDropsOtherBindings(t *testing.T) {
	bound := Card{ID: "always", Spec: Spec{LowerPos: gs(t, "approve:always pay --to=bob"), Bound: "tool=sha256:01 policy=sha256:02"}}
	free := Card{ID: "free", Spec: Spec{LowerPos: gs(t, "tool:invoke pay --...")}}
	args, err := grant.Render([]byte(`{"to":"bob"}`))
	if err != nil {
		t.Fatal(err)
	}
	always := grant.AlwaysTarget("pay", args)
	w := NewWallet("a", t0, []Card{bound, free})
	if d := w.BoundTo(bound.Bound).Decide(always); !d.Allow || d.Card != "always" {
		t.Fatalf("bound to its own binding: allow=%v rule %q, want allowed by card always", d.Allow, d.Rule())
	}
	other := w.BoundTo("tool=sha256:03 policy=sha256:02")
	if ids := cardIDs(other.Cards()); !slices.Equal(ids, []string{"free"}) {
		t.Errorf("BoundTo(another binding) holds %v, want [free]: a card bound elsewhere does not count", ids)
	}
	if d := other.Decide(always); d.Allow {
		t.Errorf("a standing approval bound to another tool's code allowed %s by %s", always.String(), d.Rule())
	}
}

func cardIDs(cs []Card) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}
