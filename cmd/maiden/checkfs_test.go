package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckWarnsOfFileBuiltinsWithoutFSGrants: maiden check warns, at the
// binding's line, of a file built-in whose reads or writes no grant of its
// agent can allow (each call would be refused unless a card from the store
// allows the path), of a wrapped CLI with write_paths none of whose
// agent's grants can make them readable (the CLI is then given none of
// them), or, readable, writable, and of nothing when a grant of that verb,
// or of any verb, is there.
func TestCheckWarnsOfFileBuiltinsWithoutFSGrants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	body := `version = 1

[agents.coder]
tools = ["fs_read", "fs_list", "fs_write"]
grants = ["tool:invoke fs_read --...", "tool:invoke fs_list --...", "tool:invoke fs_write --...", "fs:read /srv/**"]

[agents.ops]
tools = ["fs_write"]
grants = ["tool:invoke fs_write --...", "fs /srv/ops/**"]

[agents.bare]
tools = ["fs_read"]
grants = ["tool:invoke fs_read --..."]

[clis.touch]
path = "/usr/bin/touch"
command = '{"maiden_command": 1, "name": "touch", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
write_paths = ["/tmp"]

[clis.true]
path = "/bin/true"
command = '{"maiden_command": 1, "name": "true"}'

[agents.cli]
tools = ["touch", "true"]
grants = ["tool:invoke touch --... -- ...", "tool:invoke true", "fs:read /tmp/**"]

[agents.cliw]
tools = ["touch"]
grants = ["tool:invoke touch --... -- ...", "fs:write /tmp/**"]

[agents.clirw]
tools = ["touch"]
grants = ["tool:invoke touch --... -- ...", "fs /tmp/**"]
`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "check", "-config", cfg, "-isolation", "process", "-state", filepath.Join(dir, "state.db"))
	if r.code != exitOK {
		t.Fatalf("check: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	want := []string{
		cfg + `:4: warning: agent coder binds fs_write, but none of its grants is an fs:write grant: each call is refused unless a card allows fs:write of its path`,
		cfg + `:12: warning: agent bare binds fs_read, but none of its grants is an fs:read grant:`,
		cfg + `:25: warning: agent cli binds touch, but none of its grants is an fs:write grant: the CLI only reads its write_paths unless a card allows fs:write of each, whole`,
		cfg + `:29: warning: agent cliw binds touch, but none of its grants is an fs:read grant: the CLI is given none of its write_paths, neither to read nor to write, unless a card allows fs:read of each, whole`,
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("check's stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "warning:"); n != len(want) {
		t.Errorf("%d warnings, want %d (none for coder's reads, ops, true or clirw):\n%s", n, len(want), r.stderr)
	}
}

// TestCheckWarnsOfSymlinkedPaths: a wrapped CLI's read_paths or
// write_paths with a symlink on them make every run fail (the confinement
// opens declared paths without following links), so maiden check warns of
// each, naming the key and where the link leads now; real paths are not
// named, and the check still passes.
func TestCheckWarnsOfSymlinkedPaths(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	realDir := filepath.Join(dir, "releases", "v3")
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "current")
	if err := os.Symlink(filepath.Join("releases", "v3"), link); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.toml")
	body := `version = 1

[clis.true]
path = "/bin/true"
command = '{"maiden_command": 1, "name": "true"}'
read_paths = ["` + link + `", "` + realDir + `"]
write_paths = ["` + link + `"]
`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "check", "-config", cfg, "-isolation", "process", "-state", filepath.Join(dir, "state.db"))
	if r.code != exitOK {
		t.Fatalf("check: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	for _, key := range []string{"read_paths", "write_paths"} {
		want := "warning: clis.true." + key + " names " + link + ", which has a symlink on its path (it leads to " + realDir + " now)"
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "has a symlink on its path"); n != 2 {
		t.Errorf("%d symlink warnings, want 2 (the real path named too?):\n%s", n, r.stderr)
	}
}
