package toolbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/wasmsnap"
)

// Pre-initialisation of Go tools (see buildGo). A fresh instance of a
// standard-Go module runs Go's runtime start-up and every package's init
// (_initialize) before its first call; that is most of a Go tool's call.
// maiden build runs _initialize once, under wizer (from the pinned npm
// toolchain), and ships the snapshot: memory and globals as they were when
// init returned. Three things keep a snapshot honest:
//
//   - Go's runtime keeps its random state in memory (the seed behind map
//     hash seeds, math/rand and math/rand/v2's top-level functions,
//     select, ...). The build adds one file to package runtime (a go build
//     -overlay, preinitRuntimeFile) with a function that reseeds it from
//     WASI random_get, and the SDK (-tags maiden_preinit, preinit_wasip1.go)
//     exports it as maiden_restore; the snapshot's _initialize export is
//     pointed at it, and the component's start function runs it, so every
//     instance reseeds before its first call. crypto/rand asks WASI on
//     every read and needs nothing.
//   - Go's syscall package lists the WASI preopened directories in an init
//     function, which ran at build time with none. A second overlay file
//     (preinit_fs.go) runs that listing again in maiden_restore, so each
//     instance sees its own call's directories.
//   - A value a tool computed from the clock or randomness while it
//     initialised would be the same in every call. The snapshot run counts
//     the module's wall-clock and random_get calls and math/rand's draws
//     from the runtime's generator (wasmsnap.Instrument); more than the
//     runtime's own start-up makes means some package read them in init,
//     and the build falls back to an ordinary module with a warning that
//     says so (or fails, with MAIDEN_GO_PREINIT=require). So does an init
//     that calls the host (there is none at build time), fails, or runs
//     longer than snapshotTimeout.
//   - The snapshot's data segments are merged when close together
//     (wasmsnap.Coalesce): maiden's engine copies them one by one at every
//     instantiation.
//
// MAIDEN_GO_PREINIT=off builds without any of this, as before.

// PreinitEnv is the environment variable that controls pre-initialisation
// of Go tools: "off" (or "0", "false") builds an ordinary module; "require"
// fails the build instead of falling back when a snapshot is not possible;
// anything else (the default) snapshots when it can.
const PreinitEnv = "MAIDEN_GO_PREINIT"

// preinitTag is the build tag that compiles the SDK's restore export.
const preinitTag = "maiden_preinit"

// preinitRuntimeFile is added to package runtime when a tool is built for
// a snapshot. It re-runs the runtime's own seeding (randinit reads WASI
// random_get) and derives the current M's generator from it; on wasm there
// is one M and no other thread. The names it uses (globalRand, randinit,
// mrandinit) have been stable since Go 1.22; if a Go release changes them,
// compiling this file fails and the build falls back to an ordinary module.
const preinitRuntimeFile = `// Code added by maiden build (go build -overlay) to reseed a pre-initialised
// Go tool's runtime. DO NOT EDIT.

package runtime

import _ "unsafe" // go:linkname

//go:linkname maidenReseed
func maidenReseed() {
	lock(&globalRand.lock)
	globalRand.init = false
	unlock(&globalRand.lock)
	randinit()
	mrandinit(getg().m)
}
`

// preinitRecipe is hashed into Fingerprint: it changes whenever what a Go
// build produces changes for reasons outside the toolchain pins.
var preinitRecipe = fmt.Sprintf("go-preinit 3: wizer _initialize, instrument clock/random, restore export, coalesce gap %d, syscall preopen rescan %v\n%s",
	dataGap, syscallPreopenInitTokens, preinitRuntimeFile)

// snapshotTimeout bounds the snapshot run: an init that never returns (a
// hostile or broken tool) must not hang maiden build. The tool is then built
// the ordinary way, and its deadline stops it at every call as before.
var snapshotTimeout = 2 * time.Minute

// dataGap is the largest zero gap Coalesce fills between two data segments.
const dataGap = 4096

// The WASI reads Go's runtime makes while it starts (randinit's seed), with
// no package reading the clock or randomness in an init function. More
// than this in the snapshot run means a package did.
const (
	runtimeRandomReads    = 1
	runtimeWallClockReads = 0
	runtimeGoRandReads    = 0
)

type preinitMode int

const (
	preinitAuto preinitMode = iota
	preinitOff
	preinitRequire
)

func preinitSetting() preinitMode {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(PreinitEnv))) {
	case "off", "0", "false", "no":
		return preinitOff
	case "require":
		return preinitRequire
	}
	return preinitAuto
}

// preinitBuildArgs writes the runtime and syscall overlays into work and
// returns the go build arguments that add them and the SDK's restore export,
// with tags (and GOFLAGS' tags) set as well. An *errNoSnapshot says why this
// GOROOT cannot be pre-initialised (preinit_fs.go).
func preinitBuildArgs(ctx context.Context, gobin, dir, work string, tags []string) ([]string, error) {
	goroot, err := goEnv(ctx, gobin, dir, "GOROOT")
	if err != nil {
		return nil, err
	}
	fsFile, err := syscallPreopenOverlay(goroot)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(work, "maiden_preinit.go")
	if err := os.WriteFile(file, []byte(preinitRuntimeFile), 0o644); err != nil {
		return nil, err
	}
	fsPath := filepath.Join(work, preinitSyscallFile)
	if err := os.WriteFile(fsPath, []byte(fsFile), 0o644); err != nil {
		return nil, err
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {
			filepath.Join(goroot, "src", "runtime", "maiden_preinit.go"): file,
			filepath.Join(goroot, "src", "syscall", preinitSyscallFile):  fsPath,
		},
	})
	if err != nil {
		return nil, err
	}
	overlayPath := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return nil, err
	}
	return []string{"-overlay", overlayPath, "-tags", strings.Join(append(append(goflagsTags(os.Getenv("GOFLAGS")), tags...), preinitTag), ","),
		// Not inlined into their callers, so that the snapshot run can count
		// their draws (wasmsnap.Counts.GoRand).
		"-gcflags=math/rand=-l", "-gcflags=math/rand/v2=-l"}, nil
}

// goflagsTags returns the build tags set through GOFLAGS: a -tags flag on
// the command line replaces GOFLAGS' one, so the build passes both.
func goflagsTags(goflags string) []string {
	var tags []string
	fields := strings.Fields(goflags)
	for i, f := range fields {
		f = strings.TrimPrefix(f, "-")
		f = strings.TrimPrefix(f, "-")
		var v string
		switch {
		case strings.HasPrefix(f, "tags="):
			v = strings.TrimPrefix(f, "tags=")
		case f == "tags" && i+1 < len(fields):
			v = fields[i+1]
		default:
			continue
		}
		for _, t := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if t != "" && !slices.Contains(tags, t) {
				tags = append(tags, t)
			}
		}
	}
	return tags
}

func goEnv(ctx context.Context, gobin, dir, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "env", name)
	cmd.Dir = dir
	cmd.Env = goEnviron()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("running %s env %s: %w", gobin, name, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("%s env %s printed nothing", gobin, name)
	}
	return v, nil
}

// errNoSnapshot explains why a module could not be pre-initialised; the
// build then falls back to the ordinary module (or fails under "require").
type errNoSnapshot struct{ reason string }

func (e *errNoSnapshot) Error() string { return e.reason }

// wizerPath is the wizer executable of the installed toolchain for this
// machine.
func (t *Toolchain) wizerPath() (string, error) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64", "s390x": "s390x"}[runtime.GOARCH]
	goos := map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}[runtime.GOOS]
	name := "wizer"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	p := filepath.Join(t.dir, "node_modules", "@bytecodealliance", "wizer-"+goos+"-"+arch, name)
	if arch == "" || goos == "" || !fileExists(p) {
		return "", &errNoSnapshot{fmt.Sprintf("the toolchain has no wizer for %s/%s (looked for %s)", runtime.GOOS, runtime.GOARCH, p)}
	}
	return p, nil
}

// snapshotGo pre-initialises a Go core module built with preinitBuildArgs
// and returns the snapshot, its _initialize export now the SDK's restore
// function; its data segments are as wizer wrote them.
func (t *Toolchain) snapshotGo(ctx context.Context, core []byte, work string) ([]byte, error) {
	exports, err := wasmsnap.Exports(core)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(exports, "maiden_restore") {
		return nil, &errNoSnapshot{"the tool's maiden SDK predates pre-initialisation (no maiden_restore export); update github.com/maiden-run/maiden"}
	}
	if !slices.Contains(exports, "_initialize") {
		return nil, &errNoSnapshot{"the module has no _initialize export (it is not a -buildmode=c-shared reactor)"}
	}
	wizer, err := t.wizerPath()
	if err != nil {
		return nil, err
	}
	probed, probe, err := wasmsnap.Instrument(core)
	if err != nil {
		return nil, &errNoSnapshot{fmt.Sprintf("instrumenting the module for the snapshot run: %v", err)}
	}
	if !probe.GoRandCounted {
		// Without the count a math/rand value drawn in init would be
		// frozen into every call unnoticed.
		return nil, &errNoSnapshot{"the module has no name section (built with -ldflags=-s?), so math/rand draws during init cannot be counted"}
	}
	snap, err := t.wizerRun(ctx, wizer, probed, work)
	if err != nil {
		return nil, err
	}
	counts, err := probe.Counts(snap)
	if err != nil {
		return nil, &errNoSnapshot{err.Error()}
	}
	if msg := frozenReads(counts); msg != "" {
		return nil, &errNoSnapshot{msg}
	}
	return wasmsnap.SetExport(snap, "_initialize", "maiden_restore")
}

// frozenReads explains the WASI reads a snapshot run made beyond the
// runtime's own, or returns "".
func frozenReads(c wasmsnap.Counts) string {
	var what []string
	if n := int(c.WallClock) - runtimeWallClockReads; n > 0 {
		what = append(what, fmt.Sprintf("read the wall clock %d time(s) (time.Now)", n))
	}
	if n := int(c.Random) - runtimeRandomReads; n > 0 {
		what = append(what, fmt.Sprintf("read randomness %d time(s) (crypto/rand, or a seed)", n))
	}
	if n := int(c.GoRand) - runtimeGoRandReads; n > 0 {
		what = append(what, fmt.Sprintf("drew %d random number(s) from math/rand or math/rand/v2", n))
	}
	if len(what) == 0 {
		return ""
	}
	return "while the tool initialised, package-level variables or init functions " + strings.Join(what, " and ") +
		": a snapshot would freeze those values into every call. Read the clock and randomness in Execute " +
		"(or lazily, with sync.Once) instead"
}

// snapshotMemoryPages caps the linear memory of the snapshot run, in 64
// KiB pages (1 GiB): wizer runs the tool's init with whatever memory its
// module declares, up to wasm32's 4 GiB, so a tool whose init allocates
// without bound would take that much of the building machine's memory for
// up to snapshotTimeout. An init that needs more has no snapshot (the
// build says why) and runs its init at each call, under the tool's own
// memory_mb.
var snapshotMemoryPages uint32 = 1 << 14

// wizerRun runs wizer on core (instrumented) in work: its _initialize
// once, WASI without environment, arguments or directories, under
// snapshotTimeout and with the memory capped at snapshotMemoryPages (the
// module's own maximum put back in the snapshot). The tool's output is
// kept for the error message.
func (t *Toolchain) wizerRun(ctx context.Context, wizer string, core []byte, work string) ([]byte, error) {
	max, hasMax, err := wasmsnap.MemoryMax(core)
	if err != nil {
		return nil, &errNoSnapshot{fmt.Sprintf("reading the module's memory for the snapshot run: %v", err)}
	}
	capped := core
	if !hasMax || max > snapshotMemoryPages {
		if capped, err = wasmsnap.SetMemoryMax(core, snapshotMemoryPages, true); err != nil {
			return nil, &errNoSnapshot{fmt.Sprintf("capping the module's memory for the snapshot run: %v", err)}
		}
	}
	in, out := filepath.Join(work, "probed.wasm"), filepath.Join(work, "snapshot.wasm")
	if err := os.WriteFile(in, capped, 0o644); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, wizer, "--allow-wasi", "--inherit-env", "false", "--init-func", "_initialize", "-o", out, in)
	cmd.Dir = work
	cmd.Env = buildEnv("RUST_BACKTRACE=0", "RUST_LIB_BACKTRACE=0", "WASMTIME_BACKTRACE_DETAILS=0")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	setProcessGroup(cmd)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if runCtx.Err() != nil {
			return nil, &errNoSnapshot{fmt.Sprintf("the tool's init did not finish within %v in the snapshot run", snapshotTimeout)}
		}
		// Whether the cap was why is the trap's to say (a Go runtime
		// says out of memory); the cap is named either way.
		return nil, &errNoSnapshot{fmt.Sprintf("the snapshot run of the tool's init failed (%v; the snapshot run caps the tool's memory at %d MiB): %s",
			err, snapshotMemoryPages>>4, wizerMessage(output.String()))}
	}
	snap, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	return wasmsnap.SetMemoryMax(snap, max, hasMax)
}

// preinitFingerprint identifies the pre-initialisation recipe.
func preinitFingerprint() string {
	h := sha256.Sum256([]byte(preinitRecipe))
	return hex.EncodeToString(h[:8])
}

// wizerMessage keeps what explains a failed snapshot run: the tool's own
// output (a panic message), wizer's innermost cause and the Go functions it
// happened in, without wizer's backtrace.
func wizerMessage(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var own, frames []string
	cause := ""
	inWizer := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "Error:"):
			inWizer = true
			cause = strings.TrimSpace(strings.TrimPrefix(t, "Error:"))
		case !inWizer:
			if t != "" {
				own = append(own, t)
			}
		case wasmFrameRE.MatchString(t):
			name := wasmFrameRE.FindStringSubmatch(t)[1]
			if !strings.HasPrefix(name, "runtime.") && !strings.HasPrefix(name, "wasm_pc_f_loop") && !strings.HasPrefix(name, "_rt0_") {
				frames = append(frames, name)
			}
		case causeRE.MatchString(t):
			if c := strings.TrimPrefix(causeRE.FindStringSubmatch(t)[1], "Error: "); !strings.HasPrefix(c, "error while executing") {
				cause = c
			}
		}
	}
	if !inWizer {
		return lastLines(strings.TrimSpace(out), 10)
	}
	msg := cause
	if len(frames) > 0 {
		if len(frames) > 5 {
			frames = frames[:5]
		}
		msg += " (in " + strings.Join(frames, " <- ") + ")"
	}
	if strings.Contains(cause, "unknown imported function") {
		msg += "; the host is not there at build time: call maiden.Log, maiden.Fetch and other host functions from Execute, not while initialising"
	}
	if len(own) > 0 {
		if len(own) > 5 {
			own = own[len(own)-5:]
		}
		msg = strings.Join(own, "\n") + "\n" + msg
	}
	return msg
}

var (
	wasmFrameRE = regexp.MustCompile(`^\d+:\s+0x[0-9a-f]+ - [^!]*!(\S+)`)
	causeRE     = regexp.MustCompile(`^\d+: (.+)$`)
)
