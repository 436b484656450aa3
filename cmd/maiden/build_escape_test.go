package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestBuildEscapesToolText: `maiden build` shows what the project being
// built says (the description its describe() returns, the toolchain's
// messages quoting its source) with every control character escaped, as
// `maiden call` and `maiden tools` do: a project cloned from the internet
// cannot set the window title, clear the screen or print a line that looks
// like maiden's own on the terminal of whoever builds it.
func TestBuildEscapesToolText(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "testdata", "tools", "echo.wat"))
	if err != nil {
		t.Fatal(err)
	}
	const echoDesc = "Echoes its input back unchanged. A fixture for maiden's own tests."
	desc := "Echo\x1b]0;owned\a\x1b[2J\nmaiden: echo approved"
	desc += strings.Repeat(".", len(echoDesc)-len(desc)) // describe returns 66 bytes
	hostile := strings.Replace(string(src), `"`+echoDesc+`"`, `"`+watString(desc)+`"`, 1)
	if hostile == string(src) {
		t.Fatal("echo.wat's description changed; update the test")
	}

	t.Run("description", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tool.wat"), []byte(hostile), 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, "", "build", "-cache", "off", "-isolation", "process", dir)
		if r.code != exitOK {
			t.Fatalf("exit %d: %+v", r.code, r)
		}
		want := `Echo\x1b]0;owned\a\x1b[2J\nmaiden: echo approved`
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q, want it to hold %q", r.stdout, want)
		}
		if strings.ContainsAny(r.stdout+r.stderr, "\x1b\a") || strings.Contains(r.stdout, "\nmaiden: echo approved") {
			t.Errorf("a control character of the tool's description reached the terminal raw: stdout %q", r.stdout)
		}
	})

	t.Run("Go init output", func(t *testing.T) {
		// -preinit auto, whatever $MAIDEN_GO_PREINIT says: the init runs
		// at build time.
		r := cli(t, "", "build", "-cache", "off", "-isolation", "process", "-preinit", "auto", "-o", filepath.Join(t.TempDir(), "initansi.wasm"), filepath.Join("testdata", "initansi"))
		if r.code != exitTrap || !strings.Contains(r.stderr, `init\x1b]0;owned\a\x1b[2J`) {
			t.Fatalf("exit %d, want %d, and the init's output escaped in a warning: %+v", r.code, exitTrap, r)
		}
		if strings.ContainsAny(r.stderr, "\x1b\a") {
			t.Errorf("a control character of the tool's reached the terminal raw: stderr %q", r.stderr)
		}
	})
}

// watString writes s as the inside of a WAT string literal.
func watString(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			fmt.Fprintf(&b, `\%02x`, c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
