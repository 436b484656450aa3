package egress_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/testkit"
)

// searchListResolver answers as DNS does for a resolver under Kubernetes'
// resolv.conf (search ns.svc.cluster.local, ndots:5): a relative name is
// tried against the search list first, so "api.example.com" is answered by
// api.example.com.ns.svc.cluster.local, an in-cluster service anyone who
// can create one in the namespace names (a cluster IP, 10.96.0.10); only
// the absolute "api.example.com." is the public host, here the real server
// on loopback. It keeps every name exactly as asked.
type searchListResolver struct {
	mu    sync.Mutex
	asked []string
}

func (r *searchListResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	switch host {
	case "api.example.com.":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case "api.example.com":
		return []netip.Addr{netip.MustParseAddr("10.96.0.10")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *searchListResolver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// TestLookupAbsoluteName: the gate and the CONNECT proxy ask the resolver
// for exactly the name they checked, made absolute ("api.example.com."),
// never the relative name a search list would answer first. The name
// checked, the Host header, the TLS server name (the certificate is for
// api.example.com) and the audit record keep the name without the dot. A
// relative lookup would be answered with the cluster IP, which netguard
// refuses before anything is dialled.
func TestLookupAbsoluteName(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		io.WriteString(w, "ok")
	}), "api.example.com")
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	rules := egress.Rules{
		Hosts: []string{"api.example.com"}, Ports: []uint16{uint16(port)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		CAFiles:    []string{ca}, MaxResponseBytes: egress.DefaultMaxResponseBytes,
	}
	authority := "api.example.com:" + strconv.Itoa(port)

	t.Run("fetch", func(t *testing.T) {
		res, audit := &searchListResolver{}, &lockedBuf{}
		g := egress.New(&egress.Options{Resolver: res, Audit: slogJSON(audit)})
		p := policy(t, rules)
		t.Cleanup(p.CloseIdleConnections)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The tool's own spelling with one trailing dot is the same host:
		// still one absolute lookup, still no dot anywhere else.
		for _, u := range []string{"https://" + authority + "/x", "https://api.example.com.:" + strconv.Itoa(port) + "/y"} {
			p.CloseIdleConnections()
			resp, ferr := g.Fetch(ctx, p, egress.Request{URL: u})
			if ferr != nil {
				t.Fatalf("%s: %s (rule %s)", u, ferr.Message, ferr.Rule)
			}
			if resp.Status != 200 || string(resp.Body) != "ok" {
				t.Fatalf("%s: %d %q", u, resp.Status, resp.Body)
			}
		}
		if d := cmp.Diff([]string{"api.example.com.", "api.example.com."}, res.names()); d != "" {
			t.Errorf("names asked of the resolver (-want +got):\n%s", d)
		}
		mu.Lock()
		got := append([]string(nil), hosts...)
		hosts = nil
		mu.Unlock()
		if d := cmp.Diff([]string{authority, authority}, got); d != "" {
			t.Errorf("Host headers the server saw (-want +got):\n%s", d)
		}
		for _, ev := range audit.events(t) {
			if ev["msg"] == "http-fetch" && ev["host"] != "api.example.com" {
				t.Errorf("audit event names host %v, want api.example.com", ev["host"])
			}
		}
	})

	t.Run("connect", func(t *testing.T) {
		res, audit := &searchListResolver{}, &lockedBuf{}
		g := egress.New(&egress.Options{Resolver: res, Audit: slogJSON(audit)})
		proxy, err := egress.NewConnectProxy(g)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proxy.Close() })
		s, err := proxy.Open(policy(t, rules), nil, "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pem, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		proxyURL, _ := url.Parse(s.URL())
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: roots}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + authority + "/z")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("through the proxy: %d %q", resp.StatusCode, body)
		}
		if d := cmp.Diff([]string{"api.example.com."}, res.names()); d != "" {
			t.Errorf("names asked of the resolver (-want +got):\n%s", d)
		}
		ev := lastEvent(t, &proxyEnv{audit: audit})
		if ev["host"] != "api.example.com" || ev["addr"] != "127.0.0.1:"+strconv.Itoa(port) {
			t.Errorf("audit event %v, want host api.example.com at 127.0.0.1", ev)
		}
	})
}
