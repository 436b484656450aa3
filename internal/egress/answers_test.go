package egress

import (
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/netguard"
)

// TestAnswersThatCarryARefusedAddress (hostile review of the egress gate):
// a hostile DNS answers for an allowed name with an address that is, or
// delivers to, one the policy does not open: the unspecified addresses
// (0.0.0.0 connects to this host on Linux), "this network", the
// IPv4-compatible, 6to4, Teredo and NAT64 (both prefixes) forms of
// loopback, and metadata in its IPv4-mapped and IPv6 forms. The policy
// opens 127.0.0.0/8 (the test server's range), so only the wrapper or the
// address itself can refuse each: every one is refused with its own rule
// before anything is dialled, and the server counts no connection. The
// IPv4-mapped form of the allowed loopback address is the control: it is
// the same destination, and reaches the server.
func TestAnswersThatCarryARefusedAddress(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") }, false)
	for _, tc := range []struct {
		answer, rule string
	}{
		{"0.0.0.0", netguard.RuleUnspecified},
		{"0.1.2.3", netguard.RuleThisNetwork},
		{"::", netguard.RuleUnspecified},
		{"::ffff:0.0.0.0", netguard.RuleUnspecified},
		{"::7f00:1", netguard.RuleIPv4Compatible},
		{"2002:7f00:1::1", netguard.Rule6to4},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", netguard.RuleTeredo}, // client 127.0.0.1
		{"64:ff9b::7f00:1", netguard.RuleNAT64},
		{"64:ff9b:1::7f00:1", netguard.RuleNAT64},
		{"::ffff:169.254.169.254", netguard.RuleMetadata},
		{"fd00:ec2::254", netguard.RuleMetadata},
		{"fe80::1", netguard.RuleLinkLocal},
		{"::ffff:10.0.0.1", netguard.RulePrivate},
		{"::ffff:127.0.0.1", ""}, // the control: loopback itself, allowed
	} {
		t.Run(tc.answer, func(t *testing.T) {
			e := newEnv(t)
			e.res.set("api.example.com", tc.answer)
			before := s.conns.Load()
			resp, ferr := e.gate.Fetch(ctxTimeout(t, 5*time.Second), mustPolicy(t, toolFor(t, s.port)), get(urlFor(s, "api.example.com", "/")))
			if tc.rule == "" {
				if ferr != nil || string(resp.Body) != "reached" {
					t.Fatalf("got %v %v, want the server's answer", resp, ferr)
				}
				return
			}
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != tc.rule || !strings.Contains(ferr.Message, "address "+netip.MustParseAddr(tc.answer).String()+" of api.example.com") {
				t.Fatalf("got %v, want denied by rule %s naming the address", ferr, tc.rule)
			}
			if n := s.conns.Load() - before; n != 0 {
				t.Errorf("the server saw %d connections", n)
			}
		})
	}
}

// TestBoundCredentialOnlyToItsHost (hostile review of the egress gate): a
// credential bound to api.example.com, asked for by a hostile tool with
// another spelling of a host. The spellings the gate normalises to the
// bound name (case, one trailing dot) carry the credential to exactly that
// name: Host header and TLS server name as bound, never as written. Every
// other name is refused by credential-destination (another allowed host
// with a trailing dot, a punycode look-alike the policy also allows) or
// earlier (a raw IDN, an extra label, a second trailing dot), before
// anything is resolved, and the server gets nothing from them.
func TestBoundCredentialOnlyToItsHost(t *testing.T) {
	var mu sync.Mutex
	type seen struct{ host, sni, auth string }
	var got []seen
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Host, r.TLS.ServerName, r.Header.Get("Authorization")})
		mu.Unlock()
	}, false)
	e := newEnv(t)
	for _, h := range []string{"api.example.com", "other.example.com", "xn--pi-7ka.example.com", "api.example.com.evil.example"} {
		e.res.set(h, "127.0.0.1")
	}
	e.secrets["API_TOKEN"] = "tok-0123456789"
	r := toolFor(t, s.port)
	r.Hosts = []string{"api.example.com", "other.example.com", "xn--pi-7ka.example.com"}
	r.SecretDestinations = []SecretDestination{{Secret: "API_TOKEN", Hosts: []string{"api.example.com"}, Source: "[secrets.API_TOKEN]"}}
	p := mustPolicy(t, r)
	port := strconv.Itoa(int(s.port))
	for _, tc := range []struct {
		host, rule string
	}{
		{"API.Example.COM", ""},
		{"api.example.com.", ""},
		{"API.EXAMPLE.COM.", ""},
		{"other.example.com.", RuleCredentialDestination},
		{"OTHER.example.com", RuleCredentialDestination},
		{"xn--pi-7ka.example.com", RuleCredentialDestination}, // "äpi", allowed, but not the bound name
		{"XN--PI-7KA.example.com.", RuleCredentialDestination},
		{"äpi.example.com", RuleHostSyntax},
		{"api.example.com.evil.example", RuleAllowlist},
		{"api.example.com..", RuleHostSyntax},
	} {
		t.Run(tc.host, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			lookups := e.res.total.Load()
			_, ferr := e.gate.Fetch(ctxTimeout(t, 5*time.Second), p, withCred(get("https://"+tc.host+":"+port+"/"), "API_TOKEN"))
			mu.Lock()
			defer mu.Unlock()
			if tc.rule == "" {
				if ferr != nil {
					t.Fatalf("refused: %v", ferr)
				}
				want := seen{"api.example.com:" + port, "api.example.com", "Bearer tok-0123456789"}
				if len(got) != 1 || got[0] != want {
					t.Fatalf("the server saw %+v, want %+v", got, want)
				}
				return
			}
			if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != tc.rule {
				t.Fatalf("got %v, want denied by rule %s", ferr, tc.rule)
			}
			if len(got) != 0 || e.res.total.Load() != lookups {
				t.Errorf("the server saw %+v after %d lookups; want nothing, no lookup", got, e.res.total.Load()-lookups)
			}
		})
	}
}
