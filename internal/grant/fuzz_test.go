package grant

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, fails only with a *ParseError whose
// position lies inside the input, and its canonical form is a fixed point.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"tool:invoke weather --city=Par*", `tool:invoke t "--q=a \"b\"" --no-v --...`, "network:connect [::1]:443",
		"fs:read /data/**/x", `secret:use K\*`, "card:* *", `tool:invoke t --a\=b=c --no-x=true`, "tool \"x",
		`tool:invoke git log --max-count=* --... -- *.md "a b" \... ...`, "approve:always git show -- -x",
		"tool:invoke echo@sha256:" + strings.Repeat("Ab", 32) + " --m=*", `tool:invoke a\@b@sha256:` + strings.Repeat("0", 64),
		"tool:invoke e@sha512:00", "tool:invoke e@sha256:0@",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(s) || pe.Expected == "" {
				t.Fatalf("Parse(%q): bad error %#v", s, err)
			}
			return
		}
		c := g.String()
		g2, err := Parse(c)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", c, s, err)
		}
		if g2.String() != c {
			t.Fatalf("canonical form not a fixed point: %q → %q → %q", s, c, g2.String())
		}
		if !g.Covers(g2) || !g2.Covers(g) {
			t.Fatalf("%q and its canonical form %q do not cover each other", s, c)
		}
	})
}

// FuzzRender: Render never panics; what it renders, the grant printed for
// it allows (the denial's "grant it:" hint works), and only that: the same
// grant refuses the call with any one argument dropped.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		`{"city":"Berlin"}`, `{"a":[1,"x",true],"b":{"k":null},"no-x":false,"y":true}`, `{"s":"a b \" * \\ =","n":-1.5e-9}`,
		`{"...":true,"=":"=","-":"--..."}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		args, err := Render([]byte(in))
		if err != nil {
			if !errors.Is(err, ErrRender) {
				t.Fatalf("Render(%q): error %v is not ErrRender", in, err)
			}
			return
		}
		// A decoder of the tool's reads what was rendered: the same
		// properties, the same strings.
		var m map[string]any
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatalf("Render accepted %q, encoding/json refuses it: %v", in, err)
		}
		for _, a := range args {
			v, ok := m[a.Name]
			if !ok {
				t.Fatalf("Render of %q made argument %q, which encoding/json does not see", in, a.Name)
			}
			if s, isString := v.(string); isString && s != a.Value {
				t.Fatalf("Render of %q: %q is %q, encoding/json reads %q", in, a.Name, a.Value, s)
			}
		}
		target := ToolTarget("tool", args)
		g, err := Parse(target.String())
		if err != nil {
			t.Fatalf("the grant for %q, %q, does not parse: %v", in, target.String(), err)
		}
		if !g.Allows(target) {
			t.Fatalf("%q does not allow the call %q it was printed for", target.String(), in)
		}
		if len(args) > 0 {
			fewer := ToolTarget("tool", args[1:])
			if g.Allows(fewer) {
				t.Fatalf("%q allows the call without %s", target.String(), args[0])
			}
		}
	})
}

// FuzzCovers: attenuation soundness at the grant level. For a parent and a
// child grant built from the fuzzer's bytes, and a target built from them,
// if the parent covers the child and the child allows the target, the
// parent allows it.
func FuzzCovers(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07"), []byte("\x07\x06\x05\x04\x03\x02\x01\x00"), []byte("abc"))
	f.Add([]byte("pattern=cart*"), []byte("pattern=cart"), []byte("cart"))
	f.Add([]byte("\x01\x01\x02\x05\x02\x04\x04\x05\x02"), []byte("\x01\x01\x02\x05\x02\x04\x04\x02"), []byte("\x06\x06\x06\x06"))
	f.Fuzz(func(t *testing.T, pb, cb, tb []byte) {
		parent, child := genGrant(pb), genGrant(cb)
		if !parent.Covers(child) {
			return
		}
		for _, target := range genTargets(child, tb) {
			if child.Allows(target) && !parent.Allows(target) {
				t.Fatalf("parent %q covers child %q, child allows %q, parent refuses it", parent, child, target)
			}
		}
	})
}

// genGrant builds a tool or fs grant from bytes over a small alphabet, so
// that random grants often overlap.
func genGrant(b []byte) Grant {
	r := byteReader{b: b}
	if r.next()%4 == 0 {
		p := "/"
		for n := r.next() % 4; n > 0; n-- {
			p += []string{"a", "b", "*", "**"}[r.next()%4] + "/"
		}
		if len(p) > 1 {
			p = p[:len(p)-1]
		}
		g, _ := Parse("fs:read " + p)
		return g
	}
	s := "tool:invoke " + []string{"t", "*", "t*"}[r.next()%3]
	for n := r.next() % 4; n > 0; n-- {
		name := []string{"a", "b", "A"}[r.next()%3]
		switch r.next() % 4 {
		case 0:
			s += " --" + name
		case 1:
			s += " --no-" + name
		default:
			s += " --" + name + "=" + genValue(&r, true)
		}
	}
	if r.next()%3 == 0 {
		s += " --..."
	}
	// Name a component now and then (one of two), so that coverage
	// across pinned and unpinned grants is fuzzed too.
	if c := r.next() % 3; c > 0 {
		name, rest, _ := strings.Cut(s[len("tool:invoke "):], " ")
		s = "tool:invoke " + name + "@" + fuzzComponents[c] + " " + rest
	}
	g, _ := Parse(s)
	return g
}

// fuzzComponents are the components genGrant and genTargets name ("" none).
var fuzzComponents = [3]string{"", "sha256:" + strings.Repeat("0", 64), "sha256:" + strings.Repeat("1", 64)}

func genValue(r *byteReader, glob bool) string {
	v := ""
	for n := r.next() % 5; n > 0; n-- {
		c := []string{"a", "b", "*", `\*`, ".", "/"}[r.next()%6]
		if !glob && c == "*" {
			c = `\*`
		}
		v += c
	}
	return v
}

// genTargets makes targets near the child: its own arguments with the
// globs filled in from tb, plus random extras.
func genTargets(child Grant, tb []byte) []Target {
	r := byteReader{b: tb}
	if child.Class == FS {
		var out []Target
		for k := 0; k < 4; k++ {
			p := ""
			for n := r.next() % 5; n > 0; n-- {
				p += "/" + []string{"a", "b", "c"}[r.next()%3]
			}
			if p == "" {
				p = "/"
			}
			if t, err := FSTarget("read", p); err == nil {
				out = append(out, t)
			}
		}
		return out
	}
	var out []Target
	for k := 0; k < 4; k++ {
		var args []Arg
		for _, p := range child.args {
			switch p.form {
			case FormValue:
				v := ""
				for i, part := range p.value.parts {
					if i > 0 {
						v += []string{"", "a", "b", "*", "ab", ".", "/../"}[r.next()%7]
					}
					v += part
				}
				args = append(args, Arg{Name: p.name, Value: v})
			default:
				args = append(args, Arg{Name: p.name, Form: p.form})
			}
		}
		if r.next()%2 == 0 {
			args = append(args, Arg{Name: []string{"a", "b", "c", "A"}[r.next()%4], Value: "a"})
		}
		tg := ToolTarget([]string{"t", "tx", "x"}[r.next()%3], args)
		tg.Component = fuzzComponents[r.next()%3]
		out = append(out, tg)
	}
	return out
}

type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}
