package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/boundary"
)

// TestAgentBoundary reads the interface of issue 14 exactly as written there,
// and an agent without a boundary table gets the default.
func TestAgentBoundary(t *testing.T) {
	src := agentsTools + `
[agents.coder]
tools = ["fs_read", "fs_write", "fs_list", "request_sandbox_boundary", "web_fetch"]   # built-ins are bound by name

[agents.coder.boundary]                # the initial boundary of every session of this agent
network = false
fs      = [{ path = "/srv/work", access = "read", match = "subtree" }]
deny    = ["/srv/work/secrets"]        # explicit deny: no expansion can ever cover these
protected = [".git"]                   # names under any entry that an expansion can never make writable

[agents.plain]
tools = ["echo"]
`
	cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	coder, _ := cfg.Agent("coder")
	want := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted,
		Entries: []boundary.Entry{{Path: "/srv/work", Access: boundary.Read, Match: boundary.Subtree}},
		Deny:    []string{"/srv/work/secrets"}, Protected: []string{".git"}, Network: false}
	if d := cmp.Diff(want, coder.Boundary); d != "" {
		t.Errorf("coder's boundary (-want +got):\n%s", d)
	}
	for _, b := range coder.Bindings {
		if !b.Builtin {
			t.Errorf("%s: bound as a [tools] entry, want a built-in", b.Tool)
		}
	}
	plain, _ := cfg.Agent("plain")
	if d := cmp.Diff(DefaultBoundary(), plain.Boundary); d != "" {
		t.Errorf("an agent without [boundary] (-want +got):\n%s", d)
	}
	if !plain.Boundary.Network || len(plain.Boundary.Entries) != 0 || plain.Boundary.Kind != boundary.Managed {
		t.Errorf("default boundary %+v: want managed, no filesystem, network on", plain.Boundary)
	}
	// Config values are immutable: a caller's edit does not reach the next reader.
	coder.Boundary.Entries[0].Path = "/"
	again, _ := cfg.Agent("coder")
	if again.Boundary.Entries[0].Path != "/srv/work" {
		t.Error("Agent returned the configuration's own boundary slice")
	}
}

func TestWebFetchBinding(t *testing.T) {
	src := agentsTools + `
[agents.web.tools.web_fetch]
http_allow = ["api.example.com", "*.docs.example.org"]
credential = "API_TOKEN"
secret_headers = { "X-Api-Key" = "KEY_ONE" }
proxy_secret = "PROXY_PASS"
`
	cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cfg.Agent("web")
	b := a.Bindings[0]
	if !b.Builtin || b.Tool != "web_fetch" {
		t.Fatalf("binding %+v", b)
	}
	if d := cmp.Diff([]string{"api.example.com", "*.docs.example.org"}, b.HTTPAllow); d != "" {
		t.Errorf("http_allow (-want +got):\n%s", d)
	}
	if b.Credential != "API_TOKEN" || b.ProxySecret != "PROXY_PASS" || b.SecretHeaders["X-Api-Key"] != "KEY_ONE" {
		t.Errorf("material %q %q %v", b.Credential, b.ProxySecret, b.SecretHeaders)
	}
	// Without http_allow, web_fetch reaches nothing (deny by default).
	cfg, err = parse("agent.toml", []byte(agentsTools+"\n[agents.web]\ntools = [\"web_fetch\"]\n"), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	a, _ = cfg.Agent("web")
	if len(a.Bindings[0].HTTPAllow) != 0 {
		t.Errorf("unlisted web_fetch allows %v", a.Bindings[0].HTTPAllow)
	}
}

func TestAgentBoundaryErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"relative path", "[agents.a.boundary]\nfs = [{ path = \"srv/work\" }]\n", []string{
			`agent.toml:12: agents.a.boundary.fs[0].path: "srv/work" must be an absolute path`,
		}},
		{"unclean path", "[agents.a.boundary]\nfs = [{ path = \"/srv/../etc\" }]\n", []string{
			`agent.toml:12: agents.a.boundary.fs[0].path: "/srv/../etc" is not clean: write "/etc"`,
		}},
		{"bad access", "[agents.a.boundary]\nfs = [{ path = \"/srv\", access = \"deny\" }]\n", []string{
			`agent.toml:12: agents.a.boundary.fs[0].access: must be "read" or "write", got "deny" (deny paths go in deny)`,
		}},
		{"bad match", "[agents.a.boundary]\nfs = [{ path = \"/srv\", match = \"prefix\" }]\n", []string{
			`agent.toml:12: agents.a.boundary.fs[0].match: must be "exact" or "subtree", got "prefix"`,
		}},
		{"entry without path", "[agents.a.boundary]\nfs = [{ access = \"read\" }]\n", []string{
			`agent.toml:12: agents.a.boundary.fs[0]: needs a path`,
		}},
		{"entry typo", "[agents.a.boundary]\nfs = [{ path = \"/srv\", acess = \"read\" }]\n", []string{
			`agent.toml:12: agents.a.boundary.fs[0].acess: unknown key (did you mean "access"?)`,
		}},
		{"entry not a table", "[agents.a.boundary]\nfs = [\"/srv\"]\n", []string{
			`agent.toml:12: agents.a.boundary.fs[0]: must be an inline table`,
		}},
		{"protected path", "[agents.a.boundary]\nprotected = [\"a/.git\"]\n", []string{
			`agent.toml:12: agents.a.boundary.protected[0]: protected "a/.git" must be one path component`,
		}},
		{"deny relative", "[agents.a.boundary]\ndeny = [\"secrets\"]\n", []string{
			`agent.toml:12: agents.a.boundary.deny[0]: "secrets" must be an absolute path`,
		}},
		{"network not bool", "[agents.a.boundary]\nnetwork = \"no\"\n", []string{
			`agent.toml:12: agents.a.boundary.network: must be true or false`,
		}},
		{"unknown boundary key", "[agents.a.boundary]\nnetwrk = true\n", []string{
			`agent.toml:12: agents.a.boundary.netwrk: unknown key (did you mean "network"?)`,
		}},
		{"NUL", "[agents.a.boundary]\ndeny = [\"/srv/\\u0000x\"]\n", []string{
			`agent.toml:12: agents.a.boundary.deny[0]: must not contain a NUL byte`,
		}},
		{"web_fetch unknown key", "[agents.a.tools.web_fetch]\nhosts = [\"x.example\"]\n", []string{
			`agent.toml:12: agents.a.tools.web_fetch.hosts: unknown key`,
		}},
		{"web_fetch bad secret", "[agents.a.tools.web_fetch]\ncredential = \"lower\"\n", []string{
			`agent.toml:12: agents.a.tools.web_fetch.credential: invalid secret name "lower"`,
		}},
		{"web_fetch bad header", "[agents.a.tools.web_fetch]\nsecret_headers = { \"X Key\" = \"K\" }\n", []string{
			`agent.toml:12: agents.a.tools.web_fetch.secret_headers."X Key": "X Key" is not an HTTP header name`,
		}},
		{"fs_read narrowed", "[agents.a.tools.fs_read]\ntimeout_ms = 5\n", []string{
			`agent.toml:11: agents.a.tools.fs_read: "fs_read" is a built-in tool: it has no policy to narrow`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := agentsTools + "\n" + tt.src
			_, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
			if err == nil {
				t.Fatal("accepted")
			}
			errs := err.(Errors)
			if len(errs) != len(tt.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, errs[i], w)
				}
			}
		})
	}
}
