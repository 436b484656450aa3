package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/maiden-run/maiden/internal/childproc"
	"github.com/maiden-run/maiden/internal/sandbox"
	"golang.org/x/sys/unix"
)

// proc is one worker process, seen from the parent. It runs one call at a
// time; whoever holds it (the pool hands it out) is the only one to send.
type proc struct {
	cmd  *exec.Cmd
	conn *ipcConn     // spins while a call is out, then sleeps off the poller
	code *codeChannel // compiled code by descriptor (codefd.go); nil: through conn
	pid  int

	exited chan struct{} // closed once the process is reaped
	stop   chan struct{} // closed by kill
	frames chan frame    // read by the reader goroutine; unbuffered (read says why)
	dead   chan struct{} // closed when the reader stops (EOF, bad frame)
	err    error         // why the reader stopped; set before dead closes

	stderr *tailBuffer
	rd     *bufio.Reader // frames from conn (one reader at a time: read)
	// limits bounds each frame the worker may send (workerFrameLimit; a
	// compile worker's, compileFrameLimit), set before its reader starts.
	limits func(typ byte) int

	deadOnce sync.Once
	typical  time.Duration // a moving average of this worker's call times
	// spinUntil is when the worker stops waiting awake after its last
	// answer (UnixNano): until then it is in /proc/loadavg's runnable
	// count already (freecpu.go).
	spinUntil int64

	fingerprint string
	confinement string // the worker's own account of its confinement

	memcg    *memcg      // the worker's own memory cgroup (nil without one; memcg.go)
	memcgOOM atomic.Bool // the kernel killed it for its cgroup's limit

	// Bookkeeping of the holder (no lock: one holder at a time).
	loaded []string // digests of loaded code, least recently used first
	base   uint64   // VmData after the last load, bytes
	limit  uint64   // the RLIMIT_DATA soft limit in force (0: none set)
	calls  int
	guard  *time.Timer // kills the worker at a call's deadline + grace (armGuard)

	// The kills that timers and callbacks make on behalf of one operation
	// (a load, a call) are ordered with its end under opMu: a timer that
	// fired as the call ended runs its function on a goroutine of its own,
	// which a loaded machine may run after the worker was released and
	// taken by the next call (it once failed a 20 s call after 14 ms as
	// past its deadline: the previous call's guard). So such a kill names
	// the operation it is for (killFor), and one that ended is not killed.
	opMu    sync.Mutex
	op      uint64    // the operation holding the worker (begin); moved on by end
	guardOp uint64    // the operation the guard is armed for
	guardAt time.Time // when that operation's guard may kill
	// idlePriority: the worker's threads are at SCHED_IDLE (priority.go).
	idlePriority bool
	killed       killReason
	killedMu     sync.Mutex
}

type frame struct {
	typ byte
	p   []byte
}

type killReason int

const (
	notKilled killReason = iota
	killedDeadline
	killedCancel
	killedProtocol
	killedShutdown
)

// spawn starts a worker: argv is the program and its arguments (the maiden
// binary, or a program whose main calls worker.Main). The environment is
// empty but for the worker marker: no secrets, no proxies, nothing of the
// parent's.
func spawn(ctx context.Context, argv []string, timeout time.Duration) (*proc, error) {
	return spawnWith(ctx, argv, timeout, nil, nil, false)
}

// tokioThreads gives the worker's wasmtime one tokio thread instead of one
// per CPU. wasmtime's WASI spawns a task on its tokio runtime for each
// stdout and stderr stream a guest asks for (a Go or JS tool asks for both
// in every call) and wakes a runtime thread to run it and again when the
// store drops it; with two runtime threads they also woke each other,
// ~1.5 wake-ups a call more (bench/README.md, "Where a Go tool's fixed
// cost goes"). A worker runs one call at a time: one thread serves it.
const tokioThreads = "TOKIO_WORKER_THREADS=1"

// workerGOGC is the worker's garbage collector target. A worker's live heap
// is small and every call's frames (the input in, the output out) are fresh
// garbage, so at Go's default the collector took ~24 % of the worker's CPU
// in 1 MiB calls (perf, docs/input-speed.md "Workers"). At 400: a 1 MiB
// input through a worker in 0.66-0.92x the wall time (six rounds), the
// worker's peak RSS +10 MiB (94 -> 104), a tiny call unchanged. The memory
// bound does not move: the cgroup's limit is set at each call from what the
// worker holds then (garbage included) plus the call's headroom
// (memcg.setLimit), and a call's own frames are live while it runs
// whatever the target.
const workerGOGC = "GOGC=400"

// spawnWith is spawn for a worker that inherits files (from fd 4 on) and
// has env added to its environment (a one-call worker's preopened
// directories), at SCHED_IDLE from its start if idle (priority.go).
func spawnWith(ctx context.Context, argv []string, timeout time.Duration, files []*os.File, env []string, idle bool) (*proc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("worker socket: %w", err)
	}
	// The parent's end is non-blocking, off Go's poller (ipcConn).
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("worker socket: %w", err)
	}
	parentEnd, err := newIPCConn(fds[0])
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("worker socket: %w", err)
	}
	childEnd := os.NewFile(uintptr(fds[1]), "maiden-ipc")

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{envWorker + "=" + strconv.Itoa(protocolVersion), tokioThreads, workerGOGC}, env...)
	cmd.ExtraFiles = append([]*os.File{childEnd}, files...) // fd 3, then files
	// The shared mailboxes, after the files; without them (no memfd
	// here) the socket carries everything.
	if mf, region, err := newMailboxRegion(); err == nil {
		cmd.Env = append(cmd.Env, envMailbox+"="+strconv.Itoa(3+len(cmd.ExtraFiles)))
		cmd.ExtraFiles = append(cmd.ExtraFiles, mf)
		defer mf.Close() // the worker has its copy once started
		parentEnd.useMailboxes(region)
	}
	// The code channel (codefd.go), last; without it compiled code goes
	// through the socket.
	code, codeEnd, cerr := newCodeChannel()
	if cerr == nil {
		cmd.Env = append(cmd.Env, envCode+"="+strconv.Itoa(3+len(cmd.ExtraFiles)))
		cmd.ExtraFiles = append(cmd.ExtraFiles, codeEnd)
		defer codeEnd.Close() // the worker has its copy once started
	}
	cmd.Dir = "/"
	tail := &tailBuffer{max: 8 << 10}
	cmd.Stderr = tail
	// The worker dies with its parent, and gets its own process group so a
	// terminal's ^C reaches the parent, which then stops its workers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// From the spawning thread: the worker's Pdeathsig follows the thread
	// that forks it (internal/childproc).
	err = childproc.Start(cmd)
	// The child has its copy; the parent must not keep this end open, or a
	// worker that dies before its hello would never read as EOF.
	childEnd.Close()
	if err != nil {
		parentEnd.Close()
		if code != nil {
			code.close()
		}
		return nil, fmt.Errorf("start worker %s: %w", argv[0], err)
	}
	p := &proc{cmd: cmd, conn: parentEnd, code: code, pid: cmd.Process.Pid, frames: make(chan frame),
		dead: make(chan struct{}), exited: make(chan struct{}), stop: make(chan struct{}), stderr: tail, limits: workerFrameLimit}
	p.rd = bufio.NewReaderSize(p.conn, 64<<10)
	p.memcg = joinMemcg(p.pid)
	if idle {
		// Before the worker's runtime starts its threads, which inherit
		// the policy; failing that, it starts at normal priority.
		_ = p.setIdlePriority(true)
	}
	go p.read()
	go func() {
		_ = cmd.Wait()
		p.conn.peerGone()
		if p.code != nil {
			p.code.close()
		}
		if p.memcg != nil {
			p.memcgOOM.Store(p.memcg.oomKilled())
			p.memcg.leave()
		}
		close(p.exited)
	}()

	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f := <-p.frames:
		if f.typ != msgHello {
			p.kill(killedProtocol)
			return nil, fmt.Errorf("worker %d: first message was type %d, not hello", p.pid, f.typ)
		}
		h, err := decodeHello(f.p)
		if err != nil || h.Version != protocolVersion {
			p.kill(killedProtocol)
			return nil, fmt.Errorf("worker %d speaks protocol %d, want %d (%v): is %s the same maiden?", p.pid, h.Version, protocolVersion, err, argv[0])
		}
		p.fingerprint, p.confinement = h.Fingerprint, h.Confinement
	case <-p.dead:
		p.kill(killedProtocol)
		return nil, fmt.Errorf("worker exited before saying hello: %s", p.diagnosis())
	case <-t.C:
		p.kill(killedProtocol)
		return nil, fmt.Errorf("worker did not start within %v", timeout)
	case <-ctx.Done():
		p.kill(killedCancel)
		return nil, ctx.Err()
	}
	p.base, _ = vmData(p.pid)
	return p, nil
}

// Reading a worker's frames. Nobody reads while a worker is idle (its
// bytes wait in the socket: see pending). A holder waiting for an answer
// reads the first frame itself (readDirect), so the answer wakes the
// holder's own thread, asleep in ppoll (ipcConn), at once: handing each frame
// over from a reader goroutine had the Go scheduler wake an idle thread
// for the holder and park it again, two context switches per call on a VM
// where each costs ~10 µs (bench/README.md, "Context switches"). A holder
// that has to wait for other things meanwhile (fetches, cancellation, a
// load, a compile) starts read instead, which delivers frames on p.frames
// until the exchange's answer. One reader at a time, so frames keep their
// order.

// read delivers the worker's frames on p.frames until an answer (hello,
// loaded, compiled, done), after which it ends without reading on; any
// malformed frame ends the worker (a worker that breaks the protocol is
// compromised or broken). It reads the next frame only once the last was
// taken (p.frames has no buffer): a frame's body is allocated at the size
// its header claims, up to its type's limit (a fetch's is 64 MiB), and a
// holder that waits meanwhile (writing a fetch's reply or a load to a
// worker that does not read them, until the guard's kill) would otherwise
// have the parent hold as many such frames as the channel buffered.
func (p *proc) read() {
	for {
		f, err := p.readDirect()
		if err != nil {
			return
		}
		select {
		case p.frames <- f:
		case <-p.stop:
			// Killed while nobody read: end, so the frames and this
			// goroutine do not outlive the worker.
			p.fail(os.ErrClosed)
			return
		}
		switch f.typ {
		case msgHello, msgLoaded, msgCompiled, msgDone:
			return
		}
	}
}

// readDirect reads one frame; an error ends the worker's reading for good
// (p.dead).
func (p *proc) readDirect() (frame, error) {
	typ, body, err := readFrameLimited(p.rd, p.limits)
	if err == nil && typ < 64 {
		err = fmt.Errorf("worker sent a parent's message type %d", typ)
	}
	if err != nil {
		p.fail(err)
		return frame{}, err
	}
	return frame{typ, body}, nil
}

// fail records why the worker's frames cannot be read any more.
func (p *proc) fail(err error) {
	p.deadOnce.Do(func() {
		p.err = err
		close(p.dead)
	})
}

// pending tells whether the worker has sent bytes nobody asked for (or
// closed its end): read between calls, it is not to be trusted with
// another.
func (p *proc) pending() bool {
	return p.rd.Buffered() > 0 || p.conn.pending()
}

func (p *proc) send(b []byte) error {
	_, err := p.conn.Write(b)
	return err
}

// begin starts an operation (a load, a call) on the worker, whose kills
// by timers and callbacks go through killFor(n).
func (p *proc) begin() (n uint64) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.op++
	return p.op
}

// end ends operation n: a kill for it that has not happened yet never
// will.
func (p *proc) end(n uint64) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if p.op == n {
		p.op++
	}
}

// killFor kills the worker if operation n still holds it.
func (p *proc) killFor(n uint64, why killReason) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if p.op == n {
		p.kill(why)
	}
}

// armGuard has the worker killed d from now unless operation n has ended
// by then. One timer per worker, reset for each call (a timer a call was
// an allocation on the call's path).
func (p *proc) armGuard(n uint64, d time.Duration) {
	p.opMu.Lock()
	p.guardOp, p.guardAt = n, time.Now().Add(d)
	p.opMu.Unlock()
	if p.guard == nil {
		p.guard = time.AfterFunc(d, p.guardFired)
	} else {
		p.guard.Reset(d)
	}
}

// guardFired kills the worker if the operation the guard was last armed
// for still holds it and its time has come. A firing meant for an earlier
// call that runs late finds another operation, or the same timer armed
// for a later time (which then fires again).
func (p *proc) guardFired() {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	if p.guardOp == p.op && !time.Now().Before(p.guardAt) {
		p.kill(killedDeadline)
	}
}

// kill ends the process at once. Safe to call more than once.
func (p *proc) kill(why killReason) {
	p.killedMu.Lock()
	if p.killed == notKilled {
		p.killed = why
		close(p.stop)
	}
	p.killedMu.Unlock()
	_ = p.cmd.Process.Kill()
	_ = p.conn.Close()
}

// wake sends the worker wakeSignal (cancel.go): through os.Process, a
// pidfd on Linux, so never to a process that reused an exited worker's
// PID; an error (the worker is gone) needs nothing done.
func (p *proc) wake() { _ = p.cmd.Process.Signal(wakeSignal) }

func (p *proc) killReason() killReason {
	p.killedMu.Lock()
	defer p.killedMu.Unlock()
	return p.killed
}

// exited waits briefly for the process to be reaped and describes how it
// ended.
func (p *proc) diagnosis() string {
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	var how string
	select {
	case <-p.exited:
	case <-t.C:
		return "still running"
	}
	if st := p.cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = "killed by signal " + ws.Signal().String()
		} else {
			how = "exit status " + strconv.Itoa(st.ExitCode())
		}
	}
	if first := p.stderr.first(); first != "" {
		how += ": " + first
	}
	return how
}

// outOfMemory tells whether the worker died allocating: Rust's allocation
// failure message, Go's, or an mmap refused by the memory limit.
func (p *proc) outOfMemory() bool {
	if p.memcgOOM.Load() {
		return true
	}
	s := p.stderr.String()
	for _, m := range []string{"memory allocation of", "out of memory", "cannot allocate memory", "Cannot allocate memory", "pthread_create failed"} {
		if bytes.Contains([]byte(s), []byte(m)) {
			return true
		}
	}
	return false
}

// setDataLimit sets the worker's RLIMIT_DATA soft limit (private writable
// memory: heap, anonymous mappings, linear memories as they grow). The hard
// limit is left alone so the parent can raise the soft one again without
// privileges; the worker's seccomp filter keeps it from raising its own.
func (p *proc) setDataLimit(n uint64) error {
	if n == p.limit {
		// The data limit holds; the cgroup's follows what the worker
		// holds now. A worker that died meanwhile is reported by the call.
		if err := p.setMemcgLimit(n); err != nil && p.alive() == nil {
			return err
		}
		return nil
	}
	if err := p.alive(); err != nil {
		return err
	}
	var old unix.Rlimit
	if err := prlimit(p.pid, unix.RLIMIT_DATA, nil, &old); err != nil {
		return err
	}
	lim := unix.Rlimit{Cur: n, Max: old.Max}
	if n > old.Max {
		lim.Cur = old.Max
	}
	if err := prlimit(p.pid, unix.RLIMIT_DATA, &lim, nil); err != nil {
		return err
	}
	p.limit = n
	return p.setMemcgLimit(n)
}

// setMemcgLimit gives the worker's memory cgroup the same headroom as its
// data limit n above its resting size (what it holds now, charged).
func (p *proc) setMemcgLimit(n uint64) error {
	if p.memcg == nil {
		return nil
	}
	headroom := uint64(math.MaxUint64)
	if n != math.MaxUint64 && n >= p.base {
		headroom = n - p.base
	}
	return p.memcg.setLimit(headroom)
}

// setCPULimit bounds the worker's CPU seconds (compilation).
func (p *proc) setCPULimit(sec uint64) error {
	if err := p.alive(); err != nil {
		return err
	}
	return prlimit(p.pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: sec, Max: sec + 1}, nil)
}

// prlimit is unix.Prlimit on a worker. A worker of a maiden running as
// root runs under a uid of its own (confine_linux.c), and the kernel lets
// another process change its limits only with CAP_SYS_RESOURCE or with
// real, effective and saved ids all equal to the caller's real ids. Some
// containers give root no CAP_SYS_RESOURCE: then this thread takes the
// worker's ids as its real ids for the one call (raw setresuid and
// setresgid change only the calling thread; its effective ids stay 0, so it
// keeps its capabilities and can change back), locked to the goroutine so
// nothing else runs on it meanwhile (and Go starts new threads from a
// clean template thread, not from a locked one).
func prlimit(pid, resource int, newLimit, old *unix.Rlimit) error {
	err := unix.Prlimit(pid, resource, newLimit, old)
	if !errors.Is(err, unix.EPERM) || os.Geteuid() != 0 {
		return err
	}
	uid, gid, ierr := procIDs(pid)
	if ierr != nil {
		return err
	}
	runtime.LockOSThread()
	ruid, _, _ := unix.Getresuid()
	rgid, _, _ := unix.Getresgid()
	keep := ^uintptr(0) // -1: unchanged
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), keep, keep); e != 0 {
		runtime.UnlockOSThread()
		return err
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), keep, keep); e == 0 {
		err = unix.Prlimit(pid, resource, newLimit, old)
	}
	_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(ruid), keep, keep)
	_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(rgid), keep, keep)
	if e1 == 0 && e2 == 0 {
		runtime.UnlockOSThread()
	}
	// Otherwise the thread stays locked and ends with this goroutine's
	// caller: a thread with a worker's ids is never reused.
	return err
}

// procIDs reads a process's real uid and gid from /proc.
func procIDs(pid int) (uid, gid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	uid, gid = -1, -1
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			if f := bytes.Fields(v); len(f) > 0 {
				uid, _ = strconv.Atoi(string(f[0]))
			}
		}
		if v, ok := bytes.CutPrefix(line, []byte("Gid:")); ok {
			if f := bytes.Fields(v); len(f) > 0 {
				gid, _ = strconv.Atoi(string(f[0]))
			}
		}
	}
	if uid <= 0 || gid <= 0 {
		return 0, 0, fmt.Errorf("process %d: no worker uid and gid in /proc status", pid)
	}
	return uid, gid, nil
}

// vmData reads a process's VmData (what RLIMIT_DATA counts) in bytes.
func vmData(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmData:")); ok {
			f := bytes.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseUint(string(f[0]), 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
		}
	}
	return 0, errors.New("no VmData in /proc status")
}

// tailBuffer keeps the first and the last max/2 bytes written (a worker's
// stderr: a crash's first line says why, a runtime's goroutine dump
// follows), so a chatty or hostile worker cannot grow the parent.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	head    []byte
	tail    []byte
	skipped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := t.max/2 - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > t.max/2 {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-t.max/2:]...)
		t.skipped = true
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.skipped {
		return string(t.head) + "\n…\n" + string(t.tail)
	}
	return string(t.head) + string(t.tail)
}

// first is the first non-empty line: where a crash says why.
func (t *tailBuffer) first() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, line := range strings.Split(string(t.head), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > 300 {
				line = line[:300] + "…"
			}
			return line
		}
	}
	return ""
}

// observe folds a call's duration into the worker's typical call time.
func (p *proc) observe(d time.Duration) {
	if p.typical == 0 {
		p.typical = d
		return
	}
	p.typical += (d - p.typical) / 8
}

// spinBudget is how long to wait awake for this worker's answer: a little
// more than its typical call, within [minSpin, maxSpin].
func (p *proc) spinBudget() time.Duration {
	return min(max(p.typical+p.typical/4+50*time.Microsecond, minSpin), maxSpin)
}

// signal is the signal that ended the worker (0 if it exited or runs).
func (p *proc) signal() syscall.Signal {
	select {
	case <-p.exited:
	case <-time.After(200 * time.Millisecond):
		return 0
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// cpuTime is the CPU time the ended worker used.
func (p *proc) cpuTime() time.Duration {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
	default:
		return 0
	}
}

// gone tells whether the worker's frames cannot be read any more (it died
// or broke the protocol), or it has exited or been killed (nobody reads an
// idle worker's socket to notice).
func (p *proc) gone() bool {
	select {
	case <-p.dead:
		return true
	case <-p.exited:
		return true
	default:
		return p.killReason() != notKilled
	}
}

// alive refuses to act on the worker's pid once it has been reaped: the
// pid may belong to another process by then.
func (p *proc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("worker %d has exited", p.pid)
	default:
		return nil
	}
}

// workerFrameLimit bounds each kind of frame a worker may send before any
// of it is read: a log line, a result or a fetch cannot be larger than the
// limits on them (with room for the envelope). Compiled code, the one big
// frame, only a compile worker sends (compileFrameLimit): a call worker's
// frame that claims to be one is refused before its body is allocated.
func workerFrameLimit(typ byte) int {
	switch typ {
	case msgHello, msgLoaded:
		return 64 << 10
	case msgLog:
		return sandbox.DefaultMaxLogBytes + 4<<10
	case msgDone:
		return 2*sandbox.DefaultMaxOutputBytes + 64<<10
	case msgFetch:
		return 64 << 20 // a request body (capped by the gate) and headers
	case msgReveal:
		return maxHandleBytes + 64
	}
	return 64 << 10
}

// compileFrameLimit is a compile worker's: its answer may be as big as a
// frame may be.
func compileFrameLimit(typ byte) int {
	if typ == msgCompiled {
		return maxFrame
	}
	return workerFrameLimit(typ)
}
