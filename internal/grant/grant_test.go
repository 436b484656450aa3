package grant

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustParse(t testing.TB, s string) Grant {
	t.Helper()
	g, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return g
}

func TestParseCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"tool:invoke weather --city=Paris", "tool:invoke weather --city=Paris"},
		{"tool:invoke   search --limit=*  --pattern=cart*", "tool:invoke search --limit=* --pattern=cart*"},
		{"tool:invoke search --pattern=cart* --limit=*", "tool:invoke search --limit=* --pattern=cart*"},
		{"tool:invoke t --tags=b --tags=a", "tool:invoke t --tags=b --tags=a"}, // same name keeps its order
		{"tool:invoke t --verbose --no-color --...", "tool:invoke t --no-color --verbose --..."},
		{`tool:invoke t "--city=New York"`, `tool:invoke t "--city=New York"`},
		{`tool:invoke t --o={"k":"v"}`, `tool:invoke t --o={"k":"v"}`},
		{`tool:invoke t "--q=say \"hi\""`, `tool:invoke t "--q=say \"hi\""`},
		{`tool:invoke \"t`, `tool:invoke \"t`},
		{`tool:invoke t --q=a\*b`, `tool:invoke t --q=a\*b`},
		{`tool:invoke t --a\=b=c`, `tool:invoke t --a\=b=c`},
		{`tool:invoke t --x=`, `tool:invoke t --x=`},
		{"tool weather", "tool:* weather"},
		{"tool:* *", "tool:* *"},
		{"network:connect API.Example.com.", "network:connect api.example.com"},
		{"network:connect *.example.com:443", "network:connect *.example.com:443"},
		{"network:connect *", "network:connect *"},
		{"network:connect *:*", "network:connect *"},
		{"network:connect [::1]:8443", "network:connect [::1]:8443"},
		{"network:connect ::1", "network:connect [::1]"},
		{"secret:use API_KEY", "secret:use API_KEY"},
		{"secret:reveal *", "secret:reveal *"},
		{"fs:read /data/**", "fs:read /data/**"},
		{"fs:write /", "fs:write /"},
		{"fs:read /a/*/c", "fs:read /a/*/c"},
		{"card:derive *", "card:derive *"},
		{"card:revoke card_0123", "card:revoke card_0123"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			g := mustParse(t, tc.in)
			if got := g.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			again := mustParse(t, g.String())
			if again.String() != g.String() {
				t.Fatalf("round trip: %q then %q", g.String(), again.String())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		in       string
		col      int
		expected string
	}{
		{"", 1, "class:verb resource"},
		{"tool:invoke", 12, "a resource after"},
		{"tools:invoke x", 1, "a class (tool, network, secret, fs, card or approve)"},
		{"tool:call x", 6, "a verb of class tool (invoke, or * for any)"},
		{"secret:read x", 8, "a verb of class secret (use, reveal"},
		{"tool:invoke --city=x", 13, "a tool name before the arguments"},
		{"tool:invoke w city=x", 15, "an argument --name=value"},
		{"tool:invoke w --=x", 17, "an argument name after --"},
		{"tool:invoke w --c*ty=x", 18, "an argument name without '*'"},
		{"tool:invoke w --... --x=1", 21, "the end of the grant after --..."},
		{`tool:invoke w "--city=Paris`, 15, `a closing '"'`},
		{`tool:invoke w --city="New York"`, 27, "an argument --name=value"},
		{`tool:invoke w --city=Paris\`, 27, `a character after '\'`},
		{"network:connect http://x.com", 17, "a host pattern"},
		{"network:connect x.com:0", 23, "a port 1..65535 or *"},
		{"network:connect x.com:99999", 23, "a port 1..65535 or *"},
		{"network:connect a.com b.com", 23, "the end of the grant"},
		{"fs:read data/x", 9, "an absolute path pattern"},
		{"fs:read /a//b", 12, "a path segment"},
		{"fs:read /a/../b", 12, "a clean path"},
		{"fs:read /a/b*", 13, "'*' or '**' as a whole segment"},
		{"fs:read /a/", 12, "a path segment"},
		{"secret:use \"\"", 12, "a name"},
		{"tool:invoke w --x=\x01", 19, "a printable character"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse(tc.in)
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) = %v, want a *ParseError", tc.in, err)
			}
			if pe.Pos+1 != tc.col || !strings.Contains(pe.Expected, tc.expected) {
				t.Fatalf("Parse(%q): column %d, expected %q; want column %d, expected containing %q (error: %v)",
					tc.in, pe.Pos+1, pe.Expected, tc.col, tc.expected, err)
			}
			if !strings.Contains(err.Error(), "column") {
				t.Fatalf("error %q does not name the column", err)
			}
		})
	}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"city":"Berlin"}`, `--city=Berlin`},
		{`{"b":1,"a":"x"}`, `--a=x --b=1`},
		{`{"n":1.0}`, `--n=1`},
		{`{"n":1e2}`, `--n=100`},
		{`{"n":-0}`, `--n=0`},
		{`{"n":0.5}`, `--n=0.5`},
		{`{"n":1e21}`, `--n=1e+21`},
		{`{"n":123e18}`, `--n=123000000000000000000`},
		{`{"n":1e-7}`, `--n=1e-7`},
		{`{"n":0.000001}`, `--n=0.000001`},
		{`{"n":12345678901234567890123}`, `--n=1.2345678901234567890123e+22`},
		{`{"n":9007199254740993}`, `--n=9007199254740993`}, // not rounded to a float64
		{`{"n":-1.50E+1}`, `--n=-15`},
		{`{"v":true,"q":false}`, `--no-q --v`},
		{`{"no-cache":true}`, `--no-cache=true`},
		{`{"o":{"b":[1,2.0],"a":null}}`, `--o={"a":null,"b":[1,2]}`},
		{`{"z":null}`, `--z=null`},
		{`{"tags":["b","a"]}`, `--tags=b --tags=a`},
		{`{"tags":[]}`, `--tags=[]`},
		{`{"m":[true,1,"x",[1],{"k":"v"}]}`, `--m=true --m=1 --m=x --m=[1] --m={"k":"v"}`},
		{`{"s":"a b"}`, `"--s=a b"`},
		{`{"s":"*"}`, `--s=\*`},
		{`{"s":"\u00e9\n"}`, "\"--s=é\n\""},
		{`{"s":"\ud83d\ude00"}`, "--s=😀"},
		{`{}`, ``},
		{` { "a" : "x" } `, `--a=x`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			args, err := Render([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, a := range args {
				parts = append(parts, a.String())
			}
			if got := strings.Join(parts, " "); got != tc.want {
				t.Fatalf("Render(%s) = %s, want %s", tc.in, got, tc.want)
			}
			// The pasteable form of the call allows exactly this call.
			target := ToolTarget("t", args)
			g := mustParse(t, target.String())
			if !g.Allows(target) {
				t.Fatalf("grant %q does not allow the call it was made from", target.String())
			}
		})
	}
}

func TestRenderRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not an object", `["a"]`, "expected a JSON object"},
		{"duplicate key", `{"a":"x","a":"y"}`, `duplicate property "a"`},
		{"nested duplicate", `{"o":{"k":1,"k":2}}`, `duplicate property "k"`},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "invalid UTF-8"},
		{"lone surrogate", `{"a":"\ud800"}`, "lone UTF-16 surrogate"},
		{"swapped surrogates", `{"a":"\ude00\ud83d"}`, "lone UTF-16 surrogate"},
		{"empty name", `{"":"x"}`, "empty name"},
		{"huge exponent", `{"n":1e9999999999}`, "exponent out of range"},
		{"leading zero", `{"n":01}`, "a JSON number"},
		{"trailing garbage", `{"a":1} x`, "the end of the input"},
		{"trailing comma", `{"a":1,}`, "a property name"},
		{"too deep", `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "nested deeper"},
		{"raw control", "{\"a\":\"\x01\"}", "escaped control"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render([]byte(tc.in))
			if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render(%q) = %v, want ErrRender containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func toolTarget(t testing.TB, tool, input string) Target {
	t.Helper()
	args, err := Render([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	return ToolTarget(tool, args)
}

// TestAllowsTool covers CARDS.md A10 and A11 and the argument rules.
func TestAllowsTool(t *testing.T) {
	for _, tc := range []struct {
		name, grant, tool, input string
		want                     bool
	}{
		{"A10 exact value allowed", "tool:invoke search --pattern=cart", "search", `{"pattern":"cart"}`, true},
		{"A10 other value denied", "tool:invoke search --pattern=cart", "search", `{"pattern":"x"}`, false},
		{"A11 escaped star is literal: other value denied", `tool:invoke search --pattern=\*`, "search", `{"pattern":"cart"}`, false},
		{"A11 escaped star is literal: star allowed", `tool:invoke search --pattern=\*`, "search", `{"pattern":"*"}`, true},
		{"A11 unescaped star is a glob (extension)", "tool:invoke search --pattern=*", "search", `{"pattern":"cart"}`, true},
		{"glob prefix", "tool:invoke search --pattern=cart*", "search", `{"pattern":"cartwheel"}`, true},
		{"glob prefix miss", "tool:invoke search --pattern=cart*", "search", `{"pattern":"acart"}`, false},
		{"glob middle", "tool:invoke s --p=a*b*c", "s", `{"p":"axxbyyc"}`, true},
		{"glob middle order", "tool:invoke s --p=a*b*c", "s", `{"p":"acb"}`, false},
		{"glob overlap", "tool:invoke s --p=ab*ba", "s", `{"p":"aba"}`, false},
		// A middle piece is consumed where it matched: the second b of
		// a*b*b*c needs a b of its own.
		{"glob middle pieces each consume", "tool:invoke s --p=a*b*b*c", "s", `{"p":"abc"}`, false},
		{"glob middle pieces each consume: two", "tool:invoke s --p=a*b*b*c", "s", `{"p":"abbc"}`, true},
		{"glob middle pieces each consume: apart", "tool:invoke s --p=a*b*b*c", "s", `{"p":"axbxbxc"}`, true},
		{"glob middle piece not in the suffix", "tool:invoke s --p=a*bc*c", "s", `{"p":"abc"}`, false},
		{"glob numbers", "tool:invoke s --limit=*", "s", `{"limit":10}`, true},
		{"other tool", "tool:invoke weather --city=Paris", "weatherx", `{"city":"Paris"}`, false},
		{"tool glob", "tool:invoke * --...", "anything", `{"a":1}`, true},
		{"unmentioned argument refused", "tool:invoke weather --city=Paris", "weather", `{"city":"Paris","units":"c"}`, false},
		{"unmentioned argument with --...", "tool:invoke weather --city=Paris --...", "weather", `{"city":"Paris","units":"c"}`, true},
		{"mentioned argument missing", "tool:invoke weather --city=Paris", "weather", `{}`, false},
		{"mentioned argument missing with --...", "tool:invoke weather --city=Paris --...", "weather", `{"units":"c"}`, false},
		{"no arguments", "tool:invoke ping", "ping", `{}`, true},
		{"no arguments, some given", "tool:invoke ping", "ping", `{"x":1}`, false},
		{"flag true", "tool:invoke t --v", "t", `{"v":true}`, true},
		{"flag false is not true", "tool:invoke t --v", "t", `{"v":false}`, false},
		{"no-flag", "tool:invoke t --no-v", "t", `{"v":false}`, true},
		{"string true is not the flag", "tool:invoke t --v", "t", `{"v":"true"}`, false},
		{"flag glob value does not match a flag", "tool:invoke t --v=*", "t", `{"v":true}`, false},
		{"no- name is not a negation", "tool:invoke t --no-x", "t", `{"no-x":true}`, false},
		{"no- name true", "tool:invoke t --no-x=true", "t", `{"no-x":true}`, true},
		{"array in order", "tool:invoke t --tag=a --tag=b", "t", `{"tag":["a","b"]}`, true},
		{"array other order", "tool:invoke t --tag=a --tag=b", "t", `{"tag":["b","a"]}`, false},
		{"array longer", "tool:invoke t --tag=*", "t", `{"tag":["a","b"]}`, false},
		{"array shorter", "tool:invoke t --tag=a --tag=b", "t", `{"tag":["a"]}`, false},
		{"value is case-sensitive", "tool:invoke weather --city=Paris", "weather", `{"city":"PARIS"}`, false},
		{"tool name is case-sensitive", "tool:invoke weather", "Weather", `{}`, false},
		{"array longer with --...", "tool:invoke t --tag=* --...", "t", `{"tag":["a","b"]}`, false},
		{"nested canonical", `tool:invoke t --o={"a":1,"b":2}`, "t", `{"o":{"b":2,"a":1.0}}`, true},
		{"value with space", `tool:invoke t "--q=a b"`, "t", `{"q":"a b"}`, true},
		{"empty array is not absent", "tool:invoke t", "t", `{"tag":[]}`, false},
		{"verb any", "tool ping", "ping", `{}`, true},
		{"case variant of a pinned name refused under --...", "tool:invoke weather --city=Paris --...", "weather", `{"city":"Paris","CITY":"Berlin"}`, false},
		{"Unicode case variant refused under --...", "tool:invoke t --ask=x --...", "t", `{"ask":"x","aſk":"y"}`, false},
		{"other names still allowed under --...", "tool:invoke weather --city=Paris --...", "weather", `{"city":"Paris","units":"c"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustParse(t, tc.grant)
			if got := g.Allows(toolTarget(t, tc.tool, tc.input)); got != tc.want {
				t.Fatalf("%q allows %s %s = %v, want %v", tc.grant, tc.tool, tc.input, got, tc.want)
			}
		})
	}
}

func TestAllowsOtherClasses(t *testing.T) {
	net := func(h string, p int) Target {
		tg, err := NetworkTarget(h, p)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	fs := func(v, p string) Target {
		tg, err := FSTarget(v, p)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	for _, tc := range []struct {
		name, grant string
		target      Target
		want        bool
	}{
		{"A1 fs under **", "fs:read /data/**", fs("read", "/data/a"), true},
		{"fs ** matches deep", "fs:read /data/**", fs("read", "/data/a/b/c"), true},
		{"fs ** matches the dir itself", "fs:read /data/**", fs("read", "/data"), true},
		{"fs other dir", "fs:read /data/**", fs("read", "/datax/a"), false},
		{"fs verb", "fs:read /data/**", fs("write", "/data/a"), false},
		{"fs any verb", "fs /data/**", fs("write", "/data/a"), true},
		{"fs one segment", "fs:read /a/*/c", fs("read", "/a/b/c"), true},
		{"fs one segment not two", "fs:read /a/*/c", fs("read", "/a/b/x/c"), false},
		{"fs root", "fs:read /", fs("read", "/"), true},
		{"fs segment is case-sensitive", "fs:read /srv/public/**", fs("read", "/srv/PUBLIC/key"), false},
		{"fs a file is not its directory", "fs:read /home/ann/notes.txt", fs("read", "/home/ann"), false},
		{"fs a file is not the root", "fs:write /tmp/x/y", fs("write", "/"), false},
		{"net exact", "network:connect api.example.com", net("api.example.com", 443), true},
		{"net port", "network:connect api.example.com:443", net("api.example.com", 80), false},
		{"net wildcard", "network:connect *.example.com", net("a.example.com", 443), true},
		{"net wildcard one label", "network:connect *.example.com", net("a.b.example.com", 443), false},
		{"net any", "network:connect *", net("10.0.0.1", 22), true},
		{"net case", "network:connect api.example.com", net("API.example.com.", 443), true},
		{"secret", "secret:use K", SecretTarget("use", "K"), true},
		{"secret reveal needs reveal", "secret:use K", SecretTarget("reveal", "K"), false},
		{"secret name is case-sensitive", "secret:use API_KEY", SecretTarget("use", "api_key"), false},
		{"secret glob", "secret:* GH_*", SecretTarget("reveal", "GH_TOKEN"), true},
		{"card any", "card:revoke *", CardTarget("revoke", "card_1"), true},
		{"card id", "card:revoke card_1", CardTarget("revoke", "card_2"), false},
		{"class mismatch", "secret:use *", CardTarget("use", "x"), false},
		{"zero grant", "", Target{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Grant
			if tc.grant != "" {
				g = mustParse(t, tc.grant)
			}
			if got := g.Allows(tc.target); got != tc.want {
				t.Fatalf("%q allows %v = %v, want %v", tc.grant, tc.target, got, tc.want)
			}
		})
	}
}

func TestTargetErrors(t *testing.T) {
	for _, p := range []string{"rel/x", "/a/../b", "/a//b", "/a/./b", "/a/"} {
		if _, err := FSTarget("read", p); !errors.Is(err, ErrTarget) {
			t.Errorf("FSTarget(%q) = %v, want ErrTarget", p, err)
		}
	}
	if _, err := NetworkTarget("*.example.com", 443); !errors.Is(err, ErrTarget) {
		t.Errorf("a wildcard host target: %v", err)
	}
	if _, err := NetworkTarget("example.com", 0); !errors.Is(err, ErrTarget) {
		t.Errorf("port 0: %v", err)
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		parent, child string
		want          bool
	}{
		{"tool:invoke search --pattern=cart*", "tool:invoke search --pattern=cart", true},
		{"tool:invoke search --pattern=cart*", "tool:invoke search --pattern=cartw*", true},
		{"tool:invoke search --pattern=cart*", "tool:invoke search --pattern=*", false},
		{"tool:invoke search --pattern=cart", "tool:invoke search --pattern=cart*", false},
		{`tool:invoke search --pattern=\*`, "tool:invoke search --pattern=*", false},
		{"tool:invoke search --pattern=*", `tool:invoke search --pattern=\*`, true},
		{"tool:invoke s --p=*a*", "tool:invoke s --p=*a", true},
		{"tool:invoke s --p=a*", "tool:invoke s --p=*a", false},
		{"tool:invoke s --...", "tool:invoke s --p=x", true},
		{"tool:invoke s --...", "tool:invoke s --...", true},
		{"tool:invoke s --p=x", "tool:invoke s --p=x --...", false},
		{"tool:invoke s --p=x", "tool:invoke s", false},
		{"tool:invoke s --p=x --...", "tool:invoke s", false},
		{"tool:invoke s --p=x --...", "tool:invoke s --p=x --q=y", true},
		{"tool:invoke s --p=x", "tool:invoke s --p=x --q=y", false},
		{"tool:invoke s --t=a --t=*", "tool:invoke s --t=a --t=b", true},
		{"tool:invoke s --t=*", "tool:invoke s --t=a --t=b", false},
		{"tool:invoke s --v", "tool:invoke s --no-v", false},
		{"tool:invoke * --...", "tool:invoke s --p=x", true},
		{"tool:invoke s*", "tool:invoke *", false},
		{"tool:* s", "tool:invoke s", true},
		{"tool:invoke s", "tool:* s", false},
		{"network:connect *", "network:connect a.com:443", true},
		{"network:connect *.a.com", "network:connect x.a.com", true},
		{"network:connect *.a.com", "network:connect *.a.com:443", true},
		{"network:connect x.a.com", "network:connect *.a.com", false},
		{"network:connect a.com:443", "network:connect a.com", false},
		{"network:connect a.com", "network:connect *", false},
		{"A5 fs:read /data/**", "fs:read /other/f", false},
		{"fs:read /data/**", "fs:read /data/x/**", true},
		{"fs:read /data/*", "fs:read /data/**", false},
		{"fs:read /data/**", "fs:read /data/*/y", true},
		{"fs:read /data/*/y", "fs:read /data/x/y", true},
		{"fs:read /data/*/y", "fs:read /data/*/y", true},
		{"fs:read /**", "fs:read /", true},
		{"secret:use *", "secret:use K", true},
		{"secret:use K", "secret:use *", false},
		{"card:derive *", "card:derive card_1", true},
	} {
		t.Run(tc.parent+" ⊇ "+tc.child, func(t *testing.T) {
			p := mustParse(t, strings.TrimPrefix(tc.parent, "A5 "))
			c := mustParse(t, tc.child)
			if got := p.Covers(c); got != tc.want {
				t.Fatalf("Covers = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestArgStringRoundTrip(t *testing.T) {
	for _, a := range []Arg{
		{Name: "no-x", Form: FormTrue},
		{Name: "no-x", Form: FormFalse},
		{Name: "...", Form: FormTrue},
		{Name: "a=b", Value: "c=d"},
		{Name: "sp ace", Value: "v"},
		{Name: "x", Value: `"quoted" \ *`},
		{Name: "-x", Value: ""},
	} {
		target := ToolTarget("t", []Arg{a})
		g, err := Parse(target.String())
		if err != nil {
			t.Fatalf("%#v: %q: %v", a, target.String(), err)
		}
		if diff := cmp.Diff([]string{a.String()}, argStrings(g)); diff != "" || !g.Allows(target) {
			t.Fatalf("%#v via %q: allows=%v diff %s", a, target.String(), g.Allows(target), diff)
		}
	}
}

func argStrings(g Grant) []string {
	var s []string
	for _, p := range g.args {
		s = append(s, p.String())
	}
	return s
}

// TestCaseFoldPremise checks the reason matchArgs refuses case variants:
// Go's decoder does fill a field from them, the last key winning.
func TestCaseFoldPremise(t *testing.T) {
	var v struct {
		City string `json:"city"`
		Ask  string `json:"ask"`
	}
	if err := json.Unmarshal([]byte(`{"city":"Paris","CITY":"Berlin","ask":"x","aſk":"y"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.City != "Berlin" || v.Ask != "y" {
		t.Fatalf("encoding/json no longer folds case (%+v): the rule in foldsOnto may be relaxed", v)
	}
}

// TestApproveAlways checks the approve class: a tool's resource syntax,
// matched only by approve:always targets (never by a tool:invoke one, and
// a tool grant never matches it).
func TestApproveAlways(t *testing.T) {
	args, err := Render([]byte(`{"city":"Paris","days":3}`))
	if err != nil {
		t.Fatal(err)
	}
	exact := "approve:always weather " + Rendering(args)
	g, err := Parse(exact)
	if err != nil {
		t.Fatal(err)
	}
	if g.String() != exact {
		t.Errorf("String = %q, want %q", g.String(), exact)
	}
	if !g.Allows(AlwaysTarget("weather", args)) {
		t.Error("exact approve:always grant does not allow its call")
	}
	if g.Allows(ToolTarget("weather", args)) {
		t.Error("approve:always grant allows a tool:invoke target")
	}
	inv, _ := Parse("tool:* weather --...")
	if inv.Allows(AlwaysTarget("weather", args)) {
		t.Error("tool grant allows an approve:always target")
	}
	wide, _ := Parse("approve:always weather --city=Par* --...")
	if !wide.Covers(g) || g.Covers(wide) {
		t.Error("coverage of an edited always-grant is wrong")
	}
	other, _ := Render([]byte(`{"city":"Rome","days":3}`))
	if g.Allows(AlwaysTarget("weather", other)) {
		t.Error("exact grant allows other arguments")
	}
}
