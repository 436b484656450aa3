// Package toolbuild turns tool sources (Go, JavaScript, WAT, core wasm) into
// WebAssembly components that target maiden's `tool` world (package wit),
// and creates new tool projects from embedded templates (NewProject).
//
// Go is compiled by the standard Go toolchain found in PATH (GOOS=wasip1
// GOARCH=wasm -buildmode=c-shared, using the SDK in sdk/go for the exports
// and the canonical ABI) and wrapped with the preview1 reactor adapter.
//
// The heavy lifting is done by the Bytecode Alliance JS toolchain (jco's
// wasm-tools build for WAT/core modules, componentize-js for JavaScript).
// Rather than shipping it, maiden embeds a package.json and package-lock.json
// that pin exact versions, installs them with `npm ci` on first use into the
// user's cache dir, and drives them through a small embedded Node script
// (toolchain/build.mjs). Pinning through the lockfile (integrity hashes, no
// registry URLs) means every machine builds with the same bits, and the cache
// dir is keyed by a hash of those files so a new pin installs fresh instead
// of reusing a stale tree.
//
// This is what `maiden build` calls; package testkit uses it to build the
// fixtures under testdata/tools.
package toolbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/wit"
)

// toolchainFS holds the pinned npm project and the build driver.
// package.json lists @bytecodealliance/preview2-shim although maiden never
// imports it: componentize-js 0.23.0 imports it at run time but declares it
// only as a devDependency, so without the pin `npm ci` leaves it out and
// every JS build fails with ERR_MODULE_NOT_FOUND. The .npmrc
// makes any npm that rewrites the lockfile keep it free of registry URLs, so
// the lockfile stays valid whatever registry (or mirror) the user configures.
//
//go:embed toolchain/package.json toolchain/package-lock.json toolchain/.npmrc toolchain/build.mjs
var toolchainFS embed.FS

// pinFiles are the files whose content decides what npm installs; their hash
// names the install directory. build.mjs is not among them: changing the
// driver must not force a 30 s reinstall, so it is stored content-addressed
// beside node_modules instead.
var pinFiles = []string{"package.json", "package-lock.json", ".npmrc"}

// MinNodeMajor is the oldest Node.js major version the pinned toolchain
// supports.
const MinNodeMajor = 20

// Errors returned (wrapped) by this package; test with errors.Is.
var (
	// ErrNoNode means no usable `node` executable was found.
	ErrNoNode = errors.New("node.js not found: maiden builds tools with the JS toolchain, which needs Node.js >= 20 and npm (Debian/Ubuntu: apt-get install nodejs npm)")
	// ErrNoNPM means node was found but npm was not.
	ErrNoNPM = errors.New("npm not found: installing the JS toolchain needs npm next to Node.js >= 20 (Debian/Ubuntu: apt-get install npm)")
	// ErrNodeTooOld means node is older than MinNodeMajor.
	ErrNodeTooOld = errors.New("node.js is too old: the JS toolchain needs Node.js >= 20")
	// ErrInstall means `npm ci` of the pinned toolchain failed.
	ErrInstall = errors.New("installing the JS toolchain failed")
	// ErrBuild means the toolchain ran and rejected the input (bad WAT,
	// missing export, JS syntax error, ...). The message carries the cause.
	ErrBuild = errors.New("building the component failed")
	// ErrNoGo means a Go project was to be built but no `go` executable was
	// found.
	ErrNoGo = errors.New("go not found: building a Go tool needs the Go toolchain, 1.24 or newer (https://go.dev/dl/, or Debian/Ubuntu: apt-get install golang-go if it is new enough)")
	// ErrGoTooOld means the go executable is older than MinGoVersion.
	ErrGoTooOld = errors.New("go is too old: Go tools need Go 1.24 or newer (//go:wasmexport)")
)

// Options configures EnsureToolchain. A nil *Options means all defaults.
type Options struct {
	// CacheDir is the directory holding installed toolchains, one
	// subdirectory per pin hash. Empty means $MAIDEN_TOOLCHAIN_DIR if set,
	// else os.UserCacheDir()/maiden/toolchain.
	CacheDir string
	// Progress receives human-readable progress lines (e.g. while the
	// one-time install runs). Nil means silent.
	Progress io.Writer
	// NodePath and NPMPath are the node and npm executables. Empty means
	// look up "node" / "npm" in PATH. A path that does not exist yields
	// ErrNoNode / ErrNoNPM.
	NodePath, NPMPath string
	// GoPath is the go executable used to build Go projects. Empty means
	// look up "go" in PATH when a Go project is built; not finding it then
	// yields ErrNoGo. EnsureToolchain does not need Go.
	GoPath string
}

// Toolchain is an installed, ready-to-use JS toolchain. Its methods are safe
// for concurrent use: each build runs in its own node process and temp dir.
type Toolchain struct {
	dir      string // contains node_modules and the driver
	node     string // absolute path of node
	driver   string // absolute path of the build driver inside dir
	goPath   string // Options.GoPath
	progress io.Writer
	// concurrentGC runs the driver with V8's default collector, for
	// BenchmarkBuildJS's baseline (drive).
	concurrentGC bool
}

// Dir is the directory holding the installed node_modules.
func (t *Toolchain) Dir() string { return t.dir }

// Fingerprint identifies everything that decides what a build produces: the
// pinned packages, the driver and the tool and middleware WIT. Caches of built components
// (package testkit) key on it so that a new pin or contract rebuilds.
func Fingerprint() string {
	h := sha256.New()
	for _, name := range append(pinFiles, "build.mjs") {
		b, err := toolchainFS.ReadFile("toolchain/" + name)
		if err != nil {
			panic(err) // embedded; cannot happen
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	for _, c := range wit.Contracts {
		fmt.Fprintf(h, "wit %s %d\n", c.Version, len(c.Text))
		h.Write([]byte(c.Text))
	}
	fmt.Fprintf(h, "wit %s %d\n", wit.Middleware.Package, len(wit.Middleware.Text))
	h.Write([]byte(wit.Middleware.Text))
	fmt.Fprintf(h, "go preinit %s\n", preinitFingerprint()) // preinit.go
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pinHash names the install directory.
func pinHash() string {
	h := sha256.New()
	for _, name := range pinFiles {
		b, err := toolchainFS.ReadFile("toolchain/" + name)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// completeMarker is written (atomically) after a successful npm ci. Its
// absence means the directory is unusable, whatever else it contains.
const completeMarker = ".maiden-complete"

// EnsureToolchain returns the pinned toolchain, installing it first if
// needed. The install runs once per pin and machine (~30-60 s); concurrent
// callers, including other processes such as parallel `go test` packages,
// wait on a file lock instead of installing twice.
func EnsureToolchain(ctx context.Context, opts *Options) (*Toolchain, error) {
	if opts == nil {
		opts = &Options{}
	}
	node, err := findExecutable(opts.NodePath, "node", ErrNoNode)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: ensure toolchain: %w", err)
	}
	if err := checkNodeVersion(ctx, node); err != nil {
		return nil, fmt.Errorf("toolbuild: ensure toolchain: %w", err)
	}
	cacheDir, err := toolchainCacheDir(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: ensure toolchain: %w", err)
	}
	dir := filepath.Join(cacheDir, pinHash())
	t := &Toolchain{dir: dir, node: node, goPath: opts.GoPath, progress: opts.Progress}

	if !fileExists(filepath.Join(dir, completeMarker)) {
		// npm is only needed to install; a ready toolchain works without it.
		npm, err := findExecutable(opts.NPMPath, "npm", ErrNoNPM)
		if err != nil {
			return nil, fmt.Errorf("toolbuild: ensure toolchain: %w", err)
		}
		if err := install(ctx, cacheDir, dir, node, npm, opts.Progress); err != nil {
			return nil, fmt.Errorf("toolbuild: ensure toolchain: %w", err)
		}
	}
	if t.driver, err = writeDriver(dir); err != nil {
		return nil, fmt.Errorf("toolbuild: ensure toolchain: %w", err)
	}
	return t, nil
}

func toolchainCacheDir(configured string) (string, error) {
	if configured != "" {
		return filepath.Abs(configured)
	}
	if env := os.Getenv("MAIDEN_TOOLCHAIN_DIR"); env != "" {
		return filepath.Abs(env)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locating the cache dir (set MAIDEN_TOOLCHAIN_DIR): %w", err)
	}
	return filepath.Join(base, "maiden", "toolchain"), nil
}

// findExecutable resolves an explicit path or a PATH lookup to an absolute
// executable path; any failure is reported as notFound so callers can tell
// the user what to install.
func findExecutable(explicit, name string, notFound error) (string, error) {
	if explicit != "" {
		st, err := os.Stat(explicit)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w (%s: not an executable file)", notFound, explicit)
		}
		return filepath.Abs(explicit)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w (%q is not in PATH)", notFound, name)
	}
	return filepath.Abs(p)
}

var nodeVersionRE = regexp.MustCompile(`^v(\d+)\.`)

func checkNodeVersion(ctx context.Context, node string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%w (running %s --version: %v)", ErrNoNode, node, err)
	}
	v := strings.TrimSpace(string(out))
	m := nodeVersionRE.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("%w (%s --version printed %q)", ErrNoNode, node, v)
	}
	if major, _ := strconv.Atoi(m[1]); major < MinNodeMajor {
		return fmt.Errorf("%w (found %s at %s)", ErrNodeTooOld, v, node)
	}
	return nil
}

// install runs npm ci into dir under an exclusive lock on dir+".lock".
func install(ctx context.Context, cacheDir, dir, node, npm string, progress io.Writer) error {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", cacheDir, err)
	}
	unlock, err := atomicfile.Lock(ctx, dir+".lock", func() {
		say(progress, "waiting for another process installing the JS toolchain into %s ...", dir)
	})
	if err != nil {
		return err
	}
	defer unlock()
	// Whoever held the lock before us may have finished the job.
	if fileExists(filepath.Join(dir, completeMarker)) {
		return nil
	}

	start := time.Now()
	say(progress, "installing JS toolchain (one time, ~30 s) into %s ...", dir)
	// A previous attempt may have died half way; start from nothing.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, name := range pinFiles {
		b, _ := toolchainFS.ReadFile("toolchain/" + name)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}

	// --ignore-scripts: none of the pinned packages has an install script
	// (the lockfile has no hasInstallScript entry); platform binaries such
	// as wizer come as optional dependencies, so nothing needs to run.
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir = dir
	// npm is a node script: make sure it runs on the node we validated,
	// even if another one comes first in PATH.
	cmd.Env = buildEnv(
		"PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"npm_config_update_notifier=false",
	)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	setProcessGroup(cmd)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %v", ErrInstall, ctx.Err())
		}
		return fmt.Errorf("%w: npm ci in %s: %v\n%s", ErrInstall, dir, err, lastLines(out.String(), 15))
	}
	if err := atomicfile.Write(filepath.Join(dir, completeMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return fmt.Errorf("marking toolchain complete: %w", err)
	}
	say(progress, "JS toolchain ready (%s)", time.Since(start).Round(time.Second))
	return nil
}

// writeDriver stores build.mjs inside dir (ES module resolution starts from
// the script's own directory) under a content-addressed name, so concurrent
// processes with different maiden versions never overwrite each other's.
func writeDriver(dir string) (string, error) {
	b, err := toolchainFS.ReadFile("toolchain/build.mjs")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	p := filepath.Join(dir, "build-"+hex.EncodeToString(sum[:])[:12]+".mjs")
	if cur, err := os.ReadFile(p); err == nil && bytes.Equal(cur, b) {
		return p, nil
	}
	if err := atomicfile.Write(p, b, 0o644); err != nil {
		return "", fmt.Errorf("writing build driver: %w", err)
	}
	return p, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func say(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// setProcessGroup puts cmd in its own process group and makes context
// cancellation kill the whole group: node spawns helpers (npm's workers,
// componentize-js's wizer) that would otherwise outlive a cancelled build.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
}
