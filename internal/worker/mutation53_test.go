package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/sandbox"
	"golang.org/x/sys/unix"
)

// The pass-53 workers: like the red-team ones (redteam_test.go), an init
// function serves argv[1] "mut53-*" in a re-executed test binary, each a
// worker process a tool took over.
func init() {
	if IsChild() && len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "mut53-") {
		os.Exit(mut53Worker(os.Args[1]))
	}
}

func mut53Worker(mode string) int {
	// The parent-death signal is the main thread's (a thread the runtime
	// starts has none): read here, in init, which runs on it.
	var pdeathsig int32
	_ = unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&pdeathsig)), 0, 0, 0)
	conn := os.NewFile(ipcFD, "ipc")
	r := bufio.NewReader(conn)
	write := func(b []byte) { _, _ = conn.Write(b) }
	switch h := (hello{Version: protocolVersion, Fingerprint: "mut53", Confinement: "landlock ABI 0 (mut53)"}); mode {
	case "mut53-log-first":
		// A hello's fields under a log line's type.
		b := h.encode()
		b[4] = msgLog
		write(b)
		select {} // stays, unless killed
	case "mut53-hello-trailing":
		// A hello with a byte after its fields.
		b := append(h.encode(), 0)
		b[3]++
		write(b)
	case "mut53-huge-first":
		// A first frame over any hello's size, then it stays.
		write([]byte{0xff, 0xff, 0xff, 0xff, msgHello})
		select {}
	case "mut53-other-protocol":
		h.Version++
		write(h.encode())
	default:
		write(h.encode())
	}
	for {
		typ, p, err := readFrame(r, maxFrame)
		if err != nil {
			if mode == "mut53-outlive" {
				// The socket closed: a worker that does not leave by
				// itself, which only a kill ends.
				select {}
			}
			return 0
		}
		switch typ {
		case msgLoad:
			m, _ := decodeLoad(p)
			takeCode(m)
			write(loadedMsg{Digest: m.Digest}.encode())
		case msgRun:
			m, _ := decodeRun(p)
			switch mode {
			case "mut53-die":
				// Dies in every call (its warming describe() too).
				return 7
			case "mut53-limits":
				// Says what the parent set: its data limit and its
				// parent-death signal.
				var lim unix.Rlimit
				_ = unix.Getrlimit(unix.RLIMIT_DATA, &lim)
				write(doneMsg{ID: m.ID, Output: fmt.Sprintf(`"%d %d"`, lim.Cur, pdeathsig)}.encode())
			case "mut53-outlive":
				// Never answers; the deadline's kill must end it.
			default:
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
			}
		}
	}
}

// mut53Report runs one call in a mut53-limits worker and returns the data
// limit and the parent-death signal it saw.
func mut53Report(t *testing.T, p *Pool, l sandbox.Limits) (data uint64, pdeathsig int) {
	t.Helper()
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: l, Input: "{}"})
	if err != nil || out.Failure != nil {
		t.Fatalf("call: %+v, %v", out, err)
	}
	f := strings.Fields(strings.Trim(out.Output, `"`))
	if len(f) != 2 {
		t.Fatalf("report %q", out.Output)
	}
	data, _ = strconv.ParseUint(f[0], 10, 64)
	pdeathsig, _ = strconv.Atoi(f[1])
	return data, pdeathsig
}

// TestMutation53SmallerMemoryLowersTheLimit: a call's data limit is set
// from its own memory_mb, also when the worker's last call had more: a tool
// never runs with the headroom of the call before it.
func TestMutation53SmallerMemoryLowersTheLimit(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "mut53-limits", 1)
	big := sandbox.Limits{Timeout: 5 * time.Second, Memory: 256 << 20}
	small := sandbox.Limits{Timeout: 5 * time.Second, Memory: 16 << 20}
	first, _ := mut53Report(t, p, big)
	second, _ := mut53Report(t, p, small)
	if second+(256-16)<<20 > first {
		t.Fatalf("a call with memory_mb 16 after one with 256 on the same worker ran with a data limit of %d (the first had %d); want it lower by 240 MiB", second, first)
	}
}

// TestMutation53WorkerDiesWithItsParent: every worker is started with
// SIGKILL as its parent-death signal, so a maiden that dies takes its
// workers with it (no tool left running unsupervised).
func TestMutation53WorkerDiesWithItsParent(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "mut53-limits", 1)
	if _, sig := mut53Report(t, p, fastLim); sig != int(unix.SIGKILL) {
		t.Fatalf("the worker's parent-death signal is %d; want SIGKILL (%d)", sig, unix.SIGKILL)
	}
	// Started by root, the worker sets it again after its uid changed
	// (confine_linux.c, drop_ids): under any other user only the start's
	// own setting gives it one.
	w, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.release(w, true)
	if a := w.cmd.SysProcAttr; a == nil || a.Pdeathsig != syscall.SIGKILL {
		var sig syscall.Signal
		if a != nil {
			sig = a.Pdeathsig
		}
		t.Fatalf("the worker was started with parent-death signal %d; want SIGKILL (a maiden not running as root leaves its workers running when it dies)", sig)
	}
}

// TestMutation53DeadWorkersFreeTheirSlots: a worker that dies in a call,
// and its replacement that dies warming, leave no slot counted: the pool
// counts no worker, and the next call starts one rather than wait for a
// worker that does not exist.
func TestMutation53DeadWorkersFreeTheirSlots(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "mut53-die", 1)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := p.run(ctx, "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
		cancel()
		if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindTrap {
			t.Fatalf("call %d in a worker that dies: %+v, %v; want a trap", i+1, out, err)
		}
		p.starting.Wait() // the replacement, dead while warming
		if n := p.Workers(); n != 0 {
			t.Fatalf("after call %d (its worker and the replacement both dead) the pool counts %d workers; want 0", i+1, n)
		}
	}
}

// TestMutation53KilledWorkerIsGone: a worker killed at its call's deadline
// is ended, not only cut off: one that stays once its socket closes is
// reaped all the same.
func TestMutation53KilledWorkerIsGone(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "mut53-outlive", 1)
	w, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var healthy bool
	out, err := p.runOn(context.Background(), w, "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"}, time.Now(), &healthy)
	if err != nil || out.Failure == nil || out.Failure.Kind != sandbox.KindDeadline || healthy {
		p.release(w, healthy)
		t.Fatalf("a call that never answers: %+v, %v, healthy %t; want past its deadline", out, err, healthy)
	}
	p.release(w, false)
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("worker %d killed at its deadline (%v) still runs 10 s later: only its socket was closed", w.pid, w.killReason())
	}
}

// TestMutation53StderrTailIsBounded: a worker's stderr is held to max bytes
// however much it writes.
func TestMutation53StderrTailIsBounded(t *testing.T) {
	t.Parallel()
	tb := &tailBuffer{max: 8 << 10}
	line := []byte(strings.Repeat("x", 1000) + "\n")
	for range 1000 {
		if _, err := tb.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(tb.String()); n > 8<<10+8 {
		t.Fatalf("a worker's 1 MB of stderr is held as %d bytes; want at most %d", n, 8<<10)
	}
}

// TestMutation53LoadedFrameTrailingRefused: a worker's load answer with
// bytes after its fields is refused, like every other frame it sends.
func TestMutation53LoadedFrameTrailingRefused(t *testing.T) {
	t.Parallel()
	p := loadedMsg{Digest: "d", Err: ""}.encode()[5:]
	if _, err := decodeLoaded(append(p, 0)); !errors.Is(err, errTrailing) {
		t.Fatalf("decodeLoaded with a trailing byte: %v; want %v", err, errTrailing)
	}
}

// TestMutation53ShutdownEndsWithAHealthyRelease: a call that ended well
// just as Shutdown began returns its worker, which is ended (not kept idle)
// and lets Shutdown return: Shutdown waits for the calls out, not for ctx.
func TestMutation53ShutdownEndsWithAHealthyRelease(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "redteam-ok", 1)
	w, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var healthy bool
	out, err := p.runOn(context.Background(), w, "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"}, time.Now(), &healthy)
	if err != nil || out.Failure != nil || !healthy {
		p.release(w, healthy)
		t.Fatalf("call: %+v, %v, healthy %t", out, err, healthy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(ctx) }()
	for !p.isClosing() {
		runtime.Gosched()
	}
	p.release(w, true)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown with one call out, returned healthy once it had begun: %v; want it to return once the call did", err)
	}
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	if idle != 0 || !w.gone() {
		t.Fatalf("after Shutdown the pool holds %d idle workers, the released one gone: %t; want none, ended", idle, w.gone())
	}
}

// TestMutation53ShutdownCancelsAStart: a worker still starting (one that
// has not said hello) is abandoned by Shutdown at once, the call waiting for
// it told the pool is closed; Shutdown does not wait out the start timeout.
func TestMutation53ShutdownCancelsAStart(t *testing.T) {
	t.Parallel()
	p, err := New(&Options{Command: []string{"/bin/sleep", "60"}, Size: 1, StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.mem.Put("fake", []byte("x"))
	called := make(chan error, 1)
	go func() {
		_, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
		called <- err
	}()
	for {
		p.mu.Lock()
		n := len(p.spawning)
		p.mu.Unlock()
		if n > 0 {
			break
		}
		runtime.Gosched()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown while a worker starts (start timeout 30 s): %v; want the start abandoned at once", err)
	}
	if err := <-called; !errors.Is(err, api.ErrClosed) {
		t.Fatalf("the call waiting for the start: %v; want api.ErrClosed", err)
	}
}

// TestMutation53StartNeedsItsHello: a worker is taken only once its first
// frame is a hello of this protocol: a frame of another type that decodes as
// one, a hello of another version, or one with bytes after its fields, ends
// it.
func TestMutation53StartNeedsItsHello(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string]string{
		"mut53-log-first":      fmt.Sprintf("first message was type %d, not hello", msgLog),
		"mut53-other-protocol": fmt.Sprintf("speaks protocol %d, want %d", protocolVersion+1, protocolVersion),
		"mut53-hello-trailing": errTrailing.Error(),
	} {
		p := fakePool(t, mode, 1)
		out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: a call: %+v, %v; want the start refused: %s", mode, out, err, want)
		}
	}
}

// TestMutation53ZeroLengthFrameRefused: a frame whose length is zero (no
// type byte) is refused as truncated, not read on into the next frame.
func TestMutation53ZeroLengthFrameRefused(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a zero-length frame followed by a type byte panicked the parent's reader: %v; want errShort", r)
		}
	}()
	_, _, err := readFrameLimited(bytes.NewReader([]byte{0, 0, 0, 0, msgDone}), workerFrameLimit)
	if !errors.Is(err, errShort) {
		t.Fatalf("a zero-length frame: %v; want %v", err, errShort)
	}
}

// TestMutation53NoLimitOnAReapedPID: once a worker is reaped its pid may be
// another process's: setting its data or CPU limit is refused as exited,
// before any prlimit on that pid.
func TestMutation53NoLimitOnAReapedPID(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "redteam-ok", 1)
	w, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w.kill(killedProtocol)
	p.release(w, false)
	<-w.exited
	want := fmt.Sprintf("worker %d has exited", w.pid)
	if err := w.setDataLimit(w.limit + 1<<20); err == nil || err.Error() != want {
		t.Errorf("setDataLimit on a reaped worker: %v; want %q (refused before a prlimit on its pid)", err, want)
	}
	if err := w.setCPULimit(1); err == nil || err.Error() != want {
		t.Errorf("setCPULimit on a reaped worker: %v; want %q", err, want)
	}
}

// TestMutation53AbandonedStartsAreEnded: a start that fails (its caller gave
// up, it timed out, its first frame is not a hello or cannot be read) ends
// the process it started: nothing is left running outside the pool.
func TestMutation53AbandonedStartsAreEnded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, mode string
		cmd        []string
		start      time.Duration
		ctx        time.Duration
	}{
		{"caller gave up", "", []string{"/bin/sleep", "60"}, 30 * time.Second, 200 * time.Millisecond},
		{"start timed out", "", []string{"/bin/sleep", "60"}, 200 * time.Millisecond, 30 * time.Second},
		{"first frame not a hello", "mut53-log-first", nil, 10 * time.Second, 30 * time.Second},
		{"first frame unreadable", "mut53-huge-first", nil, 10 * time.Second, 30 * time.Second},
	} {
		cmd := c.cmd
		if cmd == nil {
			cmd = []string{mustExe(t), c.mode}
		}
		p := newPool(t, &Options{Command: cmd, Size: 1, StartTimeout: c.start})
		_ = p.mem.Put("fake", []byte("x"))
		ctx, cancel := context.WithTimeout(context.Background(), c.ctx)
		_, err := p.run(ctx, "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
		cancel()
		if err == nil {
			t.Errorf("%s: the call ran; want its start refused", c.name)
			continue
		}
		// Started by spawn and refused, the process is not the pool's:
		// found by its argv among this process's children, and waited for
		// (pidfd) if it is still there.
		for _, pid := range mut53Children(cmd) {
			fd, perr := unix.PidfdOpen(pid, 0)
			if perr != nil {
				continue // gone meanwhile
			}
			n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
			unix.Close(fd)
			if n == 0 {
				t.Errorf("%s (%v): process %d, which the failed start made, still runs 10 s later; want it killed", c.name, err, pid)
			}
		}
	}
}

// mut53Children is the PIDs of this process's live children whose argv is
// argv.
func mut53Children(argv []string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state, ppid.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && string(cmdline) == want {
			pids = append(pids, pid)
		}
	}
	return pids
}
