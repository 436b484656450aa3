package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestOCIAddHonoursAGivenDigest (the fourth review): maiden add
// oci://R/REPO:TAG@DIGEST must not pin whatever the registry's tag names
// now in place of the digest the operator gave (docs/oci.md: a tag and a
// digest is pulled only while the tag still names that digest): the tag
// moved, so the add is refused, naming that, and agent.toml is unchanged.
func TestOCIAddHonoursAGivenDigest(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	host, _ := loopbackRegistry(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	ref := "oci://" + host + "/tools/echo:v1"
	digestRE := regexp.MustCompile(`@(sha256:[0-9a-f]{64})"`)

	r := cli(t, "", "publish", testkit.Component(t, "echo"), ref)
	good := digestRE.FindStringSubmatch(r.stdout)
	if r.code != exitOK || good == nil {
		t.Fatalf("publish: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	// The registry's tag moves to another component.
	b, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.wasm")
	writeFile(t, other, string(append(bytes.Clone(b), 0, 6, 5, 'e', 'v', 'i', 'l', '!')))
	r = cli(t, "", "publish", other, ref)
	evil := digestRE.FindStringSubmatch(r.stdout)
	if r.code != exitOK || evil == nil || evil[1] == good[1] {
		t.Fatalf("publish other: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}

	writeFile(t, cfg, "version = 1\n")
	r = cli(t, "", "add", "-config", cfg, ref+"@"+good[1], "echo")
	toml, _ := os.ReadFile(cfg)
	if strings.Contains(string(toml), evil[1]) {
		t.Fatalf("add %s@%s pinned the tag's new digest %s instead (exit %d):\n%s\nstdout: %s", ref, good[1], evil[1], r.code, toml, r.stdout)
	}
	if r.code == exitOK || !strings.Contains(r.stderr, oci.ErrTagMoved.Error()) || string(toml) != "version = 1\n" {
		t.Fatalf("add of a digest its tag no longer names: exit %d, stderr %q, agent.toml:\n%s\nwant refused, naming the moved tag, nothing written", r.code, r.stderr, toml)
	}
}
