package netguard_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maiden-run/maiden/internal/netguard"
)

// teredo builds a Teredo address the way RFC 4380 §4 does, independently of
// the decoder under test: server in bits 32-63, then flags, then port and
// client address each XORed with all-ones.
func teredo(server, client string, flags, port uint16) netip.Addr {
	s := netip.MustParseAddr(server).As4()
	c := netip.MustParseAddr(client).As4()
	return netip.AddrFrom16([16]byte{
		0x20, 0x01, 0x00, 0x00,
		s[0], s[1], s[2], s[3],
		byte(flags >> 8), byte(flags),
		^byte(port >> 8), ^byte(port),
		^c[0], ^c[1], ^c[2], ^c[3],
	})
}

func TestTeredoHelperMatchesRFCExample(t *testing.T) {
	// RFC 4380 §4: server 65.54.227.120, cone flag, port 40000, client
	// 192.0.2.45.
	got := teredo("65.54.227.120", "192.0.2.45", 0x8000, 40000)
	if want := netip.MustParseAddr("2001:0:4136:e378:8000:63bf:3fff:fdd2"); got != want {
		t.Fatalf("teredo helper = %v, want %v", got, want)
	}
}

type decisionView struct {
	Allow  bool
	Rule   string
	Reason string
}

func dview(d netguard.Result) decisionView {
	return decisionView{Allow: d.Allow, Rule: d.Rule, Reason: d.Reason}
}

// TestCheckAdversarial covers forms a hostile tool or DNS answer might use
// to reach an address that is refused in its plain form.
func TestCheckAdversarial(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr netip.Addr
		want decisionView
	}{
		{"plain private", netip.MustParseAddr("10.0.0.5"), decisionView{false, "private-range",
			"address 10.0.0.5 is private (rule: private-range)"}},
		{"plain metadata", netip.MustParseAddr("169.254.169.254"), decisionView{false, "metadata",
			"address 169.254.169.254 is a cloud metadata address (rule: metadata)"}},
		{"mapped loopback", netip.MustParseAddr("::ffff:127.0.0.1"), decisionView{false, "loopback",
			"address ::ffff:127.0.0.1 is the IPv4-mapped form of 127.0.0.1, which is loopback (rule: loopback)"}},
		{"mapped loopback, hex spelling", netip.MustParseAddr("0:0:0:0:0:FFFF:7F00:0001"), decisionView{false, "loopback",
			"address ::ffff:127.0.0.1 is the IPv4-mapped form of 127.0.0.1, which is loopback (rule: loopback)"}},
		{"mapped private", netip.MustParseAddr("::ffff:10.0.0.5"), decisionView{false, "private-range",
			"address ::ffff:10.0.0.5 is the IPv4-mapped form of 10.0.0.5, which is private (rule: private-range)"}},
		{"mapped metadata", netip.MustParseAddr("::ffff:169.254.169.254"), decisionView{false, "metadata",
			"address ::ffff:169.254.169.254 is the IPv4-mapped form of 169.254.169.254, which is a cloud metadata address (rule: metadata)"}},
		{"mapped unspecified", netip.MustParseAddr("::ffff:0.0.0.0"), decisionView{false, "unspecified",
			"address ::ffff:0.0.0.0 is the IPv4-mapped form of 0.0.0.0, which is unspecified (rule: unspecified)"}},
		{"NAT64 metadata", netip.MustParseAddr("64:ff9b::a9fe:a9fe"), decisionView{false, "metadata",
			"address 64:ff9b::a9fe:a9fe is the NAT64 form of 169.254.169.254, which is a cloud metadata address (rule: metadata)"}},
		{"NAT64 loopback", netip.MustParseAddr("64:ff9b::7f00:1"), decisionView{false, "loopback",
			"address 64:ff9b::7f00:1 is the NAT64 form of 127.0.0.1, which is loopback (rule: loopback)"}},
		{"local-use NAT64 private", netip.MustParseAddr("64:ff9b:1::a00:1"), decisionView{false, "private-range",
			"address 64:ff9b:1::a00:1 is the NAT64 form of 10.0.0.1, which is private (rule: private-range)"}},
		{"6to4 private", netip.MustParseAddr("2002:a00:1::"), decisionView{false, "private-range",
			"address 2002:a00:1:: is the 6to4 form of 10.0.0.1, which is private (rule: private-range)"}},
		{"6to4 loopback", netip.MustParseAddr("2002:7f00:1::"), decisionView{false, "loopback",
			"address 2002:7f00:1:: is the 6to4 form of 127.0.0.1, which is loopback (rule: loopback)"}},
		{"6to4 metadata, host bits set", netip.MustParseAddr("2002:a9fe:a9fe:1:2:3:4:5"), decisionView{false, "metadata",
			"address 2002:a9fe:a9fe:1:2:3:4:5 is the 6to4 form of 169.254.169.254, which is a cloud metadata address (rule: metadata)"}},
		{"Teredo loopback", teredo("65.54.227.120", "127.0.0.1", 0x8000, 40000), decisionView{false, "loopback",
			"address 2001:0:4136:e378:8000:63bf:80ff:fffe is a Teredo address for client 127.0.0.1, which is loopback (rule: loopback)"}},
		{"Teredo metadata", teredo("65.54.227.120", "169.254.169.254", 0x8000, 40000), decisionView{false, "metadata",
			"address 2001:0:4136:e378:8000:63bf:5601:5601 is a Teredo address for client 169.254.169.254, which is a cloud metadata address (rule: metadata)"}},
		{"Teredo private, other server", teredo("8.8.4.4", "192.168.1.1", 0, 1), decisionView{false, "private-range",
			"address 2001:0:808:404:0:fffe:3f57:fefe is a Teredo address for client 192.168.1.1, which is private (rule: private-range)"}},
		{"unspecified v4", netip.MustParseAddr("0.0.0.0"), decisionView{false, "unspecified",
			"address 0.0.0.0 is unspecified (rule: unspecified)"}},
		{"this network", netip.MustParseAddr("0.1.2.3"), decisionView{false, "this-network",
			"address 0.1.2.3 is reserved for this network (rule: this-network)"}},
		{"unspecified v6", netip.MustParseAddr("::"), decisionView{false, "unspecified",
			"address :: is unspecified (rule: unspecified)"}},
		{"IPv4-compatible loopback", netip.MustParseAddr("::127.0.0.1"), decisionView{false, "ipv4-compatible",
			"address ::7f00:1 is a deprecated IPv4-compatible address (rule: ipv4-compatible)"}},
		{"zoned link-local", netip.MustParseAddr("fe80::1%eth0"), decisionView{false, "link-local",
			"address fe80::1%eth0 is link-local (rule: link-local)"}},
		{"IPv6 metadata", netip.MustParseAddr("fd00:ec2::254"), decisionView{false, "metadata",
			"address fd00:ec2::254 is a cloud metadata address (rule: metadata)"}},
		{"NAT64 of a global address still needs the prefix allowed", netip.MustParseAddr("64:ff9b::808:808"), decisionView{false, "nat64",
			"address 64:ff9b::808:808 is a NAT64 translation address (rule: nat64)"}},
		{"6to4 of a global address", netip.MustParseAddr("2002:808:808::1"), decisionView{false, "6to4",
			"address 2002:808:808::1 is a 6to4 address (rule: 6to4)"}},
		{"Teredo of a global address", teredo("65.54.227.120", "8.8.8.8", 0x8000, 40000), decisionView{false, "teredo",
			"address 2001:0:4136:e378:8000:63bf:f7f7:f7f7 is a Teredo tunnel address (rule: teredo)"}},
		{"mapped global is allowed", netip.MustParseAddr("::ffff:8.8.8.8"), decisionView{true, "global",
			"address ::ffff:8.8.8.8 is the IPv4-mapped form of 8.8.8.8, which is global unicast (rule: global)"}},
		{"global", netip.MustParseAddr("2606:4700:4700::1111"), decisionView{true, "global",
			"address 2606:4700:4700::1111 is global unicast (rule: global)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := netguard.Check(tc.addr, nil)
			if diff := cmp.Diff(tc.want, dview(got)); diff != "" {
				t.Errorf("Check(%s, nil) mismatch (-want +got):\n%s", tc.addr, diff)
			}
			if got.Addr != tc.addr {
				t.Errorf("Result.Addr = %v, want %v", got.Addr, tc.addr)
			}
			if c := netguard.Classify(tc.addr); c.Rule != got.Rule || view(c) != view(got.Verdict) {
				t.Errorf("Classify = %+v, Result.Verdict = %+v; want the same verdict", view(c), view(got.Verdict))
			}
		})
	}
}

func prefixes(s ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(s))
	for i, p := range s {
		ps[i] = netip.MustParsePrefix(p)
	}
	return ps
}

func TestCheckAllowances(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addr    string
		allowed []netip.Prefix
		want    decisionView
	}{
		{"loopback allowed", "127.0.0.1", prefixes("127.0.0.0/8"), decisionView{true, "operator-allowed",
			"address 127.0.0.1 is loopback (rule: loopback), but allowed by operator prefix 127.0.0.0/8"}},
		{"loopback allowance does not cover private", "10.0.0.1", prefixes("127.0.0.0/8"), decisionView{false, "private-range",
			"address 10.0.0.1 is private (rule: private-range)"}},
		{"second allowance matches", "10.0.0.1", prefixes("127.0.0.0/8", "10.0.0.0/24"), decisionView{true, "operator-allowed",
			"address 10.0.0.1 is private (rule: private-range), but allowed by operator prefix 10.0.0.0/24"}},
		{"unmasked allowance still matches", "10.0.0.1", prefixes("10.9.9.9/8"), decisionView{true, "operator-allowed",
			"address 10.0.0.1 is private (rule: private-range), but allowed by operator prefix 10.9.9.9/8"}},
		{"just outside allowance", "10.0.1.0", prefixes("10.0.0.0/24"), decisionView{false, "private-range",
			"address 10.0.1.0 is private (rule: private-range)"}},
		{"global needs no allowance", "8.8.8.8", prefixes("127.0.0.0/8"), decisionView{true, "global",
			"address 8.8.8.8 is global unicast (rule: global)"}},

		// Embedded IPv4: each address the connection reaches is matched
		// against allowances of its own family.
		{"IPv6 loopback allowance does not cover mapped v4 loopback", "::ffff:127.0.0.1", prefixes("::1/128"), decisionView{false, "loopback",
			"address ::ffff:127.0.0.1 is the IPv4-mapped form of 127.0.0.1, which is loopback (rule: loopback)"}},
		{"IPv4 allowance covers the mapped form", "::ffff:127.0.0.1", prefixes("::1/128", "127.0.0.0/8"), decisionView{true, "operator-allowed",
			"address ::ffff:127.0.0.1 is the IPv4-mapped form of 127.0.0.1, which is loopback (rule: loopback), but allowed by operator prefix 127.0.0.0/8"}},
		{"IPv4 allowance does not cover ::1", "::1", prefixes("127.0.0.0/8"), decisionView{false, "loopback",
			"address ::1 is loopback (rule: loopback)"}},
		{"mapped-form allowance means its IPv4 prefix", "10.1.2.3", prefixes("::ffff:10.0.0.0/104"), decisionView{true, "operator-allowed",
			"address 10.1.2.3 is private (rule: private-range), but allowed by operator prefix ::ffff:10.0.0.0/104"}},
		{"mapped-form allowance and mapped address", "::ffff:10.1.2.3", prefixes("::ffff:10.0.0.0/104"), decisionView{true, "operator-allowed",
			"address ::ffff:10.1.2.3 is the IPv4-mapped form of 10.1.2.3, which is private (rule: private-range), but allowed by operator prefix ::ffff:10.0.0.0/104"}},
		{"NAT64 prefix allowed, embedded global", "64:ff9b::808:808", prefixes("64:ff9b::/96"), decisionView{true, "operator-allowed",
			"address 64:ff9b::808:808 is a NAT64 translation address (rule: nat64), but allowed by operator prefix 64:ff9b::/96"}},
		{"NAT64 prefix allowed, embedded loopback still refused", "64:ff9b::7f00:1", prefixes("64:ff9b::/96"), decisionView{false, "loopback",
			"address 64:ff9b::7f00:1 is the NAT64 form of 127.0.0.1, which is loopback (rule: loopback)"}},
		{"embedded allowed, NAT64 prefix not", "64:ff9b::7f00:1", prefixes("127.0.0.0/8"), decisionView{false, "nat64",
			"address 64:ff9b::7f00:1 is a NAT64 translation address (rule: nat64)"}},
		{"both NAT64 hops allowed", "64:ff9b::7f00:1", prefixes("64:ff9b::/96", "127.0.0.0/8"), decisionView{true, "operator-allowed",
			"address 64:ff9b::7f00:1 is the NAT64 form of 127.0.0.1, which is loopback (rule: loopback), but allowed by operator prefixes 127.0.0.0/8 and 64:ff9b::/96"}},
		{"6to4 allowed, embedded private refused", "2002:a00:1::", prefixes("2002::/16"), decisionView{false, "private-range",
			"address 2002:a00:1:: is the 6to4 form of 10.0.0.1, which is private (rule: private-range)"}},
		{"zoned link-local allowed", "fe80::1%eth0", prefixes("fe80::/10"), decisionView{true, "operator-allowed",
			"address fe80::1%eth0 is link-local (rule: link-local), but allowed by operator prefix fe80::/10"}},

		// Metadata addresses must be named exactly.
		{"link-local allowance does not expose metadata", "169.254.169.254", prefixes("169.254.0.0/16"), decisionView{false, "metadata",
			"address 169.254.169.254 is a cloud metadata address (rule: metadata)"}},
		{"link-local allowance covers other link-local", "169.254.1.1", prefixes("169.254.0.0/16"), decisionView{true, "operator-allowed",
			"address 169.254.1.1 is link-local (rule: link-local), but allowed by operator prefix 169.254.0.0/16"}},
		{"CGNAT allowance does not expose Alibaba metadata", "100.100.100.200", prefixes("100.64.0.0/10"), decisionView{false, "metadata",
			"address 100.100.100.200 is a cloud metadata address (rule: metadata)"}},
		{"allow-everything does not expose metadata", "fd00:ec2::254", prefixes("0.0.0.0/0", "::/0"), decisionView{false, "metadata",
			"address fd00:ec2::254 is a cloud metadata address (rule: metadata)"}},
		{"exact metadata allowance", "169.254.169.254", prefixes("169.254.169.254/32"), decisionView{true, "operator-allowed",
			"address 169.254.169.254 is a cloud metadata address (rule: metadata), but allowed by operator prefix 169.254.169.254/32"}},
		{"exact metadata allowance, mapped form", "::ffff:169.254.169.254", prefixes("::ffff:169.254.169.254/128"), decisionView{true, "operator-allowed",
			"address ::ffff:169.254.169.254 is the IPv4-mapped form of 169.254.169.254, which is a cloud metadata address (rule: metadata), but allowed by operator prefix ::ffff:169.254.169.254/128"}},
		{"zero prefix ignored", "10.0.0.1", []netip.Prefix{{}}, decisionView{false, "private-range",
			"address 10.0.0.1 is private (rule: private-range)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := netguard.Check(netip.MustParseAddr(tc.addr), tc.allowed)
			if diff := cmp.Diff(tc.want, dview(got)); diff != "" {
				t.Errorf("Check(%s, %v) mismatch (-want +got):\n%s", tc.addr, tc.allowed, diff)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		addr, host, want string
		allowed          []netip.Prefix
	}{
		{addr: "10.0.0.5", host: "api.example.com",
			want: "address 10.0.0.5 of api.example.com is private (rule: private-range)"},
		{addr: "::ffff:169.254.169.254", host: "evil.example",
			want: "address ::ffff:169.254.169.254 of evil.example is the IPv4-mapped form of 169.254.169.254, which is a cloud metadata address (rule: metadata)"},
		{addr: "fe80::1%eth0", host: "printer.local",
			want: "address fe80::1%eth0 of printer.local is link-local (rule: link-local)"},
		{addr: "127.0.0.1", host: "localhost", allowed: prefixes("127.0.0.0/8"),
			want: "address 127.0.0.1 of localhost is loopback (rule: loopback), but allowed by operator prefix 127.0.0.0/8"},
		{addr: "10.0.0.5", host: "",
			want: "address 10.0.0.5 is private (rule: private-range)"},
		{addr: "10.0.0.5", host: "10.0.0.5",
			want: "address 10.0.0.5 is private (rule: private-range)"},
		{addr: "::1", host: "[::1]",
			want: "address ::1 is loopback (rule: loopback)"},
	} {
		d := netguard.Check(netip.MustParseAddr(tc.addr), tc.allowed)
		if got := d.Describe(tc.host); got != tc.want {
			t.Errorf("Check(%s).Describe(%q) =\n  %q\nwant\n  %q", tc.addr, tc.host, got, tc.want)
		}
	}
	if got := netguard.Check(netip.Addr{}, nil).Describe("x.example"); got != "address (invalid) of x.example is not a valid IP address (rule: invalid)" {
		t.Errorf("Describe for invalid address = %q", got)
	}
	if got := (netguard.Result{}).Describe("x.example"); got != "" {
		t.Errorf("zero Result.Describe = %q, want empty", got)
	}
}

// TestReasonNamesRule checks the contract callers rely on when logging: a
// denial's reason names the address and its rule.
func TestReasonNamesRule(t *testing.T) {
	for _, tc := range classifyCases {
		a := netip.MustParseAddr(tc.in)
		d := netguard.Check(a, nil)
		if !strings.HasPrefix(d.Reason, "address "+a.String()+" ") {
			t.Errorf("Check(%s).Reason = %q, does not start with the address", tc.in, d.Reason)
		}
		if !strings.Contains(d.Reason, "(rule: "+tc.rule+")") {
			t.Errorf("Check(%s).Reason = %q, does not name rule %q", tc.in, d.Reason, tc.rule)
		}
		if tc.via != "" && !strings.Contains(d.Reason, tc.inner) {
			t.Errorf("Check(%s).Reason = %q, does not name embedded %s", tc.in, d.Reason, tc.inner)
		}
	}
}
