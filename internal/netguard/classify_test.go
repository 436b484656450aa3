package netguard_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maiden-run/maiden/internal/netguard"
)

// verdictView makes verdicts comparable and readable in diffs; netip types
// have unexported fields that cmp refuses to descend into.
type verdictView struct {
	Addr    string
	Special bool
	Rule    string
	Range   string
	Via     string
}

func view(v netguard.Verdict) verdictView {
	r := ""
	if v.Range.IsValid() {
		r = v.Range.String()
	}
	return verdictView{Addr: v.Addr.String(), Special: v.Special, Rule: v.Rule, Range: r, Via: v.Via}
}

// classifyCase is written out by hand from the registries rather than
// derived from the package's own table, so a typo in either shows up.
type classifyCase struct {
	in    string
	rule  string
	rng   string // "" for global
	via   string // wrapper rule when the embedded IPv4 decided
	inner string // embedded address when via is set
}

var classifyCases = []classifyCase{
	// ---- IPv4 Special-Purpose Address Registry, with neighbours ----
	{in: "0.0.0.0", rule: "unspecified", rng: "0.0.0.0/32"},
	{in: "0.0.0.1", rule: "this-network", rng: "0.0.0.0/8"},
	{in: "0.255.255.255", rule: "this-network", rng: "0.0.0.0/8"},
	{in: "1.0.0.0", rule: "global"},
	{in: "9.255.255.255", rule: "global"},
	{in: "10.0.0.0", rule: "private-range", rng: "10.0.0.0/8"},
	{in: "10.0.0.5", rule: "private-range", rng: "10.0.0.0/8"},
	{in: "10.255.255.255", rule: "private-range", rng: "10.0.0.0/8"},
	{in: "11.0.0.0", rule: "global"},
	{in: "100.63.255.255", rule: "global"},
	{in: "100.64.0.0", rule: "cgnat", rng: "100.64.0.0/10"},
	{in: "100.127.255.255", rule: "cgnat", rng: "100.64.0.0/10"},
	{in: "100.128.0.0", rule: "global"},
	{in: "126.255.255.255", rule: "global"},
	{in: "127.0.0.0", rule: "loopback", rng: "127.0.0.0/8"},
	{in: "127.0.0.1", rule: "loopback", rng: "127.0.0.0/8"},
	{in: "127.255.255.255", rule: "loopback", rng: "127.0.0.0/8"},
	{in: "128.0.0.0", rule: "global"},
	{in: "169.253.255.255", rule: "global"},
	{in: "169.254.0.0", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.254.255.255", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.255.0.0", rule: "global"},
	{in: "172.15.255.255", rule: "global"},
	{in: "172.16.0.0", rule: "private-range", rng: "172.16.0.0/12"},
	{in: "172.31.255.255", rule: "private-range", rng: "172.16.0.0/12"},
	{in: "172.32.0.0", rule: "global"},
	{in: "191.255.255.255", rule: "global"},
	{in: "192.0.0.0", rule: "service-continuity", rng: "192.0.0.0/29"},
	{in: "192.0.0.7", rule: "service-continuity", rng: "192.0.0.0/29"},
	{in: "192.0.0.8", rule: "dummy", rng: "192.0.0.8/32"},
	{in: "192.0.0.9", rule: "pcp-anycast", rng: "192.0.0.9/32"},
	{in: "192.0.0.10", rule: "turn-anycast", rng: "192.0.0.10/32"},
	{in: "192.0.0.11", rule: "ietf-protocol-assignments", rng: "192.0.0.0/24"},
	{in: "192.0.0.169", rule: "ietf-protocol-assignments", rng: "192.0.0.0/24"},
	{in: "192.0.0.170", rule: "nat64-discovery", rng: "192.0.0.170/32"},
	{in: "192.0.0.171", rule: "nat64-discovery", rng: "192.0.0.171/32"},
	{in: "192.0.0.172", rule: "ietf-protocol-assignments", rng: "192.0.0.0/24"},
	{in: "192.0.0.255", rule: "ietf-protocol-assignments", rng: "192.0.0.0/24"},
	{in: "192.0.1.0", rule: "global"},
	{in: "192.0.1.255", rule: "global"},
	{in: "192.0.2.0", rule: "documentation", rng: "192.0.2.0/24"},
	{in: "192.0.2.255", rule: "documentation", rng: "192.0.2.0/24"},
	{in: "192.0.3.0", rule: "global"},
	{in: "192.31.195.255", rule: "global"},
	{in: "192.31.196.0", rule: "as112", rng: "192.31.196.0/24"},
	{in: "192.31.196.255", rule: "as112", rng: "192.31.196.0/24"},
	{in: "192.31.197.0", rule: "global"},
	{in: "192.52.192.255", rule: "global"},
	{in: "192.52.193.0", rule: "amt", rng: "192.52.193.0/24"},
	{in: "192.52.193.255", rule: "amt", rng: "192.52.193.0/24"},
	{in: "192.52.194.0", rule: "global"},
	{in: "192.88.98.255", rule: "global"},
	{in: "192.88.99.0", rule: "6to4-relay", rng: "192.88.99.0/24"},
	{in: "192.88.99.1", rule: "6to4-relay", rng: "192.88.99.0/24"},
	{in: "192.88.99.2", rule: "6a44-relay", rng: "192.88.99.2/32"},
	{in: "192.88.99.3", rule: "6to4-relay", rng: "192.88.99.0/24"},
	{in: "192.88.99.255", rule: "6to4-relay", rng: "192.88.99.0/24"},
	{in: "192.88.100.0", rule: "global"},
	{in: "192.167.255.255", rule: "global"},
	{in: "192.168.0.0", rule: "private-range", rng: "192.168.0.0/16"},
	{in: "192.168.255.255", rule: "private-range", rng: "192.168.0.0/16"},
	{in: "192.169.0.0", rule: "global"},
	{in: "192.175.47.255", rule: "global"},
	{in: "192.175.48.0", rule: "as112", rng: "192.175.48.0/24"},
	{in: "192.175.48.255", rule: "as112", rng: "192.175.48.0/24"},
	{in: "192.175.49.0", rule: "global"},
	{in: "198.17.255.255", rule: "global"},
	{in: "198.18.0.0", rule: "benchmarking", rng: "198.18.0.0/15"},
	{in: "198.19.255.255", rule: "benchmarking", rng: "198.18.0.0/15"},
	{in: "198.20.0.0", rule: "global"},
	{in: "198.51.99.255", rule: "global"},
	{in: "198.51.100.0", rule: "documentation", rng: "198.51.100.0/24"},
	{in: "198.51.100.255", rule: "documentation", rng: "198.51.100.0/24"},
	{in: "198.51.101.0", rule: "global"},
	{in: "203.0.112.255", rule: "global"},
	{in: "203.0.113.0", rule: "documentation", rng: "203.0.113.0/24"},
	{in: "203.0.113.255", rule: "documentation", rng: "203.0.113.0/24"},
	{in: "203.0.114.0", rule: "global"},
	{in: "223.255.255.255", rule: "global"},
	{in: "224.0.0.0", rule: "multicast", rng: "224.0.0.0/4"},
	{in: "239.255.255.255", rule: "multicast", rng: "224.0.0.0/4"},
	{in: "240.0.0.0", rule: "reserved", rng: "240.0.0.0/4"},
	{in: "255.255.255.254", rule: "reserved", rng: "240.0.0.0/4"},
	{in: "255.255.255.255", rule: "broadcast", rng: "255.255.255.255/32"},

	// ---- IPv4 cloud metadata beats its enclosing range ----
	{in: "169.254.169.253", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.254.169.254", rule: "metadata", rng: "169.254.169.254/32"},
	{in: "169.254.169.255", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.254.170.1", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.254.170.2", rule: "metadata", rng: "169.254.170.2/32"},
	{in: "169.254.170.3", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.254.170.22", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.254.170.23", rule: "metadata", rng: "169.254.170.23/32"},
	{in: "169.254.170.24", rule: "link-local", rng: "169.254.0.0/16"},
	{in: "169.254.0.23", rule: "metadata", rng: "169.254.0.23/32"},
	{in: "169.254.42.42", rule: "metadata", rng: "169.254.42.42/32"},
	{in: "100.100.100.199", rule: "cgnat", rng: "100.64.0.0/10"},
	{in: "100.100.100.200", rule: "metadata", rng: "100.100.100.200/32"},
	{in: "100.100.100.201", rule: "cgnat", rng: "100.64.0.0/10"},
	{in: "192.0.0.191", rule: "ietf-protocol-assignments", rng: "192.0.0.0/24"},
	{in: "192.0.0.192", rule: "metadata", rng: "192.0.0.192/32"},
	{in: "192.0.0.193", rule: "ietf-protocol-assignments", rng: "192.0.0.0/24"},
	{in: "168.63.129.15", rule: "global"},
	{in: "168.63.129.16", rule: "metadata", rng: "168.63.129.16/32"},
	{in: "168.63.129.17", rule: "global"},

	// ---- ordinary global addresses ----
	{in: "8.8.8.8", rule: "global"},
	{in: "1.1.1.1", rule: "global"},
	{in: "93.184.216.34", rule: "global"},
	{in: "2606:4700:4700::1111", rule: "global"},
	{in: "2001:4860:4860::8888", rule: "global"},
	{in: "2a00:1450:4001:81b::200e", rule: "global"},

	// ---- IPv6 Special-Purpose Address Registry, with neighbours ----
	{in: "::", rule: "unspecified", rng: "::/128"},
	{in: "::1", rule: "loopback", rng: "::1/128"},
	{in: "::2", rule: "ipv4-compatible", rng: "::/96"},
	{in: "::127.0.0.1", rule: "ipv4-compatible", rng: "::/96"},
	{in: "::ffff:ffff", rule: "ipv4-compatible", rng: "::/96"},
	{in: "::1:0:0", rule: "reserved", rng: "::/8"},
	{in: "::fffe:ffff:ffff", rule: "reserved", rng: "::/8"},
	{in: "::ffff:0:0", rule: "unspecified", rng: "0.0.0.0/32", via: "ipv4-mapped", inner: "0.0.0.0"},
	{in: "::ffff:8.8.8.8", rule: "global", via: "ipv4-mapped", inner: "8.8.8.8"},
	{in: "::ffff:ffff:ffff", rule: "broadcast", rng: "255.255.255.255/32", via: "ipv4-mapped", inner: "255.255.255.255"},
	{in: "::1:0:0:0", rule: "reserved", rng: "::/8"},
	{in: "::ffff:0:0:0", rule: "reserved", rng: "::/8"}, // RFC 2765 IPv4-translated
	{in: "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "::/8"},
	{in: "64:ff9b::808:808", rule: "nat64", rng: "64:ff9b::/96"},
	{in: "64:ff9b::", rule: "unspecified", rng: "0.0.0.0/32", via: "nat64", inner: "0.0.0.0"},
	{in: "64:ff9b::ffff:ffff", rule: "broadcast", rng: "255.255.255.255/32", via: "nat64", inner: "255.255.255.255"},
	{in: "64:ff9b::1:0:0", rule: "reserved", rng: "::/8"},
	{in: "64:ff9b:0:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "::/8"},
	{in: "64:ff9b:1::808:808", rule: "nat64", rng: "64:ff9b:1::/48"},
	{in: "64:ff9b:1:abcd::808:808", rule: "nat64", rng: "64:ff9b:1::/48"},
	{in: "64:ff9b:1::", rule: "unspecified", rng: "0.0.0.0/32", via: "nat64", inner: "0.0.0.0"},
	{in: "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", rule: "broadcast", rng: "255.255.255.255/32", via: "nat64", inner: "255.255.255.255"},
	{in: "64:ff9b:2::", rule: "reserved", rng: "::/8"},
	{in: "ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "::/8"},
	{in: "100::", rule: "discard-only", rng: "100::/64"},
	{in: "100::ffff:ffff:ffff:ffff", rule: "discard-only", rng: "100::/64"},
	{in: "100:0:0:1::", rule: "dummy", rng: "100:0:0:1::/64"},
	{in: "100:0:0:1:ffff:ffff:ffff:ffff", rule: "dummy", rng: "100:0:0:1::/64"},
	{in: "100:0:0:2::", rule: "reserved", rng: "100::/8"},
	{in: "1ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "100::/8"},
	{in: "2000::", rule: "global"},
	{in: "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "global"},
	// Teredo: 2001:0:SERVER:FLAGS:^PORT:^CLIENT. RFC 4380's own example
	// encodes client 192.0.2.45 behind server 65.54.227.120.
	{in: "2001:0:4136:e378:8000:63bf:3fff:fdd2", rule: "documentation", rng: "192.0.2.0/24", via: "teredo", inner: "192.0.2.45"},
	{in: "2001:0:4136:e378:8000:63bf:f7f7:f7f7", rule: "teredo", rng: "2001::/32"}, // client 8.8.8.8
	{in: "2001::", rule: "broadcast", rng: "255.255.255.255/32", via: "teredo", inner: "255.255.255.255"},
	{in: "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", rule: "unspecified", rng: "0.0.0.0/32", via: "teredo", inner: "0.0.0.0"},
	{in: "2001:1::", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:1::1", rule: "pcp-anycast", rng: "2001:1::1/128"},
	{in: "2001:1::2", rule: "turn-anycast", rng: "2001:1::2/128"},
	{in: "2001:1::3", rule: "dnssd-srp-anycast", rng: "2001:1::3/128"},
	{in: "2001:1::4", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:1:ffff:ffff:ffff:ffff:ffff:ffff", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:2::", rule: "benchmarking", rng: "2001:2::/48"},
	{in: "2001:2:0:ffff:ffff:ffff:ffff:ffff", rule: "benchmarking", rng: "2001:2::/48"},
	{in: "2001:2:1::", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:3::", rule: "amt", rng: "2001:3::/32"},
	{in: "2001:3:ffff:ffff:ffff:ffff:ffff:ffff", rule: "amt", rng: "2001:3::/32"},
	{in: "2001:4::", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:4:111:ffff:ffff:ffff:ffff:ffff", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:4:112::", rule: "as112", rng: "2001:4:112::/48"},
	{in: "2001:4:112:ffff:ffff:ffff:ffff:ffff", rule: "as112", rng: "2001:4:112::/48"},
	{in: "2001:4:113::", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:f:ffff:ffff:ffff:ffff:ffff:ffff", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:10::", rule: "orchid", rng: "2001:10::/28"},
	{in: "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", rule: "orchid", rng: "2001:10::/28"},
	{in: "2001:20::", rule: "orchid", rng: "2001:20::/28"},
	{in: "2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", rule: "orchid", rng: "2001:20::/28"},
	{in: "2001:30::", rule: "drone-remote-id", rng: "2001:30::/28"},
	{in: "2001:3f:ffff:ffff:ffff:ffff:ffff:ffff", rule: "drone-remote-id", rng: "2001:30::/28"},
	{in: "2001:40::", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "ietf-protocol-assignments", rng: "2001::/23"},
	{in: "2001:200::", rule: "global"},
	{in: "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", rule: "global"},
	{in: "2001:db8::", rule: "documentation", rng: "2001:db8::/32"},
	{in: "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", rule: "documentation", rng: "2001:db8::/32"},
	{in: "2001:db9::", rule: "global"},
	{in: "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "global"},
	{in: "2002::", rule: "unspecified", rng: "0.0.0.0/32", via: "6to4", inner: "0.0.0.0"},
	{in: "2002:808:808::", rule: "6to4", rng: "2002::/16"},
	{in: "2002:808:808:ffff:ffff:ffff:ffff:ffff", rule: "6to4", rng: "2002::/16"},
	{in: "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "broadcast", rng: "255.255.255.255/32", via: "6to4", inner: "255.255.255.255"},
	{in: "2003::", rule: "global"},
	{in: "2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", rule: "global"},
	{in: "2620:4f:8000::", rule: "as112", rng: "2620:4f:8000::/48"},
	{in: "2620:4f:8000:ffff:ffff:ffff:ffff:ffff", rule: "as112", rng: "2620:4f:8000::/48"},
	{in: "2620:4f:8001::", rule: "global"},
	{in: "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "global"},
	{in: "3fff::", rule: "documentation", rng: "3fff::/20"},
	{in: "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "documentation", rng: "3fff::/20"},
	{in: "3fff:1000::", rule: "global"},
	{in: "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "global"},
	{in: "4000::", rule: "reserved", rng: "4000::/3"},
	{in: "5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "4000::/3"},
	{in: "5f00::", rule: "srv6-sid", rng: "5f00::/16"},
	{in: "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "srv6-sid", rng: "5f00::/16"},
	{in: "5f01::", rule: "reserved", rng: "4000::/3"},
	{in: "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "f800::/6"},
	{in: "fc00::", rule: "unique-local", rng: "fc00::/7"},
	{in: "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "unique-local", rng: "fc00::/7"},
	{in: "fe00::", rule: "reserved", rng: "fe00::/9"},
	{in: "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "fe00::/9"},
	{in: "fe80::", rule: "link-local", rng: "fe80::/10"},
	{in: "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "link-local", rng: "fe80::/10"},
	{in: "fec0::", rule: "site-local", rng: "fec0::/10"},
	{in: "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "site-local", rng: "fec0::/10"},
	{in: "ff00::", rule: "multicast", rng: "ff00::/8"},
	{in: "ff02::1", rule: "multicast", rng: "ff00::/8"},
	{in: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "multicast", rng: "ff00::/8"},

	// ---- IPv6 space IANA has not made global unicast ----
	{in: "200::", rule: "reserved", rng: "200::/7"},
	{in: "400::", rule: "reserved", rng: "400::/6"},
	{in: "800::", rule: "reserved", rng: "800::/5"},
	{in: "1000::", rule: "reserved", rng: "1000::/4"},
	{in: "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", rule: "reserved", rng: "1000::/4"},
	{in: "6000::", rule: "reserved", rng: "6000::/3"},
	{in: "8000::", rule: "reserved", rng: "8000::/3"},
	{in: "a000::", rule: "reserved", rng: "a000::/3"},
	{in: "c000::", rule: "reserved", rng: "c000::/3"},
	{in: "e000::", rule: "reserved", rng: "e000::/4"},
	{in: "f000::", rule: "reserved", rng: "f000::/5"},
	{in: "f800::", rule: "reserved", rng: "f800::/6"},

	// ---- IPv6 cloud metadata beats unique-local ----
	{in: "fd00:ec2::253", rule: "unique-local", rng: "fc00::/7"},
	{in: "fd00:ec2::254", rule: "metadata", rng: "fd00:ec2::254/128"},
	{in: "fd00:ec2::255", rule: "unique-local", rng: "fc00::/7"},
	{in: "fd00:ec2::23", rule: "metadata", rng: "fd00:ec2::23/128"},
	{in: "fd20:ce::254", rule: "metadata", rng: "fd20:ce::254/128"},
}

func TestClassify(t *testing.T) {
	for _, tc := range classifyCases {
		t.Run(tc.in, func(t *testing.T) {
			a := netip.MustParseAddr(tc.in)
			want := verdictView{
				Addr:    a.String(),
				Special: tc.rule != "global",
				Rule:    tc.rule,
				Range:   tc.rng,
				Via:     tc.via,
			}
			if tc.via != "" {
				want.Addr = tc.inner
			}
			got := netguard.Classify(a)
			if diff := cmp.Diff(want, view(got)); diff != "" {
				t.Errorf("Classify(%s) mismatch (-want +got):\n%s", tc.in, diff)
			}
			if got.Name == "" {
				t.Errorf("Classify(%s).Name is empty", tc.in)
			}
			if tc.via != "" && got.Outer != a {
				t.Errorf("Classify(%s).Outer = %v, want the input", tc.in, got.Outer)
			}
			d := netguard.Check(a, nil)
			if d.Allow != (tc.rule == "global") || d.Rule != tc.rule {
				t.Errorf("Check(%s, nil) = {Allow:%v Rule:%q}, want {Allow:%v Rule:%q}",
					tc.in, d.Allow, d.Rule, tc.rule == "global", tc.rule)
			}
		})
	}
}

func TestClassifyZoned(t *testing.T) {
	for _, tc := range []struct{ in, rule string }{
		{"fe80::1%eth0", "link-local"},
		{"fe80::1%25", "link-local"},
		{"ff02::1%lo", "multicast"},
		{"::1%lo", "loopback"},
		{"::ffff:127.0.0.1%eth0", "loopback"},
		{"2606:4700:4700::1111%eth0", "global"},
	} {
		a := netip.MustParseAddr(tc.in)
		v := netguard.Classify(a)
		if v.Rule != tc.rule {
			t.Errorf("Classify(%s).Rule = %q, want %q", tc.in, v.Rule, tc.rule)
		}
		if v.Addr.Zone() != "" {
			t.Errorf("Classify(%s).Addr = %v, want the zone stripped", tc.in, v.Addr)
		}
		if got, want := v, netguard.Classify(a.WithZone("")); view(got) != view(want) {
			t.Errorf("Classify(%s) = %+v, differs from the unzoned %+v", tc.in, view(got), view(want))
		}
	}
}

func TestClassifyInvalid(t *testing.T) {
	v := netguard.Classify(netip.Addr{})
	if !v.Special || v.Rule != "invalid" || v.Range.IsValid() {
		t.Errorf("Classify(zero Addr) = %+v, want special rule invalid with no range", v)
	}
	d := netguard.Check(netip.Addr{}, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")})
	want := "address (invalid) is not a valid IP address (rule: invalid)"
	if d.Allow || d.Rule != "invalid" || d.Reason != want {
		t.Errorf("Check(zero Addr, everything) = %+v, want denial %q", d, want)
	}
}

// TestAgreesWithStdlib guards against the table forgetting a range that the
// standard library already knows is not global.
func TestAgreesWithStdlib(t *testing.T) {
	for _, tc := range classifyCases {
		a := netip.MustParseAddr(tc.in)
		u := a.Unmap()
		stdSpecial := u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() ||
			u.IsLinkLocalMulticast() || u.IsInterfaceLocalMulticast() || u.IsMulticast() ||
			u.IsUnspecified() || !u.IsGlobalUnicast()
		if stdSpecial && !netguard.Classify(a).Special {
			t.Errorf("%s: net/netip says it is not global, Classify says global", tc.in)
		}
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	for _, s := range []string{"8.8.8.8", "169.254.169.254", "::ffff:10.0.0.1", "2001:0:4136:e378:8000:63bf:80ff:fffe", "2606:4700:4700::1111", "fe80::1%eth0"} {
		a := netip.MustParseAddr(s)
		if n := testing.AllocsPerRun(100, func() { netguard.Classify(a) }); n != 0 {
			t.Errorf("Classify(%s) allocates %v times per call", s, n)
		}
	}
}

var benchAddrs = []netip.Addr{
	netip.MustParseAddr("8.8.8.8"),
	netip.MustParseAddr("192.0.0.192"),
	netip.MustParseAddr("10.1.2.3"),
	netip.MustParseAddr("::ffff:169.254.169.254"),
	netip.MustParseAddr("2606:4700:4700::1111"),
	netip.MustParseAddr("2001:0:4136:e378:8000:63bf:80ff:fffe"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("2a00:1450:4001:81b::200e"),
}

var sink netguard.Verdict

func BenchmarkClassify(b *testing.B) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink = netguard.Classify(benchAddrs[i%len(benchAddrs)])
		i++
	}
}

func BenchmarkCheck(b *testing.B) {
	allowed := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = netguard.Check(benchAddrs[i%len(benchAddrs)], allowed)
		i++
	}
}
