package egress_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestConnectProxyTunnelNamesTheCheckedHost (hostile CLI): a CONNECT is
// decided by the host it names, but the CLI speaks TLS itself, and a server
// that serves many names on one address (a CDN, a cloud front end, shared
// hosting) answers for the name in the ClientHello. A CLI allowed
// api.example.com must not reach another name on its address by sending
// that name as SNI (domain fronting), by sending no name (the address's
// default site), or by speaking plain HTTP with another Host. Each is
// refused by rule tls-server-name before the server gets a byte, audited,
// and kept as the session's refusal; the checked name and, for an allowed
// IP literal, no name at all, still pass. The server here is one loopback
// TLS server holding a certificate for both names, as a CDN's edge does.
func TestConnectProxyTunnelNamesTheCheckedHost(t *testing.T) {
	var handled atomic.Int64
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		fmt.Fprintf(w, "site %s", r.TLS.ServerName)
	}), "api.example.com", "evil.example.net")
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	pemCA, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemCA)

	e := newProxyEnv(t, testkit.Loopback("api.example.com"))
	s, err := e.proxy.Open(policy(t, egress.Rules{
		Hosts: []string{"api.example.com", "127.0.0.1"}, Ports: []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cur := s // the session through uses

	// through CONNECTs to target and sends first over the tunnel: a TLS
	// handshake naming sni (none when ""; a plain HTTP request when plain)
	// and a GET with Host host. It returns the body or the failure.
	through := func(target, sni, host string, plain bool) (string, error) {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(e.proxy.Port()))
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+basic(cur)+"\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return "", err
		}
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("CONNECT: %s", resp.Status)
		}
		var rw io.ReadWriter = c
		if !plain {
			// The test client checks the certificate against the names
			// it offers; with no SNI it has no name to check.
			tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: roots, InsecureSkipVerify: sni == "", NextProtos: []string{"http/1.1"}})
			if err := tc.Handshake(); err != nil {
				return "", fmt.Errorf("handshake: %w", err)
			}
			rw, br = tc, bufio.NewReader(tc)
		}
		io.WriteString(rw, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		return string(b), err
	}
	api := "api.example.com:" + strconv.Itoa(port)
	ip := "127.0.0.1:" + strconv.Itoa(port)

	// The positive controls: the checked name, and an allowed IP literal
	// without a name.
	if got, err := through(api, "api.example.com", "api.example.com", false); err != nil || got != "site api.example.com" {
		t.Fatalf("the checked name: %q %v", got, err)
	}
	if got, err := through(ip, "", "127.0.0.1", false); err != nil || got != "site " {
		t.Fatalf("an allowed IP literal without SNI: %q %v", got, err)
	}
	if s.Refusal() != "" {
		t.Fatalf("refusal after allowed tunnels: %s", s.Refusal())
	}

	cases := []struct {
		name, target, sni, host string
		plain                   bool
	}{
		{"another name as SNI (fronting)", api, "evil.example.net", "evil.example.net", false},
		{"another name as SNI, the checked Host", api, "evil.example.net", "api.example.com", false},
		{"no SNI: the address's default site", api, "", "evil.example.net", false},
		{"a name as SNI to an allowed IP literal", ip, "evil.example.net", "evil.example.net", false},
		{"plain HTTP with another Host", api, "", "evil.example.net", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := handled.Load()
			got, err := through(c.target, c.sni, c.host, c.plain)
			if err == nil {
				t.Fatalf("reached %q through a tunnel to %s", got, c.target)
			}
			if n := handled.Load() - before; n != 0 {
				t.Fatalf("the server handled %d requests", n)
			}
			ev := lastEvent(t, e)
			if ev["decision"] != "deny" || ev["rule"] != egress.RuleServerName || ev["method"] != "CONNECT" {
				t.Fatalf("audit event %v, want a denial by %s", ev, egress.RuleServerName)
			}
			if !strings.Contains(s.Refusal(), "(rule: "+egress.RuleServerName+")") {
				t.Fatalf("session refusal %q", s.Refusal())
			}
		})
	}

	// The caller's record of each tunnel (OpenEach's done, which the host
	// audits) tells the same: refused by that rule, not allowed.
	tunnels := make(chan egress.Tunnel, 2)
	each, err := e.proxy.OpenEach(policy(t, egress.Rules{
		Hosts: []string{"api.example.com"}, Ports: []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}), "", func() (egress.Authorizer, func(egress.Tunnel)) {
		return nil, func(tn egress.Tunnel) { tunnels <- tn }
	})
	if err != nil {
		t.Fatal(err)
	}
	defer each.Close()
	cur = each
	if _, err := through(api, "evil.example.net", "evil.example.net", false); err == nil {
		t.Fatal("fronting reached the other name through an OpenEach session")
	}
	if tn := <-tunnels; tn.Allowed || tn.Rule != egress.RuleServerName || !strings.Contains(tn.Reason, "evil.example.net") {
		t.Errorf("the fronted tunnel reported as %+v, want refused by %s naming the name sent", tn, egress.RuleServerName)
	}
	if got, err := through(api, "api.example.com", "api.example.com", false); err != nil || got != "site api.example.com" {
		t.Fatalf("the checked name through an OpenEach session: %q %v", got, err)
	}
	if tn := <-tunnels; !tn.Allowed || tn.Rule != egress.RuleAllowed {
		t.Errorf("the checked tunnel reported as %+v, want allowed", tn)
	}
}
