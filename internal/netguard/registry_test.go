package netguard

import (
	"net/netip"
	"testing"
)

var knownRules = map[string]bool{
	RuleMetadata: true, RuleThisNetwork: true, RuleUnspecified: true, RulePrivate: true,
	RuleCGNAT: true, RuleLoopback: true, RuleLinkLocal: true, RuleIETFProtocol: true,
	RuleServiceContinuity: true, RuleDummy: true, RulePCPAnycast: true, RuleTURNAnycast: true,
	RuleNAT64Discovery: true, RuleDocumentation: true, RuleAS112: true, RuleAMT: true,
	Rule6to4Relay: true, Rule6a44Relay: true, RuleBenchmarking: true, RuleReserved: true,
	RuleBroadcast: true, RuleMulticast: true, RuleIPv4Mapped: true, RuleIPv4Compatible: true,
	RuleNAT64: true, RuleDiscardOnly: true, RuleTeredo: true, RuleDNSSDAnycast: true,
	RuleORCHID: true, RuleDroneRemoteID: true, Rule6to4: true, RuleSRv6SID: true,
	RuleUniqueLocal: true, RuleSiteLocal: true,
}

// wrapperRules are the rows whose addresses carry an IPv4 address, so the
// embedded address may decide the verdict instead of the row.
var wrapperRules = map[string]bool{RuleIPv4Mapped: true, RuleNAT64: true, Rule6to4: true, RuleTeredo: true}

func TestRegistryTables(t *testing.T) {
	for _, tab := range []struct {
		name    string
		entries []entry
		is4     bool
	}{{"ipv4Table", ipv4Table, true}, {"ipv6Table", ipv6Table, false}} {
		seen := map[netip.Prefix]bool{}
		for _, e := range tab.entries {
			switch {
			case !e.prefix.IsValid() || e.prefix != e.prefix.Masked():
				t.Errorf("%s: %v is not a masked prefix", tab.name, e.prefix)
			case e.prefix.Addr().Is4() != tab.is4:
				t.Errorf("%s: %v is in the wrong table", tab.name, e.prefix)
			case seen[e.prefix]:
				t.Errorf("%s: %v listed twice", tab.name, e.prefix)
			case !knownRules[e.rule]:
				t.Errorf("%s: %v has unknown rule %q", tab.name, e.prefix, e.rule)
			case e.name == "" || e.ref == "":
				t.Errorf("%s: %v lacks a name or reference", tab.name, e.prefix)
			}
			seen[e.prefix] = true
			if e.rule == RuleMetadata && e.prefix.Bits() != e.prefix.Addr().BitLen() {
				t.Errorf("%s: metadata entry %v is not a single address", tab.name, e.prefix)
			}
		}
	}
}

// TestEveryEntryBoundaries walks every row of both tables: its first and
// last address must be classified by that row or a more specific one nested
// in it, and the addresses just outside must not be.
func TestEveryEntryBoundaries(t *testing.T) {
	for _, e := range append(append([]entry{}, ipv4Table...), ipv6Table...) {
		first := e.prefix.Addr()
		last := lastAddr(e.prefix)
		for _, a := range []netip.Addr{first, last} {
			v := Classify(a)
			if !v.Special {
				t.Errorf("%v (%s): inside address %v classified global", e.prefix, e.rule, a)
				continue
			}
			if v.Via != "" {
				if !wrapperRules[e.rule] && !nestedIn(e.prefix, lookup6(v.Outer).prefix) {
					t.Errorf("%v (%s): inside address %v reported via %s", e.prefix, e.rule, a, v.Via)
				}
				continue
			}
			if !nestedIn(e.prefix, v.Range) {
				t.Errorf("%v (%s): inside address %v classified by %v (%s), outside the entry", e.prefix, e.rule, a, v.Range, v.Rule)
			}
		}
		for _, a := range []netip.Addr{first.Prev(), last.Next()} {
			if !a.IsValid() {
				continue // range starts or ends at the edge of the family
			}
			if v := Classify(a); v.Via == "" && nestedIn(e.prefix, v.Range) {
				t.Errorf("%v (%s): outside address %v classified by %v (%s)", e.prefix, e.rule, a, v.Range, v.Rule)
			}
		}
	}
}

func nestedIn(outer, inner netip.Prefix) bool {
	return inner.IsValid() && inner.Bits() >= outer.Bits() && outer.Contains(inner.Addr())
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestIPv6GlobalOnlyIn2000 checks that no IPv6 address outside 2000::/3
// reaches "global" through a gap in the table: every /16 outside it must be
// covered by some row.
func TestIPv6GlobalOnlyIn2000(t *testing.T) {
	for hi := 0; hi < 1<<16; hi++ {
		var b [16]byte
		b[0], b[1] = byte(hi>>8), byte(hi)
		for _, fill := range []byte{0x00, 0xff} {
			for i := 2; i < 16; i++ {
				b[i] = fill
			}
			a := netip.AddrFrom16(b)
			if a.Is4In6() {
				continue
			}
			e := lookup6(a)
			if e == &reserved6 || (e == &global && !globalUnicast6.Contains(a)) {
				t.Fatalf("%v: classified %q by %v; a gap in the IPv6 table", a, e.rule, e.prefix)
			}
		}
	}
}

func TestIndexBucketsMostSpecificFirst(t *testing.T) {
	for _, ix := range []*index{index4, index6} {
		for b, bucket := range ix {
			for i := 1; i < len(bucket); i++ {
				if bucket[i-1].prefix.Bits() < bucket[i].prefix.Bits() {
					t.Errorf("bucket %#x: %v before more specific %v", b, bucket[i-1].prefix, bucket[i].prefix)
				}
			}
		}
	}
}
