package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// BenchmarkRoundTrip measures what a tiny call costs in a worker against
// the same call in process, and the floor under both on this machine, in
// one run (the machine's load changes from minute to minute, so only
// numbers from the same run compare):
//
//   - inprocess: sandbox.Execute of the WAT echo tool.
//   - worker: the same call through a Pool (one worker per goroutine).
//   - floor-blocking: two bare Go processes ping-ponging 64 bytes over a
//     socketpair with blocking reads on locked threads: the cost of two
//     cross-process wake-ups, the least any socket-based worker can pay.
//   - floor-netpoll: the same with both ends non-blocking under Go's
//     network poller (how a worker's socket was read before).
//   - floor-socket-spin: the same with both ends non-blocking on locked
//     threads, each going round read(2) for up to futexSpin before it
//     sleeps in ppoll(2): what a socket costs when both ends spin (as a
//     maiden worker call's do at rest), against floor-futex-spin.
//   - floor-futex, floor-futex-spin: the same over a shared page with
//     futex wake-ups, sleeping at once or after polling for futexSpin
//     (futexfloor_bench_test.go): what a shared-memory ring could win.
//
// Each row reports p50-ns, p90-ns and p99-ns per call, mean-ns (the mean
// latency of one call; ns/op at g2 is wall time per call, the inverse of
// calls/s) and tail-ns/call (what calls over 200 µs add to the mean):
//
//	go test ./internal/worker -run '^$' -bench '^BenchmarkRoundTrip$' -count 5
func BenchmarkRoundTrip(b *testing.B) {
	echo := testkit.Component(b, "echo")
	const in = `{"message":"hello"}`
	rows := []struct {
		name  string
		setup func(b *testing.B) (op func() error, done func())
		// own: each goroutine needs a setup of its own (a pong process
		// answers one caller at a time).
		own bool
	}{
		{"inprocess", func(b *testing.B) (func() error, func()) {
			sb, err := sandbox.New(&sandbox.Options{CacheDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			return func() error {
				out, err := sb.Execute(context.Background(), sandbox.Call{Path: echo, Limits: lim, Input: in})
				return checkEcho(out, err)
			}, func() { sb.Close() }
		}, false},
		{"worker", func(b *testing.B) (func() error, func()) { return workerRow(b, echo, in) }, false},
		// The parent and the worker spinning for every call whatever the
		// load (as before freecpu.go): the comparison for the row above.
		{"worker-alwaysspin", func(b *testing.B) (func() error, func()) {
			op, done := workerRow(b, echo, in)
			spinPolicy = func(*freeCPUs, bool) bool { return true }
			return op, func() { spinPolicy = (*freeCPUs).spinnable; done() }
		}, false},
		// Neither end ever spinning.
		{"worker-nospin", func(b *testing.B) (func() error, func()) {
			op, done := workerRow(b, echo, in)
			spinPolicy = func(*freeCPUs, bool) bool { return false }
			return op, func() { spinPolicy = (*freeCPUs).spinnable; done() }
		}, false},
		{"floor-blocking", pongSetup("blocking"), true},
		{"floor-netpoll", pongSetup("netpoll"), true},
		{"floor-socket-spin", pongSetup("socket-spin"), true},
		{"floor-futex", futexSetup(0), true},
		{"floor-futex-spin", futexSetup(futexSpin), true},
	}
	for _, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			for _, g := range []int{1, 2} {
				b.Run(fmt.Sprintf("g%d", g), func(b *testing.B) {
					otherCPU = func() procStat { return procStat{} }
					measureCalls(b, g, r.own, r.setup)
				})
			}
		})
	}
}

// addOther counts process pid's CPU in otherCPU.
func addOther(pid int) {
	prev := otherCPU
	otherCPU = func() procStat { return prev().add(processStat(pid)) }
}

func checkEcho(out sandbox.Outcome, err error) error {
	if err != nil {
		return err
	}
	if out.Failure != nil || !strings.Contains(out.Output, "hello") {
		return fmt.Errorf("echo: %+v", out)
	}
	return nil
}

// measureCalls shares b.N calls between g goroutines; setup runs once (a
// pool, a sandbox) and its op is called from all of them, or once per
// goroutine if own.
func measureCalls(b *testing.B, g int, own bool, setup func(b *testing.B) (func() error, func())) {
	ops := make([]func() error, g)
	op, done := setup(b)
	defer done()
	ops[0] = op
	for i := 1; i < g; i++ {
		if !own {
			ops[i] = op
			continue
		}
		o, d := setup(b)
		defer d()
		ops[i] = o
	}
	// Warm up outside the timed region: a worker's first call faults its
	// code in.
	for _, o := range ops {
		if err := o(); err != nil {
			b.Fatal(err)
		}
	}
	durs := make([][]time.Duration, g)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	st0 := processStat(os.Getpid()).add(otherCPU())
	start := time.Now()
	for i := range g {
		wg.Go(func() {
			d := make([]time.Duration, 0, b.N/g+1)
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				t0 := time.Now()
				if err := ops[i](); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				d = append(d, time.Since(t0))
			}
			durs[i] = d
		})
	}
	wg.Wait()
	wall := time.Since(start)
	st := processStat(os.Getpid()).add(otherCPU())
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	d := slices.Concat(durs...)
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	pct := func(p int) time.Duration { return d[max((p*len(d)+99)/100, 1)-1] }
	// The mean against p50 is issue 23's slow mode: p90 shows the calls
	// that paid a wake-up, tail-ns/call what calls over 200 µs (a
	// descheduled end, a collection) add to the mean.
	var tail time.Duration
	for _, x := range d[sort.Search(len(d), func(i int) bool { return d[i] > 200*time.Microsecond }):] {
		tail += x
	}
	b.ReportMetric(float64(pct(50)), "p50-ns")
	b.ReportMetric(float64(pct(90)), "p90-ns")
	b.ReportMetric(float64(pct(99)), "p99-ns")
	b.ReportMetric(float64(sum)/float64(len(d)), "mean-ns")
	b.ReportMetric(float64(tail)/float64(len(d)), "tail-ns/call")
	b.ReportMetric(float64(len(d))/wall.Seconds(), "calls/s")
	// CPU per call, this process and the other end together: on a machine
	// with other work, CPU a call burns (a scheduler spinning, a thread
	// woken for nothing) is CPU another call waits for.
	b.ReportMetric(float64(st.cpu-st0.cpu)/float64(len(d)), "cpu-ns/call")
	b.ReportMetric(float64(st.switches-st0.switches)/float64(len(d)), "switches/call")
}

// otherCPU is the CPU time of the processes at the other end of the row
// being measured (a pool's workers, a pong process); set by its setup.
var otherCPU = func() procStat { return procStat{} }

// procStat is what the kernel counted for a process so far: the CPU time
// of all its threads (from /proc/PID/task/*/schedstat: nanoseconds; the
// process-wide file counts only the main thread) and their context
// switches (from each thread's status). Zero if it is gone.
type procStat struct {
	cpu      time.Duration
	switches int64
}

func (a procStat) add(b procStat) procStat {
	return procStat{a.cpu + b.cpu, a.switches + b.switches}
}

func processStat(pid int) procStat {
	th := testkit.ReadThreadStats(strconv.Itoa(pid))
	return procStat{cpu: th.OnCPU, switches: int64(th.Voluntary + th.Involuntary)}
}

// envPong makes this test binary a bare ping-pong process (the floor rows):
// no confinement, no sandbox, only the socket on fd 3.
const envPong = "MAIDEN_BENCH_PONG"

// pongMain answers every 64-byte message on fd 3 with the same bytes,
// reading either with blocking syscalls on a locked thread or through Go's
// poller; it is called from TestMain.
func pongMain(mode string) int {
	switch mode {
	case "futex":
		return futexPongMain(0)
	case "futex-spin":
		return futexPongMain(futexSpin)
	}
	var buf [64]byte
	if mode == "socket-spin" {
		runtime.LockOSThread()
		_ = syscall.SetNonblock(3, true)
		for {
			if err := readSpin(3, buf[:], futexSpin); err != nil {
				return 0
			}
			if err := writeAll(3, buf[:]); err != nil {
				return 0
			}
		}
	}
	if mode == "blocking" {
		runtime.LockOSThread()
		for {
			if _, err := readFull(3, buf[:]); err != nil {
				return 0
			}
			if _, err := unix.Write(3, buf[:]); err != nil {
				return 0
			}
		}
	}
	_ = syscall.SetNonblock(3, true)
	f := os.NewFile(3, "pong")
	for {
		if _, err := readFullFile(f, buf[:]); err != nil {
			return 0
		}
		if _, err := f.Write(buf[:]); err != nil {
			return 0
		}
	}
}

// readSpin fills p from the non-blocking fd, going round read(2) for up
// to spin before each sleep in ppoll(2).
func readSpin(fd int, p []byte, spin time.Duration) error {
	n := 0
	until := time.Now().Add(spin)
	for i := 0; n < len(p); i++ {
		k, err := unix.Read(fd, p[n:])
		switch {
		case err == nil && k == 0:
			return io.EOF
		case err == nil:
			n += k
			continue
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return err
		}
		if i&15 == 15 && time.Now().After(until) {
			if err := pollFD(fd, unix.POLLIN); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeAll writes p to the non-blocking fd, sleeping in ppoll(2) while
// the socket is full.
func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		k, err := unix.Write(fd, p)
		switch {
		case err == nil:
			p = p[k:]
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if err := pollFD(fd, unix.POLLOUT); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

func pollFD(fd int, events int16) error {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: events}}
	for {
		_, err := unix.Ppoll(fds[:], nil, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

func readFull(fd int, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := unix.Read(fd, p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, os.ErrClosed
		}
		n += k
	}
	return n, nil
}

func readFullFile(f *os.File, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := f.Read(p[n:])
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

// pongSetup starts one pong process and returns a round trip with it, in
// the same mode on the parent's side.
func pongSetup(mode string) func(b *testing.B) (func() error, func()) {
	return func(b *testing.B) (func() error, func()) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		child := os.NewFile(uintptr(fds[1]), "pong")
		cmd := exec.Command(mustExe(b))
		cmd.Env = []string{envPong + "=" + mode}
		cmd.ExtraFiles = []*os.File{child}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		child.Close()
		addOther(cmd.Process.Pid)
		var buf [64]byte
		var op func() error
		var closeFn func()
		if mode == "blocking" {
			fd := fds[0]
			op = func() error {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if _, err := unix.Write(fd, buf[:]); err != nil {
					return err
				}
				_, err := readFull(fd, buf[:])
				return err
			}
			closeFn = func() { unix.Close(fd) }
		} else if mode == "socket-spin" {
			fd := fds[0]
			_ = unix.SetNonblock(fd, true)
			op = func() error {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if err := writeAll(fd, buf[:]); err != nil {
					return err
				}
				return readSpin(fd, buf[:], futexSpin)
			}
			closeFn = func() { unix.Close(fd) }
		} else {
			_ = unix.SetNonblock(fds[0], true)
			f := os.NewFile(uintptr(fds[0]), "ping")
			op = func() error {
				if _, err := f.Write(buf[:]); err != nil {
					return err
				}
				_, err := readFullFile(f, buf[:])
				return err
			}
			closeFn = func() { f.Close() }
		}
		return op, func() {
			closeFn()
			_ = cmd.Wait()
		}
	}
}

// workerRow opens the echo tool in a pool of two workers.
func workerRow(b *testing.B, echo, in string) (func() error, func()) {
	p, err := New(&Options{Size: 2})
	if err != nil {
		b.Fatal(err)
	}
	tl, err := p.Open(context.Background(), echo, lim)
	if err != nil {
		b.Fatal(err)
	}
	otherCPU = func() procStat {
		p.mu.Lock()
		defer p.mu.Unlock()
		var sum procStat
		for _, w := range p.idle {
			sum = sum.add(processStat(w.pid))
		}
		for w := range p.busy {
			sum = sum.add(processStat(w.pid))
		}
		return sum
	}
	return func() error {
			out, err := tl.Execute(context.Background(), sandbox.Call{Limits: lim, Input: in})
			return checkEcho(out, err)
		}, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = p.Shutdown(ctx)
		}
}
