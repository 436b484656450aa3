package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestNetworkOffAndWebFetch: with network disabled in the session's
// boundary, a WebAssembly tool whose policy allows the host and web_fetch
// are both refused before any connection (the server counts none), with
// the structured error asking for network; once a human approves the
// expansion, both reach the server, web_fetch with the binding's secret
// material attached by the host and redacted from what comes back; the
// material is dropped when the session's boundary is downgraded and when
// the session ends.
func TestNetworkOffAndWebFetch(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "auth=%s key=%s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	h := newHostWith(t, `version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]

[agents.a]
grants = ["tool:invoke fetcher --...", "tool:invoke web_fetch --...", "tool:invoke request_sandbox_boundary --...",
  "network:connect api.example.com", "secret:use API_TOKEN", "secret:use KEY_ONE"]
[agents.a.boundary]
network = false
[agents.a.tools.fetcher]
[agents.a.tools.request_sandbox_boundary]
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
credential = "API_TOKEN"
secret_headers = { "X-Api-Key" = "KEY_ONE" }
`, maiden.Options{
		Isolation:    maiden.InProcess,
		Resolver:     testkit.Loopback("api.example.com"),
		ApprovalPoll: 20 * time.Millisecond,
		LookupSecret: func(name string) (string, bool) {
			return map[string]string{"API_TOKEN": "tok-s3cr3t-value", "KEY_ONE": "key-s3cr3t-value"}[name], true
		},
	}, "js/fetcher")
	ctx := context.Background()
	target := "https://api.example.com:" + port + "/"
	call := func(session, tool string, input any) maiden.Result {
		raw, _ := json.Marshal(input)
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: tool, Input: string(raw), Session: session})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	for _, tool := range []string{"fetcher", "web_fetch"} {
		res := call("s1", tool, map[string]any{"url": target})
		e := structured(t, res)
		if e["reason"] != boundary.ReasonBoundaryRequired || e["domain"] != boundary.DomainNetwork || fmt.Sprint(e["requiredExpansion"]) != "map[network:map[enabled:true]]" {
			t.Errorf("%s with network off: %v", tool, e)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was reached %d times with network off", n)
	}

	out := requestAndDecideAs(t, h, "a", "s1", map[string]any{"id": "net", "expansion": map[string]any{"network": map[string]any{"enabled": true}}, "justification": "read the API docs"},
		maiden.Answer{Approve: true, By: "test"})
	if !out.OK {
		t.Fatalf("network request: %+v", out.Error)
	}
	res := call("s1", "fetcher", map[string]any{"url": target})
	if !res.OK || hits.Load() != 1 {
		t.Fatalf("fetcher with network on: %+v (hits %d)", res, hits.Load())
	}
	res = call("s1", "web_fetch", map[string]any{"url": target})
	if !res.OK || hits.Load() != 2 {
		t.Fatalf("web_fetch with network on: %+v (hits %d)", res, hits.Load())
	}
	if strings.Contains(res.Output, "s3cr3t") || !strings.Contains(res.Output, "[REDACTED:API_TOKEN]") || !strings.Contains(res.Output, "[REDACTED:KEY_ONE]") {
		t.Errorf("web_fetch output: %s", res.Output)
	}
	// Its request is a fetch record of the trail, as an http-fetch's is,
	// with the decisions of the agent's cards: network:connect, then
	// secret:use of each secret it carries, in the order the gate asks
	// (the secret header's, then the credential's, each after its
	// destination).
	var webFetches []map[string]any
	for _, f := range auditOf(t, h, store.AuditFetch) {
		if f["tool"] == "web_fetch" {
			webFetches = append(webFetches, f)
		}
	}
	if len(webFetches) != 1 {
		t.Fatalf("web_fetch's fetch records: %v, want the one request that reached the gate", webFetches)
	}
	f := webFetches[0]
	var targets []string
	for _, d := range f["decisions"].([]any) {
		d := d.(map[string]any)
		if d["allow"] != true {
			t.Errorf("web_fetch's recorded decision %v, want allowed", d)
		}
		targets = append(targets, fmt.Sprint(d["target"]))
	}
	if want := []string{"network:connect api.example.com:" + port, "secret:use KEY_ONE", "network:connect api.example.com:" + port, "secret:use API_TOKEN"}; !slices.Equal(targets, want) ||
		f["method"] != "GET" || f["allowed"] != true || f["status"] != float64(200) || f["credential"] != "API_TOKEN" || fmt.Sprint(f["header_secrets"]) != "[KEY_ONE]" {
		t.Errorf("web_fetch's fetch record: %v (decided %v), want %v", f, targets, want)
	}
	for _, rec := range trail(t, h, "") {
		if b, _ := json.Marshal(rec); strings.Contains(string(b), "s3cr3t") {
			t.Errorf("the audit trail holds the material: %s", b)
		}
	}
	// Another session of the agent still has network off.
	if e := structured(t, call("s2", "web_fetch", map[string]any{"url": target})); e["reason"] != boundary.ReasonBoundaryRequired {
		t.Errorf("second session: %v", e)
	}

	// Downgrade: the operator resets s1 to no network: material dropped at once.
	if !h.HeldMaterial("s1") {
		t.Fatal("s1 holds no material after a web_fetch")
	}
	if _, err := h.ResetSession(ctx, "s1", api.Boundary{Kind: api.BoundaryManaged, Filesystem: api.FSRestricted}, "test"); err != nil {
		t.Fatal(err)
	}
	if h.HeldMaterial("s1") {
		t.Error("material kept after the boundary was downgraded")
	}
	// End: a session that fetched, then ended, holds none.
	requestAndDecideAs(t, h, "a", "s3", map[string]any{"id": "n3", "expansion": map[string]any{"network": map[string]any{"enabled": true}}, "justification": "x"},
		maiden.Answer{Approve: true, By: "test"})
	if res := call("s3", "web_fetch", map[string]any{"url": target}); !res.OK || !h.HeldMaterial("s3") {
		t.Fatalf("s3: %+v", res)
	}
	if err := h.EndSession(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	if h.HeldMaterial("s3") {
		t.Error("material kept after the session ended")
	}
}

// TestWebFetchSecretHeadersChecked (found by a security review): a secret
// header of web_fetch's material passes the same checks as a credential:
// its [secrets.NAME] destinations and the agent's secret:use card, before
// anything is sent.
func TestWebFetchSecretHeadersChecked(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]string{}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Host] = r.Header.Get("X-Api-Key")
		mu.Unlock()
	}), "api.example.com", "evil.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	h := newHostWith(t, `version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
secrets = ["KEY_ONE"]

[secrets.KEY_ONE]
hosts = ["api.example.com"]

[agents.a]
grants = ["tool:invoke web_fetch --...", "network:connect api.example.com", "network:connect evil.example.com"]
[agents.a.boundary]
network = true
[agents.a.tools.web_fetch]
http_allow = ["api.example.com", "evil.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
secret_headers = { "X-Api-Key" = "KEY_ONE" }

[agents.b]
grants = ["tool:invoke web_fetch --...", "network:connect api.example.com", "network:connect evil.example.com", "secret:use KEY_ONE"]
[agents.b.boundary]
network = true
[agents.b.tools.web_fetch]
http_allow = ["api.example.com", "evil.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
secret_headers = { "X-Api-Key" = "KEY_ONE" }
`, maiden.Options{
		Isolation: maiden.InProcess,
		Resolver:  testkit.Loopback("api.example.com", "evil.example.com"),
		LookupSecret: func(name string) (string, bool) {
			return map[string]string{"KEY_ONE": "key-s3cr3t-value"}[name], true
		},
	}, "js/fetcher")
	get := func(agent, host string) maiden.Result {
		res, err := h.Call(context.Background(), maiden.Call{Agent: agent, Tool: "web_fetch", Input: `{"url":"https://` + host + `:` + port + `/x"}`})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Off the secret's destinations: refused, nothing sent.
	if res := get("b", "evil.example.com"); res.OK || !strings.Contains(res.Error.Message, "KEY_ONE") {
		t.Errorf("to evil.example.com: %+v", res.Error)
	}
	// On its destination, but agent a holds no secret:use KEY_ONE card.
	if res := get("a", "api.example.com"); res.OK || !strings.Contains(res.Error.Message, "secret:use KEY_ONE") {
		t.Errorf("without the card: %+v", res.Error)
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Fatalf("the server received requests: %v", seen)
	}
	mu.Unlock()
	if res := get("b", "api.example.com"); !res.OK {
		t.Fatalf("with the card, to its destination: %+v", res.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["api.example.com:"+port] != "key-s3cr3t-value" || seen["evil.example.com:"+port] != "" {
		t.Errorf("the server saw %v", seen)
	}
}

// TestWebFetchRecordNamesTheCheckedHost (hostile review of web_fetch): the
// fetch record of a request names the host the gate checked and sent to,
// not the agent's spelling of it. An agent that writes the allowed host
// in capitals with a trailing dot reached api.example.com, and the record
// said "API.Example.COM.:PORT" (as did every export of it): a trail
// searched or exported for api.example.com missed it.
func TestWebFetchRecordNamesTheCheckedHost(t *testing.T) {
	t.Parallel()
	var hosts []string
	var mu sync.Mutex
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	h := newHostWith(t, `version = 1
[agents.a]
grants = ["tool:invoke web_fetch --...", "network:connect api.example.com"]
[agents.a.boundary]
network = true
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
`, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com")})
	for _, spelled := range []string{"API.Example.COM.", "api.example.com"} {
		res, err := h.Call(context.Background(), maiden.Call{Agent: "a", Tool: "web_fetch", Input: `{"url":"https://` + spelled + `:` + port + `/x"}`})
		if err != nil || !res.OK {
			t.Fatalf("%s: %v %+v", spelled, err, res.Error)
		}
	}
	mu.Lock()
	if want := []string{"api.example.com:" + port, "api.example.com:" + port}; !slices.Equal(hosts, want) {
		t.Errorf("the server saw Host %q, want %q", hosts, want)
	}
	mu.Unlock()
	var recorded []string
	for _, f := range auditOf(t, h, store.AuditFetch) {
		recorded = append(recorded, fmt.Sprint(f["host"]))
	}
	if want := []string{"api.example.com:" + port, "api.example.com:" + port}; !slices.Equal(recorded, want) {
		t.Errorf("the fetch records name hosts %q, want %q (the host checked and sent to)", recorded, want)
	}
}
