package netguard_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/netguard"
)

// fuzzAllowed is a fixed allow list so the fuzzer also exercises the
// allowance paths, including a mapped-form prefix and NAT64.
var fuzzAllowed = prefixes("10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "::ffff:192.168.0.0/112", "64:ff9b::/96", "fe80::/10")

func FuzzClassify(f *testing.F) {
	seed := func(v6 string, v4 string) {
		f.Add(netip.MustParseAddr(v6).AsSlice(), netip.MustParseAddr(v4).AsSlice())
	}
	seed("::ffff:127.0.0.1", "127.0.0.1")
	seed("64:ff9b::a9fe:a9fe", "169.254.169.254")
	seed("2002:a00:1::", "10.0.0.1")
	seed("2001:0:4136:e378:8000:63bf:80ff:fffe", "0.0.0.0")
	seed("fd00:ec2::254", "100.100.100.200")
	seed("2606:4700:4700::1111", "8.8.8.8")
	seed("::", "255.255.255.255")
	seed("64:ff9b:1::a00:1", "192.0.0.192")
	f.Add([]byte{}, []byte{1})

	f.Fuzz(func(t *testing.T, raw6, raw4 []byte) {
		var b16 [16]byte
		var b4 [4]byte
		copy(b16[:], raw6)
		copy(b4[:], raw4)
		v6 := netip.AddrFrom16(b16)
		v4 := netip.AddrFrom4(b4)
		mapped := netip.AddrFrom16(v4.As16())

		for _, a := range []netip.Addr{v6, v4, mapped, v6.WithZone("eth0")} {
			checkInvariants(t, a)
		}

		// The mapped and plain forms are the same destination, with or
		// without allowances.
		for _, allowed := range [][]netip.Prefix{nil, fuzzAllowed} {
			p, m := netguard.Check(v4, allowed), netguard.Check(mapped, allowed)
			if p.Allow != m.Allow || p.Rule != m.Rule {
				t.Errorf("Check(%v)={%v %s} but Check(%v)={%v %s} with allowed=%v", v4, p.Allow, p.Rule, mapped, m.Allow, m.Rule, allowed)
			}
		}
		if cv, cm := netguard.Classify(v4), netguard.Classify(mapped); cv.Rule != cm.Rule || cv.Addr != cm.Addr || cv.Range != cm.Range {
			t.Errorf("Classify(%v)=%+v but Classify(%v)=%+v", v4, cv, mapped, cm)
		}

		// A zone never changes the outcome.
		if a, b := netguard.Check(v6, fuzzAllowed), netguard.Check(v6.WithZone("eth0"), fuzzAllowed); a.Allow != b.Allow || a.Rule != b.Rule {
			t.Errorf("zone changed Check(%v): %+v vs %+v", v6, a, b)
		}
	})
}

func checkInvariants(t *testing.T, a netip.Addr) {
	t.Helper()
	v := netguard.Classify(a)
	d := netguard.Check(a, nil)
	if v.Special == d.Allow {
		t.Fatalf("%v: Classify.Special=%v but Check(nil).Allow=%v", a, v.Special, d.Allow)
	}
	if v.Rule != d.Rule {
		t.Fatalf("%v: Classify.Rule=%q but Check(nil).Rule=%q", a, v.Rule, d.Rule)
	}
	if v.Special != (v.Rule != netguard.RuleGlobal) {
		t.Fatalf("%v: Special=%v with rule %q", a, v.Special, v.Rule)
	}
	if v.Range.IsValid() != v.Special {
		t.Fatalf("%v: rule %q with Range %v", a, v.Rule, v.Range)
	}
	if v.Range.IsValid() && !v.Range.Contains(v.Addr) {
		t.Fatalf("%v: Range %v does not contain classified Addr %v", a, v.Range, v.Addr)
	}
	if v.Name == "" || v.Addr.Zone() != "" {
		t.Fatalf("%v: bad verdict %+v", a, v)
	}
	if (v.Via == "") != !v.Outer.IsValid() {
		t.Fatalf("%v: Via %q with Outer %v", a, v.Via, v.Outer)
	}
	if !strings.HasSuffix(d.Reason, "(rule: "+d.Rule+")") || !strings.HasPrefix(d.Reason, "address "+a.String()+" ") {
		t.Fatalf("%v: Reason %q does not name the address and rule %q", a, d.Reason, d.Rule)
	}
	u := a.Unmap().WithZone("")
	if (u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() || u.IsMulticast() || u.IsUnspecified()) && !v.Special {
		t.Fatalf("%v: net/netip says not global, Classify says global", a)
	}

	// Allowances can only widen what is allowed, never narrow it, and they
	// never let a metadata address through without naming it exactly.
	w := netguard.Check(a, fuzzAllowed)
	if d.Allow && !w.Allow {
		t.Fatalf("%v: allowed with no allowances but refused with %v: %s", a, fuzzAllowed, w.Reason)
	}
	if w.Allow && w.Rule != netguard.RuleGlobal && w.Rule != netguard.RuleOperatorAllowed {
		t.Fatalf("%v: allowed with rule %q", a, w.Rule)
	}
	everything := netguard.Check(a, prefixes("0.0.0.0/0", "::/0"))
	if !everything.Allow && everything.Rule != netguard.RuleMetadata {
		t.Fatalf("%v: refused under allow-everything with rule %q", a, everything.Rule)
	}
	if everything.Allow && (v.Rule == netguard.RuleMetadata) {
		t.Fatalf("%v: metadata address allowed by a /0", a)
	}
}
