package worker

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ipcConn is the parent's end of a worker's socket. It is non-blocking but
// kept off Go's network poller: a reader or writer that finds nothing to
// do sleeps in ppoll(2) on its own thread, on the socket and on an eventfd
// that Close writes, so a kill (deadline, cancel, shutdown) ends the sleep
// at once even while the worker's end stays open.
//
// Why not the poller: a socket registered with it is in the process's
// epoll set, so each byte the worker writes, and each read of the
// worker's that makes room for the parent's next write, wakes the thread
// parked in epoll_wait, whether or not anyone waits on this socket; the
// reading goroutine is then readied there and another idle thread woken to
// run it or to poll in its place. Measured with perf (bench/README.md,
// "Off the network poller"): ~1 wake-up of the poller's thread per call in
// each process on top of the reader's own. A thread sleeping in a system call keeps its P, so
// the answer resumes the caller on the same thread with no hand-off. The
// price: each worker being waited on holds an OS thread meanwhile (one
// per worker at most; a call waiting for a free worker waits parked, with
// no thread).
//
// Every use of the descriptors holds a reference (acquire); Close marks
// the conn closed and wakes sleepers, and the last reference closes both
// descriptors, so a descriptor number is never reused under a sleeper.
type ipcConn struct {
	fd   int
	wake int // eventfd; readable once Close was called

	mu     sync.Mutex
	refs   int
	closed atomic.Bool

	wmu sync.Mutex // one frame written at a time

	// until is the UnixNano time up to which Read spins before sleeping;
	// 0: do not.
	until atomic.Int64
	// peerExited: the worker process has exited (set by its waiter).
	peerExited atomic.Bool

	// The shared mailboxes (mailbox.go), nil without them: in holds the
	// worker's frames while Read polls, out the parent's while the worker
	// polls. region is unmapped with the descriptors.
	region  []byte
	ready   *atomic.Uint32 // the worker's mailboxReady word
	in      *mailboxReader
	out     *mailbox
	polling func() bool               // Read's: still spinning and open?
	try     func([]byte) (int, error) // Read's: one read that does not wait
	write   func([]byte) error        // Write's through the socket
	wait    func(int) error           // Write's while the slot holds a frame
}

// newIPCConn takes over fd, the parent's end of a worker's socket, already
// non-blocking.
func newIPCConn(fd int) (*ipcConn, error) {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	c := &ipcConn{fd: fd, wake: wake}
	c.polling, c.try, c.write, c.wait = c.pollingMailbox, c.tryRead, c.writeSocket, c.waitSlot
	return c, nil
}

// pollingMailbox tells Read's mailbox to go on polling: while spinning,
// not closed (a kill) and the worker not known to have exited (a crash,
// which the socket then reports as its end). The polling reads the socket
// only when the worker marked a write, so without these a dead worker
// would be seen only when the spin ran out (up to maxSpin).
func (c *ipcConn) pollingMailbox() bool {
	return !c.closed.Load() && !c.peerExited.Load() && c.spinning()
}

// useMailboxes makes c carry frames through the shared region too
// (mailboxSize bytes, mapped by the caller; unmapped with c's descriptors).
func (c *ipcConn) useMailboxes(region []byte) {
	c.region = region
	c.in = &mailboxReader{m: mailboxAt(region, toParent), nap: parentNap, napping: c.mayNap}
	c.out = mailboxAt(region, toWorker)
	c.ready = mailboxReady(region)
}

// parentNap is how long the parent waiting for a worker's frame sleeps on
// its mailbox's word (woken by the worker's frame) before it sleeps on the
// socket: a futex wake-up costs less than a socket's (bench/README.md,
// "Shared mailboxes"), and a call longer than this pays one wake-up more.
const parentNap = 20 * time.Millisecond

// mayNap tells Read's mailbox it may sleep on the word: the worker speaks
// through the mailboxes (mailboxReady), the conn is not closed and the
// worker not known to have exited (Close and peerGone wake a sleeper).
func (c *ipcConn) mayNap() bool {
	return c.ready.Load() == 1 && !c.closed.Load() && !c.peerExited.Load()
}

// peerGone records that the worker process exited, and wakes a reader
// asleep on its mailbox.
func (c *ipcConn) peerGone() {
	c.peerExited.Store(true)
	if c.in != nil && c.acquire() {
		c.in.m.wake()
		c.release()
	}
}

func (c *ipcConn) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.refs++
	return true
}

func (c *ipcConn) release() {
	c.mu.Lock()
	c.refs--
	last := c.refs == 0 && c.closed.Load()
	c.mu.Unlock()
	if last {
		c.closeFDs()
	}
}

func (c *ipcConn) closeFDs() {
	_ = unix.Close(c.fd)
	_ = unix.Close(c.wake)
	if c.region != nil {
		_ = unix.Munmap(c.region)
	}
}

// Close wakes every reader and writer sleeping on the socket; they return
// os.ErrClosed. The descriptors close when the last of them has returned.
func (c *ipcConn) Close() error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return os.ErrClosed
	}
	c.closed.Store(true)
	if c.in != nil {
		c.in.m.wake() // the region is mapped until the last reference goes
	}
	var one [8]byte
	*(*uint64)(unsafe.Pointer(&one[0])) = 1 // the eventfd's counter, native-endian
	_, _ = unix.Write(c.wake, one[:])
	last := c.refs == 0
	c.mu.Unlock()
	if last {
		c.closeFDs()
	}
	return nil
}

// spinFor makes reads poll without sleeping for d from now (while an
// answer is expected and a CPU is free: see freecpu.go).
func (c *ipcConn) spinFor(d time.Duration) { c.until.Store(time.Now().Add(d).UnixNano()) }

// stop ends spinning.
func (c *ipcConn) stop() { c.until.Store(0) }

func (c *ipcConn) spinning() bool { return c.until.Load() > time.Now().UnixNano() }

func (c *ipcConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !c.acquire() {
		return 0, os.ErrClosed
	}
	defer c.release()
	spinning := false // with the mailboxes, in.read did the polling
	if in := c.in; in != nil {
		// Poll the slot and the socket without a system call while
		// nothing came by the socket (mailbox.go), sleep on the
		// mailbox's word, then sleep on the socket.
		n, err := in.read(p, c.polling, c.try)
		if err != errMailboxSleep {
			return n, err
		}
	} else {
		spinning = c.spinning()
	}
	for {
		n, err := c.tryRead(p)
		switch {
		case n > 0 || err != unix.EAGAIN:
			return n, err
		case c.closed.Load():
			return 0, os.ErrClosed
		}
		if spinning {
			if spinning = c.spinning(); spinning {
				continue
			}
		}
		if err := c.sleep(unix.POLLIN); err != nil {
			return 0, err
		}
	}
}

// tryRead reads what the socket holds, without waiting (unix.EAGAIN: it
// holds nothing).
func (c *ipcConn) tryRead(p []byte) (int, error) {
	for {
		n, err := unix.Read(c.fd, p)
		switch {
		case err == nil && n > 0:
			return n, nil
		case err == nil:
			return 0, io.EOF
		case err == unix.EINTR:
			continue
		}
		return 0, err
	}
}

// Write writes all of b (one frame), through the worker's mailbox while
// the worker polls it, else through the socket, sleeping while it is full.
func (c *ipcConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.acquire() {
		return 0, os.ErrClosed
	}
	defer c.release()
	if c.out != nil {
		if err := c.out.send(b, c.write, c.wait); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if err := c.writeSocket(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *ipcConn) writeSocket(b []byte) error {
	done := 0
	for done < len(b) {
		n, err := unix.Write(c.fd, b[done:])
		switch {
		case err == nil:
			done += n
			continue
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return err
		}
		if err := c.sleep(unix.POLLOUT); err != nil {
			return err
		}
	}
	return nil
}

// waitSlot waits while the worker's mailbox still holds the parent's last
// frame: spinning for a while (the worker is taking it), then in short
// sleeps that a Close ends (a worker that never takes it is killed by its
// guard, which closes c).
func (c *ipcConn) waitSlot(spins int) error {
	if c.closed.Load() {
		return os.ErrClosed
	}
	if spins < 1<<12 {
		return nil
	}
	fds := [1]unix.PollFd{{Fd: int32(c.wake), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(50 * time.Microsecond))
	if _, err := unix.Ppoll(fds[:], &ts, nil); err != nil && err != unix.EINTR {
		return err
	}
	if fds[0].Revents != 0 {
		return os.ErrClosed
	}
	return nil
}

// sleep waits until the socket is ready for events (or hung up), or
// Close was called (os.ErrClosed). The caller holds a reference.
func (c *ipcConn) sleep(events int16) error {
	fds := [2]unix.PollFd{{Fd: int32(c.fd), Events: events}, {Fd: int32(c.wake), Events: unix.POLLIN}}
	for {
		// unix.Ppoll enters the scheduler's system-call state (it is not
		// a raw syscall), so the thread's P can serve other goroutines
		// if this sleeps long.
		_, err := unix.Ppoll(fds[:], nil, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if fds[1].Revents != 0 {
			return os.ErrClosed
		}
		return nil
	}
}

// pending tells whether bytes wait to be read (in the socket or the
// mailbox), or the worker's end is closed, or the socket cannot be read: a
// worker in that state between calls is not to be trusted with another.
func (c *ipcConn) pending() bool {
	if !c.acquire() {
		return true
	}
	defer c.release()
	if c.in != nil && (c.in.buffered() || c.in.m.stray()) {
		return true
	}
	var b [1]byte
	// Raw: no source address to parse on a socketpair.
	_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	// Bytes waiting, the worker's end closed (0 and no error), or an error
	// other than "nothing to read".
	return errno != unix.EAGAIN
}
