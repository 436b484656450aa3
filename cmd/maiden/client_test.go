package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type clientDoc struct {
	MCPServers map[string]map[string]any `json:"mcpServers"`
	Servers    map[string]map[string]any `json:"servers"`
	Inputs     []map[string]any          `json:"inputs"`
}

func decodeDoc(t *testing.T, s string) clientDoc {
	t.Helper()
	var d clientDoc
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("not the client's JSON: %v\n%s", err, s)
	}
	return d
}

// TestClientConfigPrint: each client gets the stdio entry in its own shape,
// with the absolute paths of this binary and of agent.toml.
func TestClientConfigPrint(t *testing.T) {
	cfg := agentTOML(t, map[string]string{"echo": ""})
	t.Chdir(filepath.Dir(cfg))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []any{"serve", "-config", cfg}
	for _, tt := range []struct {
		client string
		entry  func(clientDoc) map[string]any
		extra  map[string]any
	}{
		{"claude", func(d clientDoc) map[string]any { return d.MCPServers["maiden"] }, nil},
		{"cursor", func(d clientDoc) map[string]any { return d.MCPServers["maiden"] }, nil},
		{"vscode", func(d clientDoc) map[string]any { return d.Servers["maiden"] }, map[string]any{"type": "stdio"}},
	} {
		t.Run(tt.client, func(t *testing.T) {
			r := cli(t, "", "client", "config", tt.client, "-config", "agent.toml") // relative: made absolute
			if r.code != exitOK {
				t.Fatalf("%+v", r)
			}
			want := map[string]any{"command": exe, "args": wantArgs}
			for k, v := range tt.extra {
				want[k] = v
			}
			if diff := cmp.Diff(want, tt.entry(decodeDoc(t, r.stdout))); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
			// The test binary lives in a go-build directory: a client
			// would lose it, and the user is told.
			if !strings.Contains(r.stderr, "temporary binary") {
				t.Errorf("no warning about a temporary binary: %s", r.stderr)
			}
		})
	}

	// -cache, -isolation and -v are passed on; -name names the entry;
	// flags may come before or after the client.
	r := cli(t, "", "client", "config", "-isolation", "process", "cursor", "-cache", "cachedir", "-v", "-name", "tools-a", "-config", cfg)
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	got := decodeDoc(t, r.stdout).MCPServers["tools-a"]["args"]
	want := []any{"serve", "-config", cfg, "-cache", filepath.Join(filepath.Dir(cfg), "cachedir"), "-isolation", "process", "-v"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

// TestClientConfigAgent: with agents declared, the stdio entry must name
// one (maiden serve needs it) and carries -agent and -state; an undeclared
// agent, or -agent with -url where no agents are declared, is refused.
func TestClientConfigAgent(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n[agents.research]\ntools = [\"echo\"]\n")
	f.Close()
	if r := cli(t, "", "client", "config", "claude", "-config", cfg); r.code != exitUsage || !strings.Contains(r.stderr, "declares agents (research)") {
		t.Errorf("no -agent: %+v", r)
	}
	if r := cli(t, "", "client", "config", "claude", "-config", cfg, "-agent", "ghost"); r.code != exitUsage || !strings.Contains(r.stderr, `"ghost": not declared`) {
		t.Errorf("undeclared agent: %+v", r)
	}
	if r := cli(t, "", "client", "config", "cursor", "-url", "http://127.0.0.1:8700/mcp", "-config", agentTOML(t, nil), "-agent", "research"); r.code != exitUsage ||
		!strings.Contains(r.stderr, `-agent "research": `) || !strings.Contains(r.stderr, "declares no [agents] (the server takes no agent tokens)") {
		t.Errorf("-agent with -url, no [agents]: %+v", r)
	}
	state := filepath.Join(t.TempDir(), "s.db")
	r := cli(t, "", "client", "config", "claude", "-config", cfg, "-agent", "research", "-state", state)
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	want := []any{"serve", "-config", cfg, "-state", state, "-agent", "research"}
	if diff := cmp.Diff(want, decodeDoc(t, r.stdout).MCPServers["maiden"]["args"]); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

// TestClientConfigSecretsNote: declared credentials are named, as the
// variables the client must provide; no value is ever written.
func TestClientConfigSecretsNote(t *testing.T) {
	cfg := agentTOML(t, map[string]string{"echo": `secrets = ["WEATHER_TOKEN"]`})
	t.Setenv("MAIDEN_SECRET_WEATHER_TOKEN", "s3cret-value-never-written")
	r := cli(t, "", "client", "config", "claude", "-config", cfg)
	if r.code != exitOK || !strings.Contains(r.stderr, "MAIDEN_SECRET_WEATHER_TOKEN") || strings.Contains(r.stdout+r.stderr, "s3cret") {
		t.Errorf("%+v", r)
	}
}

// TestClientConfigHTTP: an entry for a running maiden serve -http, with the
// bearer token referenced, never its value.
func TestClientConfigHTTP(t *testing.T) {
	t.Setenv("MAIDEN_TOKEN", "tok-value-must-not-appear")
	r := cli(t, "", "client", "config", "cursor", "-url", "http://127.0.0.1:8700", "-auth-token-env", "MAIDEN_TOKEN")
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	want := map[string]any{"url": "http://127.0.0.1:8700/mcp", "headers": map[string]any{"Authorization": "Bearer ${env:MAIDEN_TOKEN}"}}
	if diff := cmp.Diff(want, decodeDoc(t, r.stdout).MCPServers["maiden"]); diff != "" {
		t.Errorf("cursor (-want +got):\n%s", diff)
	}

	r = cli(t, "", "client", "config", "vscode", "-url", "https://tools.example/mcp?x=1&y=2", "-auth-token-env", "MAIDEN_TOKEN")
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	d := decodeDoc(t, r.stdout)
	want = map[string]any{"type": "http", "url": "https://tools.example/mcp?x=1&y=2", "headers": map[string]any{"Authorization": "Bearer ${input:maiden-token}"}}
	if diff := cmp.Diff(want, d.Servers["maiden"]); diff != "" {
		t.Errorf("vscode (-want +got):\n%s", diff)
	}
	if len(d.Inputs) != 1 || d.Inputs[0]["id"] != "maiden-token" || d.Inputs[0]["password"] != true || d.Inputs[0]["type"] != "promptString" {
		t.Errorf("vscode inputs %v", d.Inputs)
	}
	for _, out := range []string{r.stdout, r.stderr} {
		if strings.Contains(out, "tok-value") {
			t.Errorf("the token's value was printed: %s", out)
		}
	}

	// No token: no headers. Plain http elsewhere with a token: a warning.
	r = cli(t, "", "client", "config", "vscode", "-url", "http://127.0.0.1:9/mcp")
	if e := decodeDoc(t, r.stdout).Servers["maiden"]; r.code != exitOK || e["headers"] != nil || e["url"] != "http://127.0.0.1:9/mcp" {
		t.Errorf("%+v", r)
	}
	r = cli(t, "", "client", "config", "cursor", "-url", "http://tools.example:8700/mcp", "-auth-token-env", "MAIDEN_TOKEN")
	if r.code != exitOK || !strings.Contains(r.stderr, "unencrypted") {
		t.Errorf("%+v", r)
	}
}

func TestClientConfigRefuses(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no client", []string{}, "name one client: claude, cursor, vscode"},
		{"two clients", []string{"claude", "cursor"}, "name one client"},
		{"unknown client", []string{"zed"}, `unknown client "zed" (there is: claude, cursor, vscode)`},
		{"missing agent.toml", []string{"claude", "-config", filepath.Join(t.TempDir(), "none.toml")}, "none.toml: file not found; name your agent configuration with -config FILE"},
		{"agent.toml is a directory", []string{"claude", "-config", t.TempDir()}, "not a regular file"},
		{"claude over http", []string{"claude", "-url", "http://127.0.0.1:8700/mcp"}, "takes only servers it starts itself (stdio)"},
		{"bad url", []string{"cursor", "-url", "127.0.0.1:8700"}, `-url "127.0.0.1:8700": want an http:// or https:// URL`},
		{"url with credentials", []string{"cursor", "-url", "http://u:p@127.0.0.1/mcp"}, "want an http:// or https:// URL"},
		{"bad env name", []string{"cursor", "-url", "http://127.0.0.1/mcp", "-auth-token-env", "1-X"}, `-auth-token-env "1-X": not an environment variable name`},
		{"token without url", []string{"cursor", "-config", cfg, "-auth-token-env", "X"}, "-auth-token-env goes with -url"},
		{"state with url", []string{"cursor", "-url", "http://127.0.0.1/mcp", "-state", "s.db"}, "-state configures the maiden the client starts"},
		{"file without write", []string{"cursor", "-config", cfg, "-file", "x.json"}, "add -write"},
		{"empty name", []string{"cursor", "-config", cfg, "-name", " "}, "-name"},
		{"bad flag", []string{"cursor", "-frob"}, "flag provided but not defined: -frob"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, "", append([]string{"client", "config"}, tt.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 mentioning %q", r.code, r.stdout, r.stderr, tt.want)
			}
		})
	}
}

// TestClientConfigWrite merges into existing files: every other entry and
// key is kept in order, a backup holds the old bytes, permissions and
// symlinks survive, a second run changes nothing, and files that are not
// JSON objects are refused untouched, naming the position.
func TestClientConfigWrite(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	dir := t.TempDir()
	path := filepath.Join(dir, "claude_desktop_config.json")
	orig := `{"globalShortcut": "Ctrl+Space", "mcpServers": {"other": {"command": "/bin/other", "args": ["--x"], "env": {"K": "v"}}, "maiden": {"command": "/old/maiden", "args": []}}, "zz": [1, 2.50, null]}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "client", "config", "claude", "-config", cfg, "-write", "-file", path)
	if r.code != exitOK || !strings.Contains(r.stdout, `replaced server "maiden"`) || !strings.Contains(r.stdout, "backup: ") {
		t.Fatalf("%+v", r)
	}
	data, _ := os.ReadFile(path)
	// Keys in their order; values as written (2.50 stays 2.50).
	exe, _ := os.Executable()
	want := fmt.Sprintf(`{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "other": {
      "command": "/bin/other",
      "args": [
        "--x"
      ],
      "env": {
        "K": "v"
      }
    },
    "maiden": {
      "command": %q,
      "args": [
        "serve",
        "-config",
        %q
      ]
    }
  },
  "zz": [
    1,
    2.50,
    null
  ]
}
`, exe, cfg)
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("merged file (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", fi.Mode().Perm())
	}
	backups, _ := filepath.Glob(path + ".*.bak")
	if len(backups) != 1 {
		t.Fatalf("backups %v", backups)
	}
	if b, _ := os.ReadFile(backups[0]); string(b) != orig {
		t.Errorf("backup holds %q", b)
	}
	if fi, _ := os.Stat(backups[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v: it may hold secrets of other entries", fi.Mode().Perm())
	}

	// Again: nothing to do, no new backup, file untouched.
	r = cli(t, "", "client", "config", "claude", "-config", cfg, "-write", "-file", path)
	if r.code != exitOK || !strings.Contains(r.stdout, "nothing to do") {
		t.Fatalf("%+v", r)
	}
	if again, _ := os.ReadFile(path); string(again) != string(data) {
		t.Error("a no-op run rewrote the file")
	}
	if b, _ := filepath.Glob(path + ".*.bak"); len(b) != 1 {
		t.Errorf("backups after a no-op: %v", b)
	}

	// A second change in the same second gets its own backup.
	r = cli(t, "", "client", "config", "claude", "-config", cfg, "-write", "-file", path, "-isolation", "process")
	r2 := cli(t, "", "client", "config", "claude", "-config", cfg, "-write", "-file", path)
	if r.code != exitOK || r2.code != exitOK {
		t.Fatalf("%+v %+v", r, r2)
	}
	if b, _ := filepath.Glob(path + ".*.bak"); len(b) != 3 {
		t.Errorf("backups: %v, want 3", b)
	}

	// Through a symlink: the target is updated, the link stays.
	target := filepath.Join(dir, "real-mcp.json")
	if err := os.WriteFile(target, []byte(`{"mcpServers":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "mcp.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "client", "config", "cursor", "-config", cfg, "-write", "-file", link); r.code != exitOK || !strings.Contains(r.stdout, link+" (a symlink to "+target+")") {
		t.Fatalf("%+v; want the file written named, through the link", r)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if b, _ := os.ReadFile(target); !strings.Contains(string(b), `"maiden"`) {
		t.Errorf("target not updated: %s", b)
	}

	// VS Code: servers and inputs merged beside what is there.
	vs := filepath.Join(dir, "vscode.json")
	if err := os.WriteFile(vs, []byte(`{"inputs":[{"type":"promptString","id":"other","description":"x"}],"servers":{"gh":{"type":"http","url":"https://api.example/mcp"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "client", "config", "vscode", "-url", "http://127.0.0.1:8700/mcp", "-auth-token-env", "T", "-write", "-file", vs)
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	b, _ := os.ReadFile(vs)
	d := decodeDoc(t, string(b))
	if len(d.Servers) != 2 || d.Servers["gh"]["url"] != "https://api.example/mcp" || len(d.Inputs) != 2 || d.Inputs[0]["id"] != "other" || d.Inputs[1]["id"] != "maiden-token" {
		t.Errorf("vscode merge:\n%s", b)
	}
}

func TestClientConfigWriteRefuses(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	for _, tt := range []struct {
		name, content, want string
	}{
		{"comment", "{\n  // servers\n  \"servers\": {}\n}\n", ":2:3: not valid JSON: invalid character '/'"},
		{"trailing comma", "{\n  \"servers\": {\"a\": {},},\n}\n", ":2:23: not valid JSON: invalid character '}'"},
		{"truncated", `{"servers": {`, ":1:13: not valid JSON: unexpected end of JSON input"},
		{"not an object", `[1, 2]`, "JSON but not an object"},
		{"servers not an object", `{"servers": ["x"]}`, `"servers" is an array, not an object`},
		{"duplicate key", `{"servers": {}, "servers": {}}`, `key "servers" appears twice`},
		{"duplicate server", `{"servers": {"maiden": {}, "maiden": {}}}`, `key "maiden" appears twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcp.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			r := cli(t, "", "client", "config", "vscode", "-config", cfg, "-write", "-file", path)
			if r.code != exitUsage || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, tt.want) || !strings.Contains(r.stderr, "nothing was written") {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %s and %q", r.code, r.stderr, path, tt.want)
			}
			if b, _ := os.ReadFile(path); string(b) != tt.content {
				t.Error("the file was changed")
			}
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*")); len(m) != 1 {
				t.Errorf("files beside it: %v", m)
			}
		})
	}
}

// TestClientConfigDefaultFiles: -write without -file writes where each
// client reads (here under a temporary HOME and XDG_CONFIG_HOME), creating
// the directories and the file.
func TestClientConfigDefaultFiles(t *testing.T) {
	cfg := agentTOML(t, map[string]string{"echo": ""})
	home, xdg, work := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Chdir(work)
	for client, path := range map[string]string{
		"claude": filepath.Join(xdg, "Claude", "claude_desktop_config.json"),
		"cursor": filepath.Join(home, ".cursor", "mcp.json"),
		"vscode": filepath.Join(work, ".vscode", "mcp.json"),
	} {
		r := cli(t, "", "client", "config", client, "-config", cfg, "-write")
		if r.code != exitOK || !strings.Contains(r.stdout, "created "+path) || strings.Contains(r.stdout, "backup") {
			t.Errorf("%s: %+v", client, r)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v", client, err)
		}
	}
}

// TestClientConfigEntryStartsMaiden does what the client will: run the
// written entry's command and args, speak MCP on its stdin and stdout, and
// list the tools.
func TestClientConfigEntryStartsMaiden(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	path := filepath.Join(t.TempDir(), "mcp.json")
	if r := cli(t, "", "client", "config", "cursor", "-config", cfg, "-write", "-file", path); r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	b, _ := os.ReadFile(path)
	var d struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	e := d.MCPServers["maiden"]
	cmd := exec.Command(e.Command, e.Args...)
	cmd.Dir = t.TempDir() // clients start servers from a directory of their own
	cmd.Env = append(os.Environ(), "MAIDEN_TEST_AS_CLI=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		io.WriteString(stdin, m+"\n")
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("maiden exited before answering tools/list")
			}
			if strings.HasPrefix(l, `{"jsonrpc":"2.0","id":2,`) {
				if !strings.Contains(l, `"name":"echo"`) {
					t.Errorf("tools/list: %s", l)
				}
				return
			}
		case <-deadline:
			t.Fatal("no tools/list answer within 60s")
		}
	}
}

// TestClientConfigKeepsTheInstalledPath: run as "maiden" from PATH, where
// it is a link to the binary (as installers make it), the entry names the
// link, so the client follows an upgrade that moves it.
func TestClientConfigKeepsTheInstalledPath(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	env := maidenOnPath(t)
	var link string
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			link = filepath.Join(filepath.SplitList(p)[0], "maiden")
		}
	}
	cmd := exec.Command(link, "client", "config", "cursor", "-config", cfg)
	cmd.Args[0] = "maiden" // as a shell starts it, found on PATH
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := decodeDoc(t, string(out)).MCPServers["maiden"]["command"]; got != link {
		t.Errorf("command %v, want the link %s", got, link)
	}
}

// TestClientConfigHTTPAgent (issue 27, rough edge 2): with [agents]
// declared, an HTTP entry must name its agent and sends that agent's token
// (without -agent it is refused, as the server would answer 403); the
// entry's header, with the token maiden agents token prints where the
// client substitutes it, is accepted by a running maiden serve -http, and
// the token's source is named right (maiden agents token NAME, not a
// server's variable).
func TestClientConfigHTTPAgent(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n[agents.research]\ntools = [\"echo\"]\n")
	f.Close()
	base := startHTTP(t, "-config", cfg)
	r := cli(t, "", "client", "config", "cursor", "-url", base+"/mcp", "-config", cfg)
	if r.code != exitUsage || !strings.Contains(r.stderr, "declares agents (research): the server answers only an agent's token; name the agent this client is with -agent NAME") {
		t.Errorf("an HTTP entry with no agent: %+v", r)
	}
	r = cli(t, "", "client", "config", "cursor", "-url", base+"/mcp", "-config", cfg, "-agent", "research")
	e := decodeDoc(t, r.stdout).MCPServers["maiden"]
	if diff := cmp.Diff(map[string]any{"url": base + "/mcp", "headers": map[string]any{"Authorization": "Bearer ${env:MAIDEN_TOKEN_RESEARCH}"}}, e); r.code != exitOK || diff != "" {
		t.Fatalf("cursor entry for research: %d %s (-want +got):\n%s", r.code, r.stderr, diff)
	}
	if want := "maiden client config: Cursor sends $MAIDEN_TOKEN_RESEARCH from its own environment: set it to the token maiden agents token research prints\n"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("cursor note: %q, want %q", r.stderr, want)
	}
	r = cli(t, "", "client", "config", "vscode", "-url", base+"/mcp", "-config", cfg, "-agent", "research")
	d := decodeDoc(t, r.stdout)
	if r.code != exitOK || len(d.Inputs) != 1 || d.Inputs[0]["description"] != "Bearer token of "+base+"/mcp (agent research's token: maiden agents token research prints one)" ||
		d.Servers["maiden"]["headers"].(map[string]any)["Authorization"] != "Bearer ${input:maiden-token}" {
		t.Errorf("vscode entry for research: %+v", r)
	}

	tok := cli(t, "", "agents", "token", "-config", cfg, "research")
	if tok.code != exitOK {
		t.Fatalf("agents token: %+v", tok)
	}
	header := strings.ReplaceAll(e["headers"].(map[string]any)["Authorization"].(string), "${env:MAIDEN_TOKEN_RESEARCH}", strings.TrimSpace(tok.stdout))
	post := func(auth string) int {
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(header); code != http.StatusOK {
		t.Errorf("the entry's header with research's token: HTTP %d", code)
	}
	if code := post(""); code == http.StatusOK {
		t.Error("the server answered a request without a token: the test proves nothing")
	}
}
