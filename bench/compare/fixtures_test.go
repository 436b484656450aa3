package compare

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

// ---- fixtures shared across benchmark invocations ----
//
// go test calls a benchmark function several times while it sizes b.N, so
// hosts, engines, compiled modules and MCP servers live for the whole
// process and are closed after the tests.

var (
	fixMu    sync.Mutex
	fixtures = map[string]any{}
	closers  []func()

	workMu sync.Mutex
	work   string
)

// shared returns the fixture under key, creating it on first use.
func shared[T any](tb testing.TB, key string, create func() (T, func())) T {
	tb.Helper()
	fixMu.Lock()
	defer fixMu.Unlock()
	if v, ok := fixtures[key]; ok {
		return v.(T)
	}
	v, closeFn := create()
	fixtures[key] = v
	if closeFn != nil {
		closers = append(closers, closeFn)
	}
	return v
}

func closeFixtures() {
	fixMu.Lock()
	defer fixMu.Unlock()
	for _, c := range slices.Backward(closers) {
		c()
	}
	closers, fixtures = nil, map[string]any{}
	if work != "" {
		os.RemoveAll(work)
	}
}

// workDir is this process's scratch directory, removed by TestMain.
func workDir(tb testing.TB) string {
	workMu.Lock()
	defer workMu.Unlock()
	if work == "" {
		d, err := os.MkdirTemp("", "maiden-compare-")
		if err != nil {
			tb.Fatal(err)
		}
		work = d
	}
	return work
}

// cacheDir keeps what is slow to make between processes: core modules
// parsed from WAT, Go tools built into components, and (in components/)
// maiden's compiled-component cache, which must be private. $COMPARE_CACHE
// overrides the default, os.UserCacheDir()/maiden/bench-compare.
func cacheDir(tb testing.TB) string {
	d := os.Getenv("COMPARE_CACHE")
	if d == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			tb.Fatalf("no cache directory (set COMPARE_CACHE): %v", err)
		}
		d = filepath.Join(base, "maiden", "bench-compare")
	}
	if err := os.MkdirAll(filepath.Join(d, "components"), 0o700); err != nil {
		tb.Fatal(err)
	}
	return d
}

// componentsDir is maiden's compiled-component cache (Options.CacheDir),
// shared by every maiden row and by `maiden serve`.
func componentsDir(tb testing.TB) string { return filepath.Join(cacheDir(tb), "components") }

// toolPath is the component of w in lang: WAT and JS fixtures from
// testdata/tools (package testkit builds and caches them), Go tools built
// with the SDK.
func toolPath(tb testing.TB, w *workload, lang string) string {
	switch lang {
	case "wat":
		return testkit.Component(tb, w.wat)
	case "js":
		return testkit.Component(tb, w.js)
	case "go":
		return goComponent(tb, w.goDir, "")
	case "go-nopreinit":
		return goComponent(tb, w.goDir, "off")
	}
	tb.Fatalf("no %s tool for workload %s", lang, w.name)
	return ""
}

// agentTOML writes an agent.toml serving w's tool in lang under the name
// w.name, with the workload's timeout and maiden's default memory ceiling
// written out, and returns its path.
func agentTOML(tb testing.TB, w *workload, lang string) string {
	path := toolPath(tb, w, lang)
	file := filepath.Join(workDir(tb), fmt.Sprintf("agent-%s-%s.toml", w.name, lang))
	toml := fmt.Sprintf("version = 1\n\n[tools.%s]\npath = %q\ntimeout_ms = %d\nmemory_mb = %d\n",
		w.name, path, w.timeout.Milliseconds(), memoryLimit>>20)
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		tb.Fatal(err)
	}
	return file
}

var toolchain = sync.OnceValues(func() (*toolbuild.Toolchain, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return toolbuild.EnsureToolchain(ctx, &toolbuild.Options{Progress: os.Stderr})
})

// coreModule returns the core wasm module of a WAT file (parsed by
// wasm-tools from maiden's pinned JS toolchain, through wasm/wat2wasm.mjs),
// cached by content.
func coreModule(tb testing.TB, watPath string) []byte {
	tb.Helper()
	src, err := os.ReadFile(watPath)
	if err != nil {
		tb.Fatal(err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "wat2wasm 1\n%s\n", toolbuild.Fingerprint())
	h.Write(src)
	name := strings.TrimSuffix(filepath.Base(watPath), ".wat")
	out := filepath.Join(cacheDir(tb), fmt.Sprintf("core-%s-%s.wasm", name, hex.EncodeToString(h.Sum(nil))[:16]))
	if b, err := os.ReadFile(out); err == nil {
		return b
	}
	tc, err := toolchain()
	if err != nil {
		tb.Fatal(err)
	}
	helper := filepath.Join(testkit.RepoRoot(tb), "bench", "compare", "wasm", "wat2wasm.mjs")
	tmp := fmt.Sprintf("%s.tmp-%d", out, os.Getpid())
	cmd := exec.Command("node", helper, tc.Dir(), watPath, tmp)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("wat2wasm %s: %v\n%s", watPath, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// watFixture is the path of testdata/tools/NAME.wat.
func watFixture(tb testing.TB, name string) string {
	return filepath.Join(testkit.RepoRoot(tb), "testdata", "tools", name+".wat")
}

// goComponent builds the Go tool in dir (relative to the repo root) with
// maiden's toolbuild (what `maiden build` does), cached by a hash of its
// sources, the SDK's, the enclosing go.mod and go.sum, the toolchain and
// the Go version. preinit is the MAIDEN_GO_PREINIT setting ("" for
// maiden's default, a pre-initialised snapshot; "off" for the module as go
// build made it).
func goComponent(tb testing.TB, dir, preinit string) string {
	tb.Helper()
	root := testkit.RepoRoot(tb)
	abs := filepath.Join(root, dir)
	h := sha256.New()
	fmt.Fprintf(h, "go tool 1\n%s\n%s\npreinit %q\n", toolbuild.Fingerprint(), runtime.Version(), preinit)
	mod := root
	if strings.HasPrefix(dir, "bench/compare/") {
		mod = filepath.Join(root, "bench", "compare")
	}
	for _, pattern := range []string{
		filepath.Join(abs, "*.go"),
		filepath.Join(root, "sdk", "go", "*.go"),
		filepath.Join(root, "bench", "compare", "tools", "gotools", "*.go"),
		filepath.Join(mod, "go.mod"),
		filepath.Join(mod, "go.sum"),
	} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			fmt.Fprintf(h, "%s %d\n", f, len(b))
			h.Write(b)
		}
	}
	out := filepath.Join(cacheDir(tb), fmt.Sprintf("go-%s-%s.wasm", filepath.Base(dir), hex.EncodeToString(h.Sum(nil))[:16]))
	if _, err := os.Stat(out); err == nil {
		return out
	}
	tc, err := toolchain()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := toolbuild.DetectProject(abs)
	if err != nil {
		tb.Fatal(err)
	}
	if p.Lang != toolbuild.LangGo {
		tb.Fatalf("%s is a %s project, want Go", dir, p.Lang)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Fixtures are built one at a time, before any row runs.
	prev, had := os.LookupEnv(toolbuild.PreinitEnv)
	os.Setenv(toolbuild.PreinitEnv, preinit)
	err = tc.Build(ctx, p, out)
	if had {
		os.Setenv(toolbuild.PreinitEnv, prev)
	} else {
		os.Unsetenv(toolbuild.PreinitEnv)
	}
	if err != nil {
		tb.Fatalf("building the Go tool %s: %v", dir, err)
	}
	return out
}

// maidenBinary is the maiden CLI for the stdio rows: $COMPARE_MAIDEN_BIN
// (./run builds it once), or the one testkit builds for every test binary
// of the run (shared: run it, do not modify it).
func maidenBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("COMPARE_MAIDEN_BIN"); p != "" {
		return p
	}
	return testkit.Binary(tb, "./cmd/maiden")
}

// reportRSS reports the peak resident set size, in MiB, of the process
// that runs the tool: this one (Linux ru_maxrss is in KiB), or pid's
// (VmHWM in /proc/PID/status) while it still runs.
func reportRSS(b *testing.B, pid int) {
	var kib int64
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return
		}
		kib = ru.Maxrss
	} else {
		kib = vmHWM(pid)
	}
	if kib > 0 {
		b.ReportMetric(float64(kib)/1024, "peak-rss-MiB")
	}
}

// vmHWM is a process's peak resident set size in KiB, 0 if unknown.
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// cpuTree is the CPU time of a server process (its own threads and the
// children it reaped) and of its live child processes (maiden's workers).
type cpuTree struct{ server, children time.Duration }

// serverCPU reads pid's cpuTree from /proc; zero when pid is 0 (the tool
// runs in this process) or gone.
func serverCPU(pid int) cpuTree {
	if pid == 0 {
		return cpuTree{}
	}
	var t cpuTree
	if st, ok := testkit.ReadProcStat(strconv.Itoa(pid)); ok {
		t.server = st.Self + st.Reaped
	}
	for _, st := range childStats(pid) {
		t.children += st.Self + st.Reaped
	}
	return t
}

// childStats are the /proc/PID/stat of the live processes whose parent is
// pid, by their pids.
func childStats(pid int) map[int]testkit.ProcStat {
	kids := map[int]testkit.ProcStat{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if st, ok := testkit.ReadProcStat(d.Name()); ok && st.PPID == pid {
			kids[n] = st
		}
	}
	return kids
}

// reportServerCPU reports the CPU a call cost the server process
// (server-cpu-us/call) and its child processes (children-cpu-us/call:
// maiden's workers), from /proc before and after the calls: unlike the
// latency rows, less moved by other work on a loaded machine. A child
// that exits during the calls takes its CPU out of the sum (reaped, it is
// counted in the server's), so the sum of both is what to compare.
func reportServerCPU(b *testing.B, pid int, before cpuTree) {
	if pid == 0 || b.N == 0 {
		return
	}
	after := serverCPU(pid)
	n := float64(b.N)
	b.ReportMetric(float64(after.server-before.server)/1e3/n, "server-cpu-us/call")
	b.ReportMetric(float64(after.children-before.children)/1e3/n, "children-cpu-us/call")
}
