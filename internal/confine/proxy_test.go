//go:build linux

package confine_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/confine"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The whole chain with a real CLI: curl from the distribution, confined,
// reaches an allowed host only through the egress proxy (as root, from its
// own network namespace, through maiden's relay); a host off the list is
// refused by the proxy, and going around the proxy is refused by Landlock.
func TestConfinedCurlThroughTheProxy(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("MAIDEN_CI") != "" {
			t.Fatal("curl is not installed (make test installs it, see scripts/deps)")
		}
		t.Skip("curl is not installed")
	}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "reached")
	}), "api.example.com")
	sport := srv.Listener.Addr().(*net.TCPAddr).Port
	gate := egress.New(&egress.Options{Resolver: testkit.Loopback("api.example.com")})
	proxy, err := egress.NewConnectProxy(gate)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	pol, err := egress.NewPolicy("curl", egress.Rules{
		Hosts: []string{"api.example.com"}, Ports: []uint16{uint16(sport)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := proxy.Open(pol, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	curlRun := func(extra ...string) confine.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := confine.Run(ctx, confine.Spec{
			Path:      curl,
			Args:      append([]string{"-sS", "--max-time", "10", "--cacert", ca}, extra...),
			Env:       []string{"HTTPS_PROXY=" + sess.URL()},
			ReadOnly:  []string{ca},
			ProxyPort: proxy.Port(),
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		t.Logf("curl %v: %v, exit %d", extra, res.Duration, res.ExitCode)
		if res.Landlock < 4 || res.Unconfined {
			t.Fatalf("not confined: %+v", res)
		}
		if os.Geteuid() == 0 && !res.NetNS {
			t.Fatalf("as root, curl ran without its network namespace: %+v", res)
		}
		return res
	}
	url := func(host string) string { return "https://" + host + ":" + strconv.Itoa(sport) + "/" }
	if res := curlRun(url("api.example.com")); res.ExitCode != 0 || string(res.Stdout) != "reached" {
		t.Fatalf("allowed host: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := curlRun(url("evil.example.com")); res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "403") {
		t.Fatalf("host off the list: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Around the proxy, straight to the server's port.
	res := curlRun("--noproxy", "*", url("127.0.0.1"))
	if res.ExitCode != 7 || !strings.Contains(string(res.Stderr), "onnect") {
		t.Fatalf("around the proxy: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}
