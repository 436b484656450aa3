package worker

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// spinReader reads a worker's end of its socket (blocking: Main), first
// trying for a while without sleeping when the next call is likely soon,
// then sleeping in read(2) on the thread that will serve the call. A call's
// round trip is two wake-ups across processes; on a virtual machine with
// idle CPUs each costs tens of microseconds once the reader has gone to
// sleep (measured here: 21 µs parent → worker, ~30 µs back), more than a
// tiny tool's whole call. A worker spins for a moment after it answers,
// when the next call of a busy server is most likely; the parent's end
// does the same in ipcConn.
//
// Not Go's network poller: a socket in the process's epoll set wakes the
// thread parked in epoll_wait for every frame the parent writes and every
// read of the parent's that makes room, whether or not anyone waits on it
// (bench/README.md, "Off the network poller"). Registering it only while
// asleep (a duplicate descriptor, closed when the frame came) was measured
// too: with the goroutine parked every P is idle and sysmon sleeps, but
// each wake through the poller cost more than one from read(2) (a WAT
// worker call's CPU 51-85 µs against 32-38 at gap 0; bench/README.md, "An
// idle worker's CPU"). So the thread sleeps in read(2), and sysmon polls
// meanwhile until it retakes the P after 10 ms; the engine no longer ticks,
// which was most of a sleeping worker's CPU.
type spinReader struct {
	f  *os.File
	rc syscall.RawConn // reads under the file's own reference to the fd
	// One attempt's buffer and result, and the bound method that makes
	// it: made once, so spinning allocates nothing (garbage would wake
	// the collector on both CPUs while the worker runs).
	buf     []byte
	n       int
	err     error
	attempt func(fd uintptr) bool
	iov     unix.Iovec // preadv2's, pointing at buf during an attempt
	// noNowait: the kernel refused RWF_NOWAIT on the socket (readOnce).
	noNowait bool
	// until is the UnixNano time up to which Read spins; 0: do not.
	until atomic.Int64

	// in is the parent's mailbox to this worker (mailbox.go), nil
	// without the shared region; polling and try are its Read's
	// callbacks, made once.
	in      *mailboxReader
	polling func() bool
	try     func([]byte) (int, error)
}

func newSpinReader(f *os.File) *spinReader {
	rc, _ := f.SyscallConn()
	r := &spinReader{f: f, rc: rc}
	r.attempt = r.readOnce
	r.polling, r.try = r.spinning, r.tryRead
	return r
}

// useMailbox makes Read take the parent's frames from m too.
func (r *spinReader) useMailbox(m *mailbox) { r.in = &mailboxReader{m: m, nap: workerNap} }

// workerNap is how long an idle worker sleeps on its mailbox's word (the
// parent's next frame wakes it) before it sleeps in read(2) on the socket.
const workerNap = 10 * time.Millisecond

// readOnce tries one read that does not wait on the blocking socket:
// preadv2(2) with RWF_NOWAIT, which on a socket is a recv with
// MSG_DONTWAIT, one system call for an attempt that finds nothing and one
// for the frame (a system call costs ~1.3 µs on this VM: bench/README.md,
// "System calls"). (Not recv itself: the worker's seccomp filter allows
// read, preadv2 and ppoll, not recvfrom.) A kernel that does not take the
// flag on a socket gets what every kernel does: ppoll with no timeout, and
// a read only once it saw bytes (or the end) waiting, two system calls for
// the frame.
func (r *spinReader) readOnce(fd uintptr) bool {
	if !r.noNowait && len(r.buf) > 0 {
		r.iov = unix.Iovec{Base: &r.buf[0]}
		r.iov.SetLen(len(r.buf))
		// Offset -1: the socket's own position (it has none), as read(2).
		n, _, errno := unix.Syscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&r.iov)), 1, ^uintptr(0), 0, unix.RWF_NOWAIT)
		r.iov = unix.Iovec{}
		switch errno {
		case 0:
			r.n, r.err = int(n), nil
			return true
		case unix.EAGAIN, unix.EINTR:
			r.n, r.err = 0, syscall.EAGAIN
			return true
		case unix.EOPNOTSUPP, unix.EINVAL, unix.ENOSYS:
			r.noNowait = true // and try the other way below
		default:
			r.n, r.err = 0, errno
			return true
		}
	}
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	var zero unix.Timespec
	if n, err := unix.Ppoll(fds[:], &zero, nil); n == 0 || err != nil {
		r.n, r.err = 0, syscall.EAGAIN
		return true
	}
	r.n, r.err = syscall.Read(int(fd), r.buf)
	return true
}

// spinFor makes reads spin for d from now.
func (r *spinReader) spinFor(d time.Duration) { r.until.Store(time.Now().Add(d).UnixNano()) }

func (r *spinReader) spinning() bool { return r.until.Load() > time.Now().UnixNano() }

// tryRead is one attempt, as the mailbox's reader wants it: syscall.EAGAIN
// when nothing waits.
func (r *spinReader) tryRead(p []byte) (int, error) {
	if r.rc == nil {
		return 0, syscall.EAGAIN
	}
	r.buf = p
	cerr := r.rc.Read(r.attempt)
	n, err := r.n, r.err
	r.buf = nil
	switch {
	case cerr != nil:
		return 0, cerr
	case n > 0:
		return n, nil
	case err == nil:
		return 0, io.EOF
	}
	return 0, err
}

func (r *spinReader) Read(p []byte) (int, error) {
	if in := r.in; in != nil {
		// The parent's mailbox and the socket, polled without a
		// system call while nothing came by the socket, then a sleep
		// on the mailbox's word (mailbox.go).
		n, err := in.read(p, r.polling, r.try)
		if err != errMailboxSleep {
			return n, err
		}
		return r.f.Read(p)
	}
	for r.rc != nil && r.until.Load() > time.Now().UnixNano() {
		// Through the RawConn, so a Close meanwhile cannot hand the fd
		// number to another file under this read.
		r.buf = p
		cerr := r.rc.Read(r.attempt)
		n, err := r.n, r.err
		r.buf = nil
		if cerr != nil {
			break
		}
		if n > 0 {
			return n, nil
		}
		if n == 0 && err == nil {
			return 0, io.EOF
		}
		if !errors.Is(err, syscall.EAGAIN) {
			break // let the plain read report it
		}
	}
	return r.f.Read(p)
}
