package netguard

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
)

// Verdict is the classification of one address.
type Verdict struct {
	// Addr is the address as classified: zone removed, unmapped for
	// IPv4-mapped input, and the embedded IPv4 address when Via is set.
	Addr netip.Addr
	// Special is true unless the address is ordinary global unicast.
	Special bool
	// Rule is a stable machine name, one of the Rule constants.
	Rule string
	// Name completes the phrase "address X is ...", e.g. "private".
	Name string
	// Range is the registry range that matched; invalid for "global" and
	// "invalid".
	Range netip.Prefix
	// Via is the rule of the IPv6 form that carried Addr ("ipv4-mapped",
	// "nat64", "6to4" or "teredo") when the verdict is about the embedded
	// IPv4 address; empty otherwise.
	Via string
	// Outer is the IPv6 address that carried Addr, when Via is set.
	Outer netip.Addr
}

// Result is the outcome of Check.
type Result struct {
	Allow bool
	// Rule is the verdict's rule, or "operator-allowed" when a special
	// address was let through by an allowance.
	Rule string
	// Reason is one sentence an operator can act on, e.g.
	// "address 10.0.0.5 is private (rule: private-range)".
	Reason string
	// Addr is the address passed to Check, zone included.
	Addr netip.Addr
	// Verdict is the classification the decision rests on: for a denial,
	// the address that was refused (which may be the embedded one).
	Verdict Verdict
}

// index maps the first byte of an address to the entries overlapping it,
// most specific first; see the package documentation for why.
type index [256][]entry

func buildIndex(entries []entry) *index {
	var ix index
	for _, e := range entries {
		first := int(e.prefix.Addr().AsSlice()[0])
		last := first
		if e.prefix.Bits() < 8 {
			last = first | 0xff>>e.prefix.Bits()
		}
		for b := first; b <= last; b++ {
			ix[b] = append(ix[b], e)
		}
	}
	for b := range ix {
		// Longest prefix first makes the first hit the most specific match;
		// rows of equal length are disjoint, so their order is irrelevant.
		slices.SortStableFunc(ix[b], func(x, y entry) int {
			return cmp.Compare(y.prefix.Bits(), x.prefix.Bits())
		})
	}
	return &ix
}

var (
	index4 = buildIndex(ipv4Table)
	index6 = buildIndex(ipv6Table)
)

func (ix *index) lookup(a netip.Addr, first byte) *entry {
	bucket := ix[first]
	for i := range bucket {
		if bucket[i].prefix.Contains(a) {
			return &bucket[i]
		}
	}
	return nil
}

// global stands in for "no entry matched" so a hop always has an entry.
var global = entry{rule: RuleGlobal, name: "global unicast"}

// reserved6 is the fail-closed answer for IPv6 outside 2000::/3 that no row
// covers. Unreachable while the table covers all of that space; kept so a
// table edit can only ever fail closed.
var reserved6 = entry{rule: RuleReserved, name: nameReserved6}

var invalid = entry{rule: RuleInvalid, name: "not a valid IP address"}

// hop is one address a connection is delivered to, with the row that
// classified it. Kept small so Classify copies pointers, not Verdicts.
type hop struct {
	addr netip.Addr
	e    *entry
}

func (h hop) special() bool { return h.e != &global }

func lookup4(a netip.Addr) *entry {
	if e := index4.lookup(a, a.As4()[0]); e != nil {
		return e
	}
	return &global
}

func lookup6(a netip.Addr) *entry {
	if e := index6.lookup(a, a.As16()[0]); e != nil {
		return e
	}
	if globalUnicast6.Contains(a) {
		return &global
	}
	return &reserved6
}

// embedded returns the IPv4 address a translation or tunnelling form
// delivers to, given the rule its IPv6 address matched.
func embedded(a netip.Addr, rule string) (netip.Addr, bool) {
	b := a.As16()
	switch rule {
	case RuleNAT64: // RFC 6052 /96 layout: low 32 bits
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case Rule6to4: // RFC 3056: 2002:V4ADDR::/48
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	case RuleTeredo: // RFC 4380 §4: client address stored inverted
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// route lists every address a connection to a is delivered to, embedded
// IPv4 first. via and outer are set when hops[0] was carried inside outer.
type route struct {
	hops  [2]hop
	n     int
	via   string
	outer netip.Addr
}

func routeOf(a netip.Addr) route {
	if !a.IsValid() {
		return route{hops: [2]hop{{e: &invalid}}, n: 1}
	}
	a = a.WithZone("")
	if a.Is4() {
		return route{hops: [2]hop{{a, lookup4(a)}}, n: 1}
	}
	if a.Is4In6() {
		// Only the IPv4 address exists on the wire, so the mapped IPv6
		// address is not a hop of its own.
		u := a.Unmap()
		return route{hops: [2]hop{{u, lookup4(u)}}, n: 1, via: RuleIPv4Mapped, outer: a}
	}
	e := lookup6(a)
	inner, ok := embedded(a, e.rule)
	if !ok {
		return route{hops: [2]hop{{a, e}}, n: 1}
	}
	return route{hops: [2]hop{{inner, lookup4(inner)}, {a, e}}, n: 2, via: e.rule, outer: a}
}

func (r *route) verdict(i int) Verdict {
	h := r.hops[i]
	v := Verdict{Addr: h.addr, Special: h.special(), Rule: h.e.rule, Name: h.e.name, Range: h.e.prefix}
	if i == 0 && r.via != "" {
		v.Via, v.Outer = r.via, r.outer
	}
	return v
}

// Classify returns the classification of a. For a form that embeds an IPv4
// address, a special embedded address takes precedence over the wrapping
// range, so ::ffff:127.0.0.1, 64:ff9b::7f00:1 and 2002:7f00:1:: are all
// "loopback" with Via naming the wrapper.
func Classify(a netip.Addr) Verdict {
	r := routeOf(a)
	for i := range r.n {
		if r.hops[i].special() {
			return r.verdict(i)
		}
	}
	return r.verdict(0)
}

// Check decides whether a tool may connect to addr. It is allowed if every
// address the connection is delivered to is ordinary global unicast or lies
// inside one of the operator's allowed prefixes; see the package
// documentation for how allowances apply to embedded IPv4 addresses and to
// metadata addresses.
func Check(addr netip.Addr, allowed []netip.Prefix) Result {
	r := routeOf(addr)
	var (
		by      [2]netip.Prefix
		nby     int
		special = -1
	)
	for i := range r.n {
		if !r.hops[i].special() {
			continue
		}
		v := r.verdict(i)
		p, ok := allowedBy(v, allowed)
		if !ok {
			return decide(addr, false, v.Rule, v, describe(v))
		}
		if special < 0 {
			special = i
		}
		by[nby] = p
		nby++
	}
	if special < 0 {
		v := r.verdict(0)
		return decide(addr, true, RuleGlobal, v, describe(v))
	}
	v := r.verdict(special)
	pred := describe(v) + ", but allowed by operator prefix " + by[0].String()
	if nby == 2 {
		pred = describe(v) + ", but allowed by operator prefixes " +
			by[0].String() + " and " + by[1].String()
	}
	return decide(addr, true, RuleOperatorAllowed, v, pred)
}

// allowedBy returns the first allowance covering v.Addr.
func allowedBy(v Verdict, allowed []netip.Prefix) (netip.Prefix, bool) {
	if v.Rule == RuleInvalid {
		return netip.Prefix{}, false
	}
	for _, p := range allowed {
		q := p
		if v.Addr.Is4() && p.Addr().Is4In6() && p.Bits() >= 96 {
			q = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if !q.IsValid() {
			continue
		}
		// Credential endpoints must be named exactly, never swept in by a
		// range allowed for some other reason.
		if v.Rule == RuleMetadata && q.Bits() < v.Range.Bits() {
			continue
		}
		if q.Contains(v.Addr) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

var viaPhrase = map[string]string{
	RuleIPv4Mapped: "the IPv4-mapped form of ",
	RuleNAT64:      "the NAT64 form of ",
	Rule6to4:       "the 6to4 form of ",
	RuleTeredo:     "a Teredo address for client ",
}

// describe is the predicate that follows "address X" in a reason.
func describe(v Verdict) string {
	tail := v.Name + " (rule: " + v.Rule + ")"
	if v.Via == "" {
		return "is " + tail
	}
	return "is " + viaPhrase[v.Via] + v.Addr.String() + ", which is " + tail
}

func subject(a netip.Addr) string {
	if !a.IsValid() {
		return "(invalid)"
	}
	return a.String()
}

func decide(addr netip.Addr, allow bool, rule string, v Verdict, pred string) Result {
	return Result{
		Allow:   allow,
		Rule:    rule,
		Reason:  "address " + subject(addr) + " " + pred,
		Addr:    addr,
		Verdict: v,
	}
}

// Describe returns Reason with the host name the address was resolved from,
// e.g. "address 10.0.0.5 of api.example.com is private (rule: private-range)".
// An empty host, or a host that is the address literal itself, leaves Reason
// unchanged.
func (d Result) Describe(host string) string {
	subj := subject(d.Addr)
	lead := "address " + subj + " "
	rest, ok := strings.CutPrefix(d.Reason, lead)
	if !ok || host == "" || host == subj || host == "["+subj+"]" {
		return d.Reason
	}
	return "address " + subj + " of " + host + " " + rest
}
