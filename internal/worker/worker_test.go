package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestMain lets this test binary be its own worker: the pool re-executes it
// with MAIDEN_WORKER set, and Main serves instead of running the tests. A
// first argument selects a hostile or probing worker for the tests below.
func TestMain(m *testing.M) {
	if mode := os.Getenv(envPong); mode != "" {
		os.Exit(pongMain(mode))
	}
	if os.Getenv(envMemcgHog) != "" {
		os.Exit(memcgHogMain())
	}
	if IsChild() && len(os.Args) > 1 {
		switch os.Args[1] {
		case "confine-probe":
			os.Exit(confineProbe())
		case "confine-threads":
			os.Exit(threadsProbe())
		case "preopen-probe":
			os.Exit(preopenProbe())
		case "preopen-ids-probe":
			os.Exit(preopenIDsProbe())
		default:
			os.Exit(hostileWorker(os.Args[1]))
		}
	}
	Main()
	os.Exit(m.Run())
}

var lim = sandbox.Limits{Timeout: 2 * time.Second, Memory: 32 << 20}

func newPool(t testing.TB, opts *Options) *Pool {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Size == 0 {
		opts.Size = 2
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return p
}

func call(t testing.TB, p *Pool, tool, input string, l sandbox.Limits) sandbox.Outcome {
	t.Helper()
	tl, err := p.Open(context.Background(), tool, l)
	if err != nil {
		t.Fatalf("open %s: %v", tool, err)
	}
	out, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: input})
	if err != nil {
		t.Fatalf("execute %s: %v", tool, err)
	}
	return out
}

func TestEchoInWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	echo := testkit.Component(t, "echo")
	tl, err := p.Open(context.Background(), echo, lim)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Description == "" || !strings.Contains(tl.Schema, "object") {
		t.Errorf("describe/schema = %q, %q", tl.Description, tl.Schema)
	}
	for i := range 3 {
		out := call(t, p, echo, fmt.Sprintf(`{"message":"hi %d"}`, i), lim)
		if out.Failure != nil || !strings.Contains(out.Output, fmt.Sprintf("hi %d", i)) {
			t.Fatalf("call %d: %+v", i, out)
		}
	}
	if n := p.Workers(); n < 1 || n > 2 {
		t.Errorf("%d workers, want 1..2", n)
	}
}

// TestDeadlineReachesWASISleep is finding 1 of the hardening issue: a Go
// tool sleeping in WASI (where epochs never fire) must still end at its
// deadline, and cancellation must reach it the same way. (Its stdin is
// empty, so a read returns at once: nothing to test there.)
func TestDeadlineReachesWASISleep(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	sleeper := testkit.Component(t, "go/sleeper")
	l := sandbox.Limits{Timeout: 1 * time.Second, Memory: 64 << 20}
	tl, err := p.Open(context.Background(), sleeper, l)
	if err != nil {
		t.Fatal(err)
	}
	// Sleeps far longer than any bound below (testkit.Slack's at most
	// 10 x): a sleep the deadline did not reach is not mistaken for load.
	for _, in := range []string{`{"ms":120000}`, `{"op":"spin"}`} {
		t.Run(in, func(t *testing.T) {
			start := time.Now()
			out, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: in})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if out.Failure == nil || out.Failure.Kind != sandbox.KindDeadline {
				t.Fatalf("outcome %+v, want a deadline", out)
			}
			// Generous: the promise is deadline + 20 ms at p99, measured by
			// BenchmarkWASISleepDeadline; a loaded CI machine is no benchmark.
			if took > testkit.Slack(t, 4*time.Second) {
				t.Errorf("took %v for a 1 s deadline", took)
			}
		})
	}
	// The pool replaced what it killed and still serves.
	out := call(t, p, sleeper, `{"ms":1}`, sandbox.Limits{Timeout: 20 * time.Second, Memory: 64 << 20})
	if out.Failure != nil || out.Output != `"slept"` {
		t.Fatalf("after the kills: %+v", out)
	}

	t.Run("cancel", func(t *testing.T) {
		tl, err := p.Open(context.Background(), sleeper, l)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err = tl.Execute(ctx, sandbox.Call{Limits: sandbox.Limits{Timeout: 2 * time.Minute, Memory: 64 << 20}, Input: `{"ms":120000}`})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if took := time.Since(start); took > testkit.Slack(t, 3*time.Second) {
			t.Errorf("cancel took %v", took)
		}
	})
}

// TestLateKillSparesTheNextCall: a deadline guard or a cancellation's
// kill that fired as a call ended runs on a goroutine of its own, which a
// loaded machine can run after the worker went back to the pool. It must
// not kill the worker under the next call (a full run once saw a 20 s call
// fail after 14 ms as past its deadline, on the worker whose 1 s call had
// just ended at its deadline). Here the late kills are run by hand, at the
// worst moment: the worker idle, its last call over.
func TestLateKillSparesTheNextCall(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	echo := testkit.Component(t, "echo")
	if out := call(t, p, echo, `{"message":"one"}`, lim); out.Failure != nil {
		t.Fatalf("first call: %+v", out)
	}
	p.mu.Lock()
	w := p.idle[0]
	p.mu.Unlock()
	w.opMu.Lock()
	last := w.op - 1 // end moved op on past the last call's number
	w.opMu.Unlock()
	w.guardFired()
	w.killFor(last, killedCancel)
	if r := w.killReason(); r != notKilled {
		t.Fatalf("a late kill for an ended call killed the idle worker (reason %d)", r)
	}
	out := call(t, p, echo, `{"message":"two"}`, lim)
	if out.Failure != nil || out.WorkerLost || !strings.Contains(out.Output, "two") {
		t.Fatalf("the next call: %+v", out)
	}
	if pids := idlePIDs(t, p); len(pids) != 1 || pids[0] != w.pid {
		t.Errorf("idle workers %v, want the same worker %d", pids, w.pid)
	}
	// The late firing runs while the next call holds the worker, its guard
	// armed for later: that call is not killed before its time.
	n := w.begin()
	w.armGuard(n, time.Hour)
	w.guardFired()
	if r := w.killReason(); r != notKilled {
		t.Fatalf("a late firing killed the next call before its time (reason %d)", r)
	}
	w.guard.Stop()
	w.end(n)
	// The guard still kills a call that outlives its time: armed for an
	// operation that holds the worker, with its time passed.
	n = w.begin()
	w.armGuard(n, 0)
	select {
	case <-w.stop: // closed by the kill
	case <-time.After(testkit.Slack(t, 5*time.Second)):
		t.Fatal("the guard of a running operation did not kill")
	}
	if r := w.killReason(); r != killedDeadline {
		t.Fatalf("the guard killed with reason %d, want killedDeadline", r)
	}
	w.end(n)
}

func TestHostileToolsInWorkers(t *testing.T) {
	t.Parallel()
	p := newPool(t, nil)
	for _, tc := range []struct {
		tool string
		kind sandbox.Kind
	}{
		{"loop", sandbox.KindDeadline},
		{"startloop", sandbox.KindDeadline},
		{"memgrow", sandbox.KindMemory},
		{"trap", sandbox.KindTrap},
		{"toolerr", sandbox.KindTool},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			path := testkit.Component(t, tc.tool)
			l := sandbox.Limits{Timeout: 500 * time.Millisecond, Memory: 16 << 20}
			tl, err := p.Open(context.Background(), path, sandbox.Limits{Timeout: 2 * time.Second, Memory: 16 << 20})
			if tc.tool == "startloop" {
				// Its start function loops: describe() already fails.
				if err == nil || !strings.Contains(err.Error(), "deadline") {
					t.Fatalf("open: %v, want a deadline failure", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: `{}`})
			if err != nil {
				t.Fatal(err)
			}
			if out.Failure == nil || out.Failure.Kind != tc.kind {
				t.Fatalf("outcome %+v, want kind %s", out, tc.kind)
			}
			// The call's timeout, not the time left when the call
			// reached the worker ("499.97ms"). (Usually the worker's
			// sandbox ends the tool and answers; on a loaded machine
			// the parent may kill the worker first, which the message
			// then adds.)
			if tc.kind == sandbox.KindDeadline && !strings.HasPrefix(out.Failure.Message, "did not finish within its 500ms timeout") {
				t.Errorf("message %q, want the call's timeout named", out.Failure.Message)
			}
		})
	}
	if out := call(t, p, testkit.Component(t, "echo"), `{"message":"still here"}`, lim); out.Failure != nil {
		t.Fatalf("pool broken after hostile tools: %+v", out)
	}
}

// TestWorkerKilledMidCall: whatever ends a worker (here, a kill from
// outside, standing in for an engine crash) fails only its own call.
func TestWorkerKilledMidCall(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	sleeper := testkit.Component(t, "go/sleeper")
	l := sandbox.Limits{Timeout: 20 * time.Second, Memory: 64 << 20}
	tl, err := p.Open(context.Background(), sleeper, l)
	if err != nil {
		t.Fatal(err)
	}
	// Kill the worker once the call is on it, however long that takes (not
	// a fixed number of tries: on a loaded machine a worker can take
	// seconds to start).
	returned := make(chan struct{})
	go func() {
		for {
			select {
			case <-returned:
				return
			case <-time.After(20 * time.Millisecond):
			}
			p.mu.Lock()
			for w := range p.busy {
				_ = syscall.Kill(w.pid, syscall.SIGSEGV)
			}
			n := len(p.busy)
			p.mu.Unlock()
			if n > 0 {
				return
			}
		}
	}()
	out, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: `{"ms":15000}`})
	close(returned)
	if err != nil {
		t.Fatal(err)
	}
	if out.Failure == nil || out.Failure.Kind != sandbox.KindTrap || !strings.Contains(out.Failure.Message, "worker process died") {
		t.Fatalf("outcome %+v, want a trap naming the dead worker", out)
	}
	if out := call(t, p, sleeper, `{"ms":1}`, l); out.Failure != nil {
		t.Fatalf("next call: %+v", out)
	}
}

// TestCompileCrashIsInvalid: a component the code generator cannot
// compile (here: a compile worker that dies) is kind invalid, and the
// parent goes on.
func TestCompileCrashIsInvalid(t *testing.T) {
	t.Parallel()
	exe, _ := os.Executable()
	p := newPool(t, &Options{Command: []string{exe, "hostile-crash-on-compile"}})
	_, err := p.Open(context.Background(), testkit.CopyToTemp(t, testkit.Component(t, "echo")), lim)
	if !errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), "compiler failed") {
		t.Fatalf("err = %v, want invalid: compiler failed", err)
	}
}

// TestHostileWorkers: the parent survives any bytes from a worker. (Not
// parallel: its hostile workers have 2 s to start.)
func TestHostileWorkers(t *testing.T) {
	exe, _ := os.Executable()
	echo := testkit.Component(t, "echo")
	for _, mode := range []string{"hostile-garbage", "hostile-huge-frame", "hostile-wrong-id", "hostile-flood-logs", "hostile-silent"} {
		t.Run(mode, func(t *testing.T) {
			// Compile with a good worker, run with the hostile one.
			good := newPool(t, nil)
			if _, err := good.Open(context.Background(), echo, lim); err != nil {
				t.Fatal(err)
			}
			bad := newPool(t, &Options{Command: []string{exe, mode}, StartTimeout: 2 * time.Second})
			bad.mem = good.mem
			bad.setFingerprint(good.fingerprint)
			l := sandbox.Limits{Timeout: 500 * time.Millisecond, Memory: 16 << 20}
			start := time.Now()
			out, err := bad.run(context.Background(), firstKey(good), "execute", sandbox.Call{Limits: l, Input: "{}"})
			if err == nil && out.Failure == nil {
				t.Fatalf("a hostile worker's call succeeded: %+v", out)
			}
			if mode == "hostile-silent" && (out.Failure == nil || out.Failure.Kind != sandbox.KindDeadline ||
				out.Failure.Message != "did not finish within its 500ms timeout (its worker had not answered by then and was stopped)") {
				t.Errorf("silent worker: %+v %v, want a deadline failure saying its worker did not answer", out.Failure, err)
			}
			if took := time.Since(start); took > testkit.Slack(t, 5*time.Second) {
				t.Errorf("took %v", took)
			}
			if len(out.Logs) > 0 {
				total := 0
				for _, e := range out.Logs {
					total += len(e.Message)
				}
				if total > 2*sandbox.DefaultMaxLogBytes {
					t.Errorf("kept %d bytes of log from a flooding worker", total)
				}
			}
			t.Logf("%s: err=%v failure=%v", mode, err, out.Failure)
		})
	}
}

// TestHostileCompiledFrameFromACallWorker: compiled code is the one frame
// allowed up to maxFrame (512 MiB), and only a compile worker sends it; a
// call worker's header claiming one is refused before the parent allocates
// its body (it was allocated, then the body waited for: 512 MiB of the
// parent's heap per hostile worker).
func TestHostileCompiledFrameFromACallWorker(t *testing.T) {
	t.Parallel()
	w, err := spawn(context.Background(), []string{mustExe(t), "hostile-compiled-frame"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.kill(killedProtocol)
	if err := w.send(runMsg{ID: 1, Digest: "x", Export: "execute", TimeoutNS: uint64(time.Second)}.encode()); err != nil {
		t.Fatal(err)
	}
	_, err = w.readDirect()
	if want := fmt.Sprintf("type %d, %d bytes, limit %d", msgCompiled, maxFrame, 64<<10); !errors.Is(err, errTooLarge) || !strings.Contains(err.Error(), want) {
		t.Fatalf("read %v, want %v (%s)", err, errTooLarge, want)
	}
}

func firstKey(p *Pool) string {
	p.mem.mu.Lock()
	defer p.mem.mu.Unlock()
	for k := range p.mem.m {
		return k
	}
	return ""
}

// confineWant is the errno each probe must get in a confined worker: EPERM
// from the filter for everything a worker must not do, ENOSYS for clone3
// (so libc falls back to clone) and for calls in no list, 0 for the
// positive controls. An errno from elsewhere (EACCES from Landlock or file
// permissions, EINVAL or EBADF from the kernel) means the filter let the
// call through.
func confineWant(name string) unix.Errno {
	switch name {
	case "getpid", "kill self 0", "tgkill self 0", "prctl PR_SET_NAME", "fcntl F_GETFD", "mmap private":
		return 0
	case "clone3", "getxattr (unlisted)", "mlock (unlisted)":
		return unix.ENOSYS
	}
	return unix.EPERM
}

// WorkerUIDBase mirrors WORKER_UID_BASE in confine_linux.c.
const workerUIDBase = 0x6d000000

// TestWorkerIsConfined runs every call of confineProbes in a real worker
// process and checks the errno of each, so a call dropped from the
// seccomp filter is caught even where Landlock or file permissions would
// also refuse it. Started by root, the worker runs as a uid of its own with
// a thread limit and its parent-death signal.
func TestWorkerIsConfined(t *testing.T) {
	t.Parallel()
	// The worker's uid must reach the target: t.TempDir and its parent
	// are private to the test's user.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mustExe(t), "confine-probe", target)
	cmd.Env = []string{envWorker + "=1", "MAIDEN_SECRET_X=leak"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	r := bufio.NewReader(stdout)
	var lines []string
	next := func() string {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("probe: %v after %q; stderr: %s", err, lines, stderr.String())
		}
		lines = append(lines, strings.TrimSpace(line))
		return strings.TrimSpace(line)
	}
	note := next()
	if !strings.HasPrefix(note, "NOTE ") {
		t.Fatalf("probe: %s", note)
	}
	var pid, uid, gid int
	if _, err := fmt.Sscanf(next(), "IDS %d %d %d", &pid, &uid, &gid); err != nil {
		t.Fatalf("probe: %q", lines)
	}
	// Changing uid clears the parent-death signal: the worker must have
	// set it again, or it would outlive maiden.
	if line := next(); line != "PDEATHSIG 9" {
		t.Errorf("worker's parent-death signal: %q, want SIGKILL (9)", line)
	}
	if os.Geteuid() == 0 {
		if want := workerUIDBase + pid; uid != want || gid != want {
			t.Errorf("worker started by root runs as uid %d gid %d, want %d", uid, gid, want)
		}
		var rl unix.Rlimit
		if err := prlimit(pid, unix.RLIMIT_NPROC, nil, &rl); err != nil || rl.Cur < uint64(128+runtime.NumCPU()) || rl.Cur > 128+4096 {
			t.Errorf("worker's RLIMIT_NPROC = %+v (%v), want 128 + CPUs", rl, err)
		}
		// No capability in any set, the bounding set included.
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if key == "CapBnd" && !haveSetpcap(t) {
				continue
			}
			if got := statusField(string(status), key); got != "0000000000000000" {
				t.Errorf("worker's %s: %q, want none", key, got)
			}
		}
	}
	// Hand the target to the worker's uid, so the kernel's own checks
	// would let chmod, chown, utimes and xattrs through: only the filter
	// stands in the way.
	if err := os.Chown(target, uid, gid); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, "go\n")
	seen := map[string]bool{}
	for len(seen) < len(confineProbes) {
		line := next()
		var errno int
		var name string
		if _, err := fmt.Sscanf(line, "CALL %d", &errno); err != nil {
			t.Fatalf("unexpected probe line %q", line)
		}
		name = strings.SplitN(line, " ", 3)[2]
		seen[name] = true
		if got, want := unix.Errno(errno), confineWant(name); got != want {
			t.Errorf("%s: errno %d (%v), want %d (%v)", name, int(got), got, int(want), want)
		}
	}
	t.Logf("probe (%s): %d calls", note, len(seen))
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("target after the probe: %v %v", fi.Mode(), err)
	}
}

// TestWorkerThreadsBounded: a worker cannot make thousands of threads
// (kernel stacks no memory limit counts). RLIMIT_NPROC counts the tasks of
// a uid, so the bound holds for workers under their own uid: when maiden
// runs as root.
func TestWorkerThreadsBounded(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("workers get a uid of their own, and with it a thread limit, only from root")
	}
	cmd := exec.Command(mustExe(t), "confine-threads")
	cmd.Env = []string{envWorker + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "THREADS all") {
		t.Fatalf("a worker made 3000 threads (%v):\n%.2000s", err, out)
	}
	if !strings.Contains(string(out), "failed to create new OS thread") && !strings.Contains(string(out), "pthread_create failed: Resource temporarily unavailable") {
		t.Fatalf("the worker did not die for want of threads (%v):\n%.2000s", err, out)
	}
	last := 0
	for _, l := range strings.Split(string(out), "\n") {
		_, _ = fmt.Sscanf(l, "THREADS %d", &last)
	}
	t.Logf("threads started before the limit: %d (reported every 50)", last)
}

// TestWorkerPageTablesBounded: a worker that grows page tables (512 MiB
// of them for a read-only mapping RLIMIT_DATA never counts) is stopped by
// its memory cgroup, and the call fails as out of memory.
func TestWorkerPageTablesBounded(t *testing.T) {
	t.Parallel()
	if _, err := memcgRoot(); err != nil {
		t.Skipf("no memory cgroup for workers here: %v", err)
	}
	if raceExtra > 0 {
		// The race detector's shadow memory adds 1 GiB to every call's
		// headroom: exceeding it would take 1.2 GiB of page tables.
		t.Skip("the race detector's extra headroom is larger than the probe")
	}
	p := newPool(t, &Options{Command: []string{mustExe(t), "hostile-pagetables"}, Size: 1, StartTimeout: 10 * time.Second})
	_ = p.mem.Put("fake", []byte("not code"))
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: sandbox.Limits{Timeout: 30 * time.Second, Memory: 16 << 20}, Input: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Failure == nil || out.Failure.Kind != sandbox.KindMemory {
		t.Fatalf("a worker grew 512 MiB of page tables: %+v", out)
	}
	t.Logf("%s", out.Failure.Message)
}

// TestWorkerEnvironmentIsEmpty: secrets in the parent's environment never
// reach a worker.
func TestWorkerEnvironmentIsEmpty(t *testing.T) {
	t.Setenv("MAIDEN_SECRET_TOKEN", "s3cret")
	w, err := spawn(context.Background(), []string{mustExe(t)}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.kill(killedShutdown)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "MAIDEN_SECRET") {
		t.Fatalf("worker environment holds a secret: %q", b)
	}
}

func mustExe(t testing.TB) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestShutdownInterruptsCalls: Shutdown with calls in flight kills their
// workers, the calls return, and nothing is left running.
func TestShutdownInterruptsCalls(t *testing.T) {
	t.Parallel()
	p, err := New(&Options{Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	sleeper := testkit.Component(t, "go/sleeper")
	l := sandbox.Limits{Timeout: 30 * time.Second, Memory: 64 << 20}
	tl, err := p.Open(context.Background(), sleeper, l)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: `{"ms":30000}`})
			errs <- err
		}()
	}
	// Shut down once the three calls are on their workers (not after a
	// fixed 500 ms, by which a loaded machine may not have started them,
	// and the test would check only calls refused at the door).
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		n := len(p.busy)
		p.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 calls on a worker after a minute", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, api.ErrClosed) {
			t.Errorf("call after shutdown: %v", err)
		}
	}
	if n := p.Workers(); n != 0 {
		t.Errorf("%d workers alive after shutdown", n)
	}
	if _, err := tl.Execute(context.Background(), sandbox.Call{Limits: l, Input: `{"ms":1}`}); !errors.Is(err, api.ErrClosed) {
		t.Errorf("call after shutdown: %v, want api.ErrClosed", err)
	}
}

// TestBigHostCallArguments is the hardening issue's third finding: a tool
// with no network passes a 59 MB body (or 3.7 M headers) to http-fetch,
// which wasmtime expands at 32 bytes per byte before any maiden code runs.
// In a worker that expansion meets the worker's memory limit: the call is
// kind memory and the parent does not grow.
func TestBigHostCallArguments(t *testing.T) {
	p := newPool(t, &Options{Size: 1})
	path := testkit.Component(t, "bigargs")
	// The deadline is not what is tested: the lift must meet the memory
	// limit first, and under a full run's load (with -race) it took more
	// than 20 s to get there, ending the call at its deadline instead.
	l := sandbox.Limits{Timeout: 2 * time.Minute, Memory: 64 << 20}
	before, _ := vmData(os.Getpid())
	for _, in := range []string{`{"body":true}`, `{"headers":true}`} {
		t.Run(in, func(t *testing.T) {
			out := call(t, p, path, in, l)
			if out.Failure == nil || out.Failure.Kind != sandbox.KindMemory {
				t.Fatalf("outcome %+v, want kind memory", out)
			}
		})
	}
	after, _ := vmData(os.Getpid())
	// The parent only ever holds frames: far below the 1.9 GB the lifting
	// would cost.
	if after > before+512<<20 {
		t.Errorf("parent VmData grew from %d MiB to %d MiB", before>>20, after>>20)
	}
}

// TestDiskCacheAcrossPools: a second pool on the same cache directory
// loads the compiled code the first one stored, verified by compcache.
func TestDiskCacheAcrossPools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	echo := testkit.Component(t, "echo")
	p1 := newPool(t, &Options{CacheDir: dir})
	t1, err := p1.Open(context.Background(), echo, lim)
	if err != nil {
		t.Fatal(err)
	}
	if t1.Cached {
		t.Error("first pool found it cached")
	}
	p2 := newPool(t, &Options{CacheDir: dir})
	t2, err := p2.Open(context.Background(), echo, lim)
	if err != nil {
		t.Fatal(err)
	}
	if !t2.Cached {
		t.Error("second pool compiled again instead of using the disk cache")
	}
	out, err := t2.Execute(context.Background(), sandbox.Call{Limits: lim, Input: `{"message":"from disk"}`})
	if err != nil || out.Failure != nil || !strings.Contains(out.Output, "from disk") {
		t.Fatalf("%+v %v", out, err)
	}
}

// TestWorkerOutlivesTheThreadThatSpawnedIt: a worker's Pdeathsig follows
// the thread that forks it, and Go ends a thread whose locked goroutine
// returns (the audit journal's ingester, a network namespace's maker). A
// worker spawned by a goroutine on such a thread must survive it: it is
// forked from internal/childproc's thread. (Before, CI saw a compile
// worker "killed from outside maiden" in maiden build.) Not parallel: the
// thread it ends may have forked another test's probe (started with
// Pdeathsig by cmd.Start), which would get the signal.
func TestWorkerOutlivesTheThreadThatSpawnedIt(t *testing.T) {
	t.Parallel()
	var w *proc
	var err error
	testkit.OnEndingThread(t, func() { w, err = spawn(context.Background(), []string{mustExe(t)}, 10*time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.kill(killedShutdown)
	if testkit.Killed(t, w.pid) {
		t.Fatalf("worker %d was killed when the thread that spawned it ended", w.pid)
	}
	if err := w.alive(); err != nil {
		t.Fatal(err)
	}
}

// TestLimitFailureOfAKilledWorker: a call whose worker Shutdown killed
// between the pool handing it out and its limits being set fails with
// api.ErrClosed, as every call Shutdown interrupts (prlimit of the exiting
// process said EPERM, and the call failed with "limit worker memory:
// operation not permitted": TestShutdownInterruptsCalls, once in a full
// run); a worker killed for another reason says that reason.
func TestLimitFailureOfAKilledWorker(t *testing.T) {
	t.Parallel()
	eperm := fmt.Errorf("prlimit: %w", syscall.EPERM)
	for why, want := range map[killReason]string{killedShutdown: "", killedProtocol: "broke the worker protocol"} {
		w := &proc{killed: why, exited: make(chan struct{})}
		err := limitErr(w, eperm)
		if want == "" && !errors.Is(err, api.ErrClosed) {
			t.Errorf("killed by Shutdown: %v, want api.ErrClosed", err)
		}
		if want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("killed (%d): %v, want %q", why, err, want)
		}
	}
	live := &proc{exited: make(chan struct{})}
	if err := limitErr(live, eperm); !errors.Is(err, syscall.EPERM) || !strings.Contains(err.Error(), "limit worker memory") {
		t.Errorf("a live worker that cannot be limited: %v, want the failure itself", err)
	}
}

// idlePIDs is the pool's idle workers' PIDs, after a call; at least one.
func idlePIDs(t *testing.T, p *Pool) []int {
	t.Helper()
	p.mu.Lock()
	var pids []int
	for _, w := range p.idle {
		pids = append(pids, w.pid)
	}
	p.mu.Unlock()
	if len(pids) == 0 {
		t.Fatal("no idle worker after the calls")
	}
	return pids
}

// A worker runs with its collector's target at 400 (proc.go, workerGOGC),
// whatever the parent's environment says.
func TestWorkerGOGC(t *testing.T) {
	t.Setenv("GOGC", "50")
	p := newPool(t, &Options{Size: 1})
	if out := call(t, p, testkit.Component(t, "echo"), `{"message":"x"}`, sandbox.Limits{Timeout: 5 * time.Second, Memory: 64 << 20}); out.Failure != nil {
		t.Fatalf("call: %+v", out.Failure)
	}
	for _, pid := range idlePIDs(t, p) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		var gogc []string
		for _, kv := range strings.Split(string(env), "\x00") {
			if strings.HasPrefix(kv, "GOGC=") {
				gogc = append(gogc, kv)
			}
		}
		if len(gogc) != 1 || gogc[0] != workerGOGC {
			t.Errorf("worker %d's environment has %q, want exactly %s", pid, gogc, workerGOGC)
		}
	}
}

// A worker's wasmtime runs one tokio thread, not one per CPU (proc.go,
// tokioThreads): a Go tool's call wakes that runtime for its stdout and
// stderr streams, and with two threads they also woke each other.
func TestWorkerRunsOneTokioThread(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	sleeper := testkit.Component(t, "go/sleeper")
	l := sandbox.Limits{Timeout: 5 * time.Second, Memory: 64 << 20}
	for range 3 {
		if out := call(t, p, sleeper, `{"ms":1}`, l); out.Failure != nil {
			t.Fatalf("call: %+v", out.Failure)
		}
	}
	for _, pid := range idlePIDs(t, p) {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, task := range tasks {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, task.Name()))
			if strings.HasPrefix(string(comm), "tokio-runtime") {
				n++
			}
		}
		if n > 1 {
			t.Errorf("worker %d runs %d tokio threads, want at most 1", pid, n)
		}
	}
}
