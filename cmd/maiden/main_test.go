package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

type cliResult struct {
	code           int
	stdout, stderr string
}

func cli(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

// agentTOML writes an agent.toml whose tools are the named test tools, each
// under its own name, with extra lines per tool.
func agentTOML(t *testing.T, tools map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("version = 1\n")
	for name, extra := range tools {
		fmt.Fprintf(&b, "\n[tools.%s]\npath = %q\n%s\n", name, testkit.Component(t, name), extra)
	}
	path := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCallExitCodes(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{
		"echo":    "",
		"toolerr": "",
		"loop":    "timeout_ms = 200",
		"memgrow": "memory_mb = 8",
		"trap":    "",
		"notwasm": "",
	})
	cache := t.TempDir()
	tests := []struct {
		name, tool, input string
		code              int
		kind              string
	}{
		{"ok", "echo", `{"message":"hi"}`, exitOK, ""},
		{"tool error", "toolerr", "{}", exitTool, "tool"},
		{"unknown tool", "nope", "{}", exitUsage, "config"},
		{"input not JSON", "echo", "{", exitUsage, "input"},
		{"input against schema", "echo", `{"message":7}`, exitUsage, "input"},
		{"deadline", "loop", "{}", exitDeadline, "deadline"},
		{"memory", "memgrow", "{}", exitMemory, "memory"},
		{"trap", "trap", "{}", exitTrap, "trap"},
		{"invalid tool", "notwasm", "{}", exitTrap, "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "", "call", "-config", cfg, "-cache", cache, tc.tool, tc.input)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, tc.code, r.stderr)
			}
			if tc.code == exitOK {
				if r.stdout != "{\"message\":\"hi\"}\n" {
					t.Errorf("stdout %q", r.stdout)
				}
			} else if !strings.Contains(r.stderr, "maiden: ") {
				t.Errorf("stderr %q does not explain the failure", r.stderr)
			}

			r = cli(t, "", "call", "-config", cfg, "-cache", cache, "-json", tc.tool, tc.input)
			if r.code != tc.code {
				t.Fatalf("-json: exit %d, want %d", r.code, tc.code)
			}
			var env struct {
				Tool  string  `json:"tool"`
				OK    bool    `json:"ok"`
				Out   string  `json:"output"`
				Logs  []any   `json:"logs"`
				MS    float64 `json:"duration_ms"`
				Error *struct {
					Kind, Message string
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &env); err != nil {
				t.Fatalf("-json output %q: %v", r.stdout, err)
			}
			if env.Tool != tc.tool || env.OK != (tc.kind == "") || env.Logs == nil {
				t.Errorf("envelope %+v", env)
			}
			if tc.kind != "" && (env.Error == nil || env.Error.Kind != tc.kind || env.Error.Message == "") {
				t.Errorf("envelope error %+v, want kind %s", env.Error, tc.kind)
			}
			// The timeout as configured, not the time left when the
			// call reached the worker (it said "199.99ms"); a worker
			// killed before it answered (a loaded machine) adds that.
			if tc.kind == "deadline" && env.Error != nil && !strings.HasPrefix(env.Error.Message, "did not finish within its 200ms timeout") {
				t.Errorf("deadline message %q", env.Error.Message)
			}
		})
	}
}

func TestCallInputFromStdin(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	r := cli(t, `{"message":"from stdin"}`, "call", "-config", cfg, "-cache", "off", "echo", "-")
	if r.code != exitOK || r.stdout != "{\"message\":\"from stdin\"}\n" {
		t.Fatalf("%+v", r)
	}
	// No input at all means {}, which echo's schema (message required)
	// refuses with a message naming the missing property.
	r = cli(t, "", "call", "-config", cfg, "-cache", "off", "echo")
	if r.code != exitUsage || !strings.Contains(r.stderr, `missing properties: "message"`) {
		t.Fatalf("%+v", r)
	}
}

func TestCallLogsGoToStderr(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"logger": ""})
	r := cli(t, "", "call", "-config", cfg, "-cache", "off", "logger")
	if r.code != exitOK || r.stdout != "logged\n" || !strings.Contains(r.stderr, "[warn] ") {
		t.Fatalf("%+v", r)
	}
}

// TestCheckCountsTools (issue 27, rough edge 7): maiden check counts
// tools, not its own check of the confinement a wrapped CLI needs, and says
// what a configuration of built-ins only has to load.
func TestCheckCountsTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ name, body, want string }{
		{"one wrapped CLI", "version = 1\n[clis.true]\npath = \"/bin/true\"\ncommand = '{\"maiden_command\": 1, \"name\": \"true\"}'\n", ": 1 tool ok\n"},
		{"built-ins only", "version = 1\n[agents.a]\ntools = [\"cards_list\"]\n", ": no tools to load (the agents' built-ins need none)\n"},
	} {
		cfg := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".toml")
		if err := os.WriteFile(cfg, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, "", "check", "-config", cfg, "-cache", "off")
		if r.code != exitOK || !strings.Contains(r.stdout, "\n"+cfg+tt.want) && !strings.HasPrefix(r.stdout, cfg+tt.want) {
			t.Errorf("%s: %+v", tt.name, r)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	good := agentTOML(t, map[string]string{"echo": "", "logger": ""})
	r := cli(t, "", "check", "-config", good, "-cache", "off")
	if r.code != exitOK || !strings.Contains(r.stdout, "2 tools ok") {
		t.Fatalf("%+v", r)
	}

	bad := agentTOML(t, map[string]string{"echo": "", "badimport": ""})
	r = cli(t, "", "check", "-config", bad, "-cache", "off")
	if r.code != exitTrap || !strings.Contains(r.stderr, "tools.badimport") || !strings.Contains(r.stderr, "evil:net/socket") {
		t.Fatalf("%+v", r)
	}
}

// TestCheckReportsEveryConfigError: maiden check lists all problems of a bad
// agent.toml, each with its line, not just the first.
func TestCheckReportsEveryConfigError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agent.toml")
	body := "version = 1\n[tools.a]\npath = \"missing.wasm\"\nmemory_mb = 0\n[tools.b]\npath = \"x.wasm\"\ntimeout = 5\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "check", "-config", path)
	if r.code != exitUsage {
		t.Fatalf("exit %d", r.code)
	}
	for _, want := range []string{":3: tools.a.path", ":4: tools.a.memory_mb", ":6: tools.b.path", ":7: tools.b.timeout"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestTools(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": "http_allow = [\"api.example.com\"]\ntitle = \"Echo\"\nannotations = { destructive = false }"})
	r := cli(t, "", "tools", "-config", cfg, "-cache", "off", "-json")
	if r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	// The schema is a JSON object, not a string holding JSON, and the
	// policy is the whole effective policy.
	var infos []struct {
		Name        string
		Description string
		Title       string
		InputSchema map[string]any  `json:"input_schema"`
		Hints       map[string]bool `json:"hints"`
		Policy      struct {
			HTTPAllow            []string `json:"http_allow"`
			HTTPPorts            []uint16 `json:"http_ports"`
			HTTPAllowCIDRs       []string `json:"http_allow_cidrs"`
			HTTPCAFiles          []string `json:"http_ca_files"`
			HTTPMaxResponseBytes int64    `json:"http_max_response_bytes"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(infos) != 1 || infos[0].Name != "echo" || infos[0].InputSchema["type"] != "object" || infos[0].Policy.HTTPAllow[0] != "api.example.com" ||
		infos[0].Policy.HTTPMaxResponseBytes != 2<<20 || infos[0].Policy.HTTPPorts == nil || infos[0].Policy.HTTPAllowCIDRs == nil || infos[0].Policy.HTTPCAFiles == nil {
		t.Errorf("%+v", infos)
	}
	// Derived from the policy (network: open world), one overridden.
	if h := infos[0].Hints; infos[0].Title != "Echo" || len(h) != 4 || h["read_only"] || h["destructive"] || !h["open_world"] {
		t.Errorf("title %q, hints %v", infos[0].Title, h)
	}
	r = cli(t, "", "tools", "-config", cfg, "-cache", "off")
	if r.code != exitOK || !strings.Contains(r.stdout, "network api.example.com") || !strings.Contains(r.stdout, "echo (Echo)") || !strings.Contains(r.stdout, "hints:   open-world") {
		t.Errorf("%+v", r)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"frobnicate"}, {"call"}, {"call", "-nope"}, {"check", "extra"}} {
		if r := cli(t, "", args...); r.code != exitUsage || r.stderr == "" {
			t.Errorf("%q: %+v", args, r)
		}
	}
	if r := cli(t, "", "help"); r.code != exitOK || !strings.Contains(r.stdout, "Exit codes") {
		t.Errorf("help: %+v", r)
	}
	if r := cli(t, "", "call", "-config", filepath.Join(t.TempDir(), "none.toml"), "x"); r.code != exitUsage || !strings.Contains(r.stderr, "file not found") {
		t.Errorf("missing config: %+v", r)
	}
}

func TestBuildWAT(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "testdata", "tools", "echo.wat"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool.wat"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "build", "-cache", "off", dir)
	if r.code != exitOK || !strings.Contains(r.stdout, "Echoes") {
		t.Fatalf("%+v", r)
	}
	// The check's compile is announced (with no cache, it compiles).
	if want := "compiling " + filepath.Base(dir) + ".wasm for this machine, to check that it loads"; !strings.Contains(r.stderr, want) {
		t.Errorf("build's stderr lacks %q:\n%s", want, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.Base(dir)+".wasm")); err != nil {
		t.Fatal(err)
	}
	// A syntax error is the tool's fault: exit 1 with file and line, in
	// compiler form, without maiden's package names.
	if err := os.WriteFile(filepath.Join(dir, "tool.wat"), []byte("(module\n  (func (i32.bogus)))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "build", "-cache", "off", dir)
	if r.code != exitTool || !strings.Contains(r.stderr, "tool.wat:2:") || strings.Contains(r.stderr, "toolbuild") {
		t.Fatalf("%+v", r)
	}
	if r := cli(t, "", "build", t.TempDir()); r.code != exitUsage || !strings.Contains(r.stderr, "index.js") {
		t.Fatalf("empty dir: %+v", r)
	}
}

// TestCallInputNotAnObject (issue 27, rough edge 7): an agent's call whose
// input is JSON but not an object is told so, not that it "cannot be
// rendered for authorization".
func TestCallInputNotAnObject(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": ""})
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n[agents.a]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n")
	f.Close()
	for in, kind := range map[string]string{`[1,2]`: "an array", `"x"`: "a string", `null`: "null"} {
		r := cli(t, "", "call", "-config", cfg, "-agent", "a", "echo", in)
		if want := "maiden: echo failed (input): input must be a JSON object, got " + kind + "\n"; r.code != exitUsage || r.stderr != want {
			t.Errorf("input %s: %d %q, want %q", in, r.code, r.stderr, want)
		}
	}
}
