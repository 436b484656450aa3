package pipeline

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/config"
)

// testConfig writes body to dir/agent.toml and loads it, as a user's
// agent.toml is loaded (relative paths in it are dir's). A test that
// reloads calls it again with the new body: the same file is rewritten.
func testConfig(t testing.TB, dir, body string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testHost is New over testConfig(t, dir, body) with opts. It does not
// close the Host: the caller defers Close, so the Host closes where the
// test's other defers put it (a t.Cleanup would run after all of them).
func testHost(t testing.TB, dir, body string, opts *Options) (*Host, *config.Config) {
	t.Helper()
	cfg := testConfig(t, dir, body)
	h, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, cfg
}
