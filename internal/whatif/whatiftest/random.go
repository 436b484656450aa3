package whatiftest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/whatif"
)

// Agents are the agents of a random trail.
var Agents = []string{"a0", "a1", "a2", "a3"}

// GrantPool is what random cards are made of: globs, a trailing --...,
// command words and positionals, hosts, secrets.
var GrantPool = []string{
	"tool:invoke t0 --...", "tool:invoke t0 --to=a*", "tool:invoke t0 --to=alice --n=1",
	"tool:invoke t1 --q=*", "tool:invoke t1 --q=cat*", "tool:invoke t1 --q=* --n=*",
	"tool:invoke t2", "tool:invoke t2 --...", "tool:invoke t3 --flag --...",
	"tool:invoke git log --...", "tool:invoke git log --max-count=5 -- README.md", "tool:invoke git status",
	"tool:invoke git --...", "tool:invoke t0@" + CompA + " --...", "tool:invoke t1@" + CompB + " --q=*",
	"tool:invoke fs_read --path=/srv/**", "tool:invoke fs_write --...", "tool:invoke fs_list --path=/srv", "tool:invoke web_fetch --...", "tool:invoke web_fetch --url=https://api.example.com/v1",
	"network:connect api.example.com:443", "network:connect *.example.com", "network:connect *:443", "network:connect 10.0.0.1",
	"secret:use K0", "secret:use *", "secret:use K1",
	"secret:reveal K0", "secret:reveal *",
}

// FSPool is what a card's fs grants are made of: subtrees, one level, a
// whole class, and a subtree inside another (an exception's).
var FSPool = []string{"fs:read /srv/**", "fs:write /srv/work/**", "fs /data/**", "fs:read /srv/work/secret/**", "fs:read /home/*", "fs:read /**", "fs /home/**"}

// Grants parses grants (the test fails, or Grants panics without t, on
// one that does not).
func Grants(t testing.TB, ss ...string) []cards.Grant {
	var out []cards.Grant
	for _, s := range ss {
		g, err := grant.Parse(s)
		if err != nil {
			if t == nil {
				panic(fmt.Sprintf("Parse(%q): %v", s, err))
			}
			t.Helper()
			t.Fatalf("Parse(%q): %v", s, err)
		}
		out = append(out, cards.Grant{Grant: g})
	}
	return out
}

// RandomCards are n cards of the Agents made at now: lower-positive
// grants with occasional exceptions, prohibitions and ceilings, grants
// for one recipient, expired and revoked cards, and cards derived into
// other agents' wallets.
func RandomCards(t testing.TB, rng *rand.Rand, n int, now time.Time) []cards.Card {
	pick := func(k int) []cards.Grant {
		var out []cards.Grant
		for range k {
			g := Grants(t, GrantPool[rng.IntN(len(GrantPool))])[0]
			if rng.IntN(10) == 0 {
				g.Recipient = Agents[rng.IntN(len(Agents))]
			}
			out = append(out, g)
		}
		return out
	}
	pickFS := func() []cards.Grant { return Grants(t, FSPool[rng.IntN(len(FSPool))]) }
	var cs []cards.Card
	for i := range n {
		c := cards.Card{ID: fmt.Sprintf("c%03d", i), Holder: Agents[rng.IntN(len(Agents))], Manager: "operator", Created: now.Add(-time.Hour)}
		c.LowerPos = pick(1 + rng.IntN(3))
		fs := rng.IntN(3) == 0
		if fs {
			c.LowerPos = append(c.LowerPos, pickFS()...)
		}
		switch rng.IntN(14) {
		case 0:
			c.LowerNeg = pick(1)
			if fs {
				c.LowerNeg = pickFS()
			}
		case 1:
			c.LowerPos, c.UpperNeg = nil, pick(1)
			if fs {
				c.UpperNeg = pickFS()
			}
		case 2:
			if rng.IntN(3) == 0 { // a ceiling: everything but t2, t3 and fs_*
				c.UpperPos = Grants(t, "tool:invoke t0 --...", "tool:invoke t1 --...", "tool:invoke git --...", "tool:invoke web_fetch --...", "network:connect *", "secret:use *", "secret:reveal *", "fs:read /**")
			}
		case 3:
			c.Expires = now.Add(-time.Minute)
		case 4:
			c.Revoked = now.Add(-time.Minute)
		case 5:
			c.Expires = now.Add(time.Hour)
		}
		if i > 0 && rng.IntN(6) == 0 {
			c.Parents = []string{cs[rng.IntN(len(cs))].ID}
		}
		cs = append(cs, c)
	}
	return cs
}

// Two components the tools of a random trail run (or none known).
var (
	CompA = "sha256:" + strings.Repeat("a1", 32)
	CompB = "sha256:" + strings.Repeat("b2", 32)
	Comps = []string{"", CompA, CompB}
)

var (
	values = []string{"alice", "anna", "bob", "cat", "cats", "dog", "1", "5", "x y", "--", "*", "é"}
	argsOf = []string{"to", "q", "n", "flag"}
	hosts  = []string{"api.example.com", "www.example.com", "example.org", "10.0.0.1", "::1"}
	ports  = []int{443, 80, 8443}
	secs   = []string{"K0", "K1", "K2"}
)

// builtinCalls are calls of maiden's built-in tools (their tool:invoke is
// the cards' like any tool's, and a file built-in's path is decided by the
// agent's fs cards too: Trail.CallWith; the session boundary's own checks
// of their paths are not the cards' and not recorded as decisions).
var builtinCalls = [][2]string{
	{"fs_read", "--path=/srv/work/a.txt"}, {"fs_read", "--path=/etc/passwd"}, {"fs_write", "--content=x --path=/srv/work/b.txt"},
	{"fs_list", "--path=/srv"}, {"web_fetch", "--url=https://api.example.com/v1"}, {"web_fetch", "--url=https://example.org/"},
}

// RandomRendering is a call of t0 to t3, of git (a command tool, as a
// wrapped CLI renders) or of a built-in tool, with random arguments, its
// canonical rendering.
func RandomRendering(rng *rand.Rand) (tool, rendered string) {
	if rng.IntN(8) == 0 {
		c := builtinCalls[rng.IntN(len(builtinCalls))]
		return c[0], c[1]
	}
	var args []grant.Arg
	for _, name := range argsOf {
		switch rng.IntN(3) {
		case 0:
			args = append(args, grant.Arg{Name: name, Form: grant.FormValue, Value: values[rng.IntN(len(values))]})
		case 1:
			if name == "flag" {
				args = append(args, grant.Arg{Name: name, Form: grant.FormTrue})
			}
		}
	}
	grant.SortArgs(args)
	if rng.IntN(4) == 0 {
		cmd := [][]string{{"log"}, {"status"}, {"remote", "add"}}[rng.IntN(3)]
		var pos []string
		if rng.IntN(2) == 0 {
			pos = []string{"README.md", "a b"}[:1+rng.IntN(2)]
		}
		return "git", grant.CommandRendering(cmd, args, pos)
	}
	return fmt.Sprintf("t%d", rng.IntN(4)), grant.Rendering(args)
}

// dirsOffered are the directories a session's boundary offers a call's
// tool (session.PreopensFor's result), written or not.
var dirsOffered = []string{"/srv/work", "/srv/data", "/data/x", "/home/u", "/srv/work/secret/keys"}

// RandomPlan is a call whose input middleware layers rewrite (one or two
// times, into another call of the same tool) in half the cases, and whose
// session offers up to three directories in the other half and in a
// quarter of the first; some calls of t0 and t1 are an import's whose
// credential the call path asks secret:use of (Plan.Credential).
func RandomPlan(rng *rand.Rand, agent string) Plan {
	tool, r := RandomRendering(rng)
	// The component follows from the rendering, so the generator's
	// sequence (the rest of the trail) does not depend on it.
	p := Plan{Agent: agent, Tool: tool, Comp: Comps[len(r)%len(Comps)], Rendered: []string{r}}
	if (tool == "t0" || tool == "t1") && len(r)%2 == 1 {
		// An imported tool whose import sends a credential (and runs no
		// component of maiden's), decided by the same token.
		p.Comp, p.Credential = "", secs[len(r)/2%len(secs)]
	}
	if rng.IntN(2) == 0 {
		for range 1 + rng.IntN(2) {
			for {
				t2, r2 := RandomRendering(rng)
				if t2 == tool {
					p.Rendered = append(p.Rendered, r2)
					break
				}
			}
		}
		if rng.IntN(4) != 0 {
			return p
		}
	}
	for range 1 + rng.IntN(3) {
		p.Dirs = append(p.Dirs, Preopen{Dir: dirsOffered[rng.IntN(len(dirsOffered))], Write: rng.IntN(2) == 0})
	}
	if fileVerb(tool) != "" || p.Credential != "" {
		p.Dirs = nil // a file built-in is handed no directory (its path is decided instead: CallWith), nor an import
	}
	return p
}

// RandomTrail records n varied decisions on cs at at: 40% plain calls
// (one in eight of a built-in tool), 30% calls rewritten by middleware or
// given a session's directories (or both), 20% requests through the
// egress gate (a tool's http-fetch or web_fetch's request, with a
// credential or not, or a wrapped CLI's CONNECT), 10% reveals (some
// refused by the binding).
func RandomTrail(t testing.TB, rng *rand.Rand, cs []cards.Card, at time.Time, n int) *Trail {
	tr := &Trail{T: t, Cards: cs, At: at, Plans: map[int64]Plan{}}
	for range n {
		agent := Agents[rng.IntN(len(Agents))]
		switch k := rng.IntN(10); {
		case k < 3:
			tr.CallWith(RandomPlan(rng, agent))
		case k < 7:
			tool, r := RandomRendering(rng)
			tr.CallOf(agent, tool, r, Comps[rng.IntN(len(Comps))])
		case k < 9:
			host, port := hosts[rng.IntN(len(hosts))], ports[rng.IntN(len(ports))]
			if rng.IntN(4) == 0 {
				tr.Tunnel(agent, "git", host, port)
				break
			}
			cred := ""
			if rng.IntN(2) == 0 {
				cred = secs[rng.IntN(len(secs))]
			}
			tr.Fetch(agent, []string{"fetcher", "web_fetch"}[rng.IntN(2)], host, port, cred)
		default:
			tr.Reveal(agent, "vault", secs[rng.IntN(len(secs))], rng.IntN(4) != 0)
		}
	}
	return tr
}

// Two bindings of a tool's code and policy, as approval requests and the
// always-cards minted from them name them.
var (
	BindingA = [2]string{"sha256:" + strings.Repeat("0a", 32), `{"v":"a"}`}
	BindingB = [2]string{"sha256:" + strings.Repeat("0b", 32), `{"v":"b"}`}
)

// AlwaysCards are each agent's always-cards, made at now: one bound to
// BindingA, one to BindingB, and one granted bound to nothing.
func AlwaysCards(t testing.TB, now time.Time) []cards.Card {
	var cs []cards.Card
	for _, a := range Agents {
		for i, c := range []struct{ grant, bound string }{
			{"approve:always t0 --to=a* --...", bindingKey(BindingA)},
			{"approve:always t0 --...", bindingKey(BindingB)},
			{"approve:always t1 --q=cat* --...", ""},
		} {
			cs = append(cs, cards.Card{ID: fmt.Sprintf("always-%s-%d", a, i), Holder: a, Manager: "operator", Created: now.Add(-time.Hour),
				Spec: cards.Spec{LowerPos: Grants(t, c.grant), Bound: c.bound}})
		}
	}
	return cs
}

func bindingKey(b [2]string) string { return whatif.BindingKey(b[0], b[1]) }

// RandomApprovals records n calls of t0 and t1 through an approve layer
// that may approve always (ApproveLayer), under BindingA or BindingB: a
// human asked, or an always-card's standing approval.
func RandomApprovals(rng *rand.Rand, tr *Trail, n int) {
	for i := range n {
		var tool, r string
		for tool != "t0" && tool != "t1" {
			tool, r = RandomRendering(rng)
		}
		b := BindingA
		if rng.IntN(2) == 0 {
			b = BindingB
		}
		tr.ApproveLayer(Approved{Agent: Agents[rng.IntN(len(Agents))], Tool: tool, Inputs: []string{r}, ToolDigest: b[0], Policy: b[1],
			Request: fmt.Sprintf("apr_%d", i)})
	}
}
