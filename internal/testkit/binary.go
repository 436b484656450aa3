package testkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/atomicfile"
)

// Binary returns the path of a program built from this module with
// `go build` (no -race, as a user builds it), for tests that run it as a
// separate process: "./cmd/maiden" (the maiden command),
// "./testdata/mcpstdio", "./testdata/hostilecli". pkg is relative to the
// repository's root.
//
// Every test binary of a run shares one copy: it is built into the testkit
// cache under a directory named for the checkout, under a cross-process
// lock, and go build itself decides whether it is stale. go build -o leaves
// an output whose build ID matches every input (the sources, the
// dependencies, the flags, the toolchain) untouched, so only the first
// test binary of a run links it; the others, and later runs with unchanged
// sources, cost one up-to-date check (about a second). The file is shared:
// do not modify it (see CopyToTemp).
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	path, err := BuildBinary(pkg)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return path
}

// BuildBinary is Binary for code without a testing.TB, such as TestMain.
func BuildBinary(pkg string) (string, error) {
	binMu.Lock()
	b := binBuilds[pkg]
	if b == nil {
		b = &binBuild{}
		binBuilds[pkg] = b
	}
	binMu.Unlock()
	b.once.Do(func() { b.path, b.err = buildBinary(pkg) })
	return b.path, b.err
}

type binBuild struct {
	once sync.Once
	path string
	err  error
}

var (
	binMu     sync.Mutex
	binBuilds = map[string]*binBuild{} // by package, once per test process
)

func buildBinary(pkg string) (string, error) {
	root, err := findRepoRoot()
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(pkg, "./") || strings.Contains(pkg, "..") {
		return "", fmt.Errorf("bad package %q: want a path under the repository's root, such as ./cmd/maiden", pkg)
	}
	base, err := cacheDir()
	if err != nil {
		return "", err
	}
	// One directory per checkout: two worktrees testing at once never
	// replace each other's binaries.
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(base, "bin", hex.EncodeToString(sum[:8]))
	// The file keeps the package's own name (maiden, not cmd_maiden): a
	// program may print it.
	dir = filepath.Join(dir, sanitize(strings.TrimPrefix(pkg, "./")))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	unlock, err := atomicfile.Lock(ctx, out+".lock", nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	// -trimpath, as scripts/test builds the test binaries: the compiled
	// packages' cache keys then omit the checkout's directory, so another
	// checkout of the same sources (a fresh clone, a worktree) links from
	// Go's build cache instead of compiling every package again.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (needs Go with cgo and a C compiler): %v\n%s", pkg, err, b)
	}
	return out, nil
}

// ModuleBinary is Binary for a program of another module, built (as `go
// build -trimpath -o`) from the module whose go.mod is in dir, relative to
// the repository's root: a test's own module under testdata pins the
// program's version (such as the OpenTelemetry Collector for the tracing test), so
// its dependencies never become maiden's. The same cache, lock and
// staleness check as Binary: the first build downloads and compiles (it
// can take minutes), later ones cost go build's up-to-date check.
//
// A build already under way for the same checkout (another test binary, or
// make test's first step, scripts/deps, which starts the tracing test's
// collector with cmd/modulebinary while the machine waits on apt-get) holds
// the lock: ModuleBinary waits for it, then finds the binary up to date.
func ModuleBinary(t testing.TB, dir, pkg string) string {
	t.Helper()
	path, err := BuildModuleBinary(dir, pkg)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return path
}

// BuildModuleBinary is ModuleBinary for code without a testing.TB, such as
// internal/testkit/cmd/modulebinary, which builds ahead of the tests into
// the same file under the same lock.
func BuildModuleBinary(dir, pkg string) (string, error) {
	key := dir + " " + pkg
	binMu.Lock()
	b := binBuilds[key]
	if b == nil {
		b = &binBuild{}
		binBuilds[key] = b
	}
	binMu.Unlock()
	b.once.Do(func() { b.path, b.err = buildModuleBinary(dir, pkg) })
	return b.path, b.err
}

func buildModuleBinary(dir, pkg string) (string, error) {
	root, err := findRepoRoot()
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(dir, "./") || strings.Contains(dir, "..") {
		return "", fmt.Errorf("bad module directory %q: want a path under the repository's root", dir)
	}
	base, err := cacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(base, "bin", hex.EncodeToString(sum[:8]), sanitize(strings.TrimPrefix(dir, "./")), filepath.Base(pkg))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	unlock, err := atomicfile.Lock(ctx, out+".lock", nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, b)
	}
	return out, nil
}
