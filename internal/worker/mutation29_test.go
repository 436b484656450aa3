package worker

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Pass 29 (docs/security-tests.md, "Twenty-ninth pass"): the parent's side
// of the shared mailboxes against a worker that writes the words and the
// slot in any order, any value. The worker's writes are made here by this
// process on a shared mapping, as the worker's would be from its own.

// mutation29Region maps a region as the parent's and the worker's mappings
// of one memfd would be (shared); the test process keeps it.
func mutation29Region(t *testing.T) []byte {
	t.Helper()
	region, err := unix.Mmap(-1, 0, mailboxSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	return region
}

// mutation29Take is the parent's read of a frame the worker says is in the
// slot (mbFull) after the parent's read set it waiting (armed): not
// polling, the socket empty. A panic (a slice past the slot) is returned as
// an error, for the test to report.
func mutation29Take(r *mailboxReader, p []byte) (n int, err error) {
	r.armed = true
	defer func() {
		if v := recover(); v != nil {
			n, err = 0, fmt.Errorf("the parent panicked: %v", v)
		}
	}()
	return r.read(p, func() bool { return false }, func([]byte) (int, error) { return 0, syscall.EAGAIN })
}

// TestMutation29SlotLengthBounds: the frame's length is the worker's word,
// any value: the parent takes only a length of 1 to the slot's size, and
// refuses every other (errSlotOverrun, the word given back idle) without a
// byte read past the slot (which, for the parent's mailbox, would be past
// the region: a panic of the parent; for the other direction's, the other
// slot). A frame of exactly the slot's size is taken whole.
func TestMutation29SlotLengthBounds(t *testing.T) {
	t.Parallel()
	region := mutation29Region(t)
	for _, dir := range []int{toWorker, toParent} {
		m := mailboxAt(region, dir)
		r := &mailboxReader{m: m}
		p := make([]byte, mailboxSlot+4096)
		for _, size := range []uint32{0, mailboxSlot + 1, mailboxSlot + mailboxHeader, mailboxSize, 1 << 31, ^uint32(0)} {
			m.n.Store(size)
			m.state.Store(mbFull)
			n, err := mutation29Take(r, p)
			if !errors.Is(err, errSlotOverrun) {
				t.Fatalf("direction %d, a frame of %d bytes in a slot of %d: read %d bytes, %v; want %v", dir, size, mailboxSlot, n, err, errSlotOverrun)
			}
			if s := m.state.Load(); s != mbIdle {
				t.Fatalf("direction %d, a frame of %d bytes refused: the word left %d, want idle", dir, size, s)
			}
		}
		for i := range m.slot {
			m.slot[i] = byte(i * 7)
		}
		m.n.Store(mailboxSlot)
		m.state.Store(mbFull)
		n, err := mutation29Take(r, p)
		if err != nil || n != mailboxSlot || !bytes.Equal(p[:n], m.slot) {
			t.Fatalf("direction %d, a frame of the slot's size: read %d bytes, %v; want the %d bytes of the slot", dir, n, err, mailboxSlot)
		}
	}
}

// TestMutation29SlotLengthReadOnce: the parent reads the frame's length
// once and copies by what it checked: a worker that moves the length between
// a small value and one far past the slot, as fast as it can while the
// parent takes frame after frame, gets each frame taken at the small length
// or refused, never a copy by the moved length (a panic of the parent).
func TestMutation29SlotLengthReadOnce(t *testing.T) {
	t.Parallel()
	region := mutation29Region(t)
	m := mailboxAt(region, toParent)
	const small = 16
	for i := range small {
		m.slot[i] = byte('a' + i)
	}
	var stop atomic.Bool
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		for !stop.Load() {
			m.n.Store(small)
			m.n.Store(1 << 30)
		}
	}()
	defer func() { stop.Store(true); <-flipped }()
	r := &mailboxReader{m: m}
	p := make([]byte, 64)
	taken, refused := 0, 0
	// Two seconds of takes: the worker's moves fall between two loads
	// of the parent's only while both run at once, which a loaded machine
	// allows now and then.
	start := time.Now()
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		m.state.Store(mbFull)
		n, err := mutation29Take(r, p)
		switch {
		case errors.Is(err, errSlotOverrun):
			refused++
		case err == nil && n == small && string(p[:n]) == "abcdefghijklmnop":
			taken++
		default:
			t.Fatalf("take %d with the length moving: read %d bytes %q, %v; want the %d-byte frame or %v",
				i, n, p[:min(n, len(p))], err, small, errSlotOverrun)
		}
	}
	t.Logf("%d frames taken, %d refused", taken, refused)
}

// TestMutation29FrameCopiedOut: a frame longer than the parent's buffer is
// copied out of the slot whole when it is taken: what the worker writes in
// the slot afterwards (its word says idle: the slot is its own again) does
// not change the bytes the parent reads of it next.
func TestMutation29FrameCopiedOut(t *testing.T) {
	t.Parallel()
	region := mutation29Region(t)
	m := mailboxAt(region, toParent)
	want := make([]byte, 1000)
	for i := range want {
		want[i] = byte(i%251) + 1
	}
	copy(m.slot, want)
	m.n.Store(uint32(len(want)))
	m.state.Store(mbFull)
	r := &mailboxReader{m: m}
	got := make([]byte, 0, len(want))
	p := make([]byte, 100)
	n, err := mutation29Take(r, p)
	if err != nil || n != len(p) {
		t.Fatalf("first read: %d bytes, %v; want %d", n, err, len(p))
	}
	got = append(got, p[:n]...)
	// The worker, seeing the word idle, writes its slot again.
	for i := range len(want) {
		m.slot[i] = 0
	}
	for len(got) < len(want) {
		n, err := mutation29Take(r, p)
		if err != nil || n == 0 {
			t.Fatalf("after %d bytes: %d, %v", len(got), n, err)
		}
		got = append(got, p[:n]...)
	}
	if i := mismatch(got, want); i >= 0 {
		t.Fatalf("byte %d of the frame read after the worker wrote its slot again: %d, want %d (the rest was read from the shared slot, not a copy)", i, got[i], want[i])
	}
}

func mismatch(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestMutation29StrayWords: between calls, the worker's mailbox left by
// the parent idle, waiting or abandoned is the only one that is not a
// worker that spoke unasked: any other word the worker wrote (a slot taken,
// full, being read, a receiver's sleep, a value of no state) makes the
// worker pending, so that it is not given another call.
func TestMutation29StrayWords(t *testing.T) {
	t.Parallel()
	c, _, region := mailboxPair(t)
	toP := mailboxAt(region, toParent)
	for _, s := range []uint32{mbIdle, mbWaiting, mbAbandoned} {
		toP.state.Store(s)
		if c.pending() {
			t.Fatalf("the worker's word %d (the parent's own) is taken for a worker that spoke", s)
		}
	}
	for _, s := range []uint32{mbTaken, mbFull, mbReading, mbSleeping, mbSleeping + 1, ^uint32(0)} {
		toP.state.Store(s)
		if !c.pending() {
			t.Fatalf("the worker's word %d between calls: not pending, want a worker that spoke unasked", s)
		}
	}
	toP.state.Store(mbIdle)
}

// TestMutation29TakenSlotIsAbandoned: a sender that took the slot (mbTaken)
// and never fills it, while the parent has stopped polling, does not fail
// the call: after abandonAfter rounds the parent marks the slot abandoned
// (the sender's frame goes by the socket) and reads the socket, waiting
// (errMailboxSleep), rather than give up on the worker (errMailboxMoved).
func TestMutation29TakenSlotIsAbandoned(t *testing.T) {
	t.Parallel()
	region := mutation29Region(t)
	m := mailboxAt(region, toParent)
	r := &mailboxReader{m: m, armed: true}
	m.state.Store(mbTaken)
	n, err := r.read(make([]byte, 64), func() bool { return false }, func([]byte) (int, error) { return 0, syscall.EAGAIN })
	if err != errMailboxSleep || m.state.Load() != mbAbandoned || r.armed {
		t.Fatalf("a slot taken and never filled: read %d bytes, %v, the word %d (armed %v); want %v, the word abandoned (%d)",
			n, err, m.state.Load(), r.armed, errMailboxSleep, mbAbandoned)
	}
}

// TestMutation29SlotSizedFrames: a frame of the slot's size goes through the
// slot whole; one a byte longer goes by the socket, the word left as the
// receiver set it (a frame cut to the slot, its length one over, would be
// refused by the receiver as an overrun: the call lost).
func TestMutation29SlotSizedFrames(t *testing.T) {
	t.Parallel()
	region := mutation29Region(t)
	m := mailboxAt(region, toWorker)
	for _, size := range []int{mailboxSlot, mailboxSlot + 1} {
		frame := make([]byte, size)
		for i := range frame {
			frame[i] = byte(i*13 + size)
		}
		m.state.Store(mbWaiting)
		var socket []byte
		err := m.send(frame, func(b []byte) error { socket = append(socket, b...); return nil },
			func(int) error { return errors.New("wait: the slot was empty") })
		if err != nil {
			t.Fatal(err)
		}
		switch s, n := m.state.Load(), m.n.Load(); {
		case size <= mailboxSlot && (s != mbFull || n != uint32(size) || !bytes.Equal(m.slot, frame) || len(socket) != 0):
			t.Fatalf("a frame of the slot's size (%d): the word %d, length %d, %d bytes by the socket; want it in the slot, full", size, s, n, len(socket))
		case size > mailboxSlot && (s != mbWaiting || !bytes.Equal(socket, frame)):
			t.Fatalf("a frame of %d bytes, slot %d: the word %d, length %d, %d bytes by the socket; want it whole by the socket, the word waiting", size, mailboxSlot, s, n, len(socket))
		}
	}
}

// TestMutation29AbandonedCopyGoesBySocket: a receiver that stops polling
// while the sender copies into the slot (mbTaken → mbAbandoned) reads the
// socket: the sender's frame then goes there, never left in the slot
// marked full over the receiver's word (where the receiver, reading the
// socket, would not see it, and its next read would set the word waiting
// over it: the frame lost).
func TestMutation29AbandonedCopyGoesBySocket(t *testing.T) {
	t.Parallel()
	region := mutation29Region(t)
	m := mailboxAt(region, toWorker)
	frame := make([]byte, mailboxSlot-1)
	var abandoned atomic.Int64
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // the receiver, abandoning every copy it sees
		defer close(done)
		for !stop.Load() {
			if m.state.CompareAndSwap(mbTaken, mbAbandoned) {
				abandoned.Add(1)
			}
		}
	}()
	defer func() { stop.Store(true); <-done }()
	seen := 0
	for start := time.Now(); time.Since(start) < 5*time.Second && seen < 3; {
		m.state.Store(mbWaiting)
		before := abandoned.Load()
		var socket int
		err := m.send(frame, func(b []byte) error { socket += len(b); return nil },
			func(int) error { return errors.New("wait: the slot was empty") })
		if err != nil {
			t.Fatal(err)
		}
		if abandoned.Load() == before {
			continue
		}
		seen++
		if s := m.state.Load(); s != mbAbandoned || socket != len(frame) {
			t.Fatalf("the receiver abandoned the copy: the word %d, %d bytes by the socket; want the word abandoned (%d), the %d bytes by the socket",
				s, socket, mbAbandoned, len(frame))
		}
	}
	if seen == 0 {
		t.Fatal("no copy was abandoned in 5s: the test proves nothing")
	}
	t.Logf("%d copies abandoned", seen)
}

// TestMutation29SockMarkClearedBeforeTheRead: the receiver clears the sock
// mark before it reads the socket, so a mark the sender sets after that
// read found nothing is still there at the receiver's next look. Here the
// mark is up for bytes an earlier read took, and the sender acts in that
// window (inside the receiver's read, as it returns EAGAIN): a frame too
// big for the slot goes by the socket (marked), then a small one goes by
// the slot. The socket's frame was sent first and must be read first; a
// mark cleared after the read is lost, and the slot's frame is taken ahead
// of the socket's bytes.
func TestMutation29SockMarkClearedBeforeTheRead(t *testing.T) {
	t.Parallel()
	region := mutation29Region(t)
	m := mailboxAt(region, toParent)
	r := &mailboxReader{m: m}
	m.sock.Store(1)                                   // the mark of bytes an earlier read took
	first := bytes.Repeat([]byte{'A'}, mailboxSlot+1) // by the socket
	second := []byte("second, by the slot")
	var socket []byte
	tries := 0
	try := func(p []byte) (int, error) {
		tries++
		if tries == 1 {
			// The read found nothing; the sender sends both frames
			// before the receiver looks again.
			write := func(b []byte) error { socket = append(socket, b...); return nil }
			full := func(int) error { return errors.New("the slot was full: want it empty") }
			if err := m.send(first, write, full); err != nil {
				return 0, err
			}
			if err := m.send(second, write, full); err != nil {
				return 0, err
			}
			if s := m.state.Load(); s != mbFull || len(socket) != len(first) {
				return 0, fmt.Errorf("after the two sends: the word %d, %d bytes by the socket; want full (%d), %d", s, len(socket), mbFull, len(first))
			}
			return 0, syscall.EAGAIN
		}
		if len(socket) == 0 {
			return 0, syscall.EAGAIN
		}
		n := copy(p, socket)
		socket = socket[n:]
		return n, nil
	}
	var got []byte
	p := make([]byte, 2*mailboxSlot)
	polls := 0
	polling := func() bool { polls++; return polls < 1000 } // bounded: a lost frame ends the read, not the test
	for len(got) < len(first)+len(second) {
		n, err := r.read(p, polling, try)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		if len(got) == 0 && n > 0 && p[0] != 'A' {
			t.Fatalf("the first read returned %q (the slot's frame) ahead of the %d bytes written to the socket before it: the sock mark set between the receiver's socket read and its clear was lost", p[:n], len(first))
		}
		got = append(got, p[:n]...)
	}
	if want := append(append([]byte{}, first...), second...); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, first mismatch at %d; want the socket's frame then the slot's", len(got), mismatch(got, want))
	}
}
