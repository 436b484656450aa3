package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// The red-team workers: this file cannot add modes to TestMain, so an init
// function (which runs before TestMain) serves argv[1] "redteam-*" in a
// re-executed test binary. Like hostileWorker, each stands in for a
// compromised worker process (native code the tool took over).
func init() {
	if IsChild() && len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "redteam-") {
		os.Exit(redteamWorker(os.Args[1]))
	}
}

func redteamWorker(mode string) int {
	if mode == "redteam-probe" {
		return redteamProbe()
	}
	conn := os.NewFile(ipcFD, "ipc")
	r := bufio.NewReader(conn)
	write := func(b []byte) { _, _ = conn.Write(b) }
	write(hello{Version: protocolVersion, Fingerprint: "redteam", Confinement: "landlock ABI 0 (redteam)"}.encode())
	for {
		typ, p, err := readFrame(r, maxFrame)
		if err != nil {
			return 0
		}
		switch typ {
		case msgLoad:
			if mode == "redteam-ignore-load" {
				continue // never answers: the parent must not wait forever
			}
			m, _ := decodeLoad(p)
			takeCode(m)
			write(loadedMsg{Digest: m.Digest}.encode())
			if mode == "redteam-deaf" {
				select {} // reads nothing more
			}
		case msgCompile:
			if mode == "redteam-hang-compile" {
				continue // never answers
			}
			return 1
		case msgRun:
			m, _ := decodeRun(p)
			switch mode {
			case "redteam-flood-idle":
				// Answer, then keep talking while the parent holds the
				// worker idle.
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
				for range 64 {
					write(logMsg{ID: m.ID, Level: "info", Source: "log", Message: "after done"}.encode())
				}
			case "redteam-talk-later":
				// Answer, then speak up once the parent has put the
				// worker back in the pool (where nobody reads it).
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
				go func(id uint64) {
					time.Sleep(50 * time.Millisecond)
					write(logMsg{ID: id, Level: "info", Source: "log", Message: "while idle"}.encode())
				}(m.ID)
			case "redteam-idle-spin":
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
				go func() {
					for i := 0; ; i++ { //nolint:staticcheck // burning CPU is the point
						_ = i * i
					}
				}()
			case "redteam-fail-describe":
				write(doneMsg{ID: m.ID, FailKind: "trap", FailMessage: "poisoned by another tool's worker"}.encode())
			case "redteam-host-error":
				write(doneMsg{ID: m.ID, HostErr: "token=s3cr3t-value"}.encode())
			default:
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
			}
		}
	}
}

// fakePool is a pool of red-team workers holding a fake artifact (the
// red-team workers answer a load without looking at the code).
func fakePool(t *testing.T, mode string, size int) *Pool {
	t.Helper()
	p := newPool(t, &Options{Command: []string{mustExe(t), mode}, Size: size, StartTimeout: 5 * time.Second})
	_ = p.mem.Put("fake", []byte("not code"))
	return p
}

var fastLim = sandbox.Limits{Timeout: 300 * time.Millisecond, Memory: 16 << 20}

// TestRedTeamFloodWhileIdleKilledOnNextCall: a worker that sends frames
// after its answer is not reused: the next call runs on a fresh worker.
func TestRedTeamFloodWhileIdleKilledOnNextCall(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "redteam-flood-idle", 1)
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if err != nil || out.Failure != nil || out.Output != `"ok"` {
		t.Fatalf("first call: %+v %v", out, err)
	}
	time.Sleep(100 * time.Millisecond)
	// Its stale log lines are either seen at release (the worker is not
	// reused) or on the next call (a trap, and the worker is replaced).
	// Every worker of this mode floods after every answer (its warming
	// describe() too), so later calls may trap again: what must hold is
	// that each call ends promptly as ok or trap, never with another
	// call's frames taken for its own.
	for i := 0; i < 4; i++ {
		start := time.Now()
		out, err = p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
		if err != nil || (out.Failure == nil && out.Output != `"ok"`) || (out.Failure != nil && out.Failure.Kind != sandbox.KindTrap) {
			t.Fatalf("call %d after the flood: %+v %v", i+2, out, err)
		}
		if took := time.Since(start); took > testkit.Slack(t, 5*time.Second) {
			t.Errorf("call %d took %v", i+2, took)
		}
	}
}

// TestRedTeamIdleWorkerThatSpokeIsNotTaken: nobody reads an idle worker's
// socket, so a worker that sends bytes after it was put back in the pool
// is found out when a call would take it: it is killed, and the call runs
// on a fresh worker instead of failing on the stale frame.
func TestRedTeamIdleWorkerThatSpokeIsNotTaken(t *testing.T) {
	t.Parallel()
	spokeWhileIdleIsNotTaken(t, "redteam-talk-later")
}

// spokeWhileIdleIsNotTaken checks that a worker of the given mode, which
// answers its first call and then speaks while idle (its bytes in the
// socket, or a frame in its mailbox), is killed and the next call runs on a
// fresh worker.
func spokeWhileIdleIsNotTaken(t *testing.T, mode string) {
	p := fakePool(t, mode, 1)
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if err != nil || out.Failure != nil || out.Output != `"ok"` {
		t.Fatalf("first call: %+v %v", out, err)
	}
	p.mu.Lock()
	if len(p.idle) != 1 {
		p.mu.Unlock()
		t.Fatalf("%d idle workers after the first call, want 1", len(p.idle))
	}
	w := p.idle[0]
	p.mu.Unlock()
	// Wait for the worker to speak while idle (bytes in the socket, a
	// frame in the mailbox).
	bound := time.Now().Add(testkit.Slack(t, 5*time.Second))
	for !w.pending() {
		if time.Now().After(bound) {
			t.Fatal("the idle worker never spoke")
		}
		time.Sleep(time.Millisecond)
	}
	out, err = p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if err != nil || out.Failure != nil || out.Output != `"ok"` {
		t.Fatalf("call after the idle worker spoke: %+v %v, want ok from a fresh worker", out, err)
	}
	if w.killReason() == notKilled {
		t.Fatalf("the worker that spoke while idle (pid %d) was not killed", w.pid)
	}
}

// TestRedTeamWorkerHostErrorKillsWorker: a worker's HostErr ends the call
// as a trap (a worker cannot turn its call into a host error), and the
// worker is dropped.
func TestRedTeamWorkerHostErrorKillsWorker(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "redteam-host-error", 1)
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTrap {
		t.Fatalf("%+v %v, want a trap", out, err)
	}
	// The worker is never reused: its replacement (warmed with describe(),
	// where this hostile mode answers a host error again, and so is
	// dropped too) is a new process.
	p.mu.Lock()
	for w := range p.busy {
		t.Errorf("worker %d still busy", w.pid)
	}
	p.mu.Unlock()
	if n := p.Workers(); n > 1 {
		t.Errorf("%d workers, want at most 1", n)
	}
}

// TestRedTeamMissingWorkerBinary: a worker command that does not exist is
// an error naming it, at once, and the pool keeps no slot for it.
func TestRedTeamMissingWorkerBinary(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Command: []string{"/nonexistent/maiden-worker"}, Size: 1})
	_ = p.mem.Put("fake", []byte("x"))
	start := time.Now()
	for range 3 {
		_, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/maiden-worker") {
			t.Fatalf("err = %v", err)
		}
	}
	if took := time.Since(start); took > testkit.Slack(t, 2*time.Second) {
		t.Errorf("took %v", took)
	}
	if n := p.Workers(); n != 0 {
		t.Errorf("%d workers counted", n)
	}
}

// TestRedTeamShutdownTwiceAndAfter: Shutdown is idempotent and calls after
// it are api.ErrClosed, with no worker left.
func TestRedTeamShutdownTwiceAndAfter(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "redteam-ok", 2)
	if _, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"}); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("err = %v, want api.ErrClosed", err)
	}
	if n := p.Workers(); n != 0 {
		t.Errorf("%d workers", n)
	}
}

// childPIDs lists the live (non-zombie) children of this process.
func childPIDs(t *testing.T) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var pids []int
	me := os.Getpid()
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		var state byte
		var ppid int
		if _, err := fmt.Sscanf(s[i+2:], "%c %d", &state, &ppid); err != nil {
			continue
		}
		if ppid == me && state != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// redteamProbe tries, confined, what a compromised worker might use to
// escape its limits, one line per attempt; it waits for a line on stdin
// between steps so the test can look at it from outside.
func redteamProbe() int {
	in := bufio.NewReader(os.Stdin)
	fmt.Printf("NOTE %s\n", confinementNote())
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 16<<20, unix.IPC_CREAT|0o600)
	if err != nil {
		fmt.Printf("DENIED shmget: %v\n", err)
	} else {
		fmt.Printf("SHM %d\n", id)
	}
	fmt.Printf("KILLPARENT %v\n", unix.Kill(os.Getppid(), 0))
	fmt.Printf("KILLALL %v\n", unix.Kill(-1, 0))
	fmt.Println("READY")
	_, _ = in.ReadString('\n') // the test has lowered RLIMIT_DATA
	b, err := unix.Mmap(-1, 0, 128<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
	if err != nil {
		fmt.Printf("DENIED mmap shared: %v\n", err)
	} else {
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Printf("ALLOWED mmap shared %d MiB\n", len(b)>>20)
	}
	p, err := unix.Mmap(-1, 0, 128<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		fmt.Printf("DENIED mmap private: %v\n", err)
	} else {
		fmt.Printf("ALLOWED mmap private %d MiB\n", len(p)>>20)
	}
	fmt.Println("DONE")
	_, _ = in.ReadString('\n')
	return 0
}

// TestRedTeamConfinedProbe pins down what holds in a confined worker: a
// private mapping past RLIMIT_DATA (set from outside, as the parent does)
// is refused, and with Landlock ABI 6+ the parent cannot be signalled.
// (The probe also makes a SysV shm segment; it is removed here.)
func TestRedTeamConfinedProbe(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(mustExe(t), "redteam-probe")
	cmd.Env = []string{envWorker + "=1"}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	r := bufio.NewReader(stdout)
	var lines []string
	readUntil := func(prefix string) {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				// How it ended says why (ThreadSanitizer exits 66; a
				// seccomp kill is signal "bad system call").
				_ = cmd.Process.Kill()
				t.Fatalf("probe: %v after %q; the probe: %v", err, lines, cmd.Wait())
			}
			lines = append(lines, strings.TrimSpace(line))
			if strings.HasPrefix(line, prefix) {
				return
			}
		}
	}
	readUntil("READY")
	data, err := vmData(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := prlimit(cmd.Process.Pid, unix.RLIMIT_DATA, nil, &old); err != nil {
		t.Fatal(err)
	}
	// 64 MiB of room, half the private mapping the probe then asks for.
	// With 16, a probe (of a twin test since removed) ended without a
	// word once, in a loaded full run (189), right after its limit was
	// set; the race runtime's own mappings growing past the room is the
	// likeliest cause (the exit was not recorded then; it is now).
	if err := prlimit(cmd.Process.Pid, unix.RLIMIT_DATA, &unix.Rlimit{Cur: data + 64<<20, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, "go\n")
	readUntil("DONE")
	_, _ = io.WriteString(stdin, "go\n")
	out := strings.Join(lines, "\n")
	t.Logf("probe:\n%s", out)
	for _, l := range lines {
		var id int
		if _, err := fmt.Sscanf(l, "SHM %d", &id); err == nil {
			_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		}
	}
	if !strings.Contains(out, "DENIED mmap private") {
		t.Error("a private mapping past RLIMIT_DATA was allowed")
	}
	var abi int
	if _, err := fmt.Sscanf(lines[0], "NOTE landlock ABI %d", &abi); err == nil && abi >= 6 {
		if !strings.Contains(out, "KILLPARENT operation not permitted") {
			t.Error("Landlock ABI 6+ but the worker may signal its parent")
		}
	}
}
