package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// mailboxPair is a parent's end (an ipcConn with the mailboxes) and a
// worker's end (its blocking socket) over one socketpair and one shared
// region, in this process.
func mailboxPair(t *testing.T) (*ipcConn, *os.File, []byte) {
	t.Helper()
	region, err := unix.Mmap(-1, 0, mailboxSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	c, fd := ipcPair(t)
	c.useMailboxes(region)
	// Not unmapped by c's Close: a failed test's goroutines may still
	// touch it. The test process leaks it.
	c.region = nil
	// The worker's end, blocking; ipcPair closes its own descriptor.
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(dup), "worker-end")
	t.Cleanup(func() { f.Close(); c.Close() })
	return c, f, region
}

// mailboxFrame is frame i of the stream test: a log frame carrying i and
// bytes derived from it, of a size that is now small, now near the slot's,
// now over it (so it must go by the socket).
func mailboxFrame(rng *rand.Rand, i int) []byte {
	var n int
	switch rng.IntN(10) {
	case 0:
		n = mailboxSlot + rng.IntN(2*mailboxSlot)
	case 1, 2:
		n = rng.IntN(mailboxSlot)
	default:
		n = rng.IntN(200)
	}
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i + j)
	}
	e := newEnc(msgLog)
	e.u32(uint32(i))
	e.bytes(p)
	return e.frame()
}

// checkMailboxFrame reads frame i from rd.
func checkMailboxFrame(rd *bufio.Reader, i int) error {
	typ, body, err := readFrame(rd, maxFrame)
	if err != nil {
		return err
	}
	d := &dec{b: body}
	got, p := d.u32(), d.bytes()
	if typ != msgLog || d.err != nil || int(got) != i {
		return fmt.Errorf("frame out of order or mangled: want %d, got %d (type %d, %v)", i, got, typ, d.err)
	}
	for j := range p {
		if p[j] != byte(i+j) {
			return fmt.Errorf("frame %d: byte %d mangled", i, j)
		}
	}
	return nil
}

// TestMailboxKeepsTheStreamInOrder: frames both ways, some through the slot,
// some by the socket (over the slot's size, or while the receiver does not
// poll), with the receivers polling now and then and the senders pausing now
// and then, arrive whole and in the order they were sent. The slot and the
// socket are both used in each direction, or the test proves nothing.
func TestMailboxKeepsTheStreamInOrder(t *testing.T) {
	t.Parallel()
	c, f, region := mailboxPair(t)
	mailboxReady(region).Store(1) // the worker's side here marks its writes: the parent may sleep on the word
	frames := 3000
	if raceExtra > 0 {
		frames = 600 // the detector makes each frame's copy ~20 times slower
	}
	toP := mailboxAt(region, toParent)
	worker := newSpinReader(f)
	worker.useMailbox(mailboxAt(region, toWorker))
	errs := make(chan error, 4)
	pause := func(rng *rand.Rand) {
		// Often enough that the receiver is polling when the next
		// frame comes (a sender ahead of its receiver finds it busy,
		// and writes the socket).
		if rng.IntN(3) == 0 {
			time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
		}
	}
	// Worker → parent: the worker's sender, the parent's ipcConn.Read.
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		write := func(b []byte) error { _, err := f.Write(b); return err }
		for i := range frames {
			if err := toP.send(mailboxFrame(rng, i), write, waitSlot); err != nil {
				errs <- err
				return
			}
			pause(rng)
		}
		errs <- nil
	}()
	go func() {
		rng := rand.New(rand.NewPCG(3, 4))
		rd := bufio.NewReaderSize(c, 64<<10)
		for i := range frames {
			if rng.IntN(3) == 0 {
				c.stop()
			} else {
				c.spinFor(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
			if err := checkMailboxFrame(rd, i); err != nil {
				errs <- fmt.Errorf("worker → parent: %w", err)
				return
			}
		}
		errs <- nil
	}()
	// Parent → worker: ipcConn.Write, the worker's spinReader.
	go func() {
		rng := rand.New(rand.NewPCG(5, 6))
		for i := range frames {
			if _, err := c.Write(mailboxFrame(rng, i)); err != nil {
				errs <- err
				return
			}
			pause(rng)
		}
		errs <- nil
	}()
	go func() {
		rng := rand.New(rand.NewPCG(7, 8))
		rd := bufio.NewReaderSize(worker, 64<<10)
		for i := range frames {
			if rng.IntN(3) == 0 {
				worker.spinFor(0)
			} else {
				worker.spinFor(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
			if err := checkMailboxFrame(rd, i); err != nil {
				errs <- fmt.Errorf("parent → worker: %w", err)
				return
			}
		}
		errs <- nil
	}()
	bound := time.After(testkit.Slack(t, time.Minute))
	for range 4 {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-bound:
			t.Fatal("the stream stalled")
		}
	}
	t.Logf("worker → parent: %d of %d frames through the slot (%d taken); parent → worker: %d (%d taken)",
		toP.sent, frames, c.in.taken, c.out.sent, worker.in.taken)
	for _, n := range []uint64{toP.sent, c.out.sent} {
		if n == 0 || n == uint64(frames) {
			t.Errorf("%d of %d frames through the slot: the test did not mix the slot and the socket", n, frames)
		}
	}
	if c.in.taken != toP.sent || worker.in.taken != c.out.sent {
		t.Errorf("frames taken %d, %d; sent through the slot %d, %d", c.in.taken, worker.in.taken, toP.sent, c.out.sent)
	}
}

// TestWorkerCallsUseTheMailboxes: with both ends spinning, a worker's calls
// go through the shared slot (the run frame one way, the answer the other),
// not only the socket: the region was mapped by the worker's constructor
// before its seccomp filter.
func TestWorkerCallsUseTheMailboxes(t *testing.T) {
	spinPolicy = func(*freeCPUs, bool) bool { return true }
	defer func() { spinPolicy = (*freeCPUs).spinnable }()
	p := newPool(t, &Options{Size: 1})
	echo := testkit.Component(t, "echo")
	if _, err := p.Open(context.Background(), echo, lim); err != nil {
		t.Fatal(err)
	}
	key := firstKey(p)
	const calls = 200
	for i := range calls {
		out, err := p.run(context.Background(), key, "execute", sandbox.Call{Limits: lim, Input: `{"i":` + strconv.Itoa(i) + `}`})
		if err != nil || out.Failure != nil {
			t.Fatalf("call %d: %+v %v", i, out, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) != 1 {
		t.Fatalf("%d idle workers, want 1", len(p.idle))
	}
	w := p.idle[0]
	if w.conn.in == nil {
		t.Fatal("the parent's end has no mailboxes")
	}
	t.Logf("%d calls: %d frames to the worker through the slot, %d from it", calls, w.conn.out.sent, w.conn.in.taken)
	if w.conn.out.sent == 0 || w.conn.in.taken == 0 {
		t.Errorf("frames through the slot: %d to the worker, %d from it; want some each way", w.conn.out.sent, w.conn.in.taken)
	}
}

// TestRedTeamMailboxOverrun: a worker that marks a frame in the slot longer
// than the slot (and the region) is refused as breaking the protocol; the
// parent reads no byte past the slot.
func TestRedTeamMailboxOverrun(t *testing.T) {
	t.Parallel()
	w, err := spawn(context.Background(), []string{mustExe(t), "hostile-mailbox-overrun"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.kill(killedProtocol)
	if w.conn.in == nil {
		t.Fatal("no mailboxes")
	}
	w.conn.spinFor(testkit.Slack(t, 10*time.Second))
	if err := w.send(runMsg{ID: 1, Digest: "x", Export: "execute", TimeoutNS: uint64(time.Second)}.encode()); err != nil {
		t.Fatal(err)
	}
	_, err = w.readDirect()
	if !errors.Is(err, errSlotOverrun) {
		t.Fatalf("read %v, want %v", err, errSlotOverrun)
	}
}

// TestRedTeamMailboxStrayIsNotTaken: a worker that puts a frame in its slot
// while idle (after answering by the socket) is not given another call.
func TestRedTeamMailboxStrayIsNotTaken(t *testing.T) {
	t.Parallel()
	spokeWhileIdleIsNotTaken(t, "hostile-mailbox-stray")
}

// TestRedTeamMailboxDeafWorker: a worker that claims forever to be reading
// the parent's last frame from the slot does not hold the parent's next one
// past the call's deadline: the call ends as a deadline, the worker killed.
func TestRedTeamMailboxDeafWorker(t *testing.T) {
	spinPolicy = func(*freeCPUs, bool) bool { return true }
	defer func() { spinPolicy = (*freeCPUs).spinnable }()
	p := fakePool(t, "hostile-mailbox-deaf", 1)
	start := time.Now()
	r := awaitRun(t, runInBackground(context.Background(), p, "fake", sandbox.Call{Limits: fastLim, Input: "{}"}), 10*time.Second,
		"the call is held past its deadline by a worker that never takes its frame")
	if r.err != nil || r.out.Failure == nil || r.out.Failure.Kind != sandbox.KindDeadline ||
		!strings.HasSuffix(r.out.Failure.Message, "timeout (its worker had not answered by then and was stopped)") {
		t.Fatalf("%+v %v, want a deadline failure saying the worker did not answer", r.out, r.err)
	}
	t.Logf("ended after %v (timeout %v)", time.Since(start), fastLim.Timeout)
}

// runResult is what p.run returned.
type runResult struct {
	out sandbox.Outcome
	err error
}

// runInBackground starts p.run of code's execute and returns where its
// result arrives.
func runInBackground(ctx context.Context, p *Pool, code string, c sandbox.Call) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		out, err := p.run(ctx, code, "execute", c)
		done <- runResult{out, err}
	}()
	return done
}

// awaitRun waits for done up to bound (scaled for the machine's load) and
// fails the test with held if it has not arrived by then.
func awaitRun(t *testing.T, done <-chan runResult, bound time.Duration, held string) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(testkit.Slack(t, bound)):
		t.Fatal(held)
		return runResult{}
	}
}

// TestRedTeamMailboxDeafAtDrop: a worker holding as many codes as a worker
// keeps, which then says forever (answered and idle) that a frame of the
// parent's is being read from its slot, is reused: the parent does not
// watch that mailbox between calls. The next call of a new code sends it
// a drop frame first, which waits for the slot; that wait is bounded by
// the call's context (and the load's guard), not by the pool's Shutdown.
func TestRedTeamMailboxDeafAtDrop(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "hostile-mailbox-deaf-when-full", 1)
	code := func(i int) string { return fmt.Sprintf("fake%d", i) }
	for i := range maxLoadedPerWorker + 1 {
		_ = p.mem.Put(code(i), []byte("not code"))
	}
	for i := range maxLoadedPerWorker {
		out, err := p.run(context.Background(), code(i), "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
		if err != nil || out.Failure != nil {
			t.Fatalf("call %d: %+v %v", i, out.Failure, err)
		}
	}
	p.mu.Lock()
	if len(p.idle) != 1 {
		p.mu.Unlock()
		t.Fatalf("%d idle workers, want the one that answered", len(p.idle))
	}
	w := p.idle[0]
	p.mu.Unlock()
	waitUntil(t, "the worker holds its slot", func() bool { return w.conn.out.state.Load() == mbReading })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := awaitRun(t, runInBackground(ctx, p, code(maxLoadedPerWorker), sandbox.Call{Limits: fastLim, Input: "{}"}), 10*time.Second,
		"the call is held past its context by a worker that never takes its drop frame")
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("%+v %v, want the call's context's end", r.out, r.err)
	}
	t.Logf("ended after %v: %v", time.Since(start), r.err)
}

// TestRedTeamMailboxDeafCancel: a worker that never answers and says
// forever that the parent's last frame is being read from its slot keeps
// the cancel frame from being written; the call still ends at its
// cancellation plus the grace (the kill is armed before the cancel frame
// is written), not at its deadline.
func TestRedTeamMailboxDeafCancel(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "hostile-mailbox-deaf-silent", 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := runInBackground(ctx, p, "fake", sandbox.Call{Limits: sandbox.Limits{Timeout: time.Minute, Memory: 16 << 20}, Input: "{}"})
	// The call is out once the worker holds its slot.
	waitUntil(t, "the worker holds its slot", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for w := range p.busy {
			if w.conn.out.state.Load() == mbReading {
				return true
			}
		}
		return false
	})
	cancel()
	start := time.Now()
	r := awaitRun(t, done, 10*time.Second, "a cancelled call is held past the grace by a worker that never takes its cancel frame")
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("%+v %v, want cancelled", r.out, r.err)
	}
	t.Logf("ended %v after the cancel: %v", time.Since(start), r.err)
}

// TestRedTeamMailboxMovingWord: the other end moves a mailbox's state word
// between every load and the compare-and-swap that depends on it (the
// mailbox's moved seam does it every time, as a hostile worker writing the
// shared page from a loop of its own could only now and then). Neither end
// loops forever on it:
//   - sender: a receiver whose word keeps changing between waiting and
//     asleep gets the frame by the socket after maxTakeTries tries;
//   - receiver: a receiver that stopped polling, whose word keeps moving
//     between waiting, taken and full, gives up after maxStopRounds rounds
//     with errMailboxMoved (the parent fails the call: a worker that broke
//     the protocol).
//
// The adversary stops moving the word after four times the bound, so that
// a loop without it ends (the test then fails on what it returned, not by
// hanging).
func TestRedTeamMailboxMovingWord(t *testing.T) {
	t.Parallel()
	region, err := unix.Mmap(-1, 0, mailboxSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(region)

	t.Run("sender", func(t *testing.T) {
		m := mailboxAt(region, toWorker)
		m.state.Store(mbWaiting)
		defer m.state.Store(mbIdle)
		moves := 0
		m.moved = func() {
			moves++
			if moves > 4*maxTakeTries {
				return
			}
			if m.state.Load() == mbWaiting {
				m.state.Store(mbSleeping)
			} else {
				m.state.Store(mbWaiting)
			}
		}
		frame := []byte("a frame for a receiver that keeps moving its word")
		var socket []byte
		err := m.send(frame, func(b []byte) error { socket = append(socket, b...); return nil },
			func(int) error { return errors.New("wait: the slot is not the sender's to wait for here") })
		if err != nil {
			t.Fatal(err)
		}
		if string(socket) != string(frame) {
			t.Fatalf("after %d moves of the word the frame went by the slot (state %d), want the socket after at most %d tries",
				moves, m.state.Load(), maxTakeTries+2)
		}
		if moves > maxTakeTries+2 || m.sock.Load() != 1 {
			t.Fatalf("socket after %d moves (want at most %d), sock mark %d", moves, maxTakeTries+2, m.sock.Load())
		}
		t.Logf("the frame went by the socket after %d moves of the word", moves)
	})

	t.Run("receiver", func(t *testing.T) {
		m := mailboxAt(region, toParent)
		defer m.state.Store(mbIdle)
		moves := 0
		m.moved = func() {
			moves++
			if moves > 4*maxStopRounds {
				return
			}
			switch m.state.Load() {
			case mbWaiting:
				m.state.Store(mbTaken)
			case mbTaken:
				m.state.Store(mbFull)
			default:
				m.state.Store(mbWaiting)
			}
		}
		r := &mailboxReader{m: m}
		var p [64]byte
		n, err := r.read(p[:], func() bool { return false }, func([]byte) (int, error) { return 0, syscall.EAGAIN })
		if !errors.Is(err, errMailboxMoved) {
			t.Fatalf("read %d bytes, %v after %d moves of the word, want %v", n, err, moves, errMailboxMoved)
		}
		if limit := maxStopRounds + 64; moves > limit {
			t.Fatalf("gave up after %d moves, want at most %d", moves, limit)
		}
		t.Logf("the reader gave up after %d moves of the word", moves)
	})
}

// TestMailboxReadEndsAtClose: a parent waiting for an answer on its
// mailbox, polling it or asleep on its word, stops at once when the worker
// is killed (Close), not at the end of its spin or nap: a deadline's kill
// must end the call's read within its 10 ms.
func TestMailboxReadEndsAtClose(t *testing.T) {
	for _, mode := range []struct {
		name string
		want uint32 // the word once the read waits
	}{{"polling", mbWaiting}, {"asleep", mbSleeping}} {
		t.Run(mode.name, func(t *testing.T) {
			c, _, region := mailboxPair(t)
			mailboxReady(region).Store(1)
			defer longNaps(c.in)()
			if mode.want == mbWaiting {
				c.spinFor(time.Minute)
			}
			errs := make(chan error, 1)
			go func() {
				_, err := c.Read(make([]byte, 64))
				errs <- err
			}()
			awaitWord(t, mailboxAt(region, toParent), mode.want, errs)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errs:
				if !errors.Is(err, os.ErrClosed) {
					t.Fatalf("read ended with %v, want %v", err, os.ErrClosed)
				}
			case <-time.After(testkit.Slack(t, 5*time.Second)):
				t.Fatal("the read went on waiting after Close")
			}
		})
	}
}

// longNaps makes a receiver's futex sleep last a minute, each slice and
// the whole nap of the readers given, so that a wake-up that does not come
// shows as a hang (the tests' bounds) rather than as a delay of a few ms;
// it returns the undo of the slice.
func longNaps(readers ...*mailboxReader) func() {
	for _, r := range readers {
		r.nap = time.Minute
	}
	old := napSlice.Swap(int64(time.Minute))
	return func() { napSlice.Store(old) }
}

// awaitWord waits until m's state word is want (a reader polling, or
// asleep on it), failing if the read ended first.
func awaitWord(t *testing.T, m *mailbox, want uint32, errs <-chan error) {
	t.Helper()
	for m.state.Load() != want {
		select {
		case err := <-errs:
			t.Fatalf("the read ended before the test was ready: %v", err)
		default:
		}
		runtime.Gosched()
	}
}

// TestMailboxSleeperIsWoken: a receiver asleep on its word is woken by a
// frame put in the slot and by one written to the socket (over the slot's
// size), each on its own, not by its nap running out.
func TestMailboxSleeperIsWoken(t *testing.T) {
	for _, size := range []int{100, mailboxSlot + 100} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			c, f, region := mailboxPair(t)
			mailboxReady(region).Store(1)
			defer longNaps(c.in)()
			toP := mailboxAt(region, toParent)
			got := make(chan error, 1)
			go func() {
				rd := bufio.NewReaderSize(c, 64<<10)
				got <- checkMailboxFrame(rd, 7)
			}()
			awaitWord(t, toP, mbSleeping, got)
			rng := rand.New(rand.NewPCG(1, uint64(size)))
			var frame []byte
			for frame = mailboxFrame(rng, 7); (len(frame) <= mailboxSlot) != (size < mailboxSlot); frame = mailboxFrame(rng, 7) {
			}
			write := func(b []byte) error { _, err := f.Write(b); return err }
			if err := toP.send(frame, write, waitSlot); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(testkit.Slack(t, 5*time.Second)):
				t.Fatal("the sleeping reader was not woken")
			}
		})
	}
}

// TestMailboxReadSeesAWorkerDie: a worker that dies (not killed by the
// parent, so its socket is not closed by it) while the parent polls its
// mailbox for the answer is seen as gone at once, not when the spin ends:
// the polling reads the socket only when the worker marked a write.
func TestMailboxReadSeesAWorkerDie(t *testing.T) {
	for _, mode := range []struct {
		name string
		want uint32
	}{{"polling", mbWaiting}, {"asleep", mbSleeping}} {
		t.Run(mode.name, func(t *testing.T) {
			w, err := spawn(context.Background(), []string{mustExe(t)}, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer w.kill(killedProtocol)
			if w.conn.in == nil {
				t.Fatal("no mailboxes")
			}
			defer longNaps(w.conn.in)()
			// The worker may still be marking the end of its hello's
			// socket write, which a reader would take for a frame on
			// its way by the socket (and sleep there instead).
			for w.conn.in.m.writing.Load() != 0 {
				runtime.Gosched()
			}
			if mode.want == mbWaiting {
				w.conn.spinFor(time.Minute)
			}
			errs := make(chan error, 1)
			go func() {
				_, err := w.readDirect()
				errs <- err
			}()
			awaitWord(t, w.conn.in.m, mode.want, errs)
			if err := unix.Kill(w.pid, unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errs:
				if !errors.Is(err, io.EOF) {
					t.Fatalf("read ended with %v, want the socket's end", err)
				}
			case <-time.After(testkit.Slack(t, 5*time.Second)):
				t.Fatal("the read went on waiting after the worker died")
			}
		})
	}
}
