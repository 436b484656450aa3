// Package installtest checks that maiden installs the way a Go user installs
// any module: `go get` into a module of their own, and `go install
// github.com/maiden-run/maiden/cmd/maiden@VERSION`, from a module cache
// where nothing was generated beforehand.
//
// The test packs the checkout into a module zip (the files git would
// publish: tracked and untracked-but-not-ignored, so nothing git ignores,
// such as a generated file, can make it pass), serves it from a file://
// module proxy next to the machine's own download cache, and builds with a
// fresh, empty module cache and no network. It first fills the machine's
// cache with what those builds read (fillDownloadCache), so it passes
// whatever that cache held before.
//
// The empty module cache is emptied at the same path every run (in the
// testkit cache, shared by checkouts), not at a new temporary path, and the
// checkout is published at the same version every run: Go's build cache keys
// a compiled package by its directory (module@version inside the module
// cache) as well as by its files, so a new path recompiled every dependency,
// and a new version every package of maiden (the go install took 72-82 s,
// most of the test), although the build cache was always the machine's own.
// The sources are still unpacked from the proxy into an empty directory, and
// every file the compiler, cgo and the linker read is hashed into the build
// cache's keys (the headers maiden's cgo includes live beside its Go files),
// so a file missing from the module zip still fails the build. What is not
// keyed by the files is the go command's module index (a listing of each
// module's packages and files, kept in the build cache per module directory
// in the module cache, which it takes as immutable): the builds run with
// GODEBUG=goindex=0, so every listing is read from the unpacked files.
package installtest

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/testkit"
)

const (
	modulePath = "github.com/maiden-run/maiden"
	// testVersion is the version the checkout is published as, the same
	// every run, so that the packages of maiden that a commit did not
	// change come from the build cache (see the package comment). The go
	// command indexes a module in the module cache once per directory,
	// path@version, and takes it as immutable, so the same version with other
	// files (the next commit) at the same path would be built from the stale
	// index: the builds run with GODEBUG=goindex=0.
	testVersion = "v0.99.0-installtest"
)

func TestInstallFromModuleProxy(t *testing.T) {
	// Two builds of maiden and its dependencies from an empty module cache
	// (a few minutes; many more on a loaded machine): until just before
	// go test's -timeout, so that a slow run fails with the commands' own
	// output rather than a panic, and 12 minutes without one.
	deadline := time.Now().Add(12 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	root := testkit.RepoRoot(t)
	echo := testkit.Component(t, "echo")
	// The run's shared maiden binary first (built once per run under a
	// lock, so usually already there): it leaves every dependency compiled
	// in the build cache, with the flags the go install below uses. Started
	// side by side, the two compiled each dependency twice.
	testkit.Binary(t, "./cmd/maiden")
	work := t.TempDir()

	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := filepath.Join(work, "proxy")
	writeProxy(t, root, proxy, goMod)

	origCache := goEnv(t, "GOMODCACHE")
	fillDownloadCache(ctx, t, root)
	modcache := emptyModCache(ctx, t, root)
	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(origCache, "cache", "download")),
		"GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GONOPROXY=", "GOTOOLCHAIN=local",
		// No module index: the same path@version holds other files each
		// commit (testVersion).
		"GODEBUG="+strings.TrimPrefix(os.Getenv("GODEBUG")+",goindex=0", ","),
		"GOMODCACHE="+modcache,
		// -modcacherw so that the module cache can be removed. -trimpath as
		// scripts/test and testkit.Binary build: without it every package's
		// build key holds its directory, here this test's own module cache,
		// so the dependencies were all compiled again (on a fresh clone,
		// 130 s for the go install below; with it 44 s, maiden's own
		// packages, which its versioned module path keeps apart).
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOWORK=off",
	)
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("%s %s (%.1fs)", name, strings.Join(args, " "), time.Since(start).Seconds())
		if err != nil {
			t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}

	// The user's own module (built below), outside the repository.
	scratch := filepath.Join(work, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(goMod)
	write(t, filepath.Join(scratch, "go.mod"), fmt.Sprintf("module example.com/scratch\n\n%s\n\nrequire %s %s\n", goLine, modulePath, testVersion))
	write(t, filepath.Join(scratch, "main.go"), scratchMain)
	agent := filepath.Join(scratch, "agent.toml")
	write(t, agent, fmt.Sprintf("version = 1\n\n[tools.echo]\npath = %q\ntimeout_ms = 5000\nmemory_mb = 16\n", echo))

	// go install ...@version, then the installed command. First, because
	// the scratch module then reuses the packages it compiled.
	gobin := filepath.Join(work, "bin")
	env = append(env, "GOBIN="+gobin)
	run(work, "go", "install", modulePath+"/cmd/maiden@"+testVersion)
	bin := filepath.Join(gobin, "maiden")
	version := run(work, bin, "version")
	if want := "maiden " + testVersion + " (wasmtime "; !strings.HasPrefix(version, want) {
		t.Fatalf("maiden version printed %q, want it to start with %q", version, want)
	}
	t.Logf("installed: %s", strings.TrimSpace(version))

	// MCP clients see the same version in serverInfo.
	serve := exec.CommandContext(ctx, bin, "serve", "-config", agent, "-cache", "off", "-watch=false")
	serve.Env = env
	serve.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"installtest","version":"0"}}}` + "\n")
	served, err := serve.Output()
	if err != nil {
		t.Fatalf("maiden serve: %v\n%s", err, served)
	}
	var initResult struct {
		Result struct {
			ServerInfo struct{ Name, Version string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal(bytes.SplitN(served, []byte("\n"), 2)[0], &initResult); err != nil {
		t.Fatalf("maiden serve's answer to initialize: %v\n%s", err, served)
	}
	if got := initResult.Result.ServerInfo; got.Name != "maiden" || got.Version != testVersion {
		t.Fatalf("serverInfo = %+v, want maiden %s", got, testVersion)
	}

	// The scratch module imports maiden and calls a tool in process.
	run(scratch, "go", "build", "-o", "scratch", ".")
	if _, err := os.Stat(filepath.Join(modcache, modulePath+"@"+testVersion, "internal", "wasmtime", "capi.h")); err != nil {
		t.Fatalf("maiden was not built from the fresh module cache: %v", err)
	}
	out := run(scratch, filepath.Join(scratch, "scratch"), agent)
	if want := `{"message":"from a scratch module"}`; strings.TrimSpace(out) != want {
		t.Fatalf("the scratch module's call printed %q, want %q", out, want)
	}

	// One copy of libwasmtime: wasmtime-go's directives and maiden's code
	// reach the same static archive, so each symbol is defined once.
	syms := run(work, "go", "tool", "nm", bin)
	for _, sym := range []string{"wasm_engine_new_with_config", "wasmtime_component_new"} {
		if n := len(regexp.MustCompile(`(?m) T `+sym+`$`).FindAllString(syms, -1)); n != 1 {
			t.Errorf("%s is defined %d times in the installed binary, want once", sym, n)
		}
	}
}

// scratchMain is what a user who imports maiden writes.
const scratchMain = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
)

func main() {
	maiden.WorkerMain() // tools run in this program re-executed (the default isolation)
	cfg, err := config.Load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h, err := maiden.New(cfg, &maiden.Options{CacheDir: "off"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer h.Close(context.Background())
	res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: ` + "`" + `{"message":"from a scratch module"}` + "`" + `})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if !res.OK {
		fmt.Fprintln(os.Stderr, res.Error.Kind, res.Error.Message)
		os.Exit(1)
	}
	fmt.Println(res.Output)
}
`

// writeProxy lays out a file:// module proxy holding the checkout as
// modulePath at testVersion.
func writeProxy(t *testing.T, root, proxy string, goMod []byte) {
	t.Helper()
	files := publishedFiles(t, root)
	dir := filepath.Join(proxy, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "list"), testVersion+"\n")
	write(t, filepath.Join(dir, testVersion+".info"), fmt.Sprintf(`{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, testVersion))
	write(t, filepath.Join(dir, testVersion+".mod"), string(goMod))

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	prefix := modulePath + "@" + testVersion + "/"
	for _, rel := range files {
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(prefix + rel)
		if err == nil {
			_, err = io.Copy(w, f)
		}
		f.Close()
		if err != nil {
			t.Fatalf("zip %s: %v", rel, err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, testVersion+".zip"), buf.String())
	t.Logf("module zip %s: %d files, %d KiB, sha256 %x", testVersion, len(files), buf.Len()>>10, sha256.Sum256(buf.Bytes()))
}

// publishedFiles lists what a release of the module would contain: the
// files git tracks or would track (not ignored), that exist, are regular,
// and are not in a nested module.
func publishedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s (the test packs the checkout's files): %v", root, err)
	}
	all := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	var nested []string
	for _, p := range all {
		if strings.HasSuffix(p, "/go.mod") {
			nested = append(nested, strings.TrimSuffix(p, "go.mod"))
		}
	}
	seen := map[string]bool{}
	var files []string
next:
	for _, p := range all {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		for _, n := range nested {
			if strings.HasPrefix(p, n) {
				continue next
			}
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		files = append(files, p)
	}
	if len(files) == 0 {
		t.Fatal("git lists no files")
	}
	return files
}

// fillDownloadCache downloads into the machine's module cache everything
// the builds from the file:// proxy read from it: the zips of the modules
// that provide maiden's packages (go mod download) and the go.mod file of
// every module@version in the module graph (go mod graph reads each one the
// resolver reads, including those of modules nothing is built from, such as
// testify@v1.3.0, which jackc/pgpassfile's go.mod requires). Without this,
// the test passed or failed by what earlier builds happened to leave in
// the cache. Both are no-ops, without network, when the cache holds it all.
func fillDownloadCache(ctx context.Context, t *testing.T, root string) {
	t.Helper()
	for _, args := range [][]string{{"mod", "download"}, {"mod", "graph"}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in %s (filling the module cache the test's proxy serves; needs the network once): %v\n%s", strings.Join(args, " "), root, err, out)
		}
		t.Logf("go %s (%.1fs)", strings.Join(args, " "), time.Since(start).Seconds())
	}
}

// emptyModCache returns the test's module cache, empty: it removes what an
// earlier run left, and removes it again after the test. A lock keeps two
// runs of the test (from two checkouts, say) from sharing it at once.
func emptyModCache(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	dir := testkit.CacheDir(t, "installtest")
	unlock, err := atomicfile.Lock(ctx, filepath.Join(dir, "lock"), func() { t.Logf("waiting for another run of this test in %s", root) })
	if err != nil {
		t.Fatal(err)
	}
	modcache := filepath.Join(dir, "modcache")
	t.Cleanup(func() {
		if err := os.RemoveAll(modcache); err != nil {
			t.Errorf("removing the test's module cache: %v", err)
		}
		unlock()
	})
	// -modcacherw (GOFLAGS below) leaves every file writable, so RemoveAll
	// empties what an earlier run that died left behind.
	if err := os.RemoveAll(modcache); err != nil {
		t.Fatalf("emptying the test's module cache: %v", err)
	}
	return modcache
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
