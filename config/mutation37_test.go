package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
)

// The thirty-seventh mutation pass's tests (docs/security-tests.md): each
// pins a promise of agent.toml's parsing that a planted bug broke without
// any other test of the package noticing. Every file here is real: the
// agent.toml, the components it names and the CLI programs are written to a
// temporary directory and read with Load.

// load37 writes body (after "version = 1", $DIR its directory) and the
// named files into a new directory, each file with its mode (a .json file
// holds a command description, any other a shell script), and loads the
// agent.toml.
func load37(t *testing.T, body string, files map[string]os.FileMode) (*Config, string, error) {
	t.Helper()
	dir := t.TempDir()
	for name, mode := range files {
		p := filepath.Join(dir, name)
		body := "#!/bin/sh\n"
		if strings.HasSuffix(name, ".json") {
			body = `{"maiden_command": 1, "name": "c"}`
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(p, []byte("version = 1\n"+strings.ReplaceAll(body, "$DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p)
	return cfg, dir, err
}

// wantRefused fails unless err is a refusal naming key with want in its
// message.
func wantRefused(t *testing.T, what string, err error, key, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted; want refused: %s: %s", what, key, want)
		return
	}
	for _, e := range err.(Errors) {
		if e.Key == key && strings.Contains(e.Msg, want) {
			return
		}
	}
	t.Errorf("%s: %v\nwant an error on %s containing %q", what, err, key, want)
}

var wasm37 = map[string]os.FileMode{"w.wasm": 0o644}

// TestMutation37SecretNameBound: a secret's name is at most MaxSecretNameLen
// characters; one more is refused, not accepted as another name.
func TestMutation37SecretNameBound(t *testing.T) {
	name := "A" + strings.Repeat("B", MaxSecretNameLen-1)
	if _, _, err := load37(t, "[tools.w]\npath = \"w.wasm\"\nsecrets = [\""+name+"\"]\n", wasm37); err != nil {
		t.Fatalf("a secret name of %d characters: %v", len(name), err)
	}
	_, _, err := load37(t, "[tools.w]\npath = \"w.wasm\"\nsecrets = [\""+name+"B\"]\n", wasm37)
	wantRefused(t, "a secret name of 129 characters", err, "tools.w.secrets[0]", "invalid secret name")
}

// TestMutation37EmptyNarrowingGrantsNothing: a binding that narrows
// http_allow or secrets to [] leaves the tool no host and no secret, not the
// tool's own.
func TestMutation37EmptyNarrowingGrantsNothing(t *testing.T) {
	cfg, _, err := load37(t, `[tools.w]
path = "w.wasm"
http_allow = ["api.example.com"]
secrets = ["TOKEN"]
[agents.a.tools.w]
http_allow = []
secrets = []
`, wasm37)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := cfg.Tool("w")
	b, _, _ := cfg.AgentBinding("a", "w")
	n := tool.Narrowed(b)
	if len(n.HTTPAllow) != 0 {
		t.Errorf("narrowed by http_allow = []: the tool may reach %q; want no host", n.HTTPAllow)
	}
	if len(n.Secrets) != 0 {
		t.Errorf("narrowed by secrets = []: the tool may use %q; want no secret", n.Secrets)
	}
}

// TestMutation37BoundaryValidated: a boundary is checked whole
// (boundary.Validate) after its entries: a protected name longer than 255
// bytes, which only Validate knows, is refused; an entry without access
// reads only.
func TestMutation37BoundaryValidated(t *testing.T) {
	_, _, err := load37(t, "[agents.a.boundary]\nprotected = [\""+strings.Repeat("p", 256)+"\"]\n", nil)
	wantRefused(t, "a protected name of 256 bytes", err, "agents.a.boundary", "protected[0]")
	cfg, _, err := load37(t, "[agents.a.boundary]\nfs = [{ path = \"/srv/data\" }]\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cfg.Agent("a")
	if len(a.Boundary.Entries) != 1 || a.Boundary.Entries[0].Access != boundary.Read {
		t.Errorf("fs = [{ path = \"/srv/data\" }]: entries %+v; want one read entry", a.Boundary.Entries)
	}
}

// TestMutation37PathPrefixBound: a path prefix is at most 1024 bytes.
func TestMutation37PathPrefixBound(t *testing.T) {
	const head = "[tools.w]\npath = \"w.wasm\"\nsecrets = [\"TOKEN\"]\n[secrets.TOKEN]\nhosts = [\"api.example.com\"]\n"
	ok := "/" + strings.Repeat("a", maxPathPrefixLen-1)
	if _, _, err := load37(t, head+"path_prefixes = [\""+ok+"\"]\n", wasm37); err != nil {
		t.Fatalf("a prefix of %d bytes: %v", len(ok), err)
	}
	_, _, err := load37(t, head+"path_prefixes = [\""+ok+"a\"]\n", wasm37)
	wantRefused(t, "a prefix of 1025 bytes", err, "secrets.TOKEN.path_prefixes[0]", "is longer than 1024 bytes")
}

// TestMutation37CredentialSettings: a kind's settings are refused when they
// could send the value where or how it was not written.
func TestMutation37CredentialSettings(t *testing.T) {
	const head = "[tools.w]\npath = \"w.wasm\"\nsecrets = [\"TOKEN\"]\n[secrets.TOKEN]\nhosts = [\"api.example.com\"]\n"
	for _, tc := range []struct{ name, body, key, want string }{
		{"template with the value twice", "kind = \"header\"\nheader = \"X-Key\"\ntemplate = \"{value} {value}\"\n",
			"secrets.TOKEN.template", "exactly once"},
		{"token_url with user info", "kind = \"oauth2\"\ntoken_url = \"https://u:p@api.example.com/token\"\nclient_id = \"c\"\n",
			"secrets.TOKEN.token_url", "without user info"},
		{"sigv4 region with '/'", "kind = \"sigv4\"\naccess_key_id = \"AK\"\nregion = \"us/east-1\"\nservice = \"s3\"\n",
			"secrets.TOKEN.region", "one word"},
		{"sigv4 service with ','", "kind = \"sigv4\"\naccess_key_id = \"AK\"\nregion = \"us-east-1\"\nservice = \"s3,iam\"\n",
			"secrets.TOKEN.service", "one word"},
	} {
		_, _, err := load37(t, head+tc.body, wasm37)
		wantRefused(t, tc.name, err, tc.key, tc.want)
	}
}

// TestMutation37ImportURL: an [mcp.NAME] url and credential are refused
// when they are not what the import's credential binding allows.
func TestMutation37ImportURL(t *testing.T) {
	for _, tc := range []struct{ name, body, key, want string }{
		{"a path leaving the prefix by ..", "[mcp.up]\nurl = \"https://mcp.example.com/v1/../admin\"\ncredential = \"UP\"\n[secrets.UP]\nhosts = [\"mcp.example.com\"]\npath_prefixes = [\"/v1/\"]\n",
			"mcp.up.credential", "is not under the path_prefixes"},
		{"a credential not a secret's name", "[mcp.up]\nurl = \"https://mcp.example.com/mcp\"\ncredential = \"up_token\"\n",
			"mcp.up.credential", "must be a secret's NAME"},
		{"user info in the url", "[mcp.up]\nurl = \"https://u:p@mcp.example.com/mcp\"\n",
			"mcp.up.url", "without user:password"},
		{"a credential on a stdio server", "[mcp.up]\ncommand = [\"$DIR/server\"]\ncredential = \"UP\"\n",
			"mcp.up", "credential is sent to a url"},
		{"both command and url", "[mcp.up]\ncommand = [\"$DIR/server\"]\nurl = \"https://mcp.example.com/mcp\"\n",
			"mcp.up", "has both command and url"},
	} {
		_, _, err := load37(t, tc.body, map[string]os.FileMode{"server": 0o755})
		wantRefused(t, tc.name, err, tc.key, tc.want)
	}
}

// cli37 is a wrapped CLI's table with a command description inline.
const cli37 = "[clis.c]\ncommand = '{\"maiden_command\": 1, \"name\": \"c\"}'\n"

// TestMutation37CLIProgram: a wrapped CLI's program and settings are
// refused when an agent could run something else than what was written.
func TestMutation37CLIProgram(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		key, want  string
	}{
		{"a group-writable program", cli37 + "path = \"$DIR/prog\"\n", 0o775, "clis.c.path", "writable by its group or others"},
		{"a program looked up relative to agent.toml", cli37 + "path = \"prog\"\n", 0o755, "clis.c.path", "must be an absolute path"},
		{"dir naming a file", cli37 + "path = \"$DIR/prog\"\ndir = \"prog\"\n", 0o755, "clis.c.dir", "not a directory"},
		{"both command and command_file", cli37 + "path = \"$DIR/prog\"\ncommand_file = \"c.json\"\n", 0o755, "clis.c", "both command and command_file"},
		{"a secret with path_prefixes", cli37 + "path = \"$DIR/prog\"\nsecrets = [\"T\"]\nhttp_allow = [\"api.example.com\"]\n[secrets.T]\nhosts = [\"api.example.com\"]\npath_prefixes = [\"/v1/\"]\n",
			0o755, "clis.c.secrets", "narrows methods or path_prefixes"},
	} {
		_, _, err := load37(t, tc.body, map[string]os.FileMode{"prog": tc.mode, "c.json": 0o644})
		wantRefused(t, tc.name, err, tc.key, tc.want)
	}
}

// TestMutation37BindingMiddlewareInChain: middleware written only on an
// agent's binding is in that agent's chain.
func TestMutation37BindingMiddlewareInChain(t *testing.T) {
	cfg, _, err := load37(t, "[tools.w]\npath = \"w.wasm\"\n[agents.a.tools.w]\nmiddleware = [{ use = \"approve\" }]\n", wasm37)
	if err != nil {
		t.Fatal(err)
	}
	if got := rules(cfg.Chain("a", "w")); got != "agents.a.tools.w.middleware[1]=approve" {
		t.Errorf("Chain(a, w) = %q; want the binding's approve", got)
	}
}

// TestMutation37MiddlewareSettings: a component layer takes only use and
// when; an approval's expiry is positive.
func TestMutation37MiddlewareSettings(t *testing.T) {
	_, _, err := load37(t, "[tools.w]\npath = \"w.wasm\"\nmiddleware = [{ use = \"guard\", limit = 1 }]\n[middleware.guard]\npath = \"w.wasm\"\n", wasm37)
	wantRefused(t, "a component layer with limit", err, "tools.w.middleware[1].limit", "unknown key for a middleware component")
	_, _, err = load37(t, "[[middleware]]\nuse = \"approve\"\nexpires = \"0s\"\n", nil)
	wantRefused(t, "expires = \"0s\"", err, "middleware[1].expires", "must be a positive duration")
}

// TestMutation37LayerDefaults: a ratelimit layer's burst defaults to its
// limit; a validate layer without check is refused; a universal layer is
// found by its rule, as an approval's decision looks it up.
func TestMutation37LayerDefaults(t *testing.T) {
	cfg, _, err := load37(t, "[[middleware]]\nuse = \"ratelimit\"\nlimit = 10\nper = \"1m\"\n[[middleware]]\nuse = \"approve\"\nallow_always = false\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Middleware(); len(m) != 2 || m[0].Burst != 10 {
		t.Errorf("ratelimit limit = 10 without burst: %+v; want burst 10", m)
	}
	if m, ok := cfg.MiddlewareRule("middleware[2]"); !ok || m.Use != UseApprove || m.AllowAlways {
		t.Errorf("MiddlewareRule(middleware[2]) = %+v, %v; want the universal approve without allow_always", m, ok)
	}
	_, _, err = load37(t, "[[middleware]]\nuse = \"validate\"\nmessage = \"m\"\n", nil)
	wantRefused(t, "validate without check", err, "middleware[1]", "validate needs check")
}

// TestMutation37ComponentHeaderExact: only [middleware.NAME] declares a
// component; [MIDDLEWARE.NAME] is an unknown key.
func TestMutation37ComponentHeaderExact(t *testing.T) {
	_, _, err := load37(t, "[MIDDLEWARE.guard]\npath = \"w.wasm\"\n", wasm37)
	wantRefused(t, "[MIDDLEWARE.guard]", err, "MIDDLEWARE", "unknown key")
}

// TestMutation37Operators: an operator's name is a tool-like name and its
// table has no keys.
func TestMutation37Operators(t *testing.T) {
	_, _, err := load37(t, "[operators.\"Alice Admin\"]\n", nil)
	wantRefused(t, "an operator named \"Alice Admin\"", err, "operators.\"Alice Admin\"", "invalid operator name")
	_, _, err = load37(t, "[operators.alice]\nrole = \"root\"\n", nil)
	wantRefused(t, "an operator with a key", err, "operators.alice.role", "an operator table has no keys")
}

// TestMutation37TraceEndpointLoopback: plain http goes only to a collector
// on loopback, not to a name that starts with "localhost".
func TestMutation37TraceEndpointLoopback(t *testing.T) {
	_, _, err := load37(t, "[trace]\notlp_endpoint = \"http://localhost.attacker.example:4318\"\n", nil)
	wantRefused(t, "http to localhost.attacker.example", err, "trace.otlp_endpoint", "is plain http to another machine")
}
