package toolbuild

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// goroot is the GOROOT of the go command the tests build with.
func goroot(t testing.TB) string {
	t.Helper()
	gobin, err := findExecutable("", "go", ErrNoGo)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := goEnv(context.Background(), gobin, ".", "GOROOT")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSyscallPreopenInitKnown: the Go the tests run with is one whose
// preopen listing maiden has read; the generated file runs that init's body.
// A new Go release that changes the init fails here, and someone must read
// it before adding its digest.
func TestSyscallPreopenInitKnown(t *testing.T) {
	t.Parallel()
	file, err := syscallPreopenOverlay(goroot(t))
	if err != nil {
		t.Fatalf("%v (add the digest of the new init to syscallPreopenInitTokens only after reading it)", err)
	}
	for _, want := range []string{"package syscall", "//go:linkname maidenRescanPreopens", "preopens = nil", `cwd = ""`, "fd_prestat_get(preopenFd, &prestat)", "cwd = preopens[0].name"} {
		if !strings.Contains(file, want) {
			t.Errorf("the generated file lacks %q:\n%s", want, file)
		}
	}
}

// TestSyscallPreopenOverlayRefuses: only the init maiden has read is run
// again; layout and comments may change, code may not.
func TestSyscallPreopenOverlayRefuses(t *testing.T) {
	t.Parallel()
	real, err := os.ReadFile(filepath.Join(goroot(t), "src", "syscall", "fs_wasip1.go"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(real)
	fake := func(t *testing.T, content string) string {
		dir := t.TempDir()
		if content != "" {
			must(t, os.MkdirAll(filepath.Join(dir, "src", "syscall"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "src", "syscall", "fs_wasip1.go"), []byte(content), 0o644))
		}
		return dir
	}
	replace := func(old, new string) string {
		if !strings.Contains(src, old) {
			t.Fatalf("fs_wasip1.go has no %q", old)
		}
		return strings.Replace(src, old, new, 1)
	}
	t.Run("layout and comments", func(t *testing.T) {
		s := replace("// We start looking for preopens at fd=3", "// A different comment.\n\t// We start looking for preopens at fd=3")
		s = strings.Replace(s, "dirNameBuf := make([]byte, 256)", "dirNameBuf := make(  []byte,256 )", 1)
		if _, err := syscallPreopenOverlay(fake(t, s)); err != nil {
			t.Errorf("a comment and spacing changed: %v", err)
		}
	})
	for _, tt := range []struct {
		name, content, want string
	}{
		{"missing file", "", "cannot read Go's list"},
		{"another first descriptor", replace("preopenFd := int32(3)", "preopenFd := int32(4)"), "maiden has not checked"},
		{"another working directory", replace("cwd = preopens[0].name", `cwd = "/"`), "maiden has not checked"},
		{"init renamed", replace("func init() {\n\tdirNameBuf", "func scan() {\n\tdirNameBuf"), "no init function calls fd_prestat_get"},
		{"cwd of another type", replace("var cwd string", "var cwd []byte"), "not []opendir and string"},
		{"not Go", "package syscall\nfunc init() {", "fs_wasip1.go"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := fake(t, tt.content)
			_, err := syscallPreopenOverlay(dir)
			var no *errNoSnapshot
			if !errors.As(err, &no) {
				t.Fatalf("err = %v, want an errNoSnapshot", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "could not give the tool its directories") {
				t.Errorf("err = %q, want it to say %q and why it matters", err, tt.want)
			}
			if tt.content != "" && !strings.Contains(err.Error(), filepath.Join(dir, "src", "syscall", "fs_wasip1.go")) {
				t.Errorf("err = %q does not name the file", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// buildFSProbe builds testdata/tools/go/fsprobesnap with the given
// MAIDEN_GO_PREINIT setting and returns the component's path, the build's
// progress text and its error.
func buildFSProbe(t testing.TB, setting string) (string, string, error) {
	t.Helper()
	tc := toolchain(t)
	t.Setenv(PreinitEnv, setting)
	var progress strings.Builder
	tc2 := *tc
	tc2.progress = &progress
	p, err := DetectProject(filepath.Join(toolsDir(t), "go", "fsprobesnap"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "fsprobesnap.wasm")
	err = tc2.Build(ctxFor(t), p, out)
	t.Logf("build (%s=%q):\n%s", PreinitEnv, setting, progress.String())
	return out, progress.String(), err
}

// probeCall runs fsprobesnap once with dirs and returns its text, or its
// error message and false.
func probeCall(t testing.TB, sb *sandbox.Sandbox, path string, dirs []sandbox.Preopen, in map[string]any) (string, bool) {
	t.Helper()
	b, _ := json.Marshal(in)
	out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Input: string(b), Preopens: dirs,
		Limits: sandbox.Limits{Timeout: 30 * time.Second, Memory: 128 << 20}})
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if out.Failure != nil {
		if out.Failure.Kind != sandbox.KindTool {
			t.Fatalf("%s: failed as %s: %s", b, out.Failure.Kind, out.Failure.Message)
		}
		return out.Failure.Message, false
	}
	var s string
	if err := json.Unmarshal([]byte(out.Output), &s); err != nil {
		t.Fatalf("%s: output %q: %v", b, out.Output, err)
	}
	return s, true
}

// probeDirs makes two directories, ro (with in.txt) and rw, and a file
// outside both.
func probeDirs(t *testing.T) (ro, rw, outside string, dirs []sandbox.Preopen) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ro, rw = filepath.Join(base, "a-ro"), filepath.Join(base, "b-rw")
	outside = filepath.Join(base, "outside.txt")
	must(t, os.MkdirAll(ro, 0o755))
	must(t, os.MkdirAll(rw, 0o755))
	must(t, os.WriteFile(filepath.Join(ro, "in.txt"), []byte("public"), 0o644))
	must(t, os.WriteFile(outside, []byte("SECRET"), 0o644))
	return ro, rw, outside, []sandbox.Preopen{{HostPath: ro, GuestPath: ro}, {HostPath: rw, GuestPath: rw, Write: true}}
}

// TestPreinitPreopens builds a Go tool the default way (pre-initialised:
// its init ran at build time, with no directory) and checks that each call
// sees exactly its own preopened directories: reads, writes, the working
// directory, and nothing in a call given none, in any order of calls.
func TestPreinitPreopens(t *testing.T) {
	path, progress, err := buildFSProbe(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress, "pre-initialised") || strings.Contains(progress, "warning") {
		t.Fatalf("fsprobesnap was not pre-initialised cleanly; build said:\n%s", progress)
	}
	sb, err := sandbox.New(&sandbox.Options{CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	ro, rw, outside, dirs := probeDirs(t)

	// Twice each, interleaved: what one instance listed never leaks into
	// the next.
	for round := range 2 {
		// Init ran without directories (at build time); the call has them.
		if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "wd"}); !ok || out != "init= call="+ro {
			t.Errorf("round %d: wd with directories = %q, ok %v; want init= (the snapshot's) call=%s", round, out, ok, ro)
		}
		if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "read", "path": filepath.Join(ro, "in.txt")}); !ok || out != "public" {
			t.Errorf("round %d: read in the preopened directory = %q, ok %v", round, out, ok)
		}
		// Relative paths resolve against the working directory, the first
		// preopened directory (Go's rule on wasip1 without $PWD).
		if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "read", "path": "in.txt"}); !ok || out != "public" {
			t.Errorf("round %d: relative read = %q, ok %v", round, out, ok)
		}
		content := "written in round " + string(rune('0'+round))
		if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "write", "path": filepath.Join(rw, "out.txt"), "content": content}); !ok {
			t.Errorf("round %d: write in the writable directory: %s", round, out)
		} else if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != content {
			t.Errorf("round %d: the host sees %q (%v), want %q", round, b, err, content)
		}
		if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "list", "path": rw}); !ok || out != "out.txt" {
			t.Errorf("round %d: list of the writable directory = %q, ok %v", round, out, ok)
		}
		// Still confined: read-only stays read-only, outside stays out.
		if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "write", "path": filepath.Join(ro, "in.txt"), "content": "overwritten"}); ok {
			t.Errorf("round %d: write in the read-only directory succeeded: %q", round, out)
		}
		if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "read", "path": outside}); ok || strings.Contains(out, "SECRET") {
			t.Errorf("round %d: read outside the directories = %q, ok %v", round, out, ok)
		}

		// A call given no directory sees none, right after one that had two.
		if out, ok := probeCall(t, sb, path, nil, map[string]any{"op": "wd"}); !ok || out != "init= call=" {
			t.Errorf("round %d: wd without directories = %q, ok %v", round, out, ok)
		}
		for _, p := range []string{filepath.Join(ro, "in.txt"), "in.txt", outside} {
			if out, ok := probeCall(t, sb, path, nil, map[string]any{"op": "read", "path": p}); ok {
				t.Errorf("round %d: a call without directories read %s: %q", round, p, out)
			}
		}
		if out, ok := probeCall(t, sb, path, nil, map[string]any{"op": "write", "path": filepath.Join(rw, "none.txt"), "content": "x"}); ok {
			t.Errorf("round %d: a call without directories wrote: %q", round, out)
		}
		// Only the second directory: it is now the first, and the only one.
		only := []sandbox.Preopen{dirs[1]}
		if out, ok := probeCall(t, sb, path, only, map[string]any{"op": "wd"}); !ok || out != "init= call="+rw {
			t.Errorf("round %d: wd with only %s = %q, ok %v", round, rw, out, ok)
		}
		if out, ok := probeCall(t, sb, path, only, map[string]any{"op": "read", "path": filepath.Join(ro, "in.txt")}); ok {
			t.Errorf("round %d: read of a directory this call was not given: %q", round, out)
		}
	}
	if _, err := os.Stat(filepath.Join(rw, "none.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a call without directories left a file: %v", err)
	}
}

// TestPreinitUnknownSyscall: a GOROOT whose preopen listing maiden has not
// read is not pre-initialised (a warning says why) and its tool still sees
// its directories; under MAIDEN_GO_PREINIT=require the build fails.
func TestPreinitUnknownSyscall(t *testing.T) {
	prev := syscallPreopenInitTokens
	syscallPreopenInitTokens = map[string]string{}
	t.Cleanup(func() { syscallPreopenInitTokens = prev })

	path, progress, err := buildFSProbe(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress, "warning: not pre-initialising") || !strings.Contains(progress, "maiden has not checked") || strings.Contains(progress, "pre-initialised (") {
		t.Errorf("want the fallback's warning and no snapshot; build said:\n%s", progress)
	}
	sb, err := sandbox.New(&sandbox.Options{CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	ro, _, _, dirs := probeDirs(t)
	// An ordinary module: init runs in the call and sees the directories.
	if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "wd"}); !ok || out != "init="+ro+" call="+ro {
		t.Errorf("wd = %q, ok %v; want init and call both %s", out, ok, ro)
	}
	if out, ok := probeCall(t, sb, path, dirs, map[string]any{"op": "read", "path": filepath.Join(ro, "in.txt")}); !ok || out != "public" {
		t.Errorf("read = %q, ok %v", out, ok)
	}

	_, progress, err = buildFSProbe(t, "require")
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "maiden has not checked") || !strings.Contains(err.Error(), "require") {
		t.Errorf("require: err = %v, want a BuildError naming the unchecked code; build said:\n%s", err, progress)
	}
}

// BenchmarkPreopenRescan measures what listing the preopened directories
// again costs a pre-initialised tool's call: fsprobesnap built with the
// rescan ("rescan") and with an empty rescan function ("none"; it then sees
// no directory), called with no directory and with one. The two builds are
// called alternately in the same loop (each first in turn), so that a
// machine's changing load falls on both alike; each row reports both medians and their ratio
// (ns/op is a pair of calls):
//
//	go test -run '^$' -bench PreopenRescan -benchtime 2s -count 3 ./internal/toolbuild
func BenchmarkPreopenRescan(b *testing.B) {
	build := func(rescan bool) string {
		prev := rescanPreopens
		rescanPreopens = rescan
		defer func() { rescanPreopens = prev }()
		path, progress, err := buildFSProbe(b, "require")
		if err != nil {
			b.Fatalf("%v\n%s", err, progress)
		}
		return path
	}
	rescan, none := build(true), build(false)
	sb, err := sandbox.New(&sandbox.Options{CacheDir: "off"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, dirs := range []struct {
		name string
		d    []sandbox.Preopen
	}{{"nodir", nil}, {"1dir", []sandbox.Preopen{{HostPath: dir, GuestPath: dir}}}} {
		calls := map[string]sandbox.Call{}
		for name, path := range map[string]string{"rescan": rescan, "none": none} {
			call := sandbox.Call{Path: path, Input: `{"op":"wd"}`, Preopens: dirs.d,
				Limits: sandbox.Limits{Timeout: 10 * time.Second, Memory: 64 << 20}}
			// Without the rescan the tool sees no directory: the check
			// that the tests above could fail.
			want := `"init= call="`
			if name == "rescan" && dirs.d != nil {
				want = `"init= call=` + dir + `"`
			}
			if out, err := sb.Execute(context.Background(), call); err != nil || out.Failure != nil || out.Output != want {
				b.Fatalf("%s/%s: %v %v %s, want %s", dirs.name, name, err, out.Failure, out.Output, want)
			}
			calls[name] = call
		}
		b.Run(dirs.name, func(b *testing.B) {
			durs := map[string][]time.Duration{}
			order := []string{"none", "rescan"}
			for b.Loop() {
				// Each first in turn: the second call of a pair may find
				// the machine warmer or busier.
				order[0], order[1] = order[1], order[0]
				for _, name := range order {
					start := time.Now()
					out, err := sb.Execute(context.Background(), calls[name])
					durs[name] = append(durs[name], time.Since(start))
					if err != nil || out.Failure != nil {
						b.Fatalf("%v %v", err, out.Failure)
					}
				}
			}
			p50 := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Nanoseconds()) / 1e3
			}
			n, r := p50(durs["none"]), p50(durs["rescan"])
			b.ReportMetric(n, "none-p50-µs")
			b.ReportMetric(r, "rescan-p50-µs")
			b.ReportMetric(r/n, "ratio")
		})
	}
}
