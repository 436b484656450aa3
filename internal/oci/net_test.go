package oci

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/maiden-run/maiden/internal/testkit"
)

// tlsRegistry is a registry of its own (go-containerregistry's, with
// per-path overrides) behind a real TLS server on loopback whose
// certificate is valid for names (127.0.0.1 when none), and the transport
// that trusts it.
func tlsRegistry(t *testing.T, names ...string) (*httptest.Server, *hostile, *http.Transport) {
	t.Helper()
	h := &hostile{reg: registry.New(registry.Logger(log.New(io.Discard, "", 0))), over: map[string]http.HandlerFunc{}}
	if len(names) == 0 {
		srv := httptest.NewUnstartedServer(h)
		// go-containerregistry tries https and http at once for a
		// loopback registry and drops the loser: no log of its handshake.
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv, h, srv.Client().Transport.(*http.Transport).Clone()
	}
	srv, caFile := testkit.TLSServer(t, h, names...)
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return srv, h, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
}

// trickle answers 200 and then one byte every 20 ms, never finishing
// within the declared length; gone is closed when the client hangs up.
func trickle(gone chan struct{}) http.HandlerFunc {
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Content-Length", "4096")
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := w.Write([]byte{' '}); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-tick.C:
				continue
			}
			break
		}
		once.Do(func() { close(gone) })
	}
}

// TestPullDeadline (finding 1 of the fifth review): a registry that
// trickles a manifest, a signature or the layer, a byte at a time, held
// Pull for ever. Pull is bounded by PullOptions.Timeout and says which
// registry, stage and artifact did not finish; the registry sees the
// client hang up.
func TestPullDeadline(t *testing.T) {
	t.Parallel()
	srv, h, tr := tlsRegistry(t)
	host := strings.TrimPrefix(srv.URL, "https://")
	ctx := context.Background()
	kp := newKeyPair(t)
	layer := digestOf(echo(t))
	const timeout = 3 * time.Second

	for _, tt := range []struct {
		stage    string
		path     func(pinned Ref) string
		artifact func(pinned Ref) string
	}{
		{StageManifest, func(p Ref) string { return "/v2/" + p.Repository + "/manifests/" + p.Digest }, func(p Ref) string { return p.Digest }},
		{StageSignature, func(p Ref) string { return "/v2/" + p.Repository + "/manifests/" + signatureTag(p.Digest) }, func(p Ref) string { return "of " + p.Digest }},
		{StageBlob, func(p Ref) string { return "/v2/" + p.Repository + "/blobs/" + layer }, func(Ref) string { return layer }},
	} {
		t.Run(tt.stage, func(t *testing.T) {
			t.Parallel()
			opts := &PullOptions{Key: kp.pub, Transport: tr, Timeout: timeout}
			pinned := pushWith(t, "oci://"+host+"/slow/"+tt.stage+":v1", echo(t), opts)
			pinned.Tag = ""
			if err := Sign(ctx, pinned, kp.signer, opts); err != nil {
				t.Fatal(err)
			}
			gone := make(chan struct{})
			h.override(tt.path(pinned), trickle(gone))

			_, err := Pull(ctx, pinned, newStore(t), opts)
			var de *DeadlineError
			if !errors.Is(err, ErrDeadline) || !errors.As(err, &de) {
				t.Fatalf("Pull from a trickling registry = %v; want ErrDeadline", err)
			}
			want := DeadlineError{Registry: host, Stage: tt.stage, Artifact: tt.artifact(pinned), Timeout: timeout}
			if *de != want {
				t.Fatalf("DeadlineError = %+v; want %+v", *de, want)
			}
			for _, s := range []string{"registry " + host, tt.stage + " " + tt.artifact(pinned), "deadline of 3s"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			select {
			case <-gone:
			case <-time.After(30 * time.Second):
				t.Fatal("the registry's trickle never saw the client hang up")
			}
		})
	}
}

// TestResolveDeadline: resolving a tag at a registry that never finishes
// its answer is bounded too, naming the tag.
func TestResolveDeadline(t *testing.T) {
	t.Parallel()
	srv, h, tr := tlsRegistry(t)
	host := strings.TrimPrefix(srv.URL, "https://")
	gone := make(chan struct{})
	stall := func(w http.ResponseWriter, r *http.Request) {
		// The answer's head never comes.
		<-r.Context().Done()
		close(gone)
	}
	h.override("/v2/slow/resolve/manifests/v1", stall)
	_, err := Resolve(context.Background(), ref(t, "oci://"+host+"/slow/resolve:v1"), &PullOptions{Transport: tr, Timeout: time.Second})
	var de *DeadlineError
	if !errors.As(err, &de) || de.Stage != StageManifest || de.Artifact != "tag v1" || de.Registry != host {
		t.Fatalf("Resolve at a stalled registry = %v; want a DeadlineError for the manifest stage of tag v1 at %s", err, host)
	}
	<-gone
}

// dialLog records what the guard connected to; anything but the addresses
// a test expects fails it, so no test ever connects off loopback.
type dialLog struct {
	t     *testing.T
	mu    sync.Mutex
	addrs []string
	// serve maps an address the test's resolver gives (a public one) to
	// the loopback server that plays it.
	serve map[string]string
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	if to, ok := d.serve[addr]; ok {
		addr = to
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		d.t.Errorf("dialled %s: a test connects only to loopback", addr)
		return nil, errors.New("test: not loopback")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *dialLog) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// TestRedirectRules (finding 2 of the fifth review): a registry's blob
// redirect was followed to loopback (http://localhost, or a name that
// resolves there), so a registry could make maiden GET a local service. A
// redirect now goes to https only, to a public address or one of the
// registry's own kind, resolved and checked before any connection, and
// never carries the registry's Authorization header to another host.
func TestRedirectRules(t *testing.T) {
	t.Parallel()
	srv, h, tr := tlsRegistry(t, "registry.test", "cdn.registry.test", "cdn.test")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	host := "registry.test:" + port
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	public := "8.8.8.8:" + port // never dialled: dialLog serves it on loopback

	// A sink on loopback: a local service a registry must not reach.
	var sinkMu sync.Mutex
	sinkHits := 0
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sinkMu.Lock()
		sinkHits++
		sinkMu.Unlock()
	}))
	t.Cleanup(sink.Close)
	sinkPort := strings.TrimPrefix(sink.URL, "http://127.0.0.1:")

	// The registry serves the layer at /cdn/LAYER too, for a redirect.
	layer := digestOf(echo(t))
	var authMu sync.Mutex
	var cdnAuth []string
	h.override("/cdn/"+layer, func(w http.ResponseWriter, r *http.Request) {
		authMu.Lock()
		cdnAuth = append(cdnAuth, r.Header.Get("Authorization"))
		authMu.Unlock()
		w.Write(echo(t))
	})

	for _, tt := range []struct {
		name     string
		registry []netip.Addr // what registry.test resolves to
		cdn      string       // the cdn host's address ("" for none)
		to       string       // the redirect's target
		want     error        // nil: the pull succeeds
		says     []string
	}{
		{name: "https to a subdomain, both on loopback like the registry", registry: loop, cdn: "127.0.0.1",
			to: "https://cdn.registry.test:" + port + "/cdn/" + layer},
		{name: "loopback from a public registry", registry: []netip.Addr{netip.MustParseAddr("8.8.8.8")}, cdn: "127.0.0.1",
			to: "https://cdn.test:" + sinkPort + "/latest/meta-data", want: ErrAddress,
			says: []string{"rule: " + RuleAddress, "address 127.0.0.1 of cdn.test is loopback (rule: loopback)", "registry.test is global"}},
		{name: "plain http to localhost from a public registry", registry: []netip.Addr{netip.MustParseAddr("8.8.8.8")},
			to: "http://localhost:" + sinkPort + "/admin", want: ErrRedirect,
			says: []string{"rule: " + RuleRedirectTLS, "redirected to http://localhost:" + sinkPort}},
		{name: "private from a loopback registry", registry: loop, cdn: "10.0.0.5",
			to: "https://cdn.test/internal", want: ErrAddress,
			says: []string{"address 10.0.0.5 of cdn.test is private (rule: private-range)", "registry.test is loopback"}},
		{name: "metadata from a loopback registry", registry: loop, cdn: "169.254.169.254",
			to: "https://cdn.test/latest/meta-data", want: ErrAddress,
			says: []string{"169.254.169.254 of cdn.test", "rule: " + RuleAddress}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hosts := testkit.Hosts{"registry.test": tt.registry}
			if tt.cdn != "" {
				a := []netip.Addr{netip.MustParseAddr(tt.cdn)}
				hosts["cdn.test"], hosts["cdn.registry.test"] = a, a
			}
			dl := &dialLog{t: t, serve: map[string]string{public: "127.0.0.1:" + port}}
			kc, err := SecretKeychain(host, "REG", "ann:hunter2")
			if err != nil {
				t.Fatal(err)
			}
			res := &askedResolver{hosts: hosts}
			opts := &PullOptions{Transport: tr, Resolver: res, Keychain: kc, dial: dl.dial}
			repo := "redirect/" + strings.NewReplacer(" ", "-", ",", "").Replace(tt.name)
			pinned := pushWith(t, "oci://"+host+"/"+repo+":v1", echo(t), opts)
			pinned.Tag = ""
			h.override("/v2/"+repo+"/blobs/"+layer, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tt.to, http.StatusTemporaryRedirect)
			})
			before := len(dl.dialled())
			res.reset()
			_, err = Pull(context.Background(), pinned, newStore(t), opts)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Pull through an allowed redirect: %v", err)
				}
				// The registry's name is the operator's, resolved as the
				// system does; the redirect's is the registry's, resolved
				// as the absolute name, out of reach of a search list.
				if asked := res.names(); !slices.Contains(asked, "cdn.registry.test.") || slices.Contains(asked, "cdn.registry.test") {
					t.Errorf("names asked of the resolver %q; want the redirect's host only as cdn.registry.test.", asked)
				}
				authMu.Lock()
				defer authMu.Unlock()
				if len(cdnAuth) == 0 || cdnAuth[len(cdnAuth)-1] != "" {
					t.Fatalf("the redirect's host got Authorization %q; want none", cdnAuth)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Pull = %v; want %v", err, tt.want)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			for _, a := range dl.dialled()[before:] {
				if !strings.HasSuffix(a, ":"+port) {
					t.Errorf("dialled %s while refusing the redirect; want no connection but the registry's", a)
				}
			}
			sinkMu.Lock()
			defer sinkMu.Unlock()
			if sinkHits != 0 {
				t.Errorf("the local service got %d requests", sinkHits)
			}
		})
	}
}

// askedResolver answers from hosts and keeps every name exactly as asked.
type askedResolver struct {
	hosts testkit.Hosts
	mu    sync.Mutex
	asked []string
}

func (r *askedResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	return r.hosts.LookupNetIP(ctx, network, host)
}

func (r *askedResolver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

func (r *askedResolver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = nil
}

// pushWith is push with options (a TLS registry's transport, a resolver).
func pushWith(t *testing.T, s string, wasm []byte, opts *PullOptions) Ref {
	t.Helper()
	p, err := Push(context.Background(), ref(t, s), wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRedirectDropsAuthorization: a redirected request to any host but
// the registry's own (a subdomain included, which net/http would copy
// the header to) goes without the Authorization header; to the registry
// itself it keeps it. The caller's request is not changed.
func TestRedirectDropsAuthorization(t *testing.T) {
	var got []string
	tr := capTransport{registry: "registry.test:5000", base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Get("Authorization"))
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})}
	prev, _ := http.NewRequest(http.MethodGet, "https://registry.test:5000/v2/a/blobs/sha256:00", nil)
	for _, tt := range []struct{ url, want string }{
		{"https://cdn.registry.test:5000/blob", ""},
		{"https://registry.test/blob", ""}, // another port is another origin
		{"https://registry.test:5000/elsewhere", "Basic c2VjcmV0"},
	} {
		req, _ := http.NewRequest(http.MethodGet, tt.url, nil)
		req.Header.Set("Authorization", "Basic c2VjcmV0")
		req.Response = &http.Response{StatusCode: http.StatusTemporaryRedirect, Request: prev}
		got = nil
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatalf("RoundTrip(%s): %v", tt.url, err)
		}
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("redirect to %s sent Authorization %q; want %q", tt.url, got, tt.want)
		}
		if req.Header.Get("Authorization") == "" {
			t.Errorf("the caller's request to %s lost its header: RoundTrip must not change it", tt.url)
		}
	}
}
