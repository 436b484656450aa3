package cards

import (
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/grant"
)

// FuzzAttenuation is the soundness of derivation: for a random parent card
// and a random child spec that CheckDerive accepts, no target the child
// allows is refused by the parent (each deciding alone in a wallet), and a
// holder of both is never allowed more than by the parent alone.
func FuzzAttenuation(f *testing.F) {
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09"), []byte("\x09\x08\x07\x06\x05\x04\x03\x02\x01"), []byte("targets"))
	f.Add([]byte("cart*cart*cart*"), []byte("cartcartcart"), []byte("\x00\x01\x02"))
	f.Fuzz(func(t *testing.T, pb, cb, tb []byte) {
		pr := &reader{b: pb}
		parent := Card{ID: "P", Spec: genSpec(pr)}
		if pr.next()%3 == 0 {
			parent.Expires = t0.Add(time.Duration(1+pr.next()) * time.Minute)
		}
		cr := &reader{b: cb}
		child := genSpec(cr)
		if cr.next()%2 == 0 {
			child.Expires = t0.Add(time.Duration(1+cr.next()) * time.Minute)
		}
		if CheckDerive(parent, child, t0) != nil {
			return
		}
		childCard := Card{ID: "C", Parents: []string{"P"}, Spec: child}
		pw := NewWallet("a", t0, []Card{parent})
		cw := NewWallet("a", t0, []Card{childCard})
		both := NewWallet("a", t0, []Card{parent, childCard})
		tr := &reader{b: tb}
		for range 24 {
			target := genTarget(tr)
			if cw.Decide(target).Allow && !pw.Decide(target).Allow {
				t.Fatalf("child %+v allows %s, parent %+v refuses it", child, target, parent.Spec)
			}
			if both.Decide(target).Allow && !pw.Decide(target).Allow {
				t.Fatalf("parent+child allow %s, parent alone refuses it", target)
			}
		}
		// Later on, the child never outlives the parent.
		if !parent.Expires.IsZero() {
			later := parent.Expires
			if NewWallet("a", later, []Card{childCard}).Decide(genTarget(&reader{})).Allow {
				t.Fatalf("the child allows something after the parent expired")
			}
		}
	})
}

type reader struct {
	b []byte
	i int
}

func (r *reader) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func (r *reader) pick(xs ...string) string { return xs[r.next()%len(xs)] }

func genSpec(r *reader) Spec {
	var s Spec
	lists := []*[]Grant{&s.LowerPos, &s.LowerNeg, &s.UpperPos, &s.UpperNeg}
	for n := r.next() % 6; n > 0; n-- {
		l := lists[r.next()%4]
		if g, ok := genGrant(r); ok {
			*l = append(*l, Grant{Grant: g, Recipient: r.pick("", "", "a", "b")})
		}
	}
	return s
}

func genGrant(r *reader) (grant.Grant, bool) {
	var s string
	switch r.next() % 3 {
	case 0:
		s = "fs:" + r.pick("read", "write", "*") + " " + genPath(r, true)
	case 1:
		s = "secret:" + r.pick("use", "reveal", "*") + " " + r.pick("K", "K*", "*", "L")
	default:
		s = "tool:" + r.pick("invoke", "*") + " " + r.pick("t", "x", "*", "t*")
		for n := r.next() % 3; n > 0; n-- {
			name := r.pick("a", "b", "A")
			switch r.next() % 4 {
			case 0:
				s += " --" + name
			case 1:
				s += " --no-" + name
			default:
				s += " --" + name + "=" + genValue(r, true)
			}
		}
		if r.next()%3 == 0 {
			s += " --..."
		}
	}
	g, err := grant.Parse(s)
	return g, err == nil
}

func genPath(r *reader, pattern bool) string {
	p := ""
	for n := r.next() % 4; n > 0; n-- {
		seg := r.pick("a", "b", "c")
		if pattern {
			seg = r.pick("a", "b", "*", "**")
		}
		p += "/" + seg
	}
	if p == "" {
		return "/"
	}
	return p
}

func genValue(r *reader, glob bool) string {
	v := ""
	for n := r.next() % 4; n > 0; n-- {
		c := r.pick("a", "b", "*", `\*`)
		if !glob && c == "*" {
			c = "x"
		}
		v += c
	}
	return v
}

func genTarget(r *reader) grant.Target {
	switch r.next() % 3 {
	case 0:
		t, err := grant.FSTarget(r.pick("read", "write"), genPath(r, false))
		if err != nil {
			panic(err)
		}
		return t
	case 1:
		return grant.SecretTarget(r.pick("use", "reveal"), r.pick("K", "KK", "L", "*"))
	}
	var args []grant.Arg
	for n := r.next() % 3; n > 0; n-- {
		name := r.pick("a", "b", "c", "A")
		switch r.next() % 3 {
		case 0:
			args = append(args, grant.Arg{Name: name, Form: grant.FormTrue})
		case 1:
			args = append(args, grant.Arg{Name: name, Form: grant.FormFalse})
		default:
			args = append(args, grant.Arg{Name: name, Value: r.pick("", "a", "b", "ab", "*", "a*", "ba")})
		}
	}
	return grant.ToolTarget(r.pick("t", "x", "tt"), args)
}
