package netguard_test

import (
	"net/netip"
	"testing"

	"github.com/maiden-run/maiden/internal/netguard"
)

// TestMappedAllowanceOfAllIPv4: an allowance written in IPv4-mapped form
// is the IPv4 prefix it maps at every length down to /96, the mapped form
// of all of IPv4 (0.0.0.0/0); and it still never sweeps in a metadata
// address.
func TestMappedAllowanceOfAllIPv4(t *testing.T) {
	all := prefixes("::ffff:0.0.0.0/96")
	for _, tc := range []struct {
		addr string
		want decisionView
	}{
		{"10.0.0.5", decisionView{true, netguard.RuleOperatorAllowed,
			"address 10.0.0.5 is private (rule: private-range), but allowed by operator prefix ::ffff:0.0.0.0/96"}},
		{"::ffff:127.0.0.1", decisionView{true, netguard.RuleOperatorAllowed,
			"address ::ffff:127.0.0.1 is the IPv4-mapped form of 127.0.0.1, which is loopback (rule: loopback), but allowed by operator prefix ::ffff:0.0.0.0/96"}},
		{"169.254.169.254", decisionView{false, netguard.RuleMetadata,
			"address 169.254.169.254 is a cloud metadata address (rule: metadata)"}},
		{"::1", decisionView{false, netguard.RuleLoopback, "address ::1 is loopback (rule: loopback)"}},
	} {
		if got := dview(netguard.Check(netip.MustParseAddr(tc.addr), all)); got != tc.want {
			t.Errorf("Check(%s, ::ffff:0.0.0.0/96) = %+v, want %+v", tc.addr, got, tc.want)
		}
	}
}

// TestMetadataNeedsItsOwnAddress: a metadata address is opened only by an
// allowance naming that address alone; one bit broader (a /31, a /127, or
// the mapped form's /127) is refused with the metadata rule.
func TestMetadataNeedsItsOwnAddress(t *testing.T) {
	for _, tc := range []struct {
		addr, allow string
		want        decisionView
	}{
		{"169.254.169.254", "169.254.169.254/31", decisionView{false, netguard.RuleMetadata,
			"address 169.254.169.254 is a cloud metadata address (rule: metadata)"}},
		{"169.254.169.254", "::ffff:169.254.169.254/127", decisionView{false, netguard.RuleMetadata,
			"address 169.254.169.254 is a cloud metadata address (rule: metadata)"}},
		{"fd00:ec2::254", "fd00:ec2::254/127", decisionView{false, netguard.RuleMetadata,
			"address fd00:ec2::254 is a cloud metadata address (rule: metadata)"}},
		{"100.100.100.200", "100.100.100.200/31", decisionView{false, netguard.RuleMetadata,
			"address 100.100.100.200 is a cloud metadata address (rule: metadata)"}},
		{"169.254.169.254", "169.254.169.254/32", decisionView{true, netguard.RuleOperatorAllowed,
			"address 169.254.169.254 is a cloud metadata address (rule: metadata), but allowed by operator prefix 169.254.169.254/32"}},
		{"169.254.169.254", "::ffff:169.254.169.254/128", decisionView{true, netguard.RuleOperatorAllowed,
			"address 169.254.169.254 is a cloud metadata address (rule: metadata), but allowed by operator prefix ::ffff:169.254.169.254/128"}},
		{"fd00:ec2::254", "fd00:ec2::254/128", decisionView{true, netguard.RuleOperatorAllowed,
			"address fd00:ec2::254 is a cloud metadata address (rule: metadata), but allowed by operator prefix fd00:ec2::254/128"}},
	} {
		if got := dview(netguard.Check(netip.MustParseAddr(tc.addr), prefixes(tc.allow))); got != tc.want {
			t.Errorf("Check(%s, %s) = %+v, want %+v", tc.addr, tc.allow, got, tc.want)
		}
	}
}
