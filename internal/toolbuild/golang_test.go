package toolbuild

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/egress"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDetectProject(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"gomod/go.mod":       "module gomod\n",
		"gomod/main.go":      "package main\n",
		"gomod/index.js":     "export function describe() {}\n", // go.mod wins
		"gofiles/main.go":    "package main\n",
		"js/index.js":        "",
		"wat/tool.wat":       "",
		"single/lib.js":      "",
		"single/x.wat":       "",
		"gofile/cmd/tool.go": "package main\n",
		"empty/README.md":    "",
	})
	for _, tt := range []struct {
		path         string
		lang         Lang
		name, source string // relative to root
		dir          string
	}{
		{"gomod", LangGo, "gomod", "gomod", "gomod"},
		{"gofiles", LangGo, "gofiles", "gofiles", "gofiles"},
		{"js", LangJS, "js", "js/index.js", "js"},
		{"wat", LangWAT, "wat", "wat/tool.wat", "wat"},
		{"single/lib.js", LangJS, "lib", "single/lib.js", "single"},
		{"single/x.wat", LangWAT, "x", "single/x.wat", "single"},
		{"gofile/cmd/tool.go", LangGo, "cmd", "gofile/cmd", "gofile/cmd"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			p, err := DetectProject(filepath.Join(root, tt.path))
			if err != nil {
				t.Fatal(err)
			}
			want := Project{Dir: filepath.Join(root, tt.dir), Name: tt.name, Lang: tt.lang, Source: filepath.Join(root, tt.source)}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"empty", "single/../empty/README.md", "nope"} {
		if _, err := DetectProject(filepath.Join(root, bad)); !errors.Is(err, ErrNoProject) {
			t.Errorf("DetectProject(%s) = %v, want ErrNoProject", bad, err)
		}
	}
}

// module builds a minimal wasm module exporting the named functions.
func module(exports ...string) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	b = append(b, 1, 4, 1, 0x60, 0, 0) // type section: func () -> ()
	b = append(b, 3, 2, 1, 0)          // function section: one func of type 0
	sec := []byte{byte(len(exports))}  // export section
	for _, e := range exports {
		sec = append(sec, byte(len(e)))
		sec = append(sec, e...)
		sec = append(sec, 0, 0) // func 0
	}
	b = append(b, 7, byte(len(sec)))
	b = append(b, sec...)
	b = append(b, 10, 4, 1, 2, 0, 0x0b) // code section: one empty body
	return b
}

func TestWasmExports(t *testing.T) {
	t.Parallel()
	got, err := wasmExports(module("describe", "schema", "execute"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"describe", "schema", "execute"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range [][]byte{nil, []byte("not wasm"), module("x")[:12], append(module("x")[:8:8], 7, 0x40, 1)} {
		if _, err := wasmExports(bad); err == nil {
			t.Errorf("wasmExports(%q) succeeded", bad)
		}
	}
}

func TestCheckGoExports(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		exports []string
		want    string // "" means accepted
	}{
		{[]string{"_initialize", "describe", "schema", "execute", "cabi_realloc", "cabi_realloc_adapter"}, ""},
		{[]string{"_initialize", "memory"}, "exports none of describe, schema, execute"},
		{[]string{"describe", "schema", "execute", "cabi_realloc"}, "cabi_realloc_adapter"},
	} {
		err := checkGoExports(module(tt.exports...))
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkGoExports(%v) = %v, want %q", tt.exports, err, tt.want)
		}
	}
}

func TestGoBuildMessage(t *testing.T) {
	t.Parallel()
	out := "# broken\n./main.go:3:15: undefined: x\n\n./main.go:4:1: syntax error\n"
	if got, want := goBuildMessage(out, errors.New("exit status 1"), "tools/broken"), "errors:\n  tools/broken/main.go:3:15: undefined: x\n  tools/broken/main.go:4:1: syntax error"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := goBuildMessage("./main.go:3:15: undefined: x\n", nil, "."), "./main.go:3:15: undefined: x"; got != want {
		t.Errorf("one line: got %q, want %q", got, want)
	}
	if got := goBuildMessage("", errors.New("exit status 2"), "."); got != "exit status 2" {
		t.Errorf("empty output: %q", got)
	}
	long := strings.Repeat("./a.go:1:1: x\n", 40)
	if got := goBuildMessage(long, nil, "."); strings.Count(got, "\n") != 31 || !strings.HasSuffix(got, "and 10 more lines") {
		t.Errorf("long output not cut: %q", got)
	}
}

func TestBuildGoWithoutGo(t *testing.T) {
	t.Parallel()
	tc := &Toolchain{goPath: filepath.Join(t.TempDir(), "no-such-go")}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"go.mod": "module x\n", "main.go": "package main\n"})
	p, err := DetectProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = tc.Build(ctxFor(t), p, filepath.Join(dir, "x.wasm"))
	if !errors.Is(err, ErrNoGo) || !strings.Contains(err.Error(), "go.dev/dl") {
		t.Errorf("err = %v, want ErrNoGo saying where to get Go", err)
	}
}

func TestBuildGoTooOld(t *testing.T) {
	t.Parallel()
	tc := &Toolchain{goPath: fakeExecutable(t, "go", "echo go1.21.5\n")}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"go.mod": "module x\n", "main.go": "package main\n"})
	p, _ := DetectProject(dir)
	err := tc.Build(ctxFor(t), p, filepath.Join(dir, "x.wasm"))
	if !errors.Is(err, ErrGoTooOld) || !strings.Contains(err.Error(), "go1.21.5") {
		t.Errorf("err = %v, want ErrGoTooOld naming the version", err)
	}
}

func TestNewProject(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		lang Lang
		want []string // a subset of the files written
	}{
		{LangGo, []string{".gitignore", "README.md", "go.mod", "main.go", "main_test.go", "sdk/abi.go", "sdk/abi_wasip1.go", "sdk/go.mod", "sdk/host_other.go", "wit/maiden-tool.wit"}},
		{LangJS, []string{".gitignore", "README.md", "index.js", "wit/maiden-tool.wit"}},
	} {
		t.Run(string(tt.lang), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "my_tool-1")
			p, files, err := NewProject(dir, tt.lang)
			if err != nil {
				t.Fatal(err)
			}
			if p.Lang != tt.lang || p.Name != "my_tool-1" || p.Dir != dir {
				t.Errorf("project %+v", p)
			}
			for _, w := range tt.want {
				if !strings.Contains(" "+strings.Join(files, " ")+" ", " "+w+" ") {
					t.Errorf("%s not written (files: %v)", w, files)
				}
				if _, err := os.Stat(filepath.Join(dir, w)); err != nil {
					t.Error(err)
				}
			}
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), "{{.Name}}") {
					t.Errorf("%s still has a {{.Name}} placeholder", f)
				}
			}
			gi, _ := os.ReadFile(filepath.Join(dir, ".gitignore"))
			if string(gi) != "/my_tool-1.wasm\n" {
				t.Errorf(".gitignore = %q", gi)
			}
			if _, _, err := NewProject(dir, tt.lang); !errors.Is(err, ErrProjectExists) {
				t.Errorf("second NewProject: %v, want ErrProjectExists", err)
			}
		})
	}
	for _, bad := range []string{"Upper", "-dash", "has space", strings.Repeat("x", 65)} {
		if _, _, err := NewProject(filepath.Join(t.TempDir(), bad), LangGo); !errors.Is(err, ErrBadName) {
			t.Errorf("NewProject(%q) = %v, want ErrBadName", bad, err)
		}
	}
	if _, _, err := NewProject(filepath.Join(t.TempDir(), "x"), LangWAT); err == nil || !strings.Contains(err.Error(), "no template") {
		t.Errorf("WAT template: %v", err)
	}
}

// TestGoTemplateOnHost runs `go vet` and `go test` in a new Go project with
// the module proxy off: the vendored SDK must be all it needs, and its
// stand-in host must make the template's test pass.
func TestGoTemplateOnHost(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the go command")
	}
	dir := filepath.Join(t.TempDir(), "hosttool")
	if _, _, err := NewProject(dir, LangGo); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "./..."}, {"mod", "tidy", "-diff"}} {
		cmd := exec.CommandContext(ctxFor(t), "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestGoModCannotSwitchToolchain: a project's go.mod does not make maiden
// build download and run another Go toolchain (a go or toolchain line newer
// than the installed Go, which GOTOOLCHAIN=auto, Go's default, fetches and
// executes): the build runs the Go the operator installed, unless the
// operator's environment sets GOTOOLCHAIN. GOPROXY=off: an attempt to
// download fails at once, without dialling anything.
func TestGoModCannotSwitchToolchain(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go in PATH")
	}
	out, err := exec.Command(gobin, "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	local := strings.TrimSpace(string(out))
	// Go's own default, whatever this machine's go.env says: GOTOOLCHAIN
	// auto in the go env file, nothing in the environment.
	goenv := filepath.Join(t.TempDir(), "goenv")
	if err := os.WriteFile(goenv, []byte("GOTOOLCHAIN=auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOENV", goenv)
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOTOOLCHAIN", "")
	os.Unsetenv("GOTOOLCHAIN")

	for _, gomod := range []string{
		"module x\n\ngo 1.24\n\ntoolchain go1.99.0\n",
		"module x\n\ngo 1.99.0\n",
	} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"go.mod": gomod, "main.go": "package main\n"})
		v, err := checkGoVersion(ctxFor(t), gobin, dir)
		if err != nil || v != local {
			t.Errorf("go.mod %q: checkGoVersion = %q, %v; want the installed %s, not a download of go1.99.0", gomod, v, err, local)
		}
		if v, err := goEnv(ctxFor(t), gobin, dir, "GOVERSION"); err != nil || v != local {
			t.Errorf("go.mod %q: go env GOVERSION = %q, %v; want the installed %s", gomod, v, err, local)
		}
	}

	t.Run("the operator's GOTOOLCHAIN", func(t *testing.T) {
		t.Setenv("GOTOOLCHAIN", "auto")
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"go.mod": "module x\n\ngo 1.24\n\ntoolchain go1.99.0\n", "main.go": "package main\n"})
		_, err := checkGoVersion(ctxFor(t), gobin, dir)
		if err == nil || !strings.Contains(err.Error(), "go1.99.0") {
			t.Fatalf("err = %v, want go's download of go1.99.0 tried (and refused by GOPROXY=off): GOTOOLCHAIN set in the environment is the operator's choice", err)
		}
	})
}

// TestDriverRunIsBounded: componentize-js runs a JavaScript tool's top-level
// code (under wizer) while it builds it, so a project whose top level never
// returns (`while (true) {}`) would hang maiden build for ever. The driver's
// run is bounded like the Go snapshot run (snapshotTimeout); here a node that
// never finishes stands for it, since a real one spins at full CPU.
func TestDriverRunIsBounded(t *testing.T) {
	prev := driverTimeout
	driverTimeout = 2 * time.Second
	t.Cleanup(func() { driverTimeout = prev })
	tc := &Toolchain{node: fakeExecutable(t, "node", "exec sleep 600\n"), driver: "build.mjs"}
	dir := t.TempDir()
	src := filepath.Join(dir, "index.js")
	writeFiles(t, dir, map[string]string{"index.js": "export function describe() { return 'x'; }\nwhile (true) {}\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := tc.Build(ctx, Project{Dir: dir, Name: "spin", Lang: LangJS, Source: src}, filepath.Join(dir, "spin.wasm"))
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "did not finish within 2s") || !strings.Contains(err.Error(), "index.js") {
		t.Fatalf("after %v: err = %v; want a build error of index.js saying the build did not finish within 2s", time.Since(start).Round(time.Millisecond), err)
	}
}

// TestBuildEnvHoldsNoSecret: the programs a build runs get maiden's
// environment without the values of its secrets (MAIDEN_SECRET_*): the
// JS driver (a fake node here, which writes its environment down) and the
// go command's environment (goEnviron). Other variables pass.
func TestBuildEnvHoldsNoSecret(t *testing.T) {
	if secretEnvPrefix != egress.SecretEnvPrefix {
		t.Fatalf("secretEnvPrefix %q, the gate's %q", secretEnvPrefix, egress.SecretEnvPrefix)
	}
	t.Setenv("MAIDEN_SECRET_BUILDTEST", "s3cret-build-value")
	t.Setenv("MAIDEN_BUILDTEST_PLAIN", "plain-value")
	seen := filepath.Join(t.TempDir(), "env")
	tc := &Toolchain{node: fakeExecutable(t, "node", "env > '"+seen+"'\nexit 1\n"), driver: "build.mjs"}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"index.js": "export function describe() { return 'x'; }\n"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tc.Build(ctx, Project{Dir: dir, Name: "env", Lang: LangJS, Source: filepath.Join(dir, "index.js")}, filepath.Join(dir, "env.wasm")); err == nil {
		t.Fatal("the fake driver's build succeeded")
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatalf("the fake node wrote no environment: %v", err)
	}
	if strings.Contains(string(b), "s3cret-build-value") || !strings.Contains(string(b), "MAIDEN_BUILDTEST_PLAIN=plain-value") {
		t.Errorf("the build driver's environment: want MAIDEN_BUILDTEST_PLAIN and no MAIDEN_SECRET_ value:\n%s", b)
	}
	env := strings.Join(goEnviron(), "\n")
	if strings.Contains(env, "s3cret-build-value") || !strings.Contains(env, "MAIDEN_BUILDTEST_PLAIN=plain-value") {
		t.Errorf("the go command's environment holds a secret's value or lacks the plain variable")
	}
}
