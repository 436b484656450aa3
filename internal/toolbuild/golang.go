package toolbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/wasmsnap"
	"github.com/maiden-run/maiden/wit"
)

// MinGoMinor is the oldest Go 1.x minor version that builds tools: Go 1.24
// introduced //go:wasmexport, which the SDK's exports need.
const MinGoMinor = 24

// buildGo compiles the Go package in p.Dir with the standard toolchain as a
// WASI reactor (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) and wraps the
// core module into a component with the preview1 reactor adapter. The
// package must use the maiden SDK (sdk/go), which provides the exports and
// the canonical ABI. Unless MAIDEN_GO_PREINIT=off, the module is
// pre-initialised first: its init runs once under wizer and the component
// starts from the snapshot (preinit.go).
func (t *Toolchain) buildGo(ctx context.Context, p Project) ([]byte, error) {
	gobin, err := findExecutable(t.goPath, "go", ErrNoGo)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %w", err)
	}
	version, err := checkGoVersion(ctx, gobin, p.Dir)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %w", err)
	}
	work, err := os.MkdirTemp("", "maiden-gobuild-*")
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %w", err)
	}
	defer os.RemoveAll(work)
	core := filepath.Join(work, "core.wasm")

	// A package that calls maiden.Middleware is built as a middleware: the
	// tag gives it the SDK's middleware exports instead of a tool's.
	var tags, plain []string
	middleware, err := goCallsMiddleware(p.Dir)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %w", err)
	}
	if middleware {
		tags = []string{MiddlewareTag}
	} else if reveals, err := goCallsSDK(p.Dir, "Reveal"); err != nil {
		return nil, fmt.Errorf("toolbuild: %w", err)
	} else if reveals {
		// A tool that reveals needs the host's reveal: maiden:tool@0.3.0.
		tags = []string{RevealTag}
	}
	if tags != nil {
		plain = []string{"-tags", strings.Join(append(goflagsTags(os.Getenv("GOFLAGS")), tags...), ",")}
	}
	mode := preinitSetting()
	extra := plain
	// snapshot: the build carries the pre-initialisation overlays, and the
	// module is snapshotted after it.
	snapshot := false
	if mode != preinitOff {
		pre, err := preinitBuildArgs(ctx, gobin, p.Dir, work, tags)
		var no *errNoSnapshot
		switch {
		case err == nil:
			extra, snapshot = pre, true
		case errors.As(err, &no) && mode != preinitRequire:
			say(t.progress, "warning: not pre-initialising the tool, so each call runs Go's start-up (~1-2 ms): %s", no.reason)
		case errors.As(err, &no):
			return nil, &BuildError{Op: "pre-initialising the Go tool", Msg: no.reason + " (" + PreinitEnv + "=require)"}
		default:
			return nil, fmt.Errorf("toolbuild: preparing the pre-initialised build: %w", err)
		}
	}
	what := "tool"
	if middleware {
		what = "middleware"
	}
	say(t.progress, "go build (%s, GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) of a %s in %s", version, what, p.Dir)
	start := time.Now()
	out, err := goBuild(ctx, gobin, p.Dir, core, extra)
	if err != nil && snapshot && ctx.Err() == nil && (strings.Contains(out, "maiden_preinit.go") || strings.Contains(out, preinitSyscallFile)) {
		// This Go release's runtime or syscall package differs from what
		// the overlay files expect: build as before.
		if mode == preinitRequire {
			return nil, &BuildError{Op: "go build", Msg: "pre-initialisation is not possible with " + version + ": " + goBuildMessage(out, err, displayDir(p.Dir))}
		}
		say(t.progress, "warning: not pre-initialising the tool: %s's runtime or syscall package does not take maiden's overlay files; building an ordinary module", version)
		snapshot = false
		out, err = goBuild(ctx, gobin, p.Dir, core, plain)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("toolbuild: go build: %w", ctx.Err())
		}
		msg := goBuildMessage(out, err, displayDir(p.Dir))
		if strings.Contains(out, "GOTOOLCHAIN=local") {
			msg += " (maiden build does not let a project's go.mod download a Go toolchain: install that Go release, or set GOTOOLCHAIN, e.g. GOTOOLCHAIN=auto, to allow it)"
		}
		return nil, &BuildError{Op: "go build", Msg: msg}
	}
	b, err := os.ReadFile(core)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: go build wrote no module: %w", err)
	}
	if err := checkGoExports(b); err != nil {
		return nil, &BuildError{Op: "go build", Msg: err.Error()}
	}
	say(t.progress, "compiled %.1f MB core module in %v", float64(len(b))/1e6, time.Since(start).Round(10*time.Millisecond))
	if snapshot {
		start = time.Now()
		snap, err := t.snapshotGo(ctx, b, work)
		if err == nil {
			snap, err = wasmsnap.Coalesce(snap, dataGap)
		}
		var no *errNoSnapshot
		switch {
		case err == nil:
			before, _ := wasmsnap.Stats(b)
			after, _ := wasmsnap.Stats(snap)
			say(t.progress, "pre-initialised (ran init once, snapshot: %d data segments instead of %d) in %v",
				after.Segments, before.Segments, time.Since(start).Round(10*time.Millisecond))
			b = snap
		case errors.As(err, &no) && mode != preinitRequire:
			say(t.progress, "warning: not pre-initialising the tool, so each call runs Go's start-up (~1-2 ms): %s", no.reason)
		case errors.As(err, &no):
			return nil, &BuildError{Op: "pre-initialising the Go tool", Msg: no.reason + " (" + PreinitEnv + "=require)"}
		case ctx.Err() != nil:
			return nil, fmt.Errorf("toolbuild: pre-initialising: %w", ctx.Err())
		default:
			return nil, fmt.Errorf("toolbuild: pre-initialising: %w", err)
		}
	}
	if b, err = wasmsnap.RemoveExport(b, "maiden_restore"); err != nil {
		return nil, fmt.Errorf("toolbuild: %w", err)
	}
	say(t.progress, "wrapping it into a component")
	return t.ComponentFromCore(ctx, b, true)
}

// goBuild runs go build for wasip1 in dir, writing the module to core, and
// returns its combined output.
func goBuild(ctx context.Context, gobin, dir, core string, extra []string) (string, error) {
	// -trimpath: panics and traps name module paths, not the author's
	// home directory, and the output does not depend on where it was built.
	args := append([]string{"build", "-buildmode=c-shared", "-trimpath"}, extra...)
	cmd := exec.CommandContext(ctx, gobin, append(args, "-o", core, ".")...)
	cmd.Dir = dir
	cmd.Env = append(goEnviron(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	setProcessGroup(cmd)
	err := cmd.Run()
	return out.String(), err
}

var goVersionRE = regexp.MustCompile(`^go1\.(\d+)`)

// goEnviron is the environment of every go command maiden build runs in a
// project: maiden's own, with GOTOOLCHAIN=local unless that sets
// GOTOOLCHAIN. Go's default (auto) lets a go.mod's go or toolchain line
// name a newer release, which the go command then downloads and runs: a
// project cloned from the internet would choose the compiler and make the
// build fetch it. The operator's Go builds, or the one their environment's
// GOTOOLCHAIN names.
func goEnviron() []string {
	env := buildEnv()
	if _, set := os.LookupEnv("GOTOOLCHAIN"); !set {
		env = append(env, "GOTOOLCHAIN=local")
	}
	return env
}

// checkGoVersion runs `go env GOVERSION` in dir (as the build will run, with
// goEnviron) and refuses versions before 1.24.
func checkGoVersion(ctx context.Context, gobin, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "env", "GOVERSION")
	cmd.Dir = dir
	cmd.Env = goEnviron()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w (running %s env GOVERSION: %v: %s)", ErrNoGo, gobin, err, lastLines(strings.TrimSpace(stderr.String()), 5))
	}
	v := strings.TrimSpace(string(out))
	if m := goVersionRE.FindStringSubmatch(v); m != nil {
		if minor, _ := strconv.Atoi(m[1]); minor < MinGoMinor {
			return "", fmt.Errorf("%w (found %s at %s)", ErrGoTooOld, v, gobin)
		}
	}
	return v, nil
}

// goBuildMessage keeps what a developer needs from go build's output: the
// compiler's file:line messages, without the "# package" headers, with
// paths relative to dir (go build ran there) made relative to where the
// user is; several messages go one per indented line.
func goBuildMessage(out string, err error, dir string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "# ") || strings.TrimSpace(l) == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(l, "./"); ok && dir != "." {
			l = filepath.Join(dir, rest)
		}
		lines = append(lines, l)
	}
	switch {
	case len(lines) == 0:
		return err.Error()
	case len(lines) == 1:
		return lines[0]
	case len(lines) > 30:
		lines = append(lines[:30], fmt.Sprintf("... and %d more lines", len(lines)-30))
	}
	return "errors:\n  " + strings.Join(lines, "\n  ")
}

// displayDir is dir relative to the working directory when that is
// shorter, for messages a person reads.
func displayDir(dir string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, dir); err == nil && len(rel) < len(dir) {
			return rel
		}
	}
	return dir
}

// checkGoExports catches the two mistakes that otherwise surface as obscure
// errors: a package that does not use the SDK (no tool exports at all), and
// a hand-written ABI without cabi_realloc_adapter, which makes the preview1
// adapter crash Go's runtime while it starts (runtime: badsystemstack).
func checkGoExports(module []byte) error {
	exports, err := wasmExports(module)
	if err != nil {
		return fmt.Errorf("reading the module's exports: %w", err)
	}
	has := map[string]bool{}
	for _, e := range exports {
		has[e] = true
	}
	if !has["describe"] && !has["schema"] && !has["execute"] && !has[wit.HandleExport] {
		return errors.New("the module exports none of describe, schema, execute, handle: a Go tool imports " +
			`maiden "github.com/maiden-run/maiden/sdk/go" and calls maiden.Register from an init function (see maiden new go); ` +
			"a Go middleware calls maiden.Middleware (see maiden new middleware-go)")
	}
	if !has["cabi_realloc_adapter"] {
		return errors.New("the module does not export cabi_realloc_adapter, without which the WASI adapter crashes " +
			"Go's runtime at start-up; build Go tools with the maiden SDK (github.com/maiden-run/maiden/sdk/go)")
	}
	return nil
}

// MiddlewareTag is the build tag that makes the Go SDK export a
// middleware's describe and handle instead of a tool's exports. maiden
// build sets it for a package that calls maiden.Middleware.
const MiddlewareTag = "maiden_middleware"

// RevealTag is the build tag that makes the Go SDK import
// maiden:tool/host@0.3.0, which has reveal. maiden build sets it for a
// package that calls maiden.Reveal; other tools stay on 0.2.0.
const RevealTag = "maiden_tool_0_3"

// goCallsMiddleware tells whether the Go package in dir (its files for
// wasip1/wasm, tests excluded) calls the SDK's Middleware function, under
// whatever name the file imports the SDK.
func goCallsMiddleware(dir string) (bool, error) { return goCallsSDK(dir, "Middleware") }

// goCallsSDK tells whether the Go package in dir (its files for
// wasip1/wasm, tests excluded) calls the SDK's function fn, under whatever
// name the file imports the SDK.
func goCallsSDK(dir, fn string) (bool, error) {
	bctx := build.Default
	bctx.GOOS, bctx.GOARCH = "wasip1", "wasm"
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return false, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := bctx.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			// go build reports it with its position.
			continue
		}
		local := ""
		for _, imp := range file.Imports {
			if path, err := strconv.Unquote(imp.Path.Value); err == nil && path == SDKModule {
				local = "maiden"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" || local == "_" {
			continue
		}
		found := false
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || found {
				return !found
			}
			switch f := call.Fun.(type) {
			case *ast.SelectorExpr:
				x, ok := f.X.(*ast.Ident)
				found = ok && x.Name == local && f.Sel.Name == fn
			case *ast.Ident:
				found = local == "." && f.Name == fn
			}
			return !found
		})
		if found {
			return true, nil
		}
	}
	return false, nil
}

// wasmExports lists the export names of a core wasm module.
func wasmExports(b []byte) ([]string, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module")
	}
	r := wasmReader{b: b, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		size := r.u32()
		end := r.i + int(size)
		if r.err != nil || end > len(r.b) || end < r.i {
			return nil, errors.New("truncated section")
		}
		if id != 7 { // export section
			r.i = end
			continue
		}
		n := r.u32()
		var names []string
		for range n {
			l := r.u32()
			if r.err != nil || r.i+int(l) > end {
				return nil, errors.New("malformed export section")
			}
			names = append(names, string(r.b[r.i:r.i+int(l)]))
			r.i += int(l)
			r.byte() // kind
			r.u32()  // index
		}
		if r.err != nil {
			return nil, r.err
		}
		return names, nil
	}
	return nil, nil
}

// wasmImportModules lists the module names a core wasm module imports
// from, each once.
func wasmImportModules(b []byte) ([]string, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module")
	}
	r := wasmReader{b: b, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		size := r.u32()
		end := r.i + int(size)
		if r.err != nil || end > len(r.b) || end < r.i {
			return nil, errors.New("truncated section")
		}
		if id != 2 { // import section
			r.i = end
			continue
		}
		name := func() string {
			l := r.u32()
			if r.err != nil || r.i+int(l) > end || r.i+int(l) < r.i {
				r.err = errors.New("malformed import section")
				return ""
			}
			s := string(r.b[r.i : r.i+int(l)])
			r.i += int(l)
			return s
		}
		limits := func() {
			flags := r.byte()
			r.u32()
			if flags&1 != 0 {
				r.u32()
			}
		}
		n := r.u32()
		var mods []string
		for range n {
			mod := name()
			name()
			switch r.byte() {
			case 0: // function: type index
				r.u32()
			case 1: // table: reference type, limits
				r.byte()
				limits()
			case 2: // memory
				limits()
			case 3: // global: value type, mutability
				r.byte()
				r.byte()
			case 4: // tag: attribute, type index
				r.byte()
				r.u32()
			default:
				r.err = errors.New("malformed import section: unknown import kind")
			}
			if r.err != nil {
				return nil, r.err
			}
			if !slices.Contains(mods, mod) {
				mods = append(mods, mod)
			}
		}
		return mods, nil
	}
	return nil, nil
}

type wasmReader struct {
	b   []byte
	i   int
	err error
}

func (r *wasmReader) byte() byte {
	if r.i >= len(r.b) {
		r.err = errors.New("unexpected end of module")
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

// u32 reads an unsigned LEB128 number.
func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("malformed LEB128 number")
	return 0
}

// secretEnvPrefix is egress.SecretEnvPrefix (toolbuild does not import the
// gate; TestBuildEnvHoldsNoSecret checks they agree): the variables that
// hold the values of maiden's secrets.
const secretEnvPrefix = "MAIDEN_SECRET_"

// buildEnv is the environment of the programs a build runs (go, node and
// npm, wizer), extra appended: maiden's own without the values of its
// secrets. No build needs one, and none of those programs runs a project's
// code natively today (componentize-js gives the JS engine no environment,
// the Go snapshot runs with --inherit-env false); kept out of their
// environment, a secret cannot reach a component, a log or an error
// through one of them later.
func buildEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, secretEnvPrefix) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
