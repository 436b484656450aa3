package grant

import (
	"errors"
	"strings"
	"testing"
)

// Two component digests, as the call path gives them (lower-case hex).
var (
	digestA = "sha256:" + strings.Repeat("a1", 32)
	digestB = "sha256:" + strings.Repeat("b2", 32)
)

// TestComponentParse: a tool grant's name may carry @sha256:HEX, which is
// normalised (lower-case hex) and kept in the canonical form; a literal
// '@' in a name is escaped, so the canonical form reads back the same.
func TestComponentParse(t *testing.T) {
	upper := "sha256:" + strings.ToUpper(strings.Repeat("a1", 32))
	for _, tc := range []struct{ in, want string }{
		{"tool:invoke echo@" + digestA + " --message=*", "tool:invoke echo@" + digestA + " --message=*"},
		{"tool:invoke echo@" + upper + " --...", "tool:invoke echo@" + digestA + " --..."},
		{"tool:invoke echo@SHA256:" + strings.Repeat("a1", 32), "tool:invoke echo@" + digestA},
		{"tool:invoke ec*@" + digestA + " --...", "tool:invoke ec*@" + digestA + " --..."},
		{"tool:invoke git@" + digestA + " log --max-count=* -- *.md", "tool:invoke git@" + digestA + " log --max-count=* -- *.md"},
		{`tool:invoke "echo@` + digestA + `"`, "tool:invoke echo@" + digestA},
		{`tool:invoke a\@b --x=1`, `tool:invoke a\@b --x=1`},
		{`tool:invoke a\@b@` + digestB, `tool:invoke a\@b@` + digestB},
		{"tool:invoke echo --m=a@b", "tool:invoke echo --m=a@b"}, // '@' in a value is a value
	} {
		t.Run(tc.in, func(t *testing.T) {
			g := mustParse(t, tc.in)
			if got := g.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			if again := mustParse(t, g.String()); again.String() != g.String() || again.Component() != g.Component() {
				t.Fatalf("round trip: %q then %q", g.String(), again.String())
			}
		})
	}
	if g := mustParse(t, `tool:invoke a\@b --x=1`); g.Component() != "" {
		t.Fatalf("an escaped '@' started a digest: %q", g.Component())
	}
}

// TestComponentParseErrors: every malformed digest is refused at grant
// time, saying where and what was expected; nothing is guessed (no short
// digest, no other algorithm, no pattern).
func TestComponentParseErrors(t *testing.T) {
	hex := strings.Repeat("a1", 32)
	for _, tc := range []struct {
		in       string
		col      int
		expected string
	}{
		{"tool:invoke echo@", 18, "a component digest after '@'"},
		{"tool:invoke echo@ --x=1", 18, "a component digest after '@'"},
		{"tool:invoke echo@" + hex, 18, "a component digest sha256:HEX after '@'"},
		{"tool:invoke echo@sha512:" + hex + hex, 18, "a sha256: digest"},
		{"tool:invoke echo@md5:" + hex[:32], 18, "a sha256: digest"},
		{"tool:invoke echo@sha256:" + hex[:63], 25, "64 hex digits after sha256:"},
		{"tool:invoke echo@sha256:" + hex + "0", 25, "64 hex digits after sha256:"},
		{"tool:invoke echo@sha256:", 25, "64 hex digits after sha256:"},
		{"tool:invoke echo@sha256:" + hex[:10] + "g" + hex[11:], 35, "a hex digit"},
		{"tool:invoke echo@sha256:" + hex[:10] + "*", 35, "a hex digit"},
		{`tool:invoke echo@sha256:\` + hex, 25, "a component digest without escapes"},
		{"tool:invoke echo@sha256:" + hex + "@" + digestB[7:], 89, "a hex digit"},
		{"tool:invoke @" + digestA, 13, "a tool name before '@'"},
		{"approve:always echo@" + digestA + " --...", 20, "an approve:always tool name without a component digest"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse(tc.in)
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) = %v, want a *ParseError", tc.in, err)
			}
			if pe.Pos+1 != tc.col || !strings.Contains(pe.Expected, tc.expected) {
				t.Fatalf("Parse(%q): column %d expected %q; want column %d expected %q (%v)", tc.in, pe.Pos+1, pe.Expected, tc.col, tc.expected, err)
			}
		})
	}
}

// TestComponentAllows: a grant naming a digest allows a call only when
// the call's component is that digest; a call of another component, or
// of a tool whose component is not known, is not covered. A grant naming
// none allows any component. Prohibitions match the same way (one
// AllowsRef for all four lists, CARDS.md "Decision").
func TestComponentAllows(t *testing.T) {
	call := func(component string) Target {
		tg := toolTarget(t, "echo", `{"message":"hi"}`)
		tg.Component = component
		return tg
	}
	pinned := mustParse(t, "tool:invoke echo@"+digestA+" --message=*")
	plain := mustParse(t, "tool:invoke echo --message=*")
	for _, tc := range []struct {
		name  string
		g     Grant
		t     Target
		allow bool
	}{
		{"same component", pinned, call(digestA), true},
		{"another component", pinned, call(digestB), false},
		{"component not known", pinned, call(""), false},
		{"differs in the last digit", pinned, call(digestA[:len(digestA)-1] + "0"), false},
		{"upper-case target is not normalised here", pinned, call(strings.ToUpper(digestA)), false},
		{"no digest, any component", plain, call(digestB), true},
		{"no digest, unknown component", plain, call(""), true},
		{"pinned, other arguments", pinned, toolTarget(t, "echo", `{"m":"hi"}`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.g.Allows(tc.t); got != tc.allow {
				t.Fatalf("%q allows %q (component %q) = %v, want %v", tc.g, tc.t.String(), tc.t.Component, got, tc.allow)
			}
		})
	}
	if !pinned.AllowsOtherComponent(ptr(call(digestB))) || !pinned.AllowsOtherComponent(ptr(call(""))) {
		t.Fatal("AllowsOtherComponent: the pinned grant allows the call but for its component, and says not")
	}
	if pinned.AllowsOtherComponent(ptr(call(digestA))) || plain.AllowsOtherComponent(ptr(call(digestB))) ||
		pinned.AllowsOtherComponent(ptr(toolTarget(t, "echo", `{"m":"x"}`))) {
		t.Fatal("AllowsOtherComponent is true where the component is not what stands between the grant and the call")
	}
}

func ptr[T any](v T) *T { return &v }

// TestComponentCovers: attenuation stays sound. A child naming a digest
// is under a parent naming the same or none; a child naming none, or
// another digest, is not under a parent naming one.
func TestComponentCovers(t *testing.T) {
	for _, tc := range []struct {
		parent, child string
		covers        bool
	}{
		{"tool:invoke echo --...", "tool:invoke echo@" + digestA + " --...", true},
		{"tool:invoke echo@" + digestA + " --...", "tool:invoke echo@" + digestA + " --message=*", true},
		{"tool:invoke echo@" + digestA + " --...", "tool:invoke echo --message=*", false},
		{"tool:invoke echo@" + digestA + " --...", "tool:invoke echo@" + digestB + " --...", false},
		{"tool:invoke *@" + digestA + " --...", "tool:invoke echo@" + digestA + " --x=1", true},
		{"tool:invoke * --...", "tool:invoke echo@" + digestB + " --x=1", true},
	} {
		if got := mustParse(t, tc.parent).Covers(mustParse(t, tc.child)); got != tc.covers {
			t.Errorf("%q covers %q = %v, want %v", tc.parent, tc.child, got, tc.covers)
		}
	}
}

// TestComponentPinnedString: the grant a denial offers for a call whose
// component is known names it, and allows that call only.
func TestComponentPinnedString(t *testing.T) {
	tg := CommandTarget("git", []string{"log"}, []Arg{{Name: "max-count", Value: "5"}}, []string{"README.md"})
	tg.Component = digestA
	want := "tool:invoke git@" + digestA + " log --max-count=5 -- README.md"
	if got := tg.PinnedString(); got != want {
		t.Fatalf("PinnedString() = %q, want %q", got, want)
	}
	g := mustParse(t, tg.PinnedString())
	other := tg
	other.Component = digestB
	if !g.Allows(tg) || g.Allows(other) {
		t.Fatalf("%q: allows its own call %v, another component's %v", g, g.Allows(tg), g.Allows(other))
	}
	if plain := toolTarget(t, "echo", `{}`); plain.PinnedString() != plain.String() {
		t.Fatalf("a target without a component: PinnedString %q, String %q", plain.PinnedString(), plain.String())
	}
}

// TestComponentBeyond: what a grant adds says the digest when it names
// one, and says the widening to any component when today's grants name
// one.
func TestComponentBeyond(t *testing.T) {
	for _, tc := range []struct {
		name, g string
		held    []string
		want    string
		red     bool
	}{
		{"pinned, new tool", "tool:invoke echo@" + digestA + " --...", nil,
			"tool:invoke echo@" + digestA + " with any arguments (today nothing of echo; only while its component is the one named)", false},
		{"pinned, wider arguments", "tool:invoke echo@" + digestA + " --message=*", []string{"tool:invoke echo@" + digestA + " --message=hi"},
			"tool:invoke echo@" + digestA + " with any --message= (today only --message=hi)", false},
		{"any component where today one", "tool:invoke echo --message=*", []string{"tool:invoke echo@" + digestA + " --message=*"},
			"tool:invoke echo with any component (today only " + digestA + ")", false},
		{"another component is not related", "tool:invoke echo@" + digestB + " --...", []string{"tool:invoke echo@" + digestA + " --..."},
			"tool:invoke echo@" + digestB + " with any arguments (today nothing of echo; only while its component is the one named)", false},
		{"pinned under an unpinned grant", "tool:invoke echo@" + digestA + " --message=hi", []string{"tool:invoke echo --..."},
			"nothing new: tool:invoke echo@" + digestA + " --message=hi is covered by tool:invoke echo --...", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held []Grant
			for _, h := range tc.held {
				held = append(held, mustParse(t, h))
			}
			got, red := Beyond(mustParse(t, tc.g), held, nil)
			if got != tc.want || red != tc.red {
				t.Errorf("Beyond(%q, %q)\n got %q (redundant %v)\nwant %q (redundant %v)", tc.g, tc.held, got, red, tc.want, tc.red)
			}
		})
	}
}
