package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// realTrail is a state store whose audit trail a real Host wrote: calls
// of a JSON tool (echo) and a command tool (cmdecho), allowed and refused
// by the agents' cards, and the http-fetches (with and without a
// credential) and reveals of a Go tool (secretuser), each decided by the
// Host's own call path and recorded by its own encoders.
type realTrail struct {
	config string
	cards  map[string]string // grant text → the ID of the operator card that holds it alone
	// counts of what the Host was asked and answered
	echoAllowed, echoDenied, listAllowed, listDenied int
	echoRejected                                     int // by the validate layer's check
	remoteAllowed                                    int // cmdecho remote show: past the approve layer by the always-card
	fetchOK, fetchOther, reveals                     int
}

func newRealTrail(t *testing.T, n int) *realTrail {
	t.Helper()
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "ok") }), "api.example.com", "other.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.toml")
	body := fmt.Sprintf(`version = 1
[tools.echo]
path = %q
# Middleware conditions the replay passes through: research's echoes of
# hello-x are rejected by a check after the cards allowed them, and
# cmdecho's remote commands pass an approve layer by a standing
# approval.
middleware = [{ use = "validate", when = "agent == 'research'", check = "!args.message.startsWith('hello x')", message = "no hello x" }]
[tools.cmdecho]
path = %q
middleware = [{ use = "approve", when = "rendered.contains('remote')", reason = "remote commands", allow_always = true }]
[tools.secretuser]
path = %q
http_allow = ["api.example.com", "other.example.com"]
http_ports = [%s]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = [%q]
secrets = ["TOKEN", "SIGNING_KEY"]
reveal = ["SIGNING_KEY"]

[agents.research]
tools = ["echo", "cmdecho", "secretuser"]
grants = ["tool:invoke secretuser --..."]
[agents.ops]
tools = ["echo"]
grants = ["tool:invoke echo --message=ops*"]
`, testkit.Component(t, "echo"), testkit.Component(t, "cmdecho"), testkit.Component(t, "go/secretuser"), port, ca)
	if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := &realTrail{config: cfgPath, cards: map[string]string{}}
	// The operator's cards, one grant each so that each can be revoked
	// alone.
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := admin.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{
		"tool:invoke echo --message=hello*",
		"tool:invoke cmdecho list --city=*",
		"network:connect api.example.com",
		"secret:use TOKEN",
		"secret:reveal SIGNING_KEY",
		"tool:invoke cmdecho remote show -- origin",
		"approve:always cmdecho remote show -- origin",
	} {
		c, err := st.Grant(ctx, "research", admin.CardSpec{Allow: []string{g}})
		if err != nil {
			t.Fatal(err)
		}
		rt.cards[g] = c.ID
	}
	// An exception and a prohibition: hello-secret* is never echoed.
	forbid, err := st.Grant(ctx, "research", admin.CardSpec{Forbid: []string{"tool:invoke echo --message=hello-secret*"}})
	if err != nil {
		t.Fatal(err)
	}
	rt.cards["forbid"] = forbid.ID
	st.Close()

	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t),
		Resolver: testkit.Loopback("api.example.com", "other.example.com"),
		LookupSecret: func(name string) (string, bool) {
			return "value-of-" + name, name == "TOKEN" || name == "SIGNING_KEY"
		}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(agent, tool, input string) maiden.Result {
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: tool, Input: input})
		if err != nil {
			t.Fatalf("%s %s %s: %v", agent, tool, input, err)
		}
		return res
	}
	words := []string{"hello", "hello-world", "hello-secret", "hi", "ops-report", "ops", "hello x", "é"}
	cities := []string{"Paris", "Berlin", "", "Zürich"}
	for i := range n {
		switch i % 10 {
		case 0, 1, 2, 3, 4:
			agent := []string{"research", "ops"}[i%2]
			msg := fmt.Sprintf("%s-%d", words[(i/2)%len(words)], i%7)
			in, _ := json.Marshal(map[string]string{"message": msg})
			if res := call(agent, "echo", string(in)); res.OK {
				rt.echoAllowed++
			} else if res.Error.Kind == maiden.KindDenied {
				rt.echoDenied++
			} else if res.Error.Kind == maiden.KindInput && res.Error.Message == "no hello x" {
				rt.echoRejected++
			} else {
				t.Fatalf("echo %s: %+v", in, res.Error)
			}
		case 5, 6, 7:
			in := `{"command":"list","limit":3}`
			if c := cities[i%len(cities)]; c != "" {
				in = fmt.Sprintf(`{"command":"list","city":%q}`, c)
			}
			if i%3 == 0 {
				in = `{"command":"remote show","name":"origin"}`
			}
			if res := call("research", "cmdecho", in); res.OK {
				rt.listAllowed++
				if i%3 == 0 {
					rt.remoteAllowed++
				}
			} else if res.Error.Kind == maiden.KindDenied {
				rt.listDenied++
			} else {
				t.Fatalf("cmdecho %s: %+v", in, res.Error)
			}
		case 8:
			if i%40 != 8 {
				continue // a fetch is dearer: one in forty calls
			}
			host := []string{"api.example.com", "other.example.com"}[(i/40)%2]
			in := map[string]any{"mode": "fetch", "url": "https://" + host + ":" + port + "/", "token": ""}
			if (i/80)%2 == 0 {
				in["token"] = map[string]string{"$secret": "TOKEN"}
			}
			b, _ := json.Marshal(in)
			res := call("research", "secretuser", string(b))
			if host == "api.example.com" {
				rt.fetchOK++
			} else {
				rt.fetchOther++
			}
			_ = res
		case 9:
			if i%40 != 9 {
				continue
			}
			b, _ := json.Marshal(map[string]any{"mode": "reveal", "token": map[string]string{"$secret": "SIGNING_KEY"}})
			call("research", "secretuser", string(b))
			rt.reveals++
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := h.Close(cctx); err != nil {
		t.Fatal(err)
	}
	return rt
}

func whatIfJSON(t *testing.T, args ...string) (api.WhatIfReport, cliResult) {
	t.Helper()
	r := cli(t, "", append([]string{"audit", "whatif", "-json"}, args...)...)
	var rep api.WhatIfReport
	if r.code != exitWhatIfError {
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("-json output %q: %v", r.stdout, err)
		}
	}
	return rep, r
}

func group(rep api.WhatIfReport, agent, tool string) api.WhatIfGroup {
	for _, g := range rep.Groups {
		if g.Agent == agent && g.Tool == tool {
			return g
		}
	}
	return api.WhatIfGroup{}
}

// TestAuditWhatIfRealTrail replays a trail a real Host wrote: with no
// change every recorded decision of the cards is reproduced exactly (the
// calls', the fetches' and the reveals') and nothing flips (exit 0);
// revoking a card flips the calls it allowed to denied and adding a grant
// flips refused ones to allowed (exit 1), grouped by agent and tool; and a
// change that cannot be replayed is exit 2 with a message that says why.
func TestAuditWhatIfRealTrail(t *testing.T) {
	t.Parallel()
	n := 2000
	if testing.Short() {
		n = 400
	}
	rt := newRealTrail(t, n)
	cfg := "-config=" + rt.config
	if rt.echoAllowed == 0 || rt.echoDenied == 0 || rt.echoRejected == 0 || rt.remoteAllowed == 0 || rt.listAllowed == 0 || rt.listDenied == 0 || rt.fetchOK == 0 || rt.fetchOther == 0 || rt.reveals == 0 {
		t.Fatalf("the trail is not varied: %+v", rt)
	}
	calls := rt.echoAllowed + rt.echoDenied + rt.echoRejected + rt.listAllowed + rt.listDenied

	rep, r := whatIfJSON(t, cfg)
	if r.code != exitWhatIfSame || rep.Flips != 0 || len(rep.Groups) != 0 {
		t.Fatalf("no change: exit %d, %d flips, stderr %q; want 0, none", r.code, rep.Flips, r.stderr)
	}
	// Every call's decision (secretuser's calls too), every fetch's and
	// every reveal's, and the approve layer's answer to approve:always
	// of each remote command (the always-card's yes, recorded in its
	// verdict).
	if want := calls + 2*(rt.fetchOK+rt.fetchOther+rt.reveals) + rt.remoteAllowed; rep.Replayed != want || rep.Verified != want || len(rep.Inexact) != 0 || rep.Stale != 0 || rep.Unversioned != 0 {
		t.Fatalf("no change: replayed %d, verified %d, inexact %v, stale %d, unversioned %d; want all %d verified (%+v)",
			rep.Replayed, rep.Verified, rep.Inexact, rep.Stale, rep.Unversioned, want, rt)
	}
	// Every remote command passed its approve layer on the always-card.
	if rep.Standing != rt.remoteAllowed {
		t.Fatalf("no change: %d standing approvals replayed, want %d", rep.Standing, rt.remoteAllowed)
	}

	t.Run("middleware conditions", func(t *testing.T) {
		// Revoking the always-card: the remote commands would ask a
		// human (allowed -> denied), nothing else flips.
		rep, r := whatIfJSON(t, cfg, "-revoke", rt.cards["approve:always cmdecho remote show -- origin"])
		g := group(rep, "research", "cmdecho")
		if r.code != exitWhatIfFlips || len(rep.Groups) != 1 || g.AllowedToDenied != rt.remoteAllowed || g.DeniedToAllowed != 0 {
			t.Fatalf("exit %d, groups %+v; want the %d remote commands allowed -> denied", r.code, rep.Groups, rt.remoteAllowed)
		}
	})

	t.Run("revoke the echo card", func(t *testing.T) {
		rep, r := whatIfJSON(t, cfg, "-revoke", rt.cards["tool:invoke echo --message=hello*"])
		g := group(rep, "research", "echo")
		if r.code != exitWhatIfFlips || g.AllowedToDenied == 0 || g.DeniedToAllowed != 0 || len(rep.Groups) != 1 || rep.Flips != g.AllowedToDenied {
			t.Fatalf("exit %d, groups %+v; want research's echo calls allowed -> denied only, exit 1", r.code, rep.Groups)
		}
		for _, ex := range g.Examples {
			if !ex.Before.Allow || ex.After.Allow || !strings.Contains(ex.Target, "--message=hello") || strings.Contains(ex.Target, "hello-secret") {
				t.Errorf("example %+v", ex)
			}
		}
	})
	t.Run("grant what was refused", func(t *testing.T) {
		rep, r := whatIfJSON(t, cfg, "-agent", "research", "-grant", "tool:invoke echo --...", "-grant", "tool:invoke cmdecho list --...")
		echo, cmd := group(rep, "research", "echo"), group(rep, "research", "cmdecho")
		// hello-secret stays forbidden by the prohibition.
		if r.code != exitWhatIfFlips || echo.DeniedToAllowed == 0 || echo.AllowedToDenied != 0 || cmd.DeniedToAllowed == 0 || len(rep.Groups) != 2 {
			t.Fatalf("exit %d, groups %+v; want echo and cmdecho denied -> allowed, exit 1", r.code, rep.Groups)
		}
		for _, ex := range echo.Examples {
			if strings.Contains(ex.Target, "hello-secret") {
				t.Errorf("a prohibited call flips: %+v", ex)
			}
		}
	})
	t.Run("replace an agent's cards with a file", func(t *testing.T) {
		// Every grant research holds but cmdecho's, and not its
		// prohibition: cmdecho's calls flip to denied, the prohibited
		// hello-secret echoes to allowed, nothing else.
		file := filepath.Join(t.TempDir(), "research.grants")
		if err := os.WriteFile(file, []byte("# research, replaced\ntool:invoke echo --message=hello*\n\nnetwork:connect api.example.com\nsecret:use TOKEN\n"+
			"secret:reveal SIGNING_KEY\ntool:invoke secretuser --...\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, r := whatIfJSON(t, cfg, "-agent", "research", "-grants", file)
		echo, cmd := group(rep, "research", "echo"), group(rep, "research", "cmdecho")
		if r.code != exitWhatIfFlips || len(rep.Groups) != 2 || cmd.AllowedToDenied == 0 || cmd.DeniedToAllowed != 0 || echo.DeniedToAllowed == 0 || echo.AllowedToDenied != 0 {
			t.Fatalf("exit %d, groups %+v; want cmdecho allowed -> denied and echo denied -> allowed only", r.code, rep.Groups)
		}
		for _, ex := range echo.Examples {
			if !strings.Contains(ex.Target, "hello-secret") {
				t.Errorf("an echo that was never prohibited flips: %+v", ex)
			}
		}
		if len(rep.Change.Revoke) != 9 || len(rep.Change.Grants) != 5 {
			t.Errorf("the change revokes %v and grants %v: want research's 9 live cards and the file's 5 grants", rep.Change.Revoke, rep.Change.Grants)
		}
	})
	t.Run("fetches and reveals", func(t *testing.T) {
		rep, r := whatIfJSON(t, cfg, "-revoke", rt.cards["secret:reveal SIGNING_KEY"], "-agent", "research", "-grant", "network:connect other.example.com")
		g := group(rep, "research", "secretuser")
		if r.code != exitWhatIfFlips || g.AllowedToDenied != rt.reveals || g.DeniedToAllowed != rt.fetchOther {
			t.Fatalf("exit %d, groups %+v; want %d reveals allowed -> denied and %d fetches of other.example.com denied -> allowed", r.code, rep.Groups, rt.reveals, rt.fetchOther)
		}
	})
	t.Run("deny and ceiling changes", func(t *testing.T) {
		// A prohibition added: research's hello-world echoes only flip.
		rep, r := whatIfJSON(t, cfg, "-agent", "research", "-deny", "tool:invoke echo --message=hello-w*")
		g := group(rep, "research", "echo")
		if r.code != exitWhatIfFlips || len(rep.Groups) != 1 || g.AllowedToDenied == 0 || g.DeniedToAllowed != 0 {
			t.Fatalf("-deny: exit %d, groups %+v; want research's echo allowed -> denied only", r.code, rep.Groups)
		}
		for _, ex := range g.Examples {
			if !strings.Contains(ex.Target, "--message=hello-world") || ex.After.Bound != api.DecisionUpperNegative {
				t.Errorf("-deny flips %s (after %+v)", ex.Target, ex.After)
			}
		}
		// The prohibition revoked: the hello-secret echoes only flip.
		rep, r = whatIfJSON(t, cfg, "-revoke", rt.cards["forbid"])
		g = group(rep, "research", "echo")
		if r.code != exitWhatIfFlips || len(rep.Groups) != 1 || g.DeniedToAllowed == 0 || g.AllowedToDenied != 0 {
			t.Fatalf("revoking the prohibition: exit %d, groups %+v; want research's echo denied -> allowed only", r.code, rep.Groups)
		}
		for _, ex := range g.Examples {
			if !strings.Contains(ex.Target, "--message=hello-secret") || ex.Before.Bound != api.DecisionUpperNegative {
				t.Errorf("revoking the prohibition flips %s (now %+v)", ex.Target, ex.Before)
			}
		}
		// A ceiling: ops keeps only its ops-report echoes.
		rep, r = whatIfJSON(t, cfg, "-agent", "ops", "-ceiling", "tool:invoke echo --message=ops-r*")
		g = group(rep, "ops", "echo")
		if r.code != exitWhatIfFlips || len(rep.Groups) != 1 || g.AllowedToDenied == 0 || g.DeniedToAllowed != 0 {
			t.Fatalf("-ceiling: exit %d, groups %+v; want ops's echo allowed -> denied only", r.code, rep.Groups)
		}
		for _, ex := range g.Examples {
			if strings.Contains(ex.Target, "--message=ops-report") || ex.After.Bound != api.DecisionUpperPositive {
				t.Errorf("-ceiling flips %s (after %+v)", ex.Target, ex.After)
			}
		}
		if r := cli(t, "", "audit", "whatif", cfg, "-deny", "tool:invoke echo"); r.code != exitWhatIfError || !strings.Contains(r.stderr, "a -deny needs an -agent NAME before it") {
			t.Errorf("-deny without -agent: exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("config after", func(t *testing.T) {
		orig, err := os.ReadFile(rt.config)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		write := func(name, from, to string) string {
			t.Helper()
			body := string(orig)
			if from != "" {
				if !strings.Contains(body, from) {
					t.Fatalf("agent.toml has no %q", from)
				}
				body = strings.Replace(body, from, to, 1)
			}
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		// The same file: nothing flips.
		rep, r := whatIfJSON(t, cfg, "-config-after", write("same.toml", "", ""))
		if r.code != exitWhatIfSame || rep.Flips != 0 || len(rep.Inexact) != 0 {
			t.Fatalf("the same agent.toml: exit %d, %d flips, stderr %q; want 0", r.code, rep.Flips, r.stderr)
		}
		for _, tc := range []struct {
			name, from, to string
			check          func(api.WhatIfReport) bool
		}{
			// ops's system grant narrowed: its ops-N echoes flip, its
			// ops-report ones stay.
			{"system grant", `grants = ["tool:invoke echo --message=ops*"]`, `grants = ["tool:invoke echo --message=ops-r*"]`, func(rep api.WhatIfReport) bool {
				g := group(rep, "ops", "echo")
				for _, ex := range g.Examples {
					if strings.Contains(ex.Target, "ops-report") {
						return false
					}
				}
				return len(rep.Groups) == 1 && g.AllowedToDenied > 0 && g.DeniedToAllowed == 0
			}},
			// cmdecho no longer bound to research: its allowed calls flip.
			{"binding removed", `tools = ["echo", "cmdecho", "secretuser"]`, `tools = ["echo", "secretuser"]`, func(rep api.WhatIfReport) bool {
				g := group(rep, "research", "cmdecho")
				return len(rep.Groups) == 1 && g.AllowedToDenied == rt.listAllowed && g.DeniedToAllowed == 0 &&
					g.Examples[0].After.Rule == "agent.toml" && strings.Contains(g.Examples[0].After.Reason, `tool "cmdecho" is not bound to agent "research" in `)
			}},
			// research's binding of secretuser narrowed: no reveal, and
			// only other.example.com (which no card allows): the reveals
			// and the fetches of api.example.com flip.
			{"binding narrowed", "tools = [\"echo\", \"cmdecho\", \"secretuser\"]\ngrants = [\"tool:invoke secretuser --...\"]\n",
				"grants = [\"tool:invoke secretuser --...\"]\n[agents.research.tools.echo]\n[agents.research.tools.cmdecho]\n[agents.research.tools.secretuser]\nreveal = []\nhttp_allow = [\"other.example.com\"]\n", func(rep api.WhatIfReport) bool {
					g := group(rep, "research", "secretuser")
					return len(rep.Groups) == 1 && g.AllowedToDenied == rt.reveals+rt.fetchOK && g.DeniedToAllowed == 0
				}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rep, r := whatIfJSON(t, cfg, "-config-after", write(strings.ReplaceAll(tc.name, " ", "-")+".toml", tc.from, tc.to))
				if r.code != exitWhatIfFlips || !tc.check(rep) {
					t.Fatalf("exit %d, stderr %q, groups %+v", r.code, r.stderr, rep.Groups)
				}
			})
		}
		// A file that does not load: exit 2, its file, line and key.
		bad := write("bad.toml", `grants = ["tool:invoke echo --message=ops*"]`, `grants = ["tool:fly"]`)
		if r := cli(t, "", "audit", "whatif", cfg, "-config-after", bad); r.code != exitWhatIfError || !strings.Contains(r.stderr, bad+":") || !strings.Contains(r.stderr, "agents.ops.grants") {
			t.Errorf("a bad -config-after: exit %d, stderr %q; want 2 naming %s, the line and agents.ops.grants", r.code, r.stderr, bad)
		}
	})
	t.Run("human output", func(t *testing.T) {
		r := cli(t, "", "audit", "whatif", cfg, "-revoke", rt.cards["tool:invoke cmdecho list --city=*"], "-since", "1d")
		if r.code != exitWhatIfFlips || !strings.Contains(r.stdout, "agent research, tool cmdecho: ") || !strings.Contains(r.stdout, "allowed -> denied  tool:invoke cmdecho list --city=") ||
			!strings.Contains(r.stdout, "now: allowed (card "+rt.cards["tool:invoke cmdecho list --city=*"]) || !strings.Contains(r.stdout, "after: denied (no card)") {
			t.Fatalf("exit %d, stdout:\n%s\nstderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("window", func(t *testing.T) {
		rep, r := whatIfJSON(t, cfg, "-since", "1ns", "-revoke", rt.cards["tool:invoke echo --message=hello*"])
		if r.code != exitWhatIfSame || rep.Replayed != 0 {
			t.Fatalf("-since 1ns: exit %d, replayed %d; want 0, 0", r.code, rep.Replayed)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"unknown card", []string{"-revoke", "c_nope"}, "unknown card: -revoke c_nope: the store holds no card of that ID"},
			{"unknown agent", []string{"-agent", "nobody", "-grant", "tool:invoke echo"}, "unknown agent: -agent nobody"},
			{"bad grant", []string{"-agent", "research", "-grant", "tool:fly x"}, `bad grant: -grant "tool:fly x" for agent research`},
			{"grant without agent", []string{"-grant", "tool:invoke echo"}, "a -grant needs an -agent NAME before it"},
			{"agent without grant", []string{"-agent", "research"}, "-agent research is followed by no -grant"},
			{"agent without grant, then another", []string{"-agent", "ops", "-agent", "research", "-grant", "tool:invoke echo"}, "-agent ops is followed by no -grant"},
			{"bad window", []string{"-since", "yesterday"}, "a positive duration such as 24h, 90m or 7d"},
			{"unknown flag", []string{"-grantz", "x"}, "flag provided but not defined: -grantz"},
			{"grants without agent", []string{"-grants", "x"}, "a -grants needs an -agent NAME before it"},
			{"grants of no file", []string{"-agent", "research", "-grants", filepath.Join(t.TempDir(), "none")}, "no such file"},
			{"argument", []string{"c_1"}, `unexpected argument "c_1"`},
			{"no store", []string{"-state", filepath.Join(t.TempDir(), "none.db")}, "no state store at"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := cli(t, "", append([]string{"audit", "whatif", cfg}, tc.args...)...)
				if r.code != exitWhatIfError || !strings.Contains(r.stderr, tc.want) {
					t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
				}
			})
		}
	})
	t.Run("json shape", func(t *testing.T) {
		r := cli(t, "", "audit", "whatif", "-json", cfg, "-revoke", rt.cards["tool:invoke echo --message=hello*"])
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.stdout), &top); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range top {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if want := "asked,change,changed_since,flips,groups,replayed,since,skipped,stale,standing,until,unversioned,verified"; strings.Join(keys, ",") != want {
			t.Errorf("keys %v, want %s", keys, want)
		}
		var groups []map[string]json.RawMessage
		json.Unmarshal(top["groups"], &groups)
		var ex []map[string]json.RawMessage
		json.Unmarshal(groups[0]["examples"], &ex)
		for _, k := range []string{"agent", "tool", "allowed_to_denied", "denied_to_allowed", "examples"} {
			if _, ok := groups[0][k]; !ok {
				t.Errorf("group without %q: %s", k, top["groups"])
			}
		}
		for _, k := range []string{"seq", "at", "agent", "tool", "record", "target", "recorded", "before", "after"} {
			if _, ok := ex[0][k]; !ok {
				t.Errorf("example without %q", k)
			}
		}
	})
}

// TestWhatIfPrintsPartial (hostile review of the what-if): the report for
// a human says how many replayed records cut a list of their decisions,
// whose cut part was not replayed, as -json does (partial). Before, only
// -json said it: a terminal's "0 flip" did not say that a session's
// directories past the record's 32 fs decisions, or a layer's rewrites
// past its 8, were not asked again.
func TestWhatIfPrintsPartial(t *testing.T) {
	var b strings.Builder
	printWhatIf(&b, api.WhatIfReport{Replayed: 5, Verified: 5, Partial: 2})
	if !strings.Contains(b.String(), "2 replayed only in part") {
		t.Errorf("the report of a replay with 2 partial records:\n%s\nwant it to say \"2 replayed only in part\"", b.String())
	}
	b.Reset()
	printWhatIf(&b, api.WhatIfReport{Replayed: 5, Verified: 5})
	if strings.Contains(b.String(), "only in part") {
		t.Errorf("the report of a replay with no partial record:\n%s", b.String())
	}
}
