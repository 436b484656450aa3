package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/sandbox/preopentest"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestPreopensInWorker runs the preopened-directory suite through worker
// processes: each such call gets a worker of its own whose Landlock domain
// holds exactly the call's directories.
func TestPreopensInWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 2, CacheDir: testkit.CompileCache(t)})
	preopentest.Run(t, func(ctx context.Context, tool string, dirs []sandbox.Preopen, input string) (sandbox.Outcome, error) {
		tl, err := p.Open(ctx, tool, preopentest.Limits)
		if err != nil {
			t.Fatalf("open %s: %v", tool, err)
		}
		return tl.Execute(ctx, sandbox.Call{Limits: preopentest.Limits, Input: input, Preopens: dirs})
	})
	// One-call workers are not pooled.
	if n := p.Workers(); n > 2 {
		t.Errorf("%d workers alive after the suite; the pool holds at most 2", n)
	}
}

// preopenProbe is a compromised one-call worker: native code, not a tool,
// trying what its Landlock domain and seccomp filter must refuse. fd 4 is
// the read-only directory, fd 5 the read-write one; argv[2] is a directory
// outside both, holding secret.txt.
func preopenProbe() int {
	if msg := confinementError(); msg != "" {
		fmt.Printf("CONFINEMENT-ERROR %s\n", msg)
		return 0
	}
	outside := os.Args[2]
	try := func(what string, err error) {
		if err != nil {
			fmt.Printf("DENIED %s: %v\n", what, err)
		} else {
			fmt.Printf("ALLOWED %s\n", what)
		}
	}
	read := func(p string) error {
		_, err := os.ReadFile(p)
		return err
	}
	try("read ro/in.txt", read("/proc/self/fd/4/in.txt"))
	try("list ro", func() error { _, err := os.ReadDir("/proc/self/fd/4"); return err }())
	try("write rw/out.txt", os.WriteFile("/proc/self/fd/5/out.txt", []byte("x"), 0o644))
	try("mkdir rw/d", os.Mkdir("/proc/self/fd/5/d", 0o755))
	try("rename rw/out.txt rw/d/out.txt", os.Rename("/proc/self/fd/5/out.txt", "/proc/self/fd/5/d/out.txt"))
	try("remove rw/d/out.txt", os.Remove("/proc/self/fd/5/d/out.txt"))
	try("write ro/in.txt", os.WriteFile("/proc/self/fd/4/in.txt", []byte("x"), 0o644))
	try("create ro/new.txt", os.WriteFile("/proc/self/fd/4/new.txt", []byte("x"), 0o644))
	try("read outside/secret.txt", read(filepath.Join(outside, "secret.txt")))
	try("read ro/../outside/secret.txt", read("/proc/self/fd/4/../outside/secret.txt"))
	try("list outside", func() error { _, err := os.ReadDir(outside); return err }())
	try("read /etc/hostname", read("/etc/hostname"))
	try("write outside/planted.txt", os.WriteFile(filepath.Join(outside, "planted.txt"), []byte("x"), 0o644))
	try("symlink in rw", os.Symlink("/etc/passwd", "/proc/self/fd/5/link"))
	try("mkfifo in rw", unix.Mkfifo("/proc/self/fd/5/fifo", 0o600))
	try("mknod socket in rw", unix.Mknod("/proc/self/fd/5/sock", unix.S_IFSOCK|0o600, 0))
	try("hard link ro/in.txt into rw", os.Link("/proc/self/fd/4/in.txt", "/proc/self/fd/5/in.txt"))
	_, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	try("socket(AF_INET)", err)
	_, err = syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
	try("fork and exec /bin/true", err)
	return 0
}

func TestPreopenWorkerIsConfined(t *testing.T) {
	t.Parallel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ro, rw, outside := filepath.Join(base, "ro"), filepath.Join(base, "rw"), filepath.Join(base, "outside")
	for _, d := range []string{ro, rw, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{filepath.Join(ro, "in.txt"): "public", filepath.Join(outside, "secret.txt"): "secret"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := sandbox.OpenPreopens([]sandbox.Preopen{{HostPath: ro, GuestPath: ro}, {HostPath: rw, GuestPath: rw, Write: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.ClosePreopens(dirs)
	files, env := preopenSpawn(dirs)
	out := runProbe(t, append([]*os.File{os.Stdin}, files...), append(env, envWorker+"=1"), outside)
	if strings.Contains(out, "landlock unavailable") {
		t.Fatalf("this kernel has no Landlock; a preopen worker must then refuse to start:\n%s", out)
	}
	want := map[string]bool{ // true: must be allowed
		"read ro/in.txt": true, "list ro": true, "write rw/out.txt": true, "mkdir rw/d": true,
		"rename rw/out.txt rw/d/out.txt": true, "remove rw/d/out.txt": true,
		"write ro/in.txt": false, "create ro/new.txt": false, "read outside/secret.txt": false,
		"read ro/../outside/secret.txt": false, "list outside": false, "read /etc/hostname": false,
		"write outside/planted.txt": false, "symlink in rw": false, "mkfifo in rw": false,
		"mknod socket in rw": false, "hard link ro/in.txt into rw": false, "socket(AF_INET)": false,
		"fork and exec /bin/true": false,
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		verdict, rest, _ := strings.Cut(line, " ")
		what, _, _ := strings.Cut(rest, ": ")
		allowed, known := want[what]
		if !known || (verdict != "ALLOWED" && verdict != "DENIED") {
			t.Errorf("unexpected probe line %q", line)
			continue
		}
		seen[what] = true
		if (verdict == "ALLOWED") != allowed {
			t.Errorf("a one-call worker with preopens: %s", line)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("probe reported %d of %d checks:\n%s", len(seen), len(want), out)
	}
	if b, err := os.ReadFile(filepath.Join(ro, "in.txt")); err != nil || string(b) != "public" {
		t.Errorf("ro/in.txt is now %q (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
		t.Error("the probe planted a file outside")
	}
}

// A bad MAIDEN_WORKER_PREOPENS is a confinement failure, never a worker
// that runs with what it could parse.
func TestPreopenWorkerRefusesBadDescription(t *testing.T) {
	t.Parallel()
	for _, modes := range []string{"x", "rwq", strings.Repeat("r", sandbox.MaxPreopens+1)} {
		out := runProbe(t, []*os.File{os.Stdin}, []string{envWorker + "=1", envPreopens + "=" + modes}, t.TempDir())
		if !strings.HasPrefix(out, "CONFINEMENT-ERROR") {
			t.Errorf("%s=%q: probe ran:\n%s", envPreopens, modes, out)
		}
	}
	// A 'r' for a descriptor that is not a directory fails the Landlock rule.
	out := runProbe(t, []*os.File{os.Stdin, os.Stdin}, []string{envWorker + "=1", envPreopens + "=r"}, t.TempDir())
	if !strings.HasPrefix(out, "CONFINEMENT-ERROR") || !strings.Contains(out, "landlock_add_rule") {
		t.Errorf("a file as a preopened directory: probe ran:\n%s", out)
	}
}

func runProbe(t *testing.T, files []*os.File, env []string, outside string) string {
	t.Helper()
	cmd := exec.Command(mustExe(t), "preopen-probe", outside)
	cmd.Env = env
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	t.Logf("probe:\n%s", out)
	return string(out)
}

// TestPreopenWorkerReuse: a worker started for a set of directories serves
// the next call with the very same directories, and no other: not other
// paths, not other access, not the same path once the directory there was
// replaced (a worker's Landlock domain is the directories it was started
// with, not their names).
func TestPreopenWorkerReuse(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1, CacheDir: testkit.CompileCache(t)})
	tool := testkit.Component(t, "go/fsprobe")
	tl, err := p.Open(context.Background(), tool, lim)
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "name"), []byte(filepath.Base(d)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := sandbox.Limits{Timeout: 30 * time.Second, Memory: 128 << 20}
	read := func(dirs []sandbox.Preopen, path string) (string, int) {
		t.Helper()
		out, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: `{"op":"read","path":"` + path + `"}`, Preopens: dirs})
		if err != nil {
			t.Fatal(err)
		}
		p.preMu.Lock()
		defer p.preMu.Unlock()
		if len(p.preIdle) == 0 {
			t.Fatal("no idle one-call worker after a call")
		}
		pid := p.preIdle[len(p.preIdle)-1].w.pid
		if out.Failure != nil {
			return "error: " + out.Failure.Message, pid
		}
		return out.Output, pid
	}
	onlyA := []sandbox.Preopen{{HostPath: a, GuestPath: a}}
	out1, pid1 := read(onlyA, a+"/name")
	out2, pid2 := read(onlyA, a+"/name")
	if out1 != `"a"` || out2 != `"a"` || pid1 != pid2 {
		t.Errorf("same directories: %s (worker %d), then %s (worker %d); want one worker for both", out1, pid1, out2, pid2)
	}
	if _, pid := read([]sandbox.Preopen{{HostPath: a, GuestPath: a, Write: true}}, a+"/name"); pid == pid1 {
		t.Error("a worker with read-only access served a call with write access")
	}
	if out, pid := read([]sandbox.Preopen{{HostPath: b, GuestPath: b}}, a+"/name"); pid == pid1 || !strings.HasPrefix(out, "error") {
		t.Errorf("another directory: %s from worker %d (the first was %d)", out, pid, pid1)
	}
	// Replace a with another directory under the same name: the worker
	// started for the old one must not serve it.
	if err := os.Rename(a, filepath.Join(base, "old-a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "name"), []byte("new a"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, pid := read(onlyA, a+"/name")
	if pid == pid1 || out != `"new a"` {
		t.Errorf("after the directory was replaced: %s from worker %d (the old one was %d)", out, pid, pid1)
	}
	p.preMu.Lock()
	n := len(p.preIdle)
	p.preMu.Unlock()
	if n > maxIdlePreopenWorkers {
		t.Errorf("%d idle one-call workers, over %d", n, maxIdlePreopenWorkers)
	}
}
