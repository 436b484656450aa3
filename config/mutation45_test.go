package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The forty-fifth mutation pass's tests (docs/security-tests.md): what
// maiden check warns of (SymlinkedPaths, FileGrantGaps,
// CredentialGrantGaps) and the oci:// settings, each read from a real
// agent.toml loaded with Load.

// load45 writes body (after "version = 1", $DIR its directory, with a
// directory real/ and a symlink link -> real in it) and loads it.
func load45(t *testing.T, body string) (*Config, string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(p, []byte("version = 1\n"+strings.ReplaceAll(body, "$DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c, dir
}

// TestMutation45SymlinkedPaths: every configured path of a wrapped CLI or
// a stdio MCP server with a symlink on it is named (read_paths,
// write_paths, an import's dir), a one-word command's included, with
// where the link leads.
func TestMutation45SymlinkedPaths(t *testing.T) {
	c, dir := load45(t, `
[clis.c]
path = "/bin/true"
command = '{"maiden_command": 1, "name": "true"}'
read_paths = ["$DIR/link"]
write_paths = ["$DIR/link"]

[mcp.up]
command = ["/bin/true"]
read_paths = ["$DIR/link"]
write_paths = ["$DIR/link"]
dir = "$DIR/link"
`)
	link, real := filepath.Join(dir, "link"), filepath.Join(dir, "real")
	want := []SymlinkedPath{
		{"clis.c", "read_paths", link, real},
		{"clis.c", "write_paths", link, real},
		{"mcp.up", "read_paths", link, real},
		{"mcp.up", "write_paths", link, real},
		{"mcp.up", "dir", link, real},
	}
	got := c.SymlinkedPaths()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("SymlinkedPaths() = %+v; lacks %s.%s", got, w.Table, w.Key)
		}
	}
	if len(got) != len(want) {
		t.Errorf("SymlinkedPaths() = %+v; want %d paths", got, len(want))
	}
}

// TestMutation45FileGrantGaps: a grant of one fs verb does not cover the
// other: fs_write with fs:read only, and a CLI with write_paths with
// fs:write only (given none of them) or fs:read only (only reading them),
// are gaps; a verbless fs grant covers both.
func TestMutation45FileGrantGaps(t *testing.T) {
	c, _ := load45(t, `
[clis.touch]
path = "/bin/true"
command = '{"maiden_command": 1, "name": "touch"}'
write_paths = ["$DIR/real"]

[agents.r]
tools = ["fs_write", "touch"]
grants = ["tool:invoke fs_write --...", "tool:invoke touch", "fs:read /srv/**"]

[agents.w]
tools = ["fs_list", "touch"]
grants = ["tool:invoke fs_list --...", "tool:invoke touch", "fs:write /srv/**"]

[agents.rw]
tools = ["fs_write", "fs_list", "touch"]
grants = ["tool:invoke fs_write --...", "tool:invoke fs_list --...", "tool:invoke touch", "fs /srv/**"]
`)
	for _, tc := range []struct {
		agent string
		want  []string // tool/verb/cli
	}{
		{"r", []string{"fs_write/write/false", "touch/write/true"}},
		{"w", []string{"fs_list/read/false", "touch/read/true"}},
		{"rw", nil},
	} {
		a, ok := c.Agent(tc.agent)
		if !ok {
			t.Fatalf("no agent %s", tc.agent)
		}
		var got []string
		for _, g := range c.FileGrantGaps(a) {
			got = append(got, g.Tool+"/"+g.Verb+"/"+map[bool]string{true: "true", false: "false"}[g.CLI])
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("FileGrantGaps(%s) = %q; want %q", tc.agent, got, tc.want)
		}
	}
}

// TestMutation45CredentialGrantGaps: an import whose credential the
// agent's grants do not allow it to use is a gap, a grant of another
// secret notwithstanding; a grant of that secret closes it.
func TestMutation45CredentialGrantGaps(t *testing.T) {
	c, _ := load45(t, `
[secrets.UP_TOKEN]
hosts = ["mcp.example.com"]

[mcp.up]
url = "https://mcp.example.com/mcp"
credential = "UP_TOKEN"

[agents.other]
tools = ["up"]
grants = ["tool:invoke up", "secret:use OTHER"]

[agents.ok]
tools = ["up"]
grants = ["tool:invoke up", "secret:use UP_TOKEN"]
`)
	for name, want := range map[string]int{"other": 1, "ok": 0} {
		a, _ := c.Agent(name)
		gaps := c.CredentialGrantGaps(a)
		if len(gaps) != want || (want == 1 && (gaps[0].Import != "up" || gaps[0].Secret != "UP_TOKEN")) {
			t.Errorf("CredentialGrantGaps(%s) = %+v; want %d gap(s) of up's UP_TOKEN", name, gaps, want)
		}
	}
}
