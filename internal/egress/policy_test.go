package egress

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRulesIntersect(t *testing.T) {
	pfx := netip.MustParsePrefix
	tool := Rules{
		Hosts:            []string{"api.example.com", "*.tiles.example", "*.cdn.example", "10.0.0.7"},
		Ports:            []uint16{8080, 8443},
		AllowCIDRs:       []netip.Prefix{pfx("10.0.0.0/8"), pfx("127.0.0.0/8")},
		Secrets:          []string{"API_TOKEN", "TILES_KEY"},
		CAFiles:          []string{"/etc/maiden/internal-ca.pem"},
		MaxResponseBytes: 1 << 20,
	}
	for _, tc := range []struct {
		name string
		a, b Rules
		want Rules
	}{
		{"nothing allowed by the card", tool, Rules{}, Rules{MaxResponseBytes: 1 << 20}},
		{"same rules", tool, tool, tool},
		{"narrowing everything", tool, Rules{
			Hosts:            []string{"api.example.com", "a.tiles.example", "*.cdn.example", "evil.example", "*.example"},
			Ports:            []uint16{8443, 9000},
			AllowCIDRs:       []netip.Prefix{pfx("10.1.0.0/16"), pfx("192.168.0.0/16"), pfx("0.0.0.0/0")},
			Secrets:          []string{"TILES_KEY", "STOLEN"},
			MaxResponseBytes: 4 << 20,
		}, Rules{
			Hosts:            []string{"api.example.com", "a.tiles.example", "*.cdn.example"},
			Ports:            []uint16{8443},
			AllowCIDRs:       []netip.Prefix{pfx("10.1.0.0/16"), pfx("10.0.0.0/8"), pfx("127.0.0.0/8")},
			Secrets:          []string{"TILES_KEY"},
			MaxResponseBytes: 1 << 20,
		}},
		// A wildcard matches exactly one label, so *.example and
		// *.tiles.example share no host: the result must not allow either.
		{"different wildcards share nothing", Rules{Hosts: []string{"*.tiles.example"}}, Rules{Hosts: []string{"*.example"}}, Rules{MaxResponseBytes: DefaultMaxResponseBytes}},
		{"zero cap is the default", Rules{MaxResponseBytes: 0}, Rules{MaxResponseBytes: 8 << 20}, Rules{MaxResponseBytes: DefaultMaxResponseBytes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range []struct{ a, b Rules }{{tc.a, tc.b}, {tc.b, tc.a}} {
				got := order.a.Intersect(order.b)
				if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(x, y string) bool { return x < y }),
					cmpopts.SortSlices(func(x, y uint16) bool { return x < y }),
					cmpopts.SortSlices(func(x, y netip.Prefix) bool { return x.String() < y.String() }),
					cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestRulesIntersectNeverWidens checks the promise directly: a host,
// address, port or secret is allowed by the intersection only if both
// sides allow it, and everything both allow is kept.
func TestRulesIntersectNeverWidens(t *testing.T) {
	patterns := []string{"api.example.com", "*.example.com", "a.example.com", "*.a.example.com", "b.a.example.com",
		"example.com", "*.other.example", "x.other.example", "127.0.0.1", "::1"}
	hosts := []string{"api.example.com", "a.example.com", "b.a.example.com", "example.com", "x.other.example",
		"y.other.example", "127.0.0.1", "::1", "evil.example"}
	prefixes := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("10.1.2.0/24"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("fc00::/7")}
	addrs := []string{"10.0.0.1", "10.1.0.1", "10.1.2.3", "127.0.0.1", "::1", "fd00::1", "192.168.1.1"}
	// Every pair of subsets of a few patterns and prefixes (by bit masks).
	subset := func(mask int, n int) []int {
		var out []int
		for i := range n {
			if mask&(1<<i) != 0 {
				out = append(out, i)
			}
		}
		return out
	}
	allows := func(r Rules, host string) bool {
		return slices.ContainsFunc(r.Hosts, func(p string) bool { return matchHost(p, host) })
	}
	inRanges := func(r Rules, a netip.Addr) bool {
		return slices.ContainsFunc(r.AllowCIDRs, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	for ma := 0; ma < 1<<len(patterns); ma += 7 {
		for mb := 0; mb < 1<<len(patterns); mb += 11 {
			var a, b Rules
			for _, i := range subset(ma, len(patterns)) {
				a.Hosts = append(a.Hosts, patterns[i])
			}
			for _, i := range subset(mb, len(patterns)) {
				b.Hosts = append(b.Hosts, patterns[i])
			}
			for _, i := range subset(ma%(1<<len(prefixes)), len(prefixes)) {
				a.AllowCIDRs = append(a.AllowCIDRs, prefixes[i])
			}
			for _, i := range subset(mb%(1<<len(prefixes)), len(prefixes)) {
				b.AllowCIDRs = append(b.AllowCIDRs, prefixes[i])
			}
			got := a.Intersect(b)
			for _, h := range hosts {
				if want := allows(a, h) && allows(b, h); allows(got, h) != want {
					t.Fatalf("host %s: %v ∩ %v = %v allows it: %v, want %v", h, a.Hosts, b.Hosts, got.Hosts, !want, want)
				}
			}
			for _, s := range addrs {
				x := netip.MustParseAddr(s)
				if want := inRanges(a, x) && inRanges(b, x); inRanges(got, x) != want {
					t.Fatalf("address %s: %v ∩ %v = %v", s, a.AllowCIDRs, b.AllowCIDRs, got.AllowCIDRs)
				}
			}
			// The result compiles: every pattern is still normalised.
			if _, err := NewPolicy("t", got); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCAFileMustBeARegularFileOfBoundedSize: a FIFO, a device or an
// endless file named in http_ca_files is refused at once, not read forever.
func TestCAFileMustBeARegularFileOfBoundedSize(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ca.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, maxCAFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{fifo, "/dev/zero", dir, big} {
		t.Run(filepath.Base(f), func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := NewPolicy("t", Rules{Hosts: []string{"api.example.com"}, CAFiles: []string{f}})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("accepted")
				}
				t.Log(err)
			case <-time.After(10 * time.Second):
				t.Fatal("reading the CA file did not return")
			}
		})
	}
}
