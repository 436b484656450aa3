package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIs reads a [clis.NAME] table with the worked example's git
// description from a file, and refuses what makes a wrapped CLI unsafe or
// unusable: a relative or group-writable program, a broken description, a
// name shared with a tool.
func TestCLIs(t *testing.T) {
	dir := t.TempDir()
	desc, err := os.ReadFile("../examples/git/git.command.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "git.json"), desc, 0o644); err != nil {
		t.Fatal(err)
	}
	writable := filepath.Join(dir, "tool")
	if err := os.WriteFile(writable, []byte("#!/bin/sh\n"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(writable, 0o777)
	load := func(body string) (*Config, error) {
		p := filepath.Join(dir, "agent.toml")
		if err := os.WriteFile(p, []byte("version = 1\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(p)
	}
	cfg, err := load(`[clis.git]
path = "/usr/bin/git"
command_file = "git.json"
dir = "."
env = ["HOME", "GIT_PAGER=cat"]
read_paths = ["."]
timeout_ms = 2000
[agents.a]
tools = ["git"]
`)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := cfg.Tool("git")
	if !ok || g.CLI == nil || g.CLI.Command == nil || g.Path != "/usr/bin/git" || g.CLI.Dir != dir || len(g.CLI.ReadPaths) != 1 || strings.Join(g.CLI.Env, ",") != "HOME,GIT_PAGER=cat" {
		t.Fatalf("git: %+v %+v", g, g.CLI)
	}
	for _, tc := range []struct{ body, want string }{
		{"[clis.x]\npath = \"git\"\ncommand_file = \"git.json\"\n", "clis.x.path: file not found"},
		{"[clis.x]\npath = \"" + writable + "\"\ncommand_file = \"git.json\"\n", "writable by its group or others"},
		{"[clis.x]\npath = \"/usr/bin/git\"\n", "missing key command_file"},
		{"[clis.x]\npath = \"/usr/bin/git\"\ncommand = '{\"maiden_command\": 1, \"name\": 5}'\n", "clis.x.command: command description"},
		{"[clis.x]\npath = \"/usr/bin/git\"\ncommand_file = \"git.json\"\nenv = [\"BAD NAME\"]\n", "is not NAME or NAME=value"},
		{"[tools.git]\npath = \"git.json\"\n[clis.git]\npath = \"/usr/bin/git\"\ncommand_file = \"git.json\"\n", "also a [tools] name"},
		{"[clis.x]\npath = \"/usr/bin/git\"\ncommand_file = \"git.json\"\nshell = true\n", "clis.x.shell: unknown key"},
		// An option's env fallback that is also a secret: the program
		// would read the secret as the option's value, unseen by cards.
		{"[clis.x]\npath = \"/usr/bin/git\"\ncommand = '{\"maiden_command\": 1, \"name\": \"x\", \"options\": [{\"name\": \"token\", \"env\": \"X_TOKEN\"}]}'\nsecrets = [\"X_TOKEN\"]\n",
			"clis.x.secrets: secret X_TOKEN is also the env fallback of an option in the command description: the program would read the secret as that option's value whenever a call omits it, which no card sees"},
	} {
		_, err := load(tc.body)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestCLISecretBinding: a wrapped CLI gets its secrets as environment
// variables and reaches the network through maiden's CONNECT proxy, which
// sees each tunnel's host and nothing inside its TLS. A [secrets.NAME]
// binding of such a secret must therefore cover every host the CLI may
// reach, and cannot narrow methods or paths; otherwise the configuration
// is refused, since the CLI (steered by an agent's arguments) could send
// the secret to a host its binding does not allow.
func TestCLISecretBinding(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) (*Config, error) {
		p := filepath.Join(dir, "agent.toml")
		if err := os.WriteFile(p, []byte("version = 1\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(p)
	}
	const cli = "[clis.gh]\npath = \"/usr/bin/git\"\ncommand = '{\"maiden_command\": 1, \"name\": \"git\"}'\nsecrets = [\"GH_TOKEN\"]\n"
	for _, tc := range []struct{ name, body, want string }{
		{"hosts covered", cli + "http_allow = [\"api.github.com\", \"a.cdn.example.com\"]\n[secrets.GH_TOKEN]\nhosts = [\"api.github.com\", \"*.cdn.example.com\"]\n", ""},
		{"no network", cli + "[secrets.GH_TOKEN]\nhosts = [\"api.github.com\"]\nmethods = [\"GET\"]\n", ""},
		{"another host", cli + "http_allow = [\"api.github.com\", \"gitlab.com\"]\n[secrets.GH_TOKEN]\nhosts = [\"api.github.com\"]\n",
			`agent.toml:5: clis.gh.secrets: the secret "GH_TOKEN" reaches this CLI as an environment variable, and its http_allow entry "gitlab.com" is not within the hosts of [secrets.GH_TOKEN] (agent.toml:7): ["api.github.com"]`},
		{"wider wildcard", cli + "http_allow = [\"*.github.com\"]\n[secrets.GH_TOKEN]\nhosts = [\"api.github.com\"]\n",
			`agent.toml:5: clis.gh.secrets: the secret "GH_TOKEN" reaches this CLI as an environment variable, and its http_allow entry "*.github.com" is not within the hosts of [secrets.GH_TOKEN]`},
		{"methods", cli + "http_allow = [\"api.github.com\"]\n[secrets.GH_TOKEN]\nhosts = [\"api.github.com\"]\nmethods = [\"GET\"]\n",
			`agent.toml:5: clis.gh.secrets: the secret "GH_TOKEN" reaches this CLI as an environment variable, and [secrets.GH_TOKEN] (agent.toml:7) narrows methods or path_prefixes, which maiden cannot hold a CLI's requests to`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.body)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %s", err, tc.want)
			}
		})
	}
}
