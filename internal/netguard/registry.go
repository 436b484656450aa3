package netguard

import "net/netip"

// Rule names are stable machine identifiers: operators grep logs for them and
// configuration may refer to them, so they never change once released.
const (
	RuleGlobal          = "global"           // ordinary global unicast
	RuleInvalid         = "invalid"          // the zero netip.Addr
	RuleOperatorAllowed = "operator-allowed" // Result only: special but allowed

	RuleMetadata = "metadata" // cloud metadata / credential endpoints

	RuleThisNetwork       = "this-network"
	RuleUnspecified       = "unspecified"
	RulePrivate           = "private-range"
	RuleCGNAT             = "cgnat"
	RuleLoopback          = "loopback"
	RuleLinkLocal         = "link-local"
	RuleIETFProtocol      = "ietf-protocol-assignments"
	RuleServiceContinuity = "service-continuity"
	RuleDummy             = "dummy"
	RulePCPAnycast        = "pcp-anycast"
	RuleTURNAnycast       = "turn-anycast"
	RuleNAT64Discovery    = "nat64-discovery"
	RuleDocumentation     = "documentation"
	RuleAS112             = "as112"
	RuleAMT               = "amt"
	Rule6to4Relay         = "6to4-relay"
	Rule6a44Relay         = "6a44-relay"
	RuleBenchmarking      = "benchmarking"
	RuleReserved          = "reserved"
	RuleBroadcast         = "broadcast"
	RuleMulticast         = "multicast"
	RuleIPv4Mapped        = "ipv4-mapped"
	RuleIPv4Compatible    = "ipv4-compatible"
	RuleNAT64             = "nat64"
	RuleDiscardOnly       = "discard-only"
	RuleTeredo            = "teredo"
	RuleDNSSDAnycast      = "dnssd-srp-anycast"
	RuleORCHID            = "orchid"
	RuleDroneRemoteID     = "drone-remote-id"
	Rule6to4              = "6to4"
	RuleSRv6SID           = "srv6-sid"
	RuleUniqueLocal       = "unique-local"
	RuleSiteLocal         = "site-local"
)

// entry is one row of a registry. name is phrased to follow "address X is".
type entry struct {
	prefix netip.Prefix
	rule   string
	name   string
	ref    string
}

func row(cidr, rule, name, ref string) entry {
	return entry{prefix: netip.MustParsePrefix(cidr), rule: rule, name: name, ref: ref}
}

// Names shared by several rows, so messages stay uniform.
const (
	namePrivate       = "private"
	nameDocumentation = "reserved for documentation"
	nameAS112         = "an AS112 DNS sink address"
	nameAMT           = "an Automatic Multicast Tunneling relay address"
	nameMetadata      = "a cloud metadata address"
	nameNAT64Disc     = "a NAT64/DNS64 discovery address"
	nameReserved6     = "in IETF-reserved IPv6 space"
)

// ipv4Table lists every IPv4 range that is not ordinary global unicast.
var ipv4Table = []entry{
	// IANA IPv4 Special-Purpose Address Registry
	// https://www.iana.org/assignments/iana-ipv4-special-registry/
	// (RFC 6890, RFC 8190), all 25 records as of the 2025 revision.
	row("0.0.0.0/8", RuleThisNetwork, "reserved for this network", "RFC 791 §3.2"),
	row("0.0.0.0/32", RuleUnspecified, "unspecified", "RFC 1122 §3.2.1.3"),
	row("10.0.0.0/8", RulePrivate, namePrivate, "RFC 1918"),
	row("100.64.0.0/10", RuleCGNAT, "in carrier-grade NAT shared address space", "RFC 6598"),
	row("127.0.0.0/8", RuleLoopback, "loopback", "RFC 1122 §3.2.1.3"),
	row("169.254.0.0/16", RuleLinkLocal, "link-local", "RFC 3927"),
	row("172.16.0.0/12", RulePrivate, namePrivate, "RFC 1918"),
	row("192.0.0.0/24", RuleIETFProtocol, "reserved for IETF protocol assignments", "RFC 6890 §2.1"),
	row("192.0.0.0/29", RuleServiceContinuity, "an IPv4 service continuity (DS-Lite) address", "RFC 7335"),
	row("192.0.0.8/32", RuleDummy, "the IPv4 dummy address", "RFC 7600"),
	// The registry marks the two anycast /32s globally reachable; they are
	// still refused because no tool has business with PCP or TURN anycast.
	row("192.0.0.9/32", RulePCPAnycast, "the Port Control Protocol anycast address", "RFC 7723"),
	row("192.0.0.10/32", RuleTURNAnycast, "the TURN anycast address", "RFC 8155"),
	row("192.0.0.170/32", RuleNAT64Discovery, nameNAT64Disc, "RFC 8880, RFC 7050 §2.2"),
	row("192.0.0.171/32", RuleNAT64Discovery, nameNAT64Disc, "RFC 8880, RFC 7050 §2.2"),
	row("192.0.2.0/24", RuleDocumentation, nameDocumentation, "RFC 5737"),
	row("192.31.196.0/24", RuleAS112, nameAS112, "RFC 7535"),
	row("192.52.193.0/24", RuleAMT, nameAMT, "RFC 7450"),
	row("192.88.99.0/24", Rule6to4Relay, "in the deprecated 6to4 relay anycast block", "RFC 7526"),
	row("192.88.99.2/32", Rule6a44Relay, "the 6a44 relay anycast address", "RFC 6751"),
	row("192.168.0.0/16", RulePrivate, namePrivate, "RFC 1918"),
	row("192.175.48.0/24", RuleAS112, nameAS112, "RFC 7534"),
	row("198.18.0.0/15", RuleBenchmarking, "reserved for benchmarking", "RFC 2544"),
	row("198.51.100.0/24", RuleDocumentation, nameDocumentation, "RFC 5737"),
	row("203.0.113.0/24", RuleDocumentation, nameDocumentation, "RFC 5737"),
	row("240.0.0.0/4", RuleReserved, "reserved for future use", "RFC 1112 §4"),
	row("255.255.255.255/32", RuleBroadcast, "the limited broadcast address", "RFC 8190, RFC 919 §7"),

	// IANA IPv4 Multicast Address Space Registry: multicast is not in the
	// special-purpose registry but is never a unicast HTTP destination.
	row("224.0.0.0/4", RuleMulticast, "multicast", "RFC 5771"),

	// Cloud metadata endpoints. Each is inside a range above except Azure's,
	// which is a public Microsoft address reachable only from inside Azure.
	row("169.254.169.254/32", RuleMetadata, nameMetadata, "AWS, GCP, Azure, OpenStack, DigitalOcean IMDS"),
	row("169.254.170.2/32", RuleMetadata, nameMetadata, "AWS ECS task metadata and credentials"),
	row("169.254.170.23/32", RuleMetadata, nameMetadata, "AWS EKS Pod Identity Agent"),
	row("169.254.0.23/32", RuleMetadata, nameMetadata, "Tencent Cloud metadata"),
	row("169.254.42.42/32", RuleMetadata, nameMetadata, "Scaleway metadata"),
	row("100.100.100.200/32", RuleMetadata, nameMetadata, "Alibaba Cloud metadata"),
	row("192.0.0.192/32", RuleMetadata, nameMetadata, "Oracle Cloud metadata"),
	row("168.63.129.16/32", RuleMetadata, nameMetadata, "Azure WireServer"),
}

// ipv6Table lists every IPv6 range that is not ordinary global unicast.
var ipv6Table = []entry{
	// IANA IPv6 Special-Purpose Address Registry
	// https://www.iana.org/assignments/iana-ipv6-special-registry/
	// (RFC 6890, RFC 8190), all 25 records as of the 2025 revision.
	row("::1/128", RuleLoopback, "loopback", "RFC 4291"),
	row("::/128", RuleUnspecified, "unspecified", "RFC 4291"),
	// Classify never reports this row: mapped addresses are classified as
	// the IPv4 address they carry and the row only names the Via form.
	row("::ffff:0:0/96", RuleIPv4Mapped, "an IPv4-mapped address", "RFC 4291"),
	row("64:ff9b::/96", RuleNAT64, "a NAT64 translation address", "RFC 6052"),
	row("64:ff9b:1::/48", RuleNAT64, "a local-use NAT64 translation address", "RFC 8215"),
	row("100::/64", RuleDiscardOnly, "in the discard-only block", "RFC 6666"),
	row("100:0:0:1::/64", RuleDummy, "in the dummy IPv6 prefix", "RFC 9780"),
	row("2001::/23", RuleIETFProtocol, "reserved for IETF protocol assignments", "RFC 2928"),
	row("2001::/32", RuleTeredo, "a Teredo tunnel address", "RFC 4380, RFC 8190"),
	row("2001:1::1/128", RulePCPAnycast, "the Port Control Protocol anycast address", "RFC 7723"),
	row("2001:1::2/128", RuleTURNAnycast, "the TURN anycast address", "RFC 8155"),
	row("2001:1::3/128", RuleDNSSDAnycast, "the DNS-SD service registration anycast address", "RFC 9665"),
	row("2001:2::/48", RuleBenchmarking, "reserved for benchmarking", "RFC 5180, Errata 1752"),
	row("2001:3::/32", RuleAMT, nameAMT, "RFC 7450"),
	row("2001:4:112::/48", RuleAS112, nameAS112, "RFC 7535"),
	row("2001:10::/28", RuleORCHID, "in the deprecated ORCHID block", "RFC 4843"),
	row("2001:20::/28", RuleORCHID, "an ORCHIDv2 identifier", "RFC 7343"),
	row("2001:30::/28", RuleDroneRemoteID, "a drone remote ID entity tag", "RFC 9374"),
	row("2001:db8::/32", RuleDocumentation, nameDocumentation, "RFC 3849"),
	row("2002::/16", Rule6to4, "a 6to4 address", "RFC 3056"),
	row("2620:4f:8000::/48", RuleAS112, nameAS112, "RFC 7534"),
	row("3fff::/20", RuleDocumentation, nameDocumentation, "RFC 9637"),
	row("5f00::/16", RuleSRv6SID, "a segment routing (SRv6) SID", "RFC 9602"),
	row("fc00::/7", RuleUniqueLocal, "unique local", "RFC 4193, RFC 8190"),
	row("fe80::/10", RuleLinkLocal, "link-local", "RFC 4291"),

	// IPv4-compatible addresses are deprecated but some stacks still route
	// them over IPv4, so they get a name of their own rather than "reserved".
	row("::/96", RuleIPv4Compatible, "a deprecated IPv4-compatible address", "RFC 4291 §2.5.5.1"),

	// IANA Internet Protocol Version 6 Address Space registry
	// https://www.iana.org/assignments/ipv6-address-space/
	// Everything outside 2000::/3 that is not listed above, so no IPv6
	// address falls through to "global" by omission.
	row("::/8", RuleReserved, nameReserved6, "RFC 4291"),
	row("100::/8", RuleReserved, nameReserved6, "RFC 4291"),
	row("200::/7", RuleReserved, nameReserved6, "RFC 4048"),
	row("400::/6", RuleReserved, nameReserved6, "RFC 4291"),
	row("800::/5", RuleReserved, nameReserved6, "RFC 4291"),
	row("1000::/4", RuleReserved, nameReserved6, "RFC 4291"),
	row("4000::/3", RuleReserved, nameReserved6, "RFC 4291"),
	row("6000::/3", RuleReserved, nameReserved6, "RFC 4291"),
	row("8000::/3", RuleReserved, nameReserved6, "RFC 4291"),
	row("a000::/3", RuleReserved, nameReserved6, "RFC 4291"),
	row("c000::/3", RuleReserved, nameReserved6, "RFC 4291"),
	row("e000::/4", RuleReserved, nameReserved6, "RFC 4291"),
	row("f000::/5", RuleReserved, nameReserved6, "RFC 4291"),
	row("f800::/6", RuleReserved, nameReserved6, "RFC 4291"),
	row("fe00::/9", RuleReserved, nameReserved6, "RFC 4291"),
	row("fec0::/10", RuleSiteLocal, "deprecated site-local", "RFC 3879"),
	row("ff00::/8", RuleMulticast, "multicast", "RFC 4291"),

	// Cloud metadata endpoints reachable over IPv6; all inside fc00::/7.
	row("fd00:ec2::254/128", RuleMetadata, nameMetadata, "AWS IMDS over IPv6"),
	row("fd00:ec2::23/128", RuleMetadata, nameMetadata, "AWS EKS Pod Identity Agent over IPv6"),
	row("fd20:ce::254/128", RuleMetadata, nameMetadata, "GCP metadata over IPv6"),
}

// globalUnicast6 is the only IPv6 space IANA designates as global unicast.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")
