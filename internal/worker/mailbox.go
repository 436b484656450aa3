package worker

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Shared mailboxes: a worker's frames without a system call.
//
// A system call costs ~1.3 µs on this VM (bench/README.md, "System calls"),
// and a round trip over the socket makes at least four even when both ends
// spin, one of them a write into the socket's other end: two bare processes
// spinning on a socket take 9 µs a round trip, on shared memory 2 µs
// (BenchmarkFutexFloor). So each process of a worker pair shares one small
// region with the other (a sealed memfd the parent makes; the worker maps it
// in its confinement constructor, before the seccomp filter that refuses new
// shared mappings, and closes the descriptor): one mailbox each way, a slot
// for one frame and four words.
//
// The socket stays: it carries every frame the slot cannot (the receiver
// asleep on the socket, a frame over the slot's size), the wake-up of a
// receiver asleep there, and a dead worker's end. A receiver that wants a
// frame says so in its word (mbWaiting) and polls; a sender that sees that
// takes the slot (mbTaken), copies the frame in and marks it there
// (mbFull). A receiver done polling sleeps on the word, a futex
// (mbSleeping), for a while (a parent only once its worker said it speaks
// this way, mailboxReady): a sender then wakes it, whether it put the frame
// in the slot or wrote it to the socket, which costs less than a wake-up
// through the socket. After that the receiver takes back its word (mbIdle)
// and sleeps on the socket, or, if a sender is copying, tells it to use the
// socket instead (mbAbandoned). The two together are one byte stream, in order:
//   - a sender writes to the socket only while the slot is not taken: a
//     frame waiting in it goes first, so the sender waits for the receiver
//     to take it (a receiver that polled and stopped takes it before it
//     sleeps);
//   - a receiver takes the slot's frame only after every byte written to
//     the socket before it: the sender marks sock after each socket write
//     has ended (and writing during one), and the receiver reads the socket
//     without waiting while sock is marked or its last read filled the
//     buffer (there may be more), before it looks at the slot.
//
// The worker is an adversary: the parent reads each word once, copies the
// frame out of the slot (bounded by the slot's size) before it parses it, and
// never waits on the worker's words without an end: its waits end when the
// worker's socket is closed (a kill by the deadline guard), and a slot that
// stays taken while the parent stops polling is abandoned. A worker that
// writes the words out of turn gets what it could get from the socket: its
// own frames in an order it chose. Between calls, a mailbox the parent did
// not leave idle or waiting is a worker that spoke unasked (pending).
//
// A worker started without the region (its constructor could not map it) or
// one that never polls works over the socket alone: the other end only uses
// the slot after seeing its receiver wait there.

const (
	mailboxSize   = 128 << 10 // the shared region: the words, then two slots
	mailboxHeader = 4096
	mailboxSlot   = (mailboxSize - mailboxHeader) / 2

	envMailbox = "MAIDEN_WORKER_MAILBOX" // the region's descriptor in the worker, for its constructor
)

// A mailbox's state word.
const (
	mbIdle      uint32 = iota // the receiver does not poll: frames go by the socket
	mbWaiting                 // the receiver polls: a sender may take the slot
	mbTaken                   // a sender is copying a frame into the slot
	mbFull                    // a frame waits in the slot
	mbReading                 // the receiver is copying it out
	mbAbandoned               // the receiver stopped polling while a sender copied: the frame goes by the socket
	mbSleeping                // the receiver sleeps on this word (a futex): a sender may take the slot, and wakes it
)

// Bounds on the loops that a word the other end keeps moving would make
// endless: a sender's tries to take a slot whose receiver keeps changing
// its word (then the frame goes by the socket); a receiver that stopped
// polling, its rounds waiting for a sender that took the slot to fill it
// (then the frame goes by the socket: mbAbandoned) and its rounds in all
// (then errMailboxMoved: the call fails as a worker that broke the
// protocol).
const (
	maxTakeTries  = 1 << 10
	abandonAfter  = 1 << 14
	maxStopRounds = 1 << 16
)

// napSlice bounds one futex sleep of a parent, so that what does not wake
// it (a worker that broke the protocol, a frame written to the socket
// unmarked) is seen within it. A variable: the tests make it long, so that
// a wake-up that should come and does not shows as a hang.
var napSlice atomic.Int64 // nanoseconds

func init() { napSlice.Store(int64(2 * time.Millisecond)) }

// Linux futex operations on a shared (not process-private) word.
const (
	opFutexWait = 0 // FUTEX_WAIT
	opFutexWake = 1 // FUTEX_WAKE
)

// sleepOn sleeps while *w holds val, at most d (or until woken, or a
// signal).
func sleepOn(w *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opFutexWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// wakeOn wakes a receiver sleeping on w.
func wakeOn(w *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opFutexWake, 1, 0, 0, 0)
}

// wake wakes this mailbox's receiver if it sleeps on its word, moving the
// word first so that a receiver about to sleep does not.
func (m *mailbox) wake() {
	if m.state.CompareAndSwap(mbSleeping, mbWaiting) {
		wakeOn(m.state)
	}
}

// Directions: each names the mailbox its receiver reads.
const (
	toWorker = 0
	toParent = 1
)

var (
	// errMailboxSleep: the receiver stopped polling with nothing in the
	// slot; the caller reads the socket, waiting.
	errMailboxSleep = errors.New("mailbox: nothing while polling")
	errSlotOverrun  = errors.New("mailbox: frame length outside the slot")
	errMailboxMoved = errors.New("mailbox: the sender kept moving the state word")
)

// mailbox is one direction's words and slot, in the shared region.
type mailbox struct {
	state   *atomic.Uint32
	n       *atomic.Uint32 // the frame's length in the slot (mbFull)
	sock    *atomic.Uint32 // 1: bytes went to the socket since the receiver last read it
	writing *atomic.Uint32 // 1: a socket write is under way
	slot    []byte
	sent    uint64 // frames this end sent through the slot (the sender's, in its own memory)
	// moved, when set, runs between each load of the state word and the
	// compare-and-swap that depends on it: the other process writes the
	// page whenever it likes, so a hostile one can move the word there
	// every time, which real concurrency shows only now and then. The
	// tests set it to do that (TestRedTeamMailboxMovingWord); nil
	// otherwise.
	moved func()
}

// mailboxReady is the region's word a worker sets once it speaks through
// the mailboxes (it marks its socket writes and wakes a sleeping parent):
// until then the parent does not sleep on a mailbox's word, since a frame
// written to the socket alone would not wake it. A worker that sets it and
// then does not mark its writes delays only its own frames, by napSlice.
func mailboxReady(region []byte) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&region[1024]))
}

// mailboxAt is direction dir's mailbox in region (mailboxSize bytes).
func mailboxAt(region []byte, dir int) *mailbox {
	if len(region) != mailboxSize {
		panic(fmt.Sprintf("mailbox region of %d bytes, want %d", len(region), mailboxSize))
	}
	// Each direction's words on cache lines of their own: the state and
	// length, which the slot's users touch, apart from the socket marks.
	w := func(off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&region[dir*512+off])) }
	start := mailboxHeader + dir*mailboxSlot
	return &mailbox{state: w(0), n: w(4), sock: w(128), writing: w(132), slot: region[start : start+mailboxSlot : start+mailboxSlot]}
}

// send delivers one frame b: through the slot while the receiver polls and
// b fits, through writeSocket otherwise. wait is called while an earlier
// frame is still in the slot (spins: how many times before, for the
// caller to spin first and sleep later); its error ends the send. One
// sender at a time.
func (m *mailbox) send(b []byte, writeSocket func([]byte) error, wait func(spins int) error) error {
	for spins := 0; ; spins++ {
		switch s := m.state.Load(); s {
		case mbWaiting, mbSleeping:
			if len(b) > len(m.slot) {
				return m.socket(b, writeSocket)
			}
			if m.moved != nil {
				m.moved()
			}
			if !m.state.CompareAndSwap(s, mbTaken) {
				// The receiver stopped polling (mbIdle, and it reads
				// the socket) or went to sleep on the word: look
				// again (a receiver that keeps moving it, which
				// breaks the protocol, gets the socket).
				if spins > maxTakeTries {
					return m.socket(b, writeSocket)
				}
				continue
			}
			copy(m.slot, b)
			m.n.Store(uint32(len(b)))
			if m.state.CompareAndSwap(mbTaken, mbFull) {
				m.sent++
				if s == mbSleeping {
					wakeOn(m.state)
				}
				return nil
			}
			// The receiver stopped polling while this copied
			// (mbAbandoned): the socket it is reading gets the frame.
			return m.socket(b, writeSocket)
		case mbTaken, mbFull, mbReading:
			// A frame of this sender's is still in the slot (mbTaken
			// only from a receiver that broke the protocol): it goes
			// first.
			if err := wait(spins); err != nil {
				return err
			}
		default: // mbIdle, mbAbandoned, or a word nobody should have written
			return m.socket(b, writeSocket)
		}
	}
}

func (m *mailbox) socket(b []byte, writeSocket func([]byte) error) error {
	m.writing.Store(1)
	err := writeSocket(b)
	m.writing.Store(0)
	m.sock.Store(1)
	// A receiver asleep on the word does not see the socket.
	m.wake()
	return err
}

// mailboxReader is a receiver's state beside its mailbox; one reader at a
// time.
type mailboxReader struct {
	m     *mailbox
	armed bool // this reader set mbWaiting and has not taken it back
	drain bool // the last read of the socket filled the buffer: there may be more
	// The rest of a slot's frame that the caller's buffer could not hold,
	// copied out of the shared region.
	rest []byte
	buf  []byte // rest's storage, reused
	// taken counts the frames read from the slot.
	taken uint64

	// nap is how long the receiver sleeps on its word (a futex the
	// sender wakes) once it stops polling, before it reads the socket,
	// waiting; 0: it does not. napping, if set, says whether it may
	// (a parent stops at a kill or the worker's exit).
	nap     time.Duration
	napping func() bool
}

// buffered tells whether read has bytes without looking anywhere.
func (r *mailboxReader) buffered() bool { return len(r.rest) > 0 }

// read reads into p: what is left of the slot's last frame, or the socket's
// bytes by try (one read that does not wait: syscall.EAGAIN when there is
// nothing), or a frame from the slot, polling while polling() says so (it
// is asked every few rounds). Once it says no, the receiver takes back its
// word (or the frame that came meanwhile) and read returns errMailboxSleep:
// the caller reads the socket, waiting.
func (r *mailboxReader) read(p []byte, polling func() bool, try func([]byte) (int, error)) (int, error) {
	if len(r.rest) > 0 {
		n := copy(p, r.rest)
		r.rest = r.rest[n:]
		return n, nil
	}
	m := r.m
	if !r.armed {
		m.state.Store(mbWaiting)
		r.armed = true
	}
	stopping, stopSpins := false, 0
	var napUntil int64 // UnixNano; 0: not napped yet
	for i := 0; ; i++ {
		// The state before the socket: a frame seen in the slot now
		// was put there after every socket write it follows had ended
		// and marked sock, so the read below gets those bytes first. (A
		// state loaded after that read could show a frame that follows
		// a write the read missed.)
		s := m.state.Load()
		if m.moved != nil {
			m.moved()
		}
		if r.drain || m.sock.Load() != 0 {
			m.sock.Store(0)
			n, err := try(p)
			if n > 0 {
				r.drain = n == len(p)
				return n, nil
			}
			r.drain = false
			if !errors.Is(err, syscall.EAGAIN) {
				r.disarm()
				return 0, err
			}
		}
		if s == mbFull {
			if n, err, ok := r.take(p); ok {
				return n, err
			}
		}
		if !stopping {
			// Out of time, a frame on its way by the socket, or a
			// word the sender should not have written (mbIdle,
			// mbReading and mbAbandoned are the receiver's).
			stopping = (s != mbWaiting && s != mbTaken && s != mbFull) || m.writing.Load() != 0 ||
				(i&15 == 15 && !polling())
			if !stopping {
				continue
			}
		}
		// Stopping: take back the word, or let a sender that is
		// copying finish (a frame of the slot's size copies in a few
		// µs), then send it to the socket.
		stopSpins++
		switch s {
		case mbWaiting:
			if r.nap > 0 && m.writing.Load() == 0 && (r.napping == nil || r.napping()) {
				now := time.Now().UnixNano()
				if napUntil == 0 {
					napUntil = now + int64(r.nap)
				}
				if now < napUntil && m.state.CompareAndSwap(mbWaiting, mbSleeping) {
					// Asleep on the word: a sender that takes the
					// slot wakes this, and so does one that writes
					// the socket after marking it (looked at again
					// here, after the word says asleep).
					if m.sock.Load() == 0 && m.writing.Load() == 0 {
						// In slices where something other than the
						// sender may end the nap (a parent's, for a
						// kill); a worker's in one.
						d := napUntil - now
						if r.napping != nil {
							d = min(d, napSlice.Load())
						}
						sleepOn(m.state, mbSleeping, time.Duration(d))
					}
					if m.state.CompareAndSwap(mbSleeping, mbWaiting) {
						// Woken by no frame in the slot (or not
						// woken): read the socket once, for a
						// frame written there unmarked.
						r.drain = true
					}
					continue
				}
			}
			if m.state.CompareAndSwap(mbWaiting, mbIdle) {
				r.armed = false
				return 0, errMailboxSleep
			}
		case mbTaken:
			if stopSpins > abandonAfter && m.state.CompareAndSwap(mbTaken, mbAbandoned) {
				r.armed = false
				return 0, errMailboxSleep
			}
		case mbFull:
			// Taken above, unless the word moved under it.
		default:
			m.state.Store(mbIdle)
			r.armed = false
			return 0, errMailboxSleep
		}
		if stopSpins > maxStopRounds {
			// Only a sender that keeps moving the word gets here.
			m.state.Store(mbIdle)
			r.armed = false
			return 0, errMailboxMoved
		}
	}
}

// take copies the slot's frame out: into p, and what p cannot hold into
// r.rest. ok is false if the state moved under it (only a sender that breaks
// the protocol moves mbFull).
func (r *mailboxReader) take(p []byte) (n int, err error, ok bool) {
	m := r.m
	if !m.state.CompareAndSwap(mbFull, mbReading) {
		return 0, nil, false
	}
	size := int(m.n.Load()) // once: the sender may write it again
	r.armed = false
	if size <= 0 || size > len(m.slot) {
		m.state.Store(mbIdle)
		return 0, fmt.Errorf("%w: %d bytes, slot %d", errSlotOverrun, size, len(m.slot)), true
	}
	r.taken++
	n = copy(p, m.slot[:size])
	if n < size {
		r.buf = append(r.buf[:0], m.slot[n:size]...)
		r.rest = r.buf
	}
	m.state.Store(mbIdle)
	return n, nil, true
}

// disarm takes back the receiver's word after a failed socket read; a frame
// already in the slot stays there for the next read.
func (r *mailboxReader) disarm() {
	if r.armed && r.m.state.CompareAndSwap(mbWaiting, mbIdle) {
		r.armed = false
	}
}

// stray tells whether the sender wrote this mailbox unasked: between calls
// the receiver left it idle, waiting or abandoned, and an honest sender
// writes it only while the receiver waits.
func (m *mailbox) stray() bool {
	switch m.state.Load() {
	case mbIdle, mbWaiting, mbAbandoned:
		return false
	}
	return true
}

// newMailboxRegion makes the region a worker shares with the parent: a
// memfd of mailboxSize bytes, sealed so that neither end can shrink it
// under the other's mapping (a shrunk file would fault the parent's reads)
// or grow it (shared memory is not counted in the worker's RLIMIT_DATA), and
// the parent's mapping of it. The worker gets f and maps it itself.
func newMailboxRegion() (f *os.File, region []byte, err error) {
	fd, err := unix.MemfdCreate("maiden-worker-mailbox", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	f = os.NewFile(uintptr(fd), "maiden-worker-mailbox")
	if err := unix.Ftruncate(fd, mailboxSize); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("mailbox size: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("mailbox seals: %w", err)
	}
	region, err = unix.Mmap(fd, 0, mailboxSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("mailbox mapping: %w", err)
	}
	return f, region, nil
}
