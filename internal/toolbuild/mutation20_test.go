package toolbuild

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/wasmsnap"
)

// The twentieth pass (docs/security-tests.md): what pre-initialisation
// promises about what runs at build time and what is checked. The
// setting is read as documented; the go build that makes a snapshot
// carries both overlays, the SDK's restore tag, GOFLAGS' tags and the
// flags that let math/rand's draws be counted; the preopen listing run
// again is the one init maiden has read; every read of the clock or
// randomness beyond the runtime's own is reported; a module the snapshot
// cannot be trusted for is refused before wizer runs; wizer runs with the
// arguments and environment the code says, and its failure is reported
// with its message; a build cancelled is cancelled, not "not
// pre-initialised"; an overlay Go refuses falls back (or fails under
// require), and a tool's own compile error is not mistaken for one.

// TestPreinitSettingRead: MAIDEN_GO_PREINIT is read case-insensitively
// and without surrounding space; "off" and its synonyms turn
// pre-initialisation off, "require" makes it mandatory, anything else is
// the default. Not parallel: it sets the process's environment.
func TestPreinitSettingRead(t *testing.T) {
	for v, want := range map[string]preinitMode{
		"": preinitAuto, "auto": preinitAuto, "yes": preinitAuto,
		"off": preinitOff, " OFF ": preinitOff, "0": preinitOff, "false": preinitOff, "No": preinitOff,
		"require": preinitRequire, "Require\n": preinitRequire,
	} {
		t.Setenv(PreinitEnv, v)
		if got := preinitSetting(); got != want {
			t.Errorf("%s=%q: mode %d, want %d", PreinitEnv, v, got, want)
		}
	}
}

// TestGoflagsTagsSeparateValue: GOFLAGS' "-tags a,b" (the value as the
// next field) counts as much as "-tags=a,b"; a "-tags" with nothing after
// it is no tag and no panic.
func TestGoflagsTagsSeparateValue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		goflags string
		want    []string
	}{
		{"-tags a,b -mod=mod", []string{"a", "b"}},
		{"--tags x -tags=y", []string{"x", "y"}},
		{"-mod=mod -tags", nil},
	} {
		if got := goflagsTags(tt.goflags); !cmp.Equal(got, tt.want) {
			t.Errorf("goflagsTags(%q) = %q, want %q", tt.goflags, got, tt.want)
		}
	}
}

// TestPreinitBuildArgs: the arguments of a pre-initialised go build carry
// GOFLAGS' tags, the tool's tags and the SDK's restore tag (a -tags flag
// replaces GOFLAGS' own), both overlay files in their packages (the
// runtime's reseeding in runtime, the preopen listing in syscall) with
// their contents, and math/rand's functions not inlined, so that their
// draws at init are counted. Not parallel: it sets GOFLAGS.
func TestPreinitBuildArgs(t *testing.T) {
	t.Setenv("GOFLAGS", "-trimpath -tags=fromgoflags")
	gobin, err := findExecutable("", "go", ErrNoGo)
	if err != nil {
		t.Fatal(err)
	}
	root := goroot(t)
	work := t.TempDir()
	args, err := preinitBuildArgs(context.Background(), gobin, ".", work, []string{RevealTag})
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(work, "overlay.json")
	want := []string{"-overlay", overlay, "-tags", "fromgoflags," + RevealTag + "," + preinitTag, "-gcflags=math/rand=-l", "-gcflags=math/rand/v2=-l"}
	if !cmp.Equal(args, want) {
		t.Errorf("go build arguments %q, want %q", args, want)
	}
	b, err := os.ReadFile(overlay)
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	rt, fs := filepath.Join(root, "src", "runtime", "maiden_preinit.go"), filepath.Join(root, "src", "syscall", preinitSyscallFile)
	if !cmp.Equal(o.Replace, map[string]string{rt: filepath.Join(work, "maiden_preinit.go"), fs: filepath.Join(work, preinitSyscallFile)}) {
		t.Fatalf("overlay %s, want %s and %s", b, rt, fs)
	}
	wantFS, err := syscallPreopenOverlay(root)
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{o.Replace[rt]: preinitRuntimeFile, o.Replace[fs]: wantFS} {
		if got, err := os.ReadFile(file); err != nil || string(got) != content {
			t.Errorf("%s holds %q (%v), want %q", file, got, err, content)
		}
	}
}

// TestSyscallPreopenInitMore: an fs_wasip1.go with two inits calling
// fd_prestat_get (the one maiden read, and another that would have run
// only at build time) is refused, whichever comes first, and so are one
// whose preopens variable is of another type and one whose listing is a
// method named init (never run at start-up).
func TestSyscallPreopenInitMore(t *testing.T) {
	t.Parallel()
	real, err := os.ReadFile(filepath.Join(goroot(t), "src", "syscall", "fs_wasip1.go"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(real)
	const second = "\nfunc init() {\n\tvar prestat prestat\n\tfd_prestat_get(3, &prestat)\n\tpreopens = append(preopens, opendir{fd: 3, name: \"/\"})\n}\n"
	first := strings.Replace(src, "func init() {\n\tdirNameBuf", strings.TrimPrefix(second, "\n")+"\nfunc init() {\n\tdirNameBuf", 1)
	if first == src || !strings.Contains(src, "var preopens []opendir") {
		t.Fatal("fs_wasip1.go has no preopen init or preopens variable where the test expects them")
	}
	for _, tt := range []struct{ name, content, want string }{
		{"a second init after", src + second, "two init functions call fd_prestat_get"},
		{"a second init before", first, "two init functions call fd_prestat_get"},
		{"preopens of another type", strings.Replace(src, "var preopens []opendir", "var preopens []*opendir", 1), "not []opendir and string"},
		// A method named init is not run when the package initialises.
		{"the listing in a method named init", strings.Replace(src, "func init() {\n\tdirNameBuf", "func (opendir) init() {\n\tdirNameBuf", 1), "no init function calls fd_prestat_get"},
	} {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "src", "syscall"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "src", "syscall", "fs_wasip1.go"), []byte(tt.content), 0o644))
		_, err := syscallPreopenOverlay(dir)
		var no *errNoSnapshot
		if !errors.As(err, &no) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want an errNoSnapshot saying %q", tt.name, err, tt.want)
		}
	}
}

// TestGoEnvPrintsNothing: a go command whose env prints nothing is an
// error, not an empty GOROOT (whose fs_wasip1.go would be looked for
// relative to the working directory).
func TestGoEnvPrintsNothing(t *testing.T) {
	t.Parallel()
	gobin := fakeExecutable(t, "go", "exit 0\n")
	if v, err := goEnv(context.Background(), gobin, t.TempDir(), "GOROOT"); err == nil || !strings.Contains(err.Error(), "env GOROOT printed nothing") {
		t.Errorf("goEnv = %q, %v; want an error saying it printed nothing", v, err)
	}
}

// TestFrozenReadsEachOne: one read beyond the runtime's own, of any kind,
// is reported with its count.
func TestFrozenReadsEachOne(t *testing.T) {
	t.Parallel()
	base := wasmsnap.Counts{WallClock: runtimeWallClockReads, Random: runtimeRandomReads, GoRand: runtimeGoRandReads}
	for _, tt := range []struct {
		c    wasmsnap.Counts
		want string
	}{
		{wasmsnap.Counts{WallClock: base.WallClock + 1, Random: base.Random, GoRand: base.GoRand}, "read the wall clock 1 time(s)"},
		{wasmsnap.Counts{WallClock: base.WallClock, Random: base.Random + 1, GoRand: base.GoRand}, "read randomness 1 time(s)"},
		{wasmsnap.Counts{WallClock: base.WallClock, Random: base.Random, GoRand: base.GoRand + 1}, "drew 1 random number(s)"},
	} {
		if msg := frozenReads(tt.c); !strings.Contains(msg, tt.want) {
			t.Errorf("frozenReads(%+v) = %q, want it to say %q", tt.c, msg, tt.want)
		}
	}
}

// exportModule is a core module with one memory and one empty function
// exported under each name.
func exportModule(names ...string) []byte {
	section := func(id byte, b ...byte) []byte { return append([]byte{id, byte(len(b))}, b...) }
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = append(out, section(1, 1, 0x60, 0, 0)...) // type 0: () -> ()
	out = append(out, section(3, 1, 0)...)          // func 0: type 0
	out = append(out, section(5, 1, 0, 1)...)       // memory 0: min 1
	exports := []byte{byte(len(names) + 1)}
	for _, n := range names {
		exports = append(append(append(exports, byte(len(n))), n...), 0, 0)
	}
	exports = append(append(append(exports, 6), "memory"...), 2, 0)
	out = append(out, section(7, exports...)...)
	return append(out, section(10, 1, 2, 0, 0x0b)...)
}

// TestSnapshotGoRefusesModules: a module without the SDK's restore
// export, without _initialize, or without the name section math/rand's
// draws are counted by, is not snapshotted, each saying why.
func TestSnapshotGoRefusesModules(t *testing.T) {
	t.Parallel()
	tc := toolchain(t)
	for _, tt := range []struct {
		name   string
		module []byte
		want   string
	}{
		{"no restore export", exportModule("_initialize"), "no maiden_restore export"},
		{"no _initialize", exportModule("maiden_restore"), "no _initialize export"},
		{"no name section", exportModule("_initialize", "maiden_restore"), "no name section"},
	} {
		snap, err := tc.snapshotGo(ctxFor(t), tt.module, t.TempDir())
		var no *errNoSnapshot
		if !errors.As(err, &no) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: snapshotGo = %d bytes, %v; want an errNoSnapshot saying %q", tt.name, len(snap), err, tt.want)
		}
	}
}

// fakeWizer installs script as the wizer of a toolchain in a new
// directory and returns the toolchain and the wizer's path.
func fakeWizer(t *testing.T, script string) (*Toolchain, string) {
	t.Helper()
	arch := map[string]string{"amd64": "x64", "arm64": "arm64", "s390x": "s390x"}[runtime.GOARCH]
	goos := map[string]string{"linux": "linux", "darwin": "darwin"}[runtime.GOOS]
	if arch == "" || goos == "" {
		t.Skipf("no wizer package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	tc := &Toolchain{dir: t.TempDir()}
	p := filepath.Join(tc.dir, "node_modules", "@bytecodealliance", "wizer-"+goos+"-"+arch, "wizer")
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	writeExecutable(t, p, "#!/bin/sh\n"+script)
	got, err := tc.wizerPath()
	if err != nil || got != p {
		t.Fatalf("wizerPath = %q, %v; want %s", got, err, p)
	}
	return tc, p
}

// TestWizerRunArgumentsAndEnvironment: the snapshot run is wizer with
// WASI, without the builder's environment, from _initialize, on the
// capped module; its environment is maiden's without secrets and with
// Rust's backtraces off (a backtrace's numbered lines would be read as
// the cause); its failure is reported with the tool's output and wizer's
// cause. Not parallel: it sets the process's environment.
func TestWizerRunArgumentsAndEnvironment(t *testing.T) {
	t.Setenv("MAIDEN_SECRET_WIZERTEST", "s3cret-wizer-value")
	t.Setenv("RUST_BACKTRACE", "full")
	rec := t.TempDir()
	tc, wizer := fakeWizer(t, "printf '%s\\n' \"$@\" > '"+rec+"/args'\nenv > '"+rec+"/env'\n"+
		"echo 'panic: the tool panicked at init'\necho 'Error: wasm trap: unreachable' >&2\nexit 3\n")
	work := t.TempDir()
	_, err := tc.wizerRun(ctxFor(t), wizer, exportModule("_initialize"), work)
	var no *errNoSnapshot
	if !errors.As(err, &no) || !strings.Contains(err.Error(), "the snapshot run of the tool's init failed (exit status 3") ||
		!strings.Contains(err.Error(), "panic: the tool panicked at init\nwasm trap: unreachable") {
		t.Errorf("wizerRun of a failing init = %v; want an errNoSnapshot with the tool's output and wizer's cause", err)
	}
	args, err := os.ReadFile(filepath.Join(rec, "args"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--allow-wasi", "--inherit-env", "false", "--init-func", "_initialize", "-o", filepath.Join(work, "snapshot.wasm"), filepath.Join(work, "probed.wasm")}
	if got := strings.Split(strings.TrimSuffix(string(args), "\n"), "\n"); !cmp.Equal(got, want) {
		t.Errorf("wizer's arguments %q, want %q", got, want)
	}
	env, err := os.ReadFile(filepath.Join(rec, "env"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(env), "\n")
	for _, v := range []string{"RUST_BACKTRACE=0", "RUST_LIB_BACKTRACE=0", "WASMTIME_BACKTRACE_DETAILS=0"} {
		if !slices.Contains(lines, v) {
			t.Errorf("wizer's environment lacks %s:\n%s", v, env)
		}
	}
	if strings.Contains(string(env), "s3cret-wizer-value") || strings.Contains(string(env), "RUST_BACKTRACE=full") {
		t.Errorf("wizer's environment holds a secret's value or the builder's RUST_BACKTRACE:\n%s", env)
	}
}

// TestWizerRunCancelled: a build cancelled during the snapshot run is
// cancelled (context.Canceled), not a snapshot that "did not finish" and
// a fallback to an ordinary build.
func TestWizerRunCancelled(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tc, wizer := fakeWizer(t, "echo started > '"+fifo+"'\nexec sleep 600\n")
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tc.wizerRun(ctx, wizer, exportModule("_initialize"), t.TempDir())
		done <- err
	}()
	f, err := os.Open(fifo) // until the wizer has started
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(f).ReadString('\n')
	f.Close()
	cancel()
	err = <-done
	var no *errNoSnapshot
	if !errors.Is(err, context.Canceled) || errors.As(err, &no) {
		t.Errorf("wizerRun cancelled = %v; want context.Canceled", err)
	}
}

// fakeGoProject is a Go project for a fake go command that answers env
// GOVERSION and GOROOT (the real one) and records each build's arguments
// (one line) and environment; a build prints out and fails. Not
// parallel: the caller sets MAIDEN_GO_PREINIT.
func fakeGoProject(t *testing.T, buildScript string) (tc *Toolchain, progress *strings.Builder, p Project, rec string) {
	t.Helper()
	rec = t.TempDir()
	gobin := fakeExecutable(t, "go", `case "$1" in
env) case "$2" in GOVERSION) echo go1.26.0;; GOROOT) echo '`+goroot(t)+`';; esac; exit 0;;
build) echo "$*" >> '`+rec+`/builds'; env > '`+rec+`/env'
`+buildScript+`;;
esac
exit 2
`)
	progress = &strings.Builder{}
	tc = &Toolchain{goPath: gobin, progress: progress}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"go.mod": "module x\n", "main.go": "package main\n"})
	p, err := DetectProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tc, progress, p, rec
}

func recordedBuilds(t *testing.T, rec string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rec, "builds"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestGoBuildArgumentsAndOverlayFallback: the go build of a tool is
// -buildmode=c-shared -trimpath for wasip1/wasm without cgo, with
// GOTOOLCHAIN=local and no secret's value; when Go refuses maiden's
// overlay files the build says so and builds again without them (no
// overlay, no restore tag), and under MAIDEN_GO_PREINIT=require it fails
// instead, naming the Go release. Not parallel: it sets the environment.
func TestGoBuildArgumentsAndOverlayFallback(t *testing.T) {
	t.Setenv("MAIDEN_SECRET_GOBUILDTEST", "s3cret-gobuild-value")
	t.Setenv("GOTOOLCHAIN", "")
	os.Unsetenv("GOTOOLCHAIN")
	const refuse = `case "$*" in *-overlay*) echo '# runtime'; echo 'runtime/maiden_preinit.go:9:2: undefined: mrandinit'; exit 1;; esac
echo './main.go:1:13: expected declaration, found boom'; exit 1`

	t.Setenv(PreinitEnv, "")
	tc, progress, p, rec := fakeGoProject(t, refuse)
	err := tc.Build(ctxFor(t), p, filepath.Join(t.TempDir(), "x.wasm"))
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "main.go:1:13: expected declaration, found boom") {
		t.Errorf("the ordinary build's error = %v; want the BuildError of the build without overlays", err)
	}
	if !strings.Contains(progress.String(), "warning: not pre-initialising the tool: go1.26.0's runtime or syscall package does not take maiden's overlay files") {
		t.Errorf("no warning that the overlay was refused:\n%s", progress)
	}
	builds := recordedBuilds(t, rec)
	var plain []string
	if len(builds) == 2 {
		plain = strings.Fields(builds[1])
	}
	if len(plain) != 6 || !strings.HasPrefix(builds[0], "build -buildmode=c-shared -trimpath -overlay ") || !strings.Contains(builds[0], preinitTag) ||
		!cmp.Equal(plain, []string{"build", "-buildmode=c-shared", "-trimpath", "-o", plain[4], "."}) || filepath.Base(plain[4]) != "core.wasm" {
		t.Errorf("go builds %q; want one with the overlays, then one with -buildmode=c-shared -trimpath only", builds)
	}
	env, err := os.ReadFile(filepath.Join(rec, "env"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(env), "\n")
	for _, v := range []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOTOOLCHAIN=local"} {
		if !slices.Contains(lines, v) {
			t.Errorf("go build's environment lacks %s", v)
		}
	}
	if strings.Contains(string(env), "s3cret-gobuild-value") {
		t.Errorf("go build's environment holds a secret's value")
	}

	t.Setenv(PreinitEnv, "require")
	tc, _, p, rec = fakeGoProject(t, refuse)
	err = tc.Build(ctxFor(t), p, filepath.Join(t.TempDir(), "x.wasm"))
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "pre-initialisation is not possible with go1.26.0") || !strings.Contains(err.Error(), "maiden_preinit.go:9:2") {
		t.Errorf("require, overlay refused: err = %v; want a BuildError naming the Go release and the overlay's error", err)
	}
	if builds := recordedBuilds(t, rec); len(builds) != 1 {
		t.Errorf("require, overlay refused: go builds %q; want the one with the overlays only", builds)
	}
}

// TestGoBuildToolErrorNotAnOverlayError: a tool that does not compile
// fails once, with its own error; it is not taken for Go refusing the
// overlays (no warning, no second build). Not parallel: it sets the
// environment.
func TestGoBuildToolErrorNotAnOverlayError(t *testing.T) {
	t.Setenv(PreinitEnv, "")
	tc, progress, p, rec := fakeGoProject(t, "echo './main.go:3:1: syntax error: unexpected }'; exit 1")
	err := tc.Build(ctxFor(t), p, filepath.Join(t.TempDir(), "x.wasm"))
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "main.go:3:1: syntax error: unexpected }") {
		t.Errorf("err = %v; want the tool's compile error", err)
	}
	if strings.Contains(progress.String(), "warning") {
		t.Errorf("a tool's compile error reported as a pre-initialisation problem:\n%s", progress)
	}
	if builds := recordedBuilds(t, rec); len(builds) != 1 {
		t.Errorf("go builds %q; want one", builds)
	}
}

// TestWizerMessageWithoutWizersError: when wizer's output has no
// "Error:" line (wizer killed, or crashed before reporting), its last
// lines are the message, not the last one alone.
func TestWizerMessageWithoutWizersError(t *testing.T) {
	t.Parallel()
	out := "fatal error: runtime: out of memory\n\ngoroutine 1 [running]:\nmain.init.0()\n"
	if got, want := wizerMessage(out), strings.TrimSpace(out); got != want {
		t.Errorf("wizerMessage = %q, want %q", got, want)
	}
}

// TestSnapshotGoUncountedRunRefused: a snapshot whose reads cannot be
// counted (here a wizer that writes back the module without the
// counters the snapshot run added) is not shipped: what it froze is
// unknown.
func TestSnapshotGoUncountedRunRefused(t *testing.T) {
	t.Parallel()
	core, err := echoCore()
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain.wasm")
	must(t, os.WriteFile(plain, core, 0o644))
	// wizer's arguments: ... -o OUT IN; OUT is the seventh.
	tc, _ := fakeWizer(t, "cp '"+plain+"' \"$7\"\n")
	snap, err := tc.snapshotGo(ctxFor(t), core, t.TempDir())
	var no *errNoSnapshot
	if !errors.As(err, &no) || !strings.Contains(err.Error(), "counter global") {
		t.Errorf("snapshotGo with a snapshot without counters = %d bytes, %v; want an errNoSnapshot saying the counters are missing", len(snap), err)
	}
}

// TestWizerPathMissing: a toolchain without wizer has no snapshot, saying
// where wizer was looked for (not a failed run of a program that is not
// there).
func TestWizerPathMissing(t *testing.T) {
	t.Parallel()
	tc := &Toolchain{dir: t.TempDir()}
	p, err := tc.wizerPath()
	var no *errNoSnapshot
	if !errors.As(err, &no) || !strings.Contains(err.Error(), "the toolchain has no wizer for") || !strings.Contains(err.Error(), tc.dir) {
		t.Errorf("wizerPath of a toolchain without wizer = %q, %v; want an errNoSnapshot naming where it looked", p, err)
	}
}
