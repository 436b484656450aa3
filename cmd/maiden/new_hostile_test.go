package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewRefusesDirOfAnotherUser: maiden new DIR, where DIR is an empty
// directory another local user made first (in /tmp, say), is refused: its
// owner can plant a symlink at a file's name while the project is written,
// and the write would land on a file of the operator's. Nothing is
// written into it, and agent.toml is not touched.
func TestNewRefusesDirOfAnotherUser(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "greet")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Skipf("cannot give a directory to another user here (not root): %v", err)
	}
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	r := cli(t, "", "new", "js", dir, "-add", "-config", cfg)
	if r.code != exitUsage || !strings.Contains(r.stderr, "belongs to uid 65534") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming uid 65534", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote into the other user's directory: %v", entries)
	}
	if _, err := os.Stat(cfg); err == nil {
		t.Error("agent.toml was written for a project that was not created")
	}
}
