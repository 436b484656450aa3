// Package testkit gives maiden's tests the tools under testdata/tools as
// built components. Import it only from _test.go files.
//
// Only the tools' sources are committed; Component builds them with the
// pinned JS toolchain (package toolbuild) on first use and caches the result
// on disk by content hash, so a warm run costs a stat and a cold one the
// toolchain install (~30-60 s, once per machine) plus about half a second
// per WAT tool and 5-15 s per JS tool. A missing toolchain fails the test
// rather than skipping it: a host test that silently does not run is worse
// than one that tells you to install Node.js.
package testkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

const modulePath = "github.com/maiden-run/maiden"

// Component returns the path of a component built from testdata/tools:
//
//	"js/NAME"  testdata/tools/js/NAME.js (componentize-js)
//	"go/NAME"  testdata/tools/go/NAME/main.go, a standard Go tool using
//	           sdk/go (built the way maiden build does)
//	"examples/NAME"
//	           the Go example examples/NAME, built the same way
//	"sdk/NAME" sdk/go/testdata/NAME, a Go tool of the SDK's own tests,
//	           built the same way
//	"middleware/NAME"
//	           testdata/middleware/NAME.wat (built against NAME.wit plus
//	           maiden's packages, world middleware, if that file exists, else
//	           against maiden:middleware), testdata/middleware/NAME.js, or
//	           testdata/middleware/NAME/ (a Go middleware using sdk/go), in
//	           that order; see Middleware
//	"NAME"     testdata/tools/NAME.wat, built against NAME.wit (plus maiden's
//	           package) if that file exists, else against maiden's world;
//	           failing that testdata/tools/js/NAME.js; failing that
//	           testdata/tools/NAME.wasm.txt copied verbatim to a .wasm path
//	           (deliberately not WebAssembly).
//
// The component is built on first use and cached under
// os.UserCacheDir()/maiden/testkit ($MAIDEN_TESTKIT_DIR overrides), keyed
// by a hash of the sources and the toolchain fingerprint. The returned file
// is shared: do not modify it (see CopyToTemp). Component calls t.Fatal
// with a clear message if the tool cannot be built, never t.Skip.
func Component(t testing.TB, name string) string {
	t.Helper()
	path, err := build(RepoRoot(t), name, t.Logf)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return path
}

// Middleware returns the path of a middleware component built from
// testdata/middleware (Component(t, "middleware/"+name)):
//
//	"city"     Go (city/main.go): rejects input.city "Atlantis", rewrites
//	           "paris" to "Paris", passes everything else and every output
//	"js/city"  the same in JavaScript (js/city.js)
//	"pass"     WAT: logs one line and passes
//	"foldrewrite" WAT: rewrites every input to two keys that differ only in case
//	"withhold" WAT: passes every call, rejects every output (after phase)
//	"mask"     WAT: passes every call and failure, rewrites every output
//	           to "masked by mask" (after phase)
//	"dlp"      Go (dlp/main.go): rejects a call whose output, error or a
//	           log line mentions a password (after and failed phases); a
//	           failure saying "rewrite me" gets a rewrite (refused)
//	"trap"     WAT: handle traps
//	"loop"     WAT: handle never returns (deadline)
//	"memhog"   WAT: handle grows memory until refused (memory)
//	"fetcher"  WAT importing the tool host's http-fetch: refused at load
func Middleware(t testing.TB, name string) string {
	t.Helper()
	return Component(t, "middleware/"+name)
}

// Build is Component for code without a testing.TB, such as TestMain or the
// setup of Example functions. Progress goes to logf (nil discards it).
func Build(name string, logf func(string, ...any)) (string, error) {
	root, err := findRepoRoot()
	if err != nil {
		return "", err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return build(root, name, logf)
}

func build(root, name string, logf func(string, ...any)) (string, error) {
	src, err := resolve(root, name)
	if err != nil {
		return "", err
	}
	cacheDir, err := cacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, sanitize(name)+"-"+src.key()+".wasm")
	if markUsed(out, time.Now()) {
		return out, nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	// Parallel test processes (go test ./...) may want the same tool; the
	// lock makes one build it while the others wait and then reuse it.
	unlock, err := atomicfile.Lock(ctx, out+".lock", nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(out) {
		return out, nil
	}

	start := time.Now()
	comp, err := src.build(ctx, logf)
	if err != nil {
		return "", fmt.Errorf("building test tool %q from %s: %w", name, src.path, err)
	}
	if err := atomicfile.Write(out, comp, 0o644); err != nil {
		return "", fmt.Errorf("caching %s: %w", out, err)
	}
	logf("testkit: built %s (%d bytes) in %s", name, len(comp), time.Since(start).Round(time.Millisecond))
	if n := pruneFixtures(cacheDir, time.Now()); n > 0 {
		logf("testkit: removed %d built test tools unused for %s", n, fixtureMaxAge)
	}
	return out, nil
}

// Built test tools are keyed by their sources and the build driver, so
// every change to either builds new ones, and without pruning the old ones
// stay forever (5 GB on a developer's machine after a few weeks). A use
// marks a build (its modification time, at most once per
// fixtureUseInterval), and building a new one removes builds unused for
// fixtureMaxAge.
const (
	fixtureMaxAge      = 7 * 24 * time.Hour
	fixtureUseInterval = 24 * time.Hour
)

var fixtureRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+-[0-9a-f]{16}\.wasm$`)

// markUsed marks the build at path used, and reports whether it exists.
func markUsed(path string, now time.Time) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	if now.Sub(fi.ModTime()) >= fixtureUseInterval {
		_ = os.Chtimes(path, now, now)
	}
	return true
}

// pruneFixtures removes the builds in dir (and their lock files) unused for
// fixtureMaxAge, and returns how many. It removes only regular files named
// as build writes them; subdirectories (compiled code, binaries) have
// their own owners.
func pruneFixtures(dir string, now time.Time) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !fixtureRE.MatchString(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < fixtureMaxAge {
			continue
		}
		p := filepath.Join(dir, e.Name())
		// Once more just before removing: another test process may have
		// marked it used since the listing.
		if fi, err := os.Stat(p); err != nil || now.Sub(fi.ModTime()) < fixtureMaxAge {
			continue
		}
		if os.Remove(p) == nil {
			n++
			_ = os.Remove(p + ".lock")
		}
	}
	return n
}

// CompileCache returns a compiled-component cache directory shared by every
// test on this machine (sandbox.Options.CacheDir, maiden.Options.CacheDir).
// Compiling a 12 MB JS component takes seconds; sharing the cache makes each
// one compile once per run instead of once per test. Entries are keyed by
// content and engine, and written atomically, so sharing is safe; tests of
// the disk cache itself use a directory of their own.
func CompileCache(t testing.TB) string {
	t.Helper()
	dir, err := CompileCacheDir()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return dir
}

// CompileCacheDir is CompileCache for code without a testing.TB, such as
// TestMain.
func CompileCacheDir() (string, error) {
	base, err := cacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "compiled")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// CacheDir returns the directory name under the testkit cache (created,
// 0700), for a test that keeps files between runs; the test owns what is in
// it. Tests of different checkouts share it.
func CacheDir(t testing.TB, name string) string {
	t.Helper()
	base, err := cacheDir()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	dir := filepath.Join(base, sanitize(name))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return dir
}

// CopyToTemp copies a file (typically a component from Component) into
// t.TempDir(), for tests that rewrite or replace it, e.g. hot reload.
func CopyToTemp(t testing.TB, src string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	defer in.Close()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatalf("testkit: copying %s: %v", src, err)
	}
	if err := out.Close(); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return dst
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// RepoRoot returns the directory holding maiden's go.mod, found by walking
// up from the working directory (a package's directory under go test).
func RepoRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() { root, rootErr = findRepoRoot() })
	if rootErr != nil {
		t.Fatalf("testkit: %v", rootErr)
	}
	return root
}

var moduleLineRE = regexp.MustCompile(`(?m)^module\s+(\S+)\s*$`)

func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			if m := moduleLineRE.FindSubmatch(b); m != nil && string(m[1]) == modulePath {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// source is a resolved test tool.
type source struct {
	kind string // "wat", "js" or "raw"
	path string
	data []byte
	wit  []byte // optional WIT document for a WAT tool
	// world is the world a WAT source with a WIT document of its own
	// targets: "tool" unless set.
	world string
}

func resolve(root, name string) (*source, error) {
	tools := filepath.Join(root, "testdata", "tools")
	if strings.Contains(name, "..") || filepath.IsAbs(name) {
		return nil, fmt.Errorf("bad test tool name %q", name)
	}
	var candidates []*source
	if mw, ok := strings.CutPrefix(name, "middleware/"); ok {
		dir := filepath.Join(root, "testdata", "middleware")
		if js, ok := strings.CutPrefix(mw, "js/"); ok {
			candidates = []*source{{kind: "js", path: filepath.Join(dir, "js", js+".js")}}
		} else if fi, err := os.Stat(filepath.Join(dir, mw)); err == nil && fi.IsDir() {
			return goSource(root, filepath.Join(dir, mw))
		} else {
			candidates = []*source{{kind: "wat", path: filepath.Join(dir, mw+".wat"), world: "middleware"}}
		}
	} else if js, ok := strings.CutPrefix(name, "js/"); ok {
		candidates = []*source{{kind: "js", path: filepath.Join(tools, "js", js+".js")}}
	} else if g, ok := strings.CutPrefix(name, "go/"); ok {
		return goSource(root, filepath.Join(tools, "go", g))
	} else if ex, ok := strings.CutPrefix(name, "examples/"); ok {
		return goSource(root, filepath.Join(root, "examples", ex))
	} else if sdk, ok := strings.CutPrefix(name, "sdk/"); ok {
		return goSource(root, filepath.Join(root, "sdk", "go", "testdata", sdk))
	} else {
		candidates = []*source{
			{kind: "wat", path: filepath.Join(tools, name+".wat")},
			{kind: "js", path: filepath.Join(tools, "js", name+".js")},
			{kind: "raw", path: filepath.Join(tools, name+".wasm.txt")},
		}
	}
	for _, c := range candidates {
		b, err := os.ReadFile(c.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c.data = b
		if c.kind == "wat" {
			w, err := os.ReadFile(strings.TrimSuffix(c.path, ".wat") + ".wit")
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			c.wit = w
		}
		return c, nil
	}
	var tried []string
	for _, c := range candidates {
		tried = append(tried, c.path)
	}
	return nil, fmt.Errorf("no test tool %q (looked for %s)", name, strings.Join(tried, ", "))
}

// goSource is a Go tool directory; its key covers its own sources, the
// SDK's and the Go code of the build itself (toolbuild and the packages it
// imports that shape the output: wasmsnap's snapshot passes, wit's
// contracts), since the built bytes depend on all of them.
func goSource(root, dir string) (*source, error) {
	var data []byte
	builder := map[string]bool{}
	dirs := []string{dir, filepath.Join(root, "sdk", "go")}
	for _, d := range []string{"internal/toolbuild", "internal/wasmsnap", "wit"} {
		d = filepath.Join(root, filepath.FromSlash(d))
		builder[d] = true
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 && d == dir {
			return nil, fmt.Errorf("no test tool %q (no .go files in %s)", filepath.Base(dir), dir)
		}
		for _, f := range files {
			if builder[d] && strings.HasSuffix(f, "_test.go") {
				continue // the build's own tests do not shape what it builds
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			data = append(append(append(data, f[len(root):]...), 0), b...)
		}
	}
	return &source{kind: "go", path: dir, data: data}, nil
}

// key hashes everything the built bytes depend on.
func (s *source) key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", s.kind, toolbuild.Fingerprint())
	fmt.Fprintf(h, "%d\n", len(s.data))
	h.Write(s.data)
	fmt.Fprintf(h, "%d\n", len(s.wit))
	h.Write(s.wit)
	if s.world != "" {
		// Only sources that have a world of their own hash it, so the keys
		// (hence the cached builds) of every other source stay as they were.
		fmt.Fprintf(h, "world %s\n", s.world)
	}
	if s.kind == "go" {
		// A Go tool's bytes also depend on the Go that compiles it (go test
		// runs the go command that built this test binary, hence
		// runtime.Version), on the tags GOFLAGS carries and on whether
		// it is pre-initialised: a cached build made under other values
		// would be stale.
		fmt.Fprintf(h, "go %s\nGOFLAGS %q\n%s %q\n", runtime.Version(), os.Getenv("GOFLAGS"),
			toolbuild.PreinitEnv, os.Getenv(toolbuild.PreinitEnv))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (s *source) build(ctx context.Context, logf func(string, ...any)) ([]byte, error) {
	if s.kind == "raw" {
		return s.data, nil
	}
	tc, err := ensureToolchain(logf)
	if err != nil {
		return nil, fmt.Errorf("the JS toolchain that builds test tools is unavailable: %w", err)
	}
	switch {
	case s.kind == "go":
		p, err := toolbuild.DetectProject(s.path)
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "maiden-testkit-go-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "tool.wasm")
		if err := tc.Build(ctx, p, out); err != nil {
			return nil, err
		}
		return os.ReadFile(out)
	case s.kind == "js":
		return tc.ComponentFromJS(ctx, s.data)
	case s.wit != nil:
		world := s.world
		if world == "" {
			world = "tool"
		}
		return tc.ComponentFromWATWithWIT(ctx, s.data, toolbuild.WithToolPackage(string(s.wit)), world)
	default:
		return tc.ComponentFromWAT(ctx, s.data)
	}
}

var (
	tcMu  sync.Mutex
	tcVal *toolbuild.Toolchain
)

// ensureToolchain installs the toolchain once per process. Failures are not
// memoized: the next test retries, and each failing test reports why.
func ensureToolchain(logf func(string, ...any)) (*toolbuild.Toolchain, error) {
	tcMu.Lock()
	defer tcMu.Unlock()
	if tcVal != nil {
		return tcVal, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tc, err := toolbuild.EnsureToolchain(ctx, &toolbuild.Options{Progress: logWriter{logf}})
	if err != nil {
		return nil, err
	}
	tcVal = tc
	return tc, nil
}

type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("testkit: %s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

func cacheDir() (string, error) {
	if d := os.Getenv("MAIDEN_TESTKIT_DIR"); d != "" {
		return filepath.Abs(d)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locating the cache dir (set MAIDEN_TESTKIT_DIR): %w", err)
	}
	return filepath.Join(base, "maiden", "testkit"), nil
}

var unsafeNameRE = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func sanitize(name string) string { return unsafeNameRE.ReplaceAllString(name, "_") }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
