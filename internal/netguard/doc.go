// Package netguard decides whether a tool may connect to an IP address.
//
// The host resolves a tool's destination name once, passes every resolved
// address through [Check], and dials only an address that was allowed. The
// package is pure: no I/O, no global state beyond lookup tables built at
// init, so the decision is reproducible from the address and the operator's
// allow list alone.
//
//	d := netguard.Check(addr, cfg.AllowedPrefixes)
//	if !d.Allow {
//		return fmt.Errorf("refusing to connect: %s", d.Describe(host))
//		// address 10.0.0.5 of api.example.com is private (rule: private-range)
//	}
//
// # What counts as special
//
// The source of truth is the IANA IPv4 and IPv6 Special-Purpose Address
// Registries (RFC 6890, RFC 8190 and later updates), every entry of which is
// a row in registry.go, plus the ranges those registries leave to other
// registries: IPv4 multicast, IPv6 multicast, deprecated IPv6 site-local, and
// the IPv6 space IANA has not designated as global unicast. Well-known cloud
// metadata endpoints get their own rule, "metadata", because they hand out
// credentials and deserve a louder message than their enclosing range.
// net.IP.IsPrivate and friends are deliberately not used: they miss most of
// these ranges (CGNAT, benchmarking, documentation, NAT64, 6to4, ...).
//
// Deny by default: an IPv4 address is global only if no entry covers it; an
// IPv6 address is global only if it lies in 2000::/3 and no entry covers it.
// Space that is merely unallocated by the RIRs (bogons) is not tracked,
// because it changes over time and is unroutable anyway.
//
// # Addresses that carry another address
//
// Some IPv6 forms deliver the connection to an IPv4 address embedded inside
// them, so a hostile DNS answer can use them to smuggle a refused address
// past a naive check:
//
//   - IPv4-mapped ::ffff:a.b.c.d never appears on the wire; the kernel dials
//     a.b.c.d. It is classified exactly as a.b.c.d (Verdict.Addr is the
//     unmapped address), so ::ffff:8.8.8.8 is as allowed as 8.8.8.8.
//   - NAT64 64:ff9b::/96 and 64:ff9b:1::/48 (the IPv4 address in the low 32
//     bits, the /96 layout of RFC 6052), 6to4 2002::/16 (bits 16-47) and
//     Teredo 2001::/32 (the client address XORed with all-ones in the low 32
//     bits) reach both a translator or relay and the embedded IPv4 address.
//     Both are classified. When the embedded address is special its rule is
//     the one reported, with the wrapping form named in the reason.
//
// Network-specific NAT64 prefixes (RFC 6052 section 2.3), other RFC 6052
// prefix lengths inside 64:ff9b:1::/48 and the Teredo server field are not
// decoded: they are either already special (and so need an allowance) or
// indistinguishable from ordinary global addresses.
//
// # Operator allowances
//
// An allowance is a netip.Prefix. A connection is allowed only if every
// address it would be delivered to is either ordinary global unicast or
// inside an allowance: for a wrapped form that is the embedded IPv4 address
// and, except for IPv4-mapped, the IPv6 address itself. Each address is
// matched against allowances of its own family, so
//
//   - 127.0.0.0/8 allows 127.0.0.1 and ::ffff:127.0.0.1, but not 10.0.0.1;
//   - ::1/128 does not allow ::ffff:127.0.0.1 (its only real destination is
//     127.0.0.1, which ::1/128 does not contain);
//   - 64:ff9b::/96 alone allows 64:ff9b::808:808 but not 64:ff9b::7f00:1,
//     which also needs 127.0.0.0/8;
//   - an allowance written in IPv4-mapped form (::ffff:10.0.0.0/104) is
//     treated as the IPv4 prefix it maps (10.0.0.0/8).
//
// A metadata address is allowed only by an allowance at least as specific
// as the address itself (169.254.169.254/32, fd00:ec2::254/128). Broad
// allowances such as 169.254.0.0/16, 100.64.0.0/10 (commonly added for
// Tailscale, and which contains Alibaba's 100.100.100.200) or 0.0.0.0/0
// therefore never expose credential endpoints by accident.
//
// # Lookup structure
//
// Each family's table is indexed by the first byte of the address: a
// 256-slot array whose slots hold the few entries overlapping that byte,
// longest prefix first. A lookup is one array index plus a short linear scan
// (at most 15 prefixes, in the IPv6 slot for 20xx::; usually zero to three),
// and the first hit is the most specific match. For ~90 prefixes that beats
// a bit trie in both speed and reviewability, and Classify does not allocate.
package netguard
