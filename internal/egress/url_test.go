package egress

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNormalizeURL pins the canonical form of accepted URLs: what is
// checked, dialled and sent.
func TestNormalizeURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		host     string
		port     uint16
	}{
		{"https://api.example.com", "https://api.example.com/", "api.example.com", 443},
		{"HTTPS://API.Example.COM./a/b?x=1#frag", "https://api.example.com/a/b?x=1", "api.example.com", 443},
		{"https://api.example.com:443/", "https://api.example.com/", "api.example.com", 443},
		{"https://api.example.com:8443/", "https://api.example.com:8443/", "api.example.com", 8443},
		{"http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x", "127.0.0.1", 8080},
		{"http://localhost/", "http://localhost/", "localhost", 80},
		{"https://[::1]/", "https://[::1]/", "::1", 443},
		{"https://[0:0:0:0:0:0:0:1]:444/", "https://[::1]:444/", "::1", 444},
		{"https://[::FFFF:127.0.0.1]/", "https://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1", 443},
		{"https://xn--bcher-kva.example/", "https://xn--bcher-kva.example/", "xn--bcher-kva.example", 443},
		{"https://a.example/a b/%2F..%2f", "https://a.example/a%20b/%2F..%2f", "a.example", 443},
		{"https://a.example/?q=a b|c\"<>{}^`é", "https://a.example/?q=a%20b%7Cc%22%3C%3E%7B%7D%5E%60%C3%A9", "a.example", 443},
		{"https://a.example/?", "https://a.example/", "a.example", 443},
		{"https://a.example/p?a=%2F&b=/?c", "https://a.example/p?a=%2F&b=/?c", "a.example", 443},
		{"https://a.example#only-fragment", "https://a.example/", "a.example", 443},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, d := normalizeURL(tc.in)
			if !d.Allow {
				t.Fatalf("refused: %s", d.Reason)
			}
			if got.String() != tc.want || got.host != tc.host || got.port != tc.port {
				t.Errorf("got %s (host %q port %d), want %s (host %q port %d)", got, got.host, got.port, tc.want, tc.host, tc.port)
			}
			if got.url().String() != tc.want {
				t.Errorf("outgoing URL %s, want %s", got.url(), tc.want)
			}
		})
	}
}

func TestCheckTarget(t *testing.T) {
	p, err := NewPolicy("t", Rules{Hosts: []string{"api.example.com", "*.tiles.example", "127.0.0.1", "::1", "localhost"},
		Ports:      []uint16{8080},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		rule string
	}{
		{"https://api.example.com/", RuleAllowed},
		{"https://a.tiles.example/", RuleAllowed},
		{"https://tiles.example/", RuleAllowlist},
		{"https://a.b.tiles.example/", RuleAllowlist},
		{"https://xapi.example.com/", RuleAllowlist},
		{"https://api.example.com.evil.example/", RuleAllowlist},
		{"https://127.0.0.1/", RuleAllowed},
		{"https://127.0.0.2/", RuleIPLiteral},
		{"https://[::1]/", RuleAllowed},
		{"https://[::ffff:127.0.0.1]/", RuleIPLiteral},
		{"http://127.0.0.1:8080/", RuleAllowed},
		{"http://localhost:8080/", RuleAllowed},
		{"http://[::1]:8080/", RuleAllowed},
		{"http://127.0.0.1/", RulePort},
		{"http://api.example.com:8080/", RuleHTTPSRequired},
		{"http://a.tiles.example/", RuleHTTPSRequired},
		{"https://api.example.com:8080/", RuleAllowed},
		{"https://api.example.com:8443/", RulePort},
	} {
		tg, d := normalizeURL(tc.url)
		if !d.Allow {
			t.Fatalf("%s: %s", tc.url, d.Reason)
		}
		if d = p.checkTarget(tg); d.Rule != tc.rule {
			t.Errorf("%s: rule %s (%s), want %s", tc.url, d.Rule, d.Reason, tc.rule)
		}
	}
}

func TestHostSyntaxMessages(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://0x7f.1/", `host "0x7f.1" is not a plain host name or IP address: looks like an IPv4 address but is not a valid one (rule: host-syntax)`},
		{"https://a..b/", `host "a..b" is not a plain host name or IP address: empty label (two dots in a row, or a leading dot) (rule: host-syntax)`},
		{"https://a_b.example/", `host "a_b.example" is not a plain host name or IP address: invalid character '_'; host names are made of letters, digits, '-' and '.' (rule: host-syntax)`},
		{"https://\u0430pi.example.com/", `host "\u0430pi.example.com" contains non-ASCII characters; write internationalised names in punycode ("xn--...") (rule: host-syntax)`},
	} {
		_, d := normalizeURL(tc.url)
		if diff := cmp.Diff(tc.want, d.Reason); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.url, diff)
		}
	}
}

func TestCheckHeadersKeepsOrderAndCase(t *testing.T) {
	h, d := checkHeaders(nil)
	if !d.Allow || len(h) != 0 {
		t.Fatalf("no headers: %v %v", h, d)
	}
	for _, m := range []string{"", "GET", "post", "PROPFIND", "M-SEARCH"} {
		if _, d := checkMethod(m); !d.Allow {
			t.Errorf("method %q refused: %s", m, d.Reason)
		}
	}
	for _, m := range []string{"GET ", "G\tET", "connect", strings.Repeat("A", 33), "GÉT"} {
		if _, d := checkMethod(m); d.Allow {
			t.Errorf("method %q allowed", m)
		}
	}
}
