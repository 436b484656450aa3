package testkit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// componentMagic is "\0asm" followed by the component-model layer version.
var componentMagic = []byte{0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00}

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "wit", "maiden-tool.wit")); err != nil {
		t.Errorf("RepoRoot = %s, which lacks wit/maiden-tool.wit: %v", root, err)
	}
}

func TestComponentBuildsAndCaches(t *testing.T) {
	t.Setenv("MAIDEN_TESTKIT_DIR", t.TempDir())
	// Concurrent first use: one goroutine builds, the others wait on the
	// lock and get the same cached file.
	paths := make([]string, 4)
	var wg sync.WaitGroup
	for i := range paths {
		wg.Go(func() { paths[i] = Component(t, "echo") })
	}
	wg.Wait()
	for _, p := range paths[1:] {
		if p != paths[0] {
			t.Fatalf("Component returned different paths: %v", paths)
		}
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, componentMagic) {
		t.Errorf("%s is not a component (starts %x)", paths[0], b[:min(8, len(b))])
	}
	st, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if again := Component(t, "echo"); again != paths[0] {
		t.Errorf("second call returned %s, want cached %s", again, paths[0])
	}
	if st2, _ := os.Stat(paths[0]); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("cached component was rewritten")
	}
	entries, _ := os.ReadDir(filepath.Dir(paths[0]))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("leftover temp file %s", e.Name())
		}
	}
}

func TestComponentWithCustomWIT(t *testing.T) {
	p := Component(t, "badimport")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("evil:net/socket@0.1.0")) {
		t.Errorf("%s does not import evil:net/socket@0.1.0", p)
	}
}

// TestResolveJS checks how a "js/NAME" fixture is found; building one takes
// 10-25 s and is exercised by every package that runs a JS fixture.
func TestResolveJS(t *testing.T) {
	src, err := resolve(RepoRoot(t), "js/echo")
	if err != nil {
		t.Fatal(err)
	}
	if src.kind != "js" || !strings.HasSuffix(src.path, filepath.Join("js", "echo.js")) {
		t.Errorf("resolved to %+v", src)
	}
}

func TestComponentNotWasm(t *testing.T) {
	p := Component(t, "notwasm")
	if filepath.Ext(p) != ".wasm" {
		t.Errorf("path %s should end in .wasm", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Error("notwasm must not be WebAssembly")
	}
}

func TestCopyToTemp(t *testing.T) {
	src := Component(t, "echo")
	dst := CopyToTemp(t, src)
	if dst == src {
		t.Fatal("CopyToTemp returned its input")
	}
	a, _ := os.ReadFile(src)
	b, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(a, b) {
		t.Errorf("copy differs from %s (%v)", src, err)
	}
}

func TestUnknownToolFails(t *testing.T) {
	if _, err := resolve(RepoRoot(t), "no-such-tool"); err == nil || !strings.Contains(err.Error(), "no-such-tool.wat") {
		t.Errorf("resolve(no-such-tool) = %v; want an error listing the paths tried", err)
	}
	if _, err := resolve(RepoRoot(t), "../go.mod"); err == nil {
		t.Error("resolve accepted a name escaping testdata/tools")
	}
}

// TestBinaryBuildsOnceAndStaysUpToDate: the first call builds, a later one
// (another test binary of the run, here a fresh process state) finds the
// output up to date and leaves it as it is.
func TestBinaryBuildsOnceAndStaysUpToDate(t *testing.T) {
	t.Setenv("MAIDEN_TESTKIT_DIR", t.TempDir())
	first, err := buildBinary("./testdata/mcpstdio")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(first) != "mcpstdio" {
		t.Errorf("Binary = %s, want a file named mcpstdio", first)
	}
	st, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (%v)", first, st.Mode())
	}
	again, err := buildBinary("./testdata/mcpstdio")
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("second build wrote %s, want %s", again, first)
	}
	// go build -o touches an up-to-date output but keeps the file; a link
	// writes a new one.
	if st2, err := os.Stat(again); err != nil || !os.SameFile(st, st2) {
		t.Errorf("an up-to-date binary was linked again (%v)", err)
	}
	if _, err := buildBinary("../elsewhere"); err == nil {
		t.Error("a package outside the repository was accepted")
	}
}

// TestGoKeyCoversWhatDecidesTheBytes: a cached Go tool is served only to a
// build that would have made the same bytes. Its key changes with the
// tool's sources, the SDK's, GOFLAGS (build tags) and MAIDEN_GO_PREINIT,
// and "sdk/NAME" names the SDK's own test tools.
func TestGoKeyCoversWhatDecidesTheBytes(t *testing.T) {
	root := RepoRoot(t)
	key := func(name string) string {
		t.Helper()
		src, err := resolve(root, name)
		if err != nil {
			t.Fatal(err)
		}
		if src.kind != "go" {
			t.Fatalf("%s resolved to kind %q, want go", name, src.kind)
		}
		return src.key()
	}
	t.Setenv("GOFLAGS", "")
	t.Setenv("MAIDEN_GO_PREINIT", "")
	base := key("sdk/sdktool")
	if src, _ := resolve(root, "sdk/sdktool"); src.path != filepath.Join(root, "sdk", "go", "testdata", "sdktool") {
		t.Errorf("sdk/sdktool resolved to %s", src.path)
	}
	if k := key("sdk/sdktool"); k != base {
		t.Fatalf("the key is not stable: %s then %s", base, k)
	}
	if k := key("sdk/noregister"); k == base {
		t.Errorf("two tools' sources share a key")
	}
	t.Run("GOFLAGS", func(t *testing.T) {
		t.Setenv("GOFLAGS", "-tags=maiden_tool_0_1")
		if key("sdk/sdktool") == base {
			t.Errorf("a build with other tags in GOFLAGS has the same key")
		}
	})
	t.Run("MAIDEN_GO_PREINIT", func(t *testing.T) {
		t.Setenv("MAIDEN_GO_PREINIT", "off")
		if key("sdk/sdktool") == base {
			t.Errorf("a build without pre-initialisation has the same key")
		}
	})
	t.Run("sources", func(t *testing.T) {
		src, err := resolve(root, "sdk/sdktool")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"sdk/go/tool.go", "internal/toolbuild/golang.go", "internal/wasmsnap/instrument.go"} {
			if !bytes.Contains(src.data, []byte(string(filepath.Separator)+filepath.FromSlash(f)+"\x00")) {
				t.Errorf("the key does not cover %s", f)
			}
		}
		// The SDK's and the build's sources follow the tool's: change the
		// last byte.
		src.data = append(src.data[:len(src.data)-1:len(src.data)-1], src.data[len(src.data)-1]^1)
		if src.key() == base {
			t.Errorf("changed sources have the same key")
		}
	})
}

// TestPruneFixtures: building a test tool removes the builds nobody used
// for fixtureMaxAge, and only those: other files and the subdirectories of
// the cache (compiled code, binaries) are not the fixtures'.
func TestPruneFixtures(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	file := func(name string, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := file("echo-0123456789abcdef.wasm", fixtureMaxAge+time.Hour)
	oldLock := file("echo-0123456789abcdef.wasm.lock", fixtureMaxAge+time.Hour)
	keep := []string{
		file("echo-fedcba9876543210.wasm", fixtureMaxAge-time.Hour),
		file("notes.txt", 10*fixtureMaxAge),
		file("echo-0123456789ABCDEF.wasm", 10*fixtureMaxAge),
		file("echo.wasm", 10*fixtureMaxAge),
	}
	sub := filepath.Join(dir, "compiled-0123456789abcdef.wasm")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(sub, now.Add(-10*fixtureMaxAge), now.Add(-10*fixtureMaxAge)); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, sub)
	if n := pruneFixtures(dir, now); n != 1 {
		t.Errorf("pruneFixtures removed %d, want 1", n)
	}
	for _, p := range []string{old, oldLock} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s unused for longer than %s is still there (%v)", filepath.Base(p), fixtureMaxAge, err)
		}
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}

	// A use marks a build at most once per fixtureUseInterval.
	used := file("used-0123456789abcdef.wasm", fixtureUseInterval+time.Hour)
	recent := file("recent-0123456789abcdef.wasm", time.Hour)
	markUsed(used, now)
	markUsed(recent, now)
	// Compared within a minute, not exactly: a file system may keep times
	// coarser than the clock's.
	if fi, _ := os.Stat(used); now.Sub(fi.ModTime()) > time.Minute {
		t.Errorf("a use did not mark a build last marked %s ago", fixtureUseInterval+time.Hour)
	}
	if fi, _ := os.Stat(recent); now.Sub(fi.ModTime()) < 59*time.Minute {
		t.Error("a use marked a build marked an hour ago")
	}
}
