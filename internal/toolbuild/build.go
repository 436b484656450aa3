package toolbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maiden-run/maiden/wit"
)

// BuildError is the error the toolchain reports for an input it rejects.
// errors.Is(err, ErrBuild) holds for it. Its text is for the tool's author:
// the file and line in compiler form when known, and nothing of maiden's
// own packages.
type BuildError struct {
	Op   string // what was being built, e.g. "component from WAT"
	File string // the author's source file, as they would name it; "" if unknown
	Line int    // 1-based; 0 if unknown
	Col  int    // 1-based; 0 if unknown
	Msg  string // the toolchain's explanation
}

// positioned matches a message that already starts with a compiler-style
// position (Go's "dir/main.go:3:15: ...").
var positioned = regexp.MustCompile(`^[^\s:]+:\d+:\d+: `)

func (e *BuildError) Error() string {
	switch {
	case e.File != "" && e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	case positioned.MatchString(e.Msg):
		return e.Msg
	}
	return e.Op + ": " + e.Msg
}

// driverPosition matches the driver's positioned messages (see
// toolchain/build.mjs): "JS syntax error at line L, column C: M" and "WAT
// line L, column C: M".
var driverPosition = regexp.MustCompile(`^(JS syntax error at|WAT) line (\d+), column (\d+): (.*)$`)

// locate attributes a driver's BuildError to the author's file: the
// position moves out of the message into File, Line and Col.
func locate(err error, file string) error {
	var be *BuildError
	if !errors.As(err, &be) || be.File != "" {
		return err
	}
	located := *be
	located.File = file
	if m := driverPosition.FindStringSubmatch(be.Msg); m != nil {
		located.Line, _ = strconv.Atoi(m[2])
		located.Col, _ = strconv.Atoi(m[3])
		located.Msg = m[4]
		if strings.HasPrefix(m[1], "JS") {
			located.Msg = "syntax error: " + m[4]
		}
	}
	return &located
}

// Is makes errors.Is(err, ErrBuild) true.
func (e *BuildError) Is(target error) bool { return target == ErrBuild }

// ComponentFromWAT builds a component from a core module written in WAT that
// implements world `tool` of maiden-tool.wit with the canonical ABI (see
// testdata/tools/echo.wat). A module that imports wasi_snapshot_preview1
// gets the preview1 reactor adapter; anything else gets none. The contract
// version follows the source (see contractForText).
func (t *Toolchain) ComponentFromWAT(ctx context.Context, wat []byte) ([]byte, error) {
	if watIsMiddleware(wat) {
		return t.ComponentFromWATWithWIT(ctx, wat, wit.Middleware.Text, wit.MiddlewareWorld)
	}
	return t.ComponentFromWATWithWIT(ctx, wat, contractForText(wat).Text, wit.World)
}

// watIsMiddleware tells whether a WAT source implements world middleware
// (maiden:middleware@0.1.0): it exports handle and not execute.
func watIsMiddleware(wat []byte) bool {
	return bytes.Contains(wat, []byte(`(export "`+wit.HandleExport+`")`)) && !bytes.Contains(wat, []byte(`(export "`+wit.ExecuteExport+`")`))
}

// contractForText picks the contract a WAT or JS source was written against:
// 0.3.0 when it names maiden:tool/host@0.3.0 (which has reveal); 0.2.0 when
// it names maiden:tool/host@0.2.0 or the output-schema export (0.2.0's
// additions), 0.1.0 otherwise. A source that uses neither builds the same
// either way for WAT; for JS see ComponentFromJS. This keeps every tool
// written before 0.2.0 building unchanged, without a flag.
func contractForText(src []byte) wit.Contract {
	if mentions(src, wit.V030.HostInterface) {
		return wit.V030
	}
	if mentions(src, wit.V020.HostInterface) || mentions(src, `"`+wit.OutputSchemaExport+`"`) {
		return wit.V020
	}
	return wit.V010
}

// mentions reports whether s appears in the code of src, not in a comment:
// a line whose text starts as a comment (//, /*, *, or WAT's ;;) is
// skipped, so that a template's comment naming another contract (the
// JS template mentions maiden:tool/host@0.3.0 for reveal) does not pick it.
func mentions(src []byte, s string) bool {
	for line := range bytes.Lines(src) {
		t := bytes.TrimSpace(line)
		if bytes.HasPrefix(t, []byte("//")) || bytes.HasPrefix(t, []byte("/*")) || bytes.HasPrefix(t, []byte("*")) || bytes.HasPrefix(t, []byte(";;")) {
			continue
		}
		if bytes.Contains(t, []byte(s)) {
			return true
		}
	}
	return false
}

// contractForCore picks the contract of a compiled core module: 0.3.0 if
// it imports from maiden:tool/host@0.3.0 (the Go SDK built with
// RevealTag), else by its exports: the Go SDK of 0.2.0 and later exports
// output-schema.
func contractForCore(core []byte) wit.Contract {
	mods, _ := wasmImportModules(core) // a malformed module fails in the embedding step, with its message
	if slices.Contains(mods, wit.V030.HostInterface) {
		return wit.V030
	}
	exports, _ := wasmExports(core)
	for _, e := range exports {
		if e == wit.OutputSchemaExport {
			return wit.V020
		}
	}
	return wit.V010
}

// ComponentFromWATWithWIT is ComponentFromWAT against a caller-supplied WIT
// document and world instead of maiden's. It exists to build deliberately
// wrong components (extra imports, missing or mistyped exports) that the
// embedding step would refuse against the real world. witText must be a
// complete WIT document; use WithToolPackage to let it import maiden's host
// interface. world names a world in witText's top-level package.
func (t *Toolchain) ComponentFromWATWithWIT(ctx context.Context, wat []byte, witText, world string) ([]byte, error) {
	return t.run(ctx, "component from WAT", request{Kind: "wat", World: world}, wat, "tool.wat", witText)
}

// ComponentFromCore builds a component from a core wasm module that
// implements world `tool` (e.g. one compiled by Go for wasip1 with
// //go:wasmexport). wasip1 adds the wasi_snapshot_preview1 reactor adapter,
// which maps the module's preview1 imports onto WASI 0.2 interfaces.
//
// A module that exports output-schema is built against maiden:tool@0.2.0,
// any other against 0.1.0.
//
// A module that exports handle and not execute (a Go middleware) is built
// against world middleware of maiden:middleware@0.1.0.
func (t *Toolchain) ComponentFromCore(ctx context.Context, core []byte, wasip1 bool) ([]byte, error) {
	if coreIsMiddleware(core) {
		return t.run(ctx, "component from core wasm", request{Kind: "core", World: wit.MiddlewareWorld, WASIP1: wasip1}, core, "tool.wasm", wit.Middleware.Text)
	}
	return t.run(ctx, "component from core wasm", request{Kind: "core", World: wit.World, WASIP1: wasip1}, core, "tool.wasm", contractForCore(core).Text)
}

// coreIsMiddleware tells whether a core module exports handle and not
// execute.
func coreIsMiddleware(core []byte) bool {
	exports, _ := wasmExports(core)
	var handle, execute bool
	for _, e := range exports {
		handle = handle || e == wit.HandleExport
		execute = execute || e == wit.ExecuteExport
	}
	return handle && !execute
}

// ComponentFromJS builds a component from one JavaScript ES module with
// componentize-js. The module exports describe(), schema() and
// execute(input), and optionally outputSchema(); host functions come from
// `import { log, httpFetch } from "maiden:tool/host@0.2.0"` (the version
// suffix is required). It is built against maiden:tool@0.2.0 (a missing
// outputSchema export means "none"), unless it imports
// maiden:tool/host@0.3.0 (for reveal: `import { reveal } from
// "maiden:tool/host@0.3.0"`), which builds it against 0.3.0, or
// maiden:tool/host@0.1.0, which keeps it on 0.1.0 (bodies as Uint8Array).
// The module must be self-contained (bundle it first):
// any other import fails the build. The engine's fetch() support is disabled, so the
// component does not import wasi:http. A value thrown by execute becomes
// err(message); a non-string result is JSON-encoded. Expect ~12 MB and
// 5-15 s per build.
//
// A module that exports handle(event) and not execute is a middleware,
// built against world middleware of maiden:middleware@0.1.0 (the driver
// tells from the module's exports): it exports describe() and
// handle(event), returns the verdict (a string, or an object that is
// JSON-encoded), and may import `log` from "maiden:middleware/host@0.1.0".
func (t *Toolchain) ComponentFromJS(ctx context.Context, jsSource []byte) ([]byte, error) {
	c := wit.V020
	switch {
	case mentions(jsSource, wit.V030.HostInterface):
		c = wit.V030 // reveal
	case mentions(jsSource, wit.V010.HostInterface):
		c = wit.V010
	}
	return t.run(ctx, "component from JS", request{Kind: "js", World: wit.World, OutputSchema: c.OutputSchema,
		MiddlewareWIT: wit.Middleware.Text, MiddlewareWorld: wit.MiddlewareWorld}, jsSource, "tool.js", c.Text)
}

// WIT returns the WIT world a component imports and exports, as printed by
// wasm-tools (`package root:component; world root { ... }`). It is WITs of
// one component.
func (t *Toolchain) WIT(ctx context.Context, component []byte) (string, error) {
	wits, err := t.WITs(ctx, [][]byte{component})
	if err != nil {
		return "", err
	}
	return wits[0], nil
}

// WITs returns the WIT world of each component, in order, as WIT does,
// printed by one driver process for all of them: a node start costs more
// than printing a world. A component whose world cannot be read (one that
// is not a component) fails the whole call with a BuildError whose message
// names it by its index in components, from 0, when there are several. No
// components means no process and no worlds.
func (t *Toolchain) WITs(ctx context.Context, components [][]byte) ([]string, error) {
	const op = "component WIT"
	if len(components) == 0 {
		return nil, nil
	}
	work, err := os.MkdirTemp("", "maiden-build-*")
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %s: %w", op, err)
	}
	defer os.RemoveAll(work)
	req := request{Kind: "wits"}
	for i, c := range components {
		p := filepath.Join(work, fmt.Sprintf("component-%d.wasm", i))
		if err := os.WriteFile(p, c, 0o644); err != nil {
			return nil, fmt.Errorf("toolbuild: %s: %w", op, err)
		}
		req.Inputs = append(req.Inputs, p)
	}
	out, err := t.drive(ctx, op, work, req)
	if err != nil {
		return nil, err
	}
	var wits []string
	if err := json.Unmarshal(out, &wits); err != nil || len(wits) != len(components) {
		return nil, fmt.Errorf("toolbuild: %s: the driver printed %d worlds for %d components (%v): %.200q", op, len(wits), len(components), err, out)
	}
	return wits, nil
}

// WithToolPackage returns witText with every version of maiden's tool
// package (and the middleware package) appended as a nested package, so
// that a custom world in witText can `import maiden:tool/host@0.1.0;` (or
// @0.2.0, or maiden:middleware/host@0.1.0) while the files in wit/ stay the
// only copies of the contract.
func WithToolPackage(witText string) string {
	out := strings.TrimRight(witText, "\n") + "\n"
	for _, c := range append(append([]wit.Contract(nil), wit.Contracts...), wit.Middleware) {
		decl := "package " + c.Package + ";"
		i := strings.Index(c.Text, decl)
		if i < 0 {
			panic("toolbuild: the WIT of " + c.Package + " does not declare " + decl)
		}
		body := c.Text[:i] + "package " + c.Package + " {" + c.Text[i+len(decl):]
		out += "\n" + strings.TrimRight(body, "\n") + "\n}\n"
	}
	return out
}

// request is the driver's stdin protocol (see toolchain/build.mjs).
type request struct {
	Kind  string `json:"kind"`
	Input string `json:"input,omitempty"`
	// Inputs: the component paths of a "wits" request, instead of Input.
	Inputs  []string `json:"inputs,omitempty"`
	Output  string   `json:"output"`
	WITPath string   `json:"witPath,omitempty"`
	World   string   `json:"world,omitempty"`
	WASIP1  bool     `json:"wasip1,omitempty"`
	// OutputSchema: the world exports output-schema (JS entry adds it).
	OutputSchema bool `json:"outputSchema,omitempty"`
	// MiddlewareWIT and MiddlewareWorld are used instead of the tool's WIT
	// and world when a JS module turns out to be a middleware (it exports
	// handle and not execute).
	MiddlewareWIT   string `json:"middlewareWit,omitempty"`
	MiddlewareWorld string `json:"middlewareWorld,omitempty"`
	WorkDir         string `json:"workDir"`
}

// errorPrefix marks the driver's one-line error on stderr.
const errorPrefix = "maiden-toolbuild-error: "

// run executes one driver request in a private temp dir. Inputs travel as
// files rather than on stdin because components are megabytes and the JS
// API wants paths anyway.
func (t *Toolchain) run(ctx context.Context, op string, req request, input []byte, inputName, witText string) ([]byte, error) {
	work, err := os.MkdirTemp("", "maiden-build-*")
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %s: %w", op, err)
	}
	defer os.RemoveAll(work)

	req.Input = filepath.Join(work, inputName)
	if err := os.WriteFile(req.Input, input, 0o644); err != nil {
		return nil, fmt.Errorf("toolbuild: %s: %w", op, err)
	}
	if witText != "" {
		req.WITPath = filepath.Join(work, "tool.wit")
		if err := os.WriteFile(req.WITPath, []byte(witText), 0o644); err != nil {
			return nil, fmt.Errorf("toolbuild: %s: %w", op, err)
		}
	}
	return t.drive(ctx, op, work, req)
}

// driverTimeout bounds one run of the driver. componentize-js runs a
// JavaScript tool's top-level code (under wizer) while it builds it: a
// module whose top level never returns (a hostile or broken project) must
// not hang maiden build, as snapshotTimeout bounds a Go tool's init. A JS
// build takes 5-15 s, anything else about a second.
var driverTimeout = 10 * time.Minute

// drive runs the driver on req in work, a private temp dir holding its
// input files, and returns what it wrote to its output.
func (t *Toolchain) drive(ctx context.Context, op, work string, req request) ([]byte, error) {
	runCtx, cancel := context.WithTimeout(ctx, driverTimeout)
	defer cancel()
	req.WorkDir = work
	req.Output = filepath.Join(work, "out")
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %s: %w", op, err)
	}

	// --single-threaded-gc: the splicer componentize-js runs (WebAssembly)
	// grows its memory 64 KiB at a time, and V8 reports each growth as
	// external memory pressure, which drives its incremental marking
	// forward; with marking on helper threads every growth waited for
	// them. A JS build's splice took ~8 CPU-seconds with the default and
	// ~2.3 with the collector on the main thread, the whole driver ~10
	// against ~5 (bench/README.md, "A JS tool's build", BenchmarkBuildJS).
	// It must be given here: set at run time (v8.setFlagsFromString, as
	// build.mjs sets the rest, so that a node without one warns instead of
	// refusing to start) it aborted node in a memory growth. It exists in
	// every node maiden supports (>= 20).
	args := []string{"--single-threaded-gc", t.driver}
	if t.concurrentGC {
		args = args[1:]
	}
	cmd := exec.CommandContext(runCtx, t.node, args...)
	cmd.Dir = work
	// TMPDIR: componentize-js and wizer put their scratch files under
	// os.tmpdir() and do not always clean up on failure; keeping them in
	// work means RemoveAll above does.
	cmd.Env = buildEnv("TMPDIR="+work, "NODE_NO_WARNINGS=1")
	cmd.Stdin = bytes.NewReader(reqJSON)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	setProcessGroup(cmd)
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("toolbuild: %s: %w", op, ctx.Err())
	}
	if runCtx.Err() != nil {
		return nil, &BuildError{Op: op, Msg: fmt.Sprintf("the build did not finish within %v and was stopped (a JavaScript tool's top-level code runs while it is built: does it return?)", driverTimeout)}
	}
	if runErr != nil {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if msg, ok := strings.CutPrefix(line, errorPrefix); ok {
				return nil, &BuildError{Op: op, Msg: msg}
			}
		}
		// The driver died without its error line (node crash, OOM kill).
		out := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		return nil, &BuildError{Op: op, Msg: fmt.Sprintf("build driver failed (%v): %s", runErr, lastLines(out, 10))}
	}
	out, err := os.ReadFile(req.Output)
	if err != nil {
		return nil, fmt.Errorf("toolbuild: %s: driver wrote no output: %w", op, err)
	}
	return out, nil
}
