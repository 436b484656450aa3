package grant

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Tests of the twenty-fifth mutation pass (docs/security-tests.md,
// docs/mutation/grant-cards.tsv): each holds a promise no earlier test
// pinned, and names the plant it kills.

// TestNetworkTargetPortBounds: a target's port is 1..65535, both ends
// included, and nothing past them (t03: 65536 accepted, which a grant for
// any port would then allow).
func TestNetworkTargetPortBounds(t *testing.T) {
	for _, p := range []int{1, 443, 65535} {
		if _, err := NetworkTarget("example.com", p); err != nil {
			t.Errorf("NetworkTarget(example.com, %d) = %v, want a target", p, err)
		}
	}
	for _, p := range []int{-1, 0, 65536, 1 << 20} {
		if tg, err := NetworkTarget("example.com", p); !errors.Is(err, ErrTarget) {
			t.Errorf("NetworkTarget(example.com, %d) = %v, %v; want ErrTarget", p, tg, err)
		}
	}
}

// TestParseErrorsMutation25: grants refused at the column that is wrong,
// saying what was expected there (the plants each row kills are named).
func TestParseErrorsMutation25(t *testing.T) {
	for _, tc := range []struct {
		in       string
		col      int
		expected string
	}{
		// t06: a port written with a leading zero (or sign) is not a port
		// spelling the canonical form gives back.
		{"network:connect x.com:0443", 23, "a port 1..65535 or *"},
		{"network:connect x.com:+443", 23, "a port 1..65535 or *"},
		// t07: one past the last port.
		{"network:connect x.com:65536", 23, "a port 1..65535 or *"},
		// r07: an escaped "--" is not an argument's start (nor "--..."
		// escaped the rest marker).
		{`tool:invoke w \--x=1`, 15, "an argument --name=value"},
		{`tool:invoke w -\-...`, 15, "an argument --name=value"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			g, err := Parse(tc.in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) = %q, %v; want a *ParseError at column %d", tc.in, g.String(), err, tc.col)
			}
			if pe.Pos+1 != tc.col || !strings.Contains(pe.Expected, tc.expected) {
				t.Fatalf("Parse(%q): column %d, expected %q; want column %d, expected containing %q",
					tc.in, pe.Pos+1, pe.Expected, tc.col, tc.expected)
			}
		})
	}
}

// TestFSOneSegmentIsOneSegment: a path pattern's '*' segment stands for
// exactly one segment, at the end as anywhere: fs:read /data/* allows the
// files in /data, not /data itself (nor the root for fs:read /*), while
// '**' at the end also matches nothing (CARDS.md "Shapes": '*' one
// segment, '**' any number). Kills t16 (a trailing '*' matching nothing).
func TestFSOneSegmentIsOneSegment(t *testing.T) {
	for _, tc := range []struct {
		grant, path string
		want        bool
	}{
		{"fs:read /data/*", "/data/a", true},
		{"fs:read /data/*", "/data", false},
		{"fs:read /*", "/", false},
		{"fs:read /data/*/*", "/data/a", false},
		{"fs:read /data/**", "/data", true},
		{"fs:read /data/**/*", "/data", false},
	} {
		tg, err := FSTarget("read", tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustParse(t, tc.grant).Allows(tg); got != tc.want {
			t.Errorf("%q allows %s = %v, want %v", tc.grant, tc.path, got, tc.want)
		}
	}
}

// TestSortArgsKeepsElementOrder: sorting a call's arguments by name keeps
// the order of arguments of one name (an array's elements, a repeated
// option), which a grant naming the name twice matches in order
// (`--tag=a --tag=b` allows ["a","b"], not ["b","a"]). Kills a03 (an
// unstable sort: with more than twelve arguments the elements move).
func TestSortArgsKeepsElementOrder(t *testing.T) {
	var args []Arg
	for i := range 40 {
		name := []string{"tag", "b", "tag", "a", "z"}[i%5]
		args = append(args, Arg{Name: name, Value: strconv.Itoa(i)})
	}
	SortArgs(args)
	last := map[string]int{}
	for k, a := range args {
		if k > 0 && args[k-1].Name > a.Name {
			t.Fatalf("SortArgs: %q before %q", args[k-1].Name, a.Name)
		}
		v, _ := strconv.Atoi(a.Value)
		if p, ok := last[a.Name]; ok && p > v {
			t.Fatalf("SortArgs put --%s=%d after --%s=%d: %v", a.Name, v, a.Name, p, Rendering(args))
		}
		last[a.Name] = v
	}
	g := mustParse(t, "tool:invoke t --tag=0 --tag=2 --tag=5 --tag=7 --...")
	call := []Arg{{Name: "z", Value: "1"}}
	for i := range 14 {
		call = append(call, Arg{Name: "b", Value: strconv.Itoa(i)})
	}
	call = append(call, Arg{Name: "tag", Value: "0"}, Arg{Name: "tag", Value: "2"}, Arg{Name: "tag", Value: "5"}, Arg{Name: "tag", Value: "7"})
	if !g.Allows(CommandTarget("t", nil, call, nil)) {
		t.Fatalf("%q does not allow its tags in order among 19 arguments", g.String())
	}
	call[len(call)-1].Value, call[len(call)-2].Value = "5", "7"
	if g.Allows(CommandTarget("t", nil, call, nil)) {
		t.Fatalf("%q allows the tags 0 2 7 5", g.String())
	}
}

// TestCoversCountsOccurrences: a parent naming an argument twice allows
// only calls giving it twice, so a child naming it once is not under it,
// whatever else the child names (CARDS.md "Derivation": every call the
// child allows, the parent must allow). Kills a18 (a child with fewer
// occurrences accepted: the child's next argument was read as the second).
func TestCoversCountsOccurrences(t *testing.T) {
	for _, tc := range []struct {
		parent, child string
		want          bool
	}{
		{"tool:invoke s --t=* --t=* --...", "tool:invoke s --t=x --u=y", false},
		{"tool:invoke s --t=* --t=* --...", "tool:invoke s --t=x --t=y --u=y", true},
		{"tool:invoke s --t=* --...", "tool:invoke s --t=x --t=y", false},
	} {
		p, c := mustParse(t, tc.parent), mustParse(t, tc.child)
		if got := p.Covers(c); got != tc.want {
			t.Errorf("%q covers %q = %v, want %v", tc.parent, tc.child, got, tc.want)
		}
	}
	p := mustParse(t, "tool:invoke s --t=* --t=* --...")
	call := ToolTarget("s", []Arg{{Name: "t", Value: "x"}, {Name: "u", Value: "y"}})
	if p.Allows(call) {
		t.Fatalf("%q allows %s", p.String(), call.String())
	}
}

// TestProhibitionNamingTwoCaseVariants: a prohibition that itself names
// two case variants of one name (--CITY=Paris --city=Paris) forbids a
// call giving a third variant ({"City":"Paris"}): which field a folding
// JSON reader fills from it is not known, so the prohibition holds
// (CARDS.md A2, A4: a lower- or upper-negative grant denies). Kills a23
// (such a prohibition forbidding nothing but its exact spellings).
func TestProhibitionNamingTwoCaseVariants(t *testing.T) {
	deny := mustParse(t, "tool:invoke t --CITY=Paris --city=Paris --...")
	for _, in := range []string{`{"City":"Paris"}`, `{"City":"Paris","q":"x"}`, `{"CITY":"Paris","city":"Paris"}`} {
		tg := toolTarget(t, "t", in)
		if !deny.ForbidsRef(&tg) {
			t.Errorf("%q does not forbid %s", deny.String(), in)
		}
	}
	tg := toolTarget(t, "t", `{"q":"x"}`)
	if deny.ForbidsRef(&tg) {
		t.Errorf("%q forbids {\"q\":\"x\"}, which names no city", deny.String())
	}
}

// TestProhibitionCaseVariantCountsOccurrences: read through a folding JSON
// reader, a case variant is held to the prohibition as its exact name is:
// --tag=a forbids the one-element ["a"] under any spelling of tag, and
// forbids ["a","b"] under none (a prohibition does not widen to calls its
// exact form would not match). Kills a28 (a longer group matched on its
// first elements).
func TestProhibitionCaseVariantCountsOccurrences(t *testing.T) {
	deny := mustParse(t, "tool:invoke t --tag=a --...")
	for in, want := range map[string]bool{
		`{"tag":["a"]}`:     true,
		`{"TAG":["a"]}`:     true,
		`{"tag":["a","b"]}`: false,
		`{"TAG":["a","b"]}`: false,
	} {
		tg := toolTarget(t, "t", in)
		if got := deny.ForbidsRef(&tg); got != want {
			t.Errorf("%q forbids %s = %v, want %v", deny.String(), in, got, want)
		}
	}
}

// TestProhibitionCaseVariantKeepsForm: a prohibition of the flag --verbose
// forbids {"VERBOSE":true}, which a folding reader reads as verbose=true,
// and not {"VERBOSE":false} (verbose=false, which its exact form
// --no-verbose would not match either). Kills a29 (the form ignored for a
// case variant: the call with false refused).
func TestProhibitionCaseVariantKeepsForm(t *testing.T) {
	deny := mustParse(t, "tool:invoke t --verbose --...")
	for in, want := range map[string]bool{
		`{"verbose":true}`:  true,
		`{"VERBOSE":true}`:  true,
		`{"verbose":false}`: false,
		`{"VERBOSE":false}`: false,
	} {
		tg := toolTarget(t, "t", in)
		if got := deny.ForbidsRef(&tg); got != want {
			t.Errorf("%q forbids %s = %v, want %v", deny.String(), in, got, want)
		}
	}
}

// TestToolNameWithLeadingDash: a tool whose name starts with '-' is
// written `\-x` (a bare leading '-' reads as an argument), and that
// grant parses and allows the call: the grant a denial offers to paste
// (Target.String) must parse. Kills r03 (an escaped leading '-' refused).
func TestToolNameWithLeadingDash(t *testing.T) {
	call := ToolTarget("-x", []Arg{{Name: "a", Value: "1"}})
	if got, want := call.String(), `tool:invoke \-x --a=1`; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	g, err := Parse(call.String())
	if err != nil {
		t.Fatalf("Parse(%q): %v", call.String(), err)
	}
	if !g.Allows(call) || g.String() != call.String() {
		t.Fatalf("Parse(%q) = %q, allows the call = %v", call.String(), g.String(), g.Allows(call))
	}
}

// TestProhibitionCaseVariantElsewhereUnforbidden: the case-variant reading
// of a prohibition widens only the arguments: a call the prohibition's
// exact spelling could not match for its class, its component or its
// command words is not forbidden because an argument is spelt in another
// case ("a deny naming a digest forbids that component only", package
// doc; CARDS.md A4). Kills r23 (the component not compared) and r24 (the
// command words not compared).
func TestProhibitionCaseVariantElsewhereUnforbidden(t *testing.T) {
	args := []Arg{{Name: "TO", Value: "bob"}}
	for _, tc := range []struct {
		deny string
		call Target
		want bool
	}{
		{"tool:invoke pay --to=bob --...", ToolTarget("pay", args), true},
		{"tool:invoke pay --to=bob --...", AlwaysTarget("pay", args), false},
		{"tool:invoke pay@" + digestA + " --to=bob --...", func() Target { c := ToolTarget("pay", args); c.Component = digestA; return c }(), true},
		{"tool:invoke pay@" + digestA + " --to=bob --...", func() Target { c := ToolTarget("pay", args); c.Component = digestB; return c }(), false},
		{"tool:invoke pay send --to=bob --...", CommandTarget("pay", []string{"send"}, args, nil), true},
		{"tool:invoke pay send --to=bob --...", CommandTarget("pay", []string{"refund"}, args, nil), false},
	} {
		deny := mustParse(t, tc.deny)
		if got := deny.ForbidsRef(&tc.call); got != tc.want {
			t.Errorf("%q forbids %s (component %q) = %v, want %v", tc.deny, tc.call.String(), tc.call.Component, got, tc.want)
		}
	}
}

// TestNamesToolOnlyToolGrants: only a tool:invoke or approve:always grant
// names a tool; a secret or card grant spelling the same name reaches no
// tool (what `maiden cards grant` shows as the tools a grant reaches,
// pipeline.GrantReach). Kills r32 (any class's name taken for a tool's).
func TestNamesToolOnlyToolGrants(t *testing.T) {
	for text, want := range map[string]bool{
		"tool:invoke weather --...":    true,
		"tool:invoke weat*":            true,
		"approve:always weather --...": true,
		"tool:invoke other":            false,
		"secret:use weather":           false,
		"card:revoke weather":          false,
		"network:connect weather":      false,
		"secret:use *":                 false,
	} {
		if got := mustParse(t, text).NamesTool("weather"); got != want {
			t.Errorf("%q names the tool weather = %v, want %v", text, got, want)
		}
	}
}

// TestRenderObjectEscapesBackslash: an object's canonical JSON escapes a
// string's backslash (minimal escapes, package doc "Rendering"), so the
// rendering is JSON that reads back as the input's value and a grant
// pinning --o={"k":"a\\b"} matches exactly that object. Kills n13 (the
// backslash written raw: `--o={"k":"a\b"}`, whose \b a reader takes for a
// backspace).
func TestRenderObjectEscapesBackslash(t *testing.T) {
	in := `{"o":{"k":"a\\b","q":"say \"hi\"\\"}}`
	args, err := Render([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := args[0].Value, `{"k":"a\\b","q":"say \"hi\"\\"}`; len(args) != 1 || got != want {
		t.Fatalf("Render(%s) = --o=%s, want --o=%s", in, got, want)
	}
	var back, orig map[string]any
	if err := json.Unmarshal([]byte(args[0].Value), &back); err != nil {
		t.Fatalf("the rendering %s is not JSON: %v", args[0].Value, err)
	}
	_ = json.Unmarshal([]byte(in), &orig)
	if !reflect.DeepEqual(back, orig["o"]) {
		t.Fatalf("the rendering reads back as %v, want %v", back, orig["o"])
	}
}

// TestComponentComparedWhole: a grant pinned to a digest allows a call
// only whose component is that digest, not one it is a prefix of (the
// comparison is of the whole strings, in constant time). Kills m05 (a
// longer component accepted on its prefix).
func TestComponentComparedWhole(t *testing.T) {
	g := mustParse(t, "tool:invoke echo@"+digestA+" --...")
	for comp, want := range map[string]bool{
		digestA:                  true,
		digestA + "0":            false,
		digestA + digestB:        false,
		digestA[:len(digestA)-1]: false,
		"":                       false,
	} {
		call := ToolTarget("echo", nil)
		call.Component = comp
		if got := g.Allows(call); got != want {
			t.Errorf("%q allows a call of component %q = %v, want %v", g.String(), comp, got, want)
		}
	}
}

// TestParseKeepsRepeatedArgumentOrder: a grant naming one argument several
// times keeps those occurrences in the order written, among however many
// other arguments (its canonical form sorts by name only), so it allows
// the elements in that order. Kills r06 (the grant's arguments sorted
// unstably: with more than twelve the occurrences move).
func TestParseKeepsRepeatedArgumentOrder(t *testing.T) {
	text := "tool:invoke t --tag=6 --b=1 --tag=0 --b=2 --tag=5 --a=1 --tag=1 --b=3 --tag=4 --a=2 --tag=3 --b=4 --tag=2 --a=3 --z=1"
	g := mustParse(t, text)
	want := "tool:invoke t --a=1 --a=2 --a=3 --b=1 --b=2 --b=3 --b=4 --tag=6 --tag=0 --tag=5 --tag=1 --tag=4 --tag=3 --tag=2 --z=1"
	if g.String() != want {
		t.Fatalf("Parse(%q).String() = %q, want %q", text, g.String(), want)
	}
	args, err := Render([]byte(`{"a":["1","2","3"],"b":["1","2","3","4"],"tag":["6","0","5","1","4","3","2"],"z":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Allows(ToolTarget("t", args)) {
		t.Fatalf("%q does not allow the tags in the order it names them", g.String())
	}
}

// TestTargetStringAllowsExactlyIt: a target's String is the grant a
// denial offers to paste, and it allows that target and nothing beside it:
// a '*' in a path, a secret's name or a tool's name is escaped (else the
// pasted grant would be a wildcard over every sibling), a '@' in a tool's
// name is escaped (else it would start a component digest), and an IPv6
// host is bracketed (else its port would not read as one). Kills x01
// (IPv6 without brackets), x02 (a path's '*' unescaped: fs:read /srv/*
// offered for the file named "*"), x03 (a secret's) and x04 (a tool's '@').
func TestTargetStringAllowsExactlyIt(t *testing.T) {
	netT := func(h string, p int) Target {
		tg, err := NetworkTarget(h, p)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	fsT := func(p string) Target {
		tg, err := FSTarget("read", p)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	for _, tc := range []struct {
		target, sibling Target
		want            string
	}{
		{netT("::1", 443), netT("::2", 443), "network:connect [::1]:443"},
		{fsT("/srv/*"), fsT("/srv/passwords"), `fs:read /srv/\*`},
		{SecretTarget("use", "GH_*"), SecretTarget("use", "GH_TOKEN"), `secret:use GH_\*`},
		{ToolTarget("a@b", nil), ToolTarget("a", nil), `tool:invoke a\@b`},
	} {
		got := tc.target.String()
		if got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
			continue
		}
		g, err := Parse(got)
		if err != nil {
			t.Errorf("Parse(%q): %v", got, err)
			continue
		}
		if !g.Allows(tc.target) || g.Allows(tc.sibling) {
			t.Errorf("%q allows its target = %v, allows %s = %v; want true, false", got, g.Allows(tc.target), tc.sibling.String(), g.Allows(tc.sibling))
		}
	}
}

// TestSchemaReachPatternPropertiesOpen: a schema with additionalProperties
// false but patternProperties still accepts the arguments its patterns
// name, so a grant naming one is not reported as never matching (what
// `maiden cards grant` warns an operator of). Kills y04 (such a schema
// taken as closed: "its input schema accepts no argument "x_1"").
func TestSchemaReachPatternPropertiesOpen(t *testing.T) {
	schema := `{"type":"object","properties":{"q":{"type":"string"}},"patternProperties":{"^x_":{"type":"string"}},"additionalProperties":false}`
	never, escapes := SchemaReach(mustParse(t, "tool:invoke t --q=a --x_1=b"), schema)
	if never != "" || escapes != "any argument its input schema does not list" {
		t.Fatalf("SchemaReach = never %q, escapes %q; want never \"\", escapes \"any argument its input schema does not list\"", never, escapes)
	}
}

// TestRenderRefusesWhatIsNotJSON: Render reads only JSON, as a tool's
// decoder does, so an input that is not JSON is ErrRender, saying at
// which byte, rather than a rendering of what a lenient reader might make
// of it: an exponent or a fraction without digits, a raw control
// character in a string (the 0x1f unit separator included). Kills y09
// ("1e" rendered as 1), y10 ("1." rendered as 1) and y12 (a raw 0x1f
// accepted).
func TestRenderRefusesWhatIsNotJSON(t *testing.T) {
	for in, at := range map[string]string{
		`{"n":1e}`:           "at byte 7: expected digits of an exponent",
		`{"n":1e+}`:          "at byte 8: expected digits of an exponent",
		`{"n":1.}`:           "at byte 7: expected digits after '.'",
		"{\"s\":\"a\x1fb\"}": "at byte 7: expected an escaped control character",
		"{\"s\":\"a\x01b\"}": "at byte 7: expected an escaped control character",
	} {
		args, err := Render([]byte(in))
		if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), at) {
			t.Errorf("Render(%q) = %v, %v; want ErrRender %s", in, Rendering(args), err, at)
		}
	}
}
