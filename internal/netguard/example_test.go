package netguard_test

import (
	"fmt"
	"net/netip"

	"github.com/maiden-run/maiden/internal/netguard"
)

func ExampleCheck() {
	allowed := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, s := range []string{
		"93.184.216.34",
		"10.0.0.5",
		"127.0.0.1",
		"::ffff:169.254.169.254",
		"2001:0:4136:e378:8000:63bf:80ff:fffe",
	} {
		d := netguard.Check(netip.MustParseAddr(s), allowed)
		fmt.Printf("%-5v %s\n", d.Allow, d.Describe("api.example.com"))
	}
	// Output:
	// true  address 93.184.216.34 of api.example.com is global unicast (rule: global)
	// false address 10.0.0.5 of api.example.com is private (rule: private-range)
	// true  address 127.0.0.1 of api.example.com is loopback (rule: loopback), but allowed by operator prefix 127.0.0.0/8
	// false address ::ffff:169.254.169.254 of api.example.com is the IPv4-mapped form of 169.254.169.254, which is a cloud metadata address (rule: metadata)
	// false address 2001:0:4136:e378:8000:63bf:80ff:fffe of api.example.com is a Teredo tunnel address (rule: teredo)
}

func ExampleClassify() {
	v := netguard.Classify(netip.MustParseAddr("64:ff9b::a9fe:a9fe"))
	fmt.Println(v.Special, v.Rule, v.Range, v.Via, v.Addr)
	// Output:
	// true metadata 169.254.169.254/32 nat64 169.254.169.254
}
