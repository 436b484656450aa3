package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestWhatIfReplaysWebFetchSecretHeaders (hostile review of the what-if):
// a web_fetch request carrying a secret header of the session's material
// is decided by the agent's cards as a credential is (network:connect,
// then secret:use of the header's secret, then network:connect again for
// the request), and its fetch record holds those decisions and the
// header's secret (header_secrets). The what-if replays them: with no
// change each is reproduced; granting secret:use of the secret to the
// agent whose request it refused flips that request to allowed, and
// prohibiting it for the agent whose request it allowed flips that one.
// Before, such a record was passed over as not the cards' (three
// decisions, or a secret:use with no credential named): a what-if of the
// grant answered that nothing flips while the trail held a request it
// would let send the secret.
func TestWhatIfReplaysWebFetchSecretHeaders(t *testing.T) {
	t.Parallel()
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	binding := `[agents.%s.boundary]
network = true
[agents.%s.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [` + port + `]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["` + ca + `"]
secret_headers = { "X-Api-Key" = "KEY_ONE" }
`
	h := newHostWith(t, `version = 1
[tools.fetcher]
path = %q
http_allow = ["api.example.com"]
secrets = ["KEY_ONE"]

[secrets.KEY_ONE]
hosts = ["api.example.com"]

[agents.a]
grants = ["tool:invoke web_fetch --...", "network:connect api.example.com"]
`+sprintfTwice(binding, "a")+`
[agents.b]
grants = ["tool:invoke web_fetch --...", "network:connect api.example.com", "secret:use KEY_ONE"]
`+sprintfTwice(binding, "b"), maiden.Options{
		Isolation: maiden.InProcess,
		Resolver:  testkit.Loopback("api.example.com"),
		LookupSecret: func(name string) (string, bool) {
			return map[string]string{"KEY_ONE": "key-wh4tif-value"}[name], true
		},
	}, "js/fetcher")
	ctx := context.Background()
	get := func(agent string) maiden.Result {
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "web_fetch", Input: `{"url":"https://api.example.com:` + port + `/x"}`})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := get("a"); res.OK {
		t.Fatal("agent a, without secret:use KEY_ONE, fetched with the secret header")
	}
	if res := get("b"); !res.OK {
		t.Fatalf("agent b: %+v", res.Error)
	}
	// The records as the gate made them.
	fetches := trail(t, h, store.AuditFetch)
	if len(fetches) != 2 {
		t.Fatalf("%d fetch records, want 2", len(fetches))
	}
	for _, f := range fetches {
		var b struct {
			HeaderSecrets []string       `json:"header_secrets"`
			Decisions     []api.Decision `json:"decisions"`
		}
		if err := json.Unmarshal(f.Body, &b); err != nil || len(b.HeaderSecrets) != 1 || b.HeaderSecrets[0] != "KEY_ONE" {
			t.Fatalf("%s's fetch record: %s", f.Agent, f.Body)
		}
		var targets []string
		for _, d := range b.Decisions {
			targets = append(targets, d.Target)
		}
		t.Logf("%s's fetch record decided %q", f.Agent, targets)
	}

	adm, err := admin.Open(ctx, h.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	since := time.Now().Add(-time.Hour)
	whatIf := func(change api.WhatIfChange) api.WhatIfReport {
		t.Helper()
		rep, err := adm.WhatIf(ctx, change, since)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// Two calls' tool:invoke and two fetches.
	if rep := whatIf(api.WhatIfChange{}); rep.Flips != 0 || rep.Replayed != 4 || rep.Verified != 4 || len(rep.Inexact) != 0 {
		t.Errorf("what-if, no change: %d flips, %d replayed, %d verified, %d skipped, inexact %+v; want the 2 calls and 2 fetches verified, no flip",
			rep.Flips, rep.Replayed, rep.Verified, rep.Skipped, rep.Inexact)
	}
	for _, tc := range []struct {
		name   string
		change api.WhatIfChange
		agent  string
		d2a    int
	}{
		{"-agent a -grant 'secret:use KEY_ONE'", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "a", Grant: "secret:use KEY_ONE"}}}, "a", 1},
		{"-agent b -deny 'secret:use KEY_ONE'", api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "b", Grant: "secret:use KEY_ONE", As: api.WhatIfDeny}}}, "b", 0},
	} {
		rep := whatIf(tc.change)
		if rep.Flips != 1 || len(rep.Groups) != 1 || rep.Groups[0].Agent != tc.agent || rep.Groups[0].Tool != "web_fetch" ||
			rep.Groups[0].DeniedToAllowed != tc.d2a || len(rep.Groups[0].Examples) != 1 || rep.Groups[0].Examples[0].Target != "secret:use KEY_ONE" {
			t.Errorf("what-if %s: %d flips, %d skipped, groups %+v; want agent %s's fetch flipped by secret:use KEY_ONE", tc.name, rep.Flips, rep.Skipped, rep.Groups, tc.agent)
		}
	}
}

// sprintfTwice fills both %s of format with name.
func sprintfTwice(format, name string) string {
	return fmt.Sprintf(format, name, name)
}

// TestWhatIfConfigAfterReplacesTheComponent (hostile review of the
// what-if): a proposed agent.toml that points a tool at another component
// (-config-after) is replayed with that component: the calls are asked
// again as the proposed file would run them. Here the proposed file
// replaces echo's component by logger's and grants echo of that
// component for any input: agent a's call the cards refused (--message=bye
// is not hi*) flips to allowed, and the allowed one (hi1) stays allowed.
// Before, the replay asked with the component the calls ran, which the
// proposed grant does not name: it said the allowed call would be refused
// and hid the refused one that the change lets through.
func TestWhatIfConfigAfterReplacesTheComponent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	echoSrc, loggerSrc := testkit.Component(t, "echo"), testkit.Component(t, "logger")
	dEcho, dLogger := fileDigest(t, echoSrc), fileDigest(t, loggerSrc)
	write := func(name, path, grant string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[agents.a]\ntools = [\"echo\"]\ngrants = [%q]\n", path, grant)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := config.Load(write("agent.toml", echoSrc, "tool:invoke echo@"+dEcho+" --message=hi*"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"hi1"}`}); !res.OK {
		t.Fatalf("hi1: %+v", res.Error)
	}
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"bye"}`}); res.OK || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("bye: %+v %+v, want denied by the cards", res, res.Error)
	}
	trail(t, h, "") // flushed into the chain
	after, err := config.Load(write("agent.toml.new", loggerSrc, "tool:invoke echo@"+dLogger+" --..."))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.Open(ctx, h.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	since := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name     string
		cfg      *config.Config
		a2d, d2a []string
	}{
		{"agent.toml itself", h.Config(), nil, nil},
		{"echo replaced by logger's component, granted whole", after, nil, []string{"tool:invoke echo --message=bye"}},
	} {
		rep, err := adm.WhatIfConfig(ctx, api.WhatIfChange{}, tc.cfg, since)
		if err != nil {
			t.Fatal(err)
		}
		var a2d, d2a []string
		for _, g := range rep.Groups {
			for _, ex := range g.Examples {
				if ex.After.Allow {
					d2a = append(d2a, ex.Target)
				} else {
					a2d = append(a2d, ex.Target)
				}
			}
		}
		if !slices.Equal(a2d, tc.a2d) || !slices.Equal(d2a, tc.d2a) || len(rep.Inexact) != 0 {
			t.Errorf("-config-after %s: allowed -> denied %q, denied -> allowed %q, inexact %+v; want %q and %q",
				tc.name, a2d, d2a, rep.Inexact, tc.a2d, tc.d2a)
		}
	}
}
