package worker

import (
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ipcPair is an ipcConn and the other end of its socket, which the test
// keeps open: a worker that is killed but whose end of the socket outlives
// it (or a worker stuck where SIGKILL takes a while) must not keep the
// parent's reader or writer asleep.
func ipcPair(t *testing.T) (*ipcConn, int) {
	t.Helper()
	c, peer := ipcPairOpen(t)
	t.Cleanup(func() { unix.Close(peer) })
	return c, peer
}

// ipcPairOpen is ipcPair whose peer descriptor the caller closes.
func ipcPairOpen(t *testing.T) (*ipcConn, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	c, err := newIPCConn(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	return c, fds[1]
}

// closeWhileAsleep waits until the goroutine calling op is asleep in ppoll (its
// thread's wait channel says so), then closes c and returns op's error.
func closeWhileAsleep(t *testing.T, c *ipcConn, op func() error) error {
	t.Helper()
	tids := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		// Locked, so the thread seen asleep is this goroutine's.
		runtime.LockOSThread()
		tids <- unix.Gettid()
		errs <- op()
	}()
	tid := <-tids
	for !asleepInPoll(tid) {
		select {
		case err := <-errs:
			t.Fatalf("returned before Close: %v", err)
		default:
		}
		time.Sleep(time.Millisecond) // polling /proc, not waiting for a peer
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not wake the sleeper")
		return nil
	}
}

// asleepInPoll tells whether thread tid sleeps in poll (its wchan).
func asleepInPoll(tid int) bool {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/wchan")
	if err != nil {
		return false
	}
	// poll_schedule_timeout, or a compiler's poll_schedule_timeout.constprop.0
	return strings.HasPrefix(string(b), "poll_schedule_timeout")
}

// A reader asleep on a worker's socket wakes when the conn is closed (the
// worker killed), with os.ErrClosed, although the worker's end stays open
// and silent.
func TestIPCCloseWakesReader(t *testing.T) {
	c, _ := ipcPair(t)
	err := closeWhileAsleep(t, c, func() error {
		var b [16]byte
		_, err := c.Read(b[:])
		return err
	})
	if !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after close: %v, want os.ErrClosed", err)
	}
	assertClosedFDs(t, c)
}

// A writer asleep on a full socket (a worker that stopped reading) wakes
// when the conn is closed.
func TestIPCCloseWakesWriter(t *testing.T) {
	c, _ := ipcPair(t)
	err := closeWhileAsleep(t, c, func() error {
		_, err := c.Write(make([]byte, 64<<20))
		return err
	})
	if !errors.Is(err, os.ErrClosed) {
		t.Fatalf("write after close: %v, want os.ErrClosed", err)
	}
	assertClosedFDs(t, c)
}

// assertClosedFDs: once the last user returned, both descriptors are
// closed (no leak per worker), and the conn refuses further use. (Its
// callers are not parallel: a descriptor number closed here may be given
// at once to another test's file.)
func assertClosedFDs(t *testing.T, c *ipcConn) {
	t.Helper()
	for _, fd := range []int{c.fd, c.wake} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Errorf("fd %d still open after close (%v)", fd, err)
		}
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read of a closed conn: %v", err)
	}
	if _, err := c.Write([]byte{1}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write of a closed conn: %v", err)
	}
}

// Frames pass both ways, bytes a worker sent unasked show as pending, and
// the worker's end closing reads as EOF.
func TestIPCReadWritePending(t *testing.T) {
	t.Parallel()
	c, peer := ipcPair(t)
	if c.pending() {
		t.Fatal("pending on a quiet socket")
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	if n, err := unix.Read(peer, b[:]); err != nil || string(b[:n]) != "ping" {
		t.Fatalf("peer read %q, %v", b[:n], err)
	}
	if _, err := unix.Write(peer, []byte("pong")); err != nil {
		t.Fatal(err)
	}
	if !c.pending() {
		t.Fatal("bytes waiting but not pending")
	}
	if n, err := c.Read(b[:]); err != nil || string(b[:n]) != "pong" {
		t.Fatalf("read %q, %v", b[:n], err)
	}
	if err := unix.Shutdown(peer, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	if !c.pending() {
		t.Fatal("peer's end closed but not pending")
	}
	if _, err := c.Read(b[:]); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
	c.Close()
}

// TestPeerClosedWithUnreadBytesIsHangUp: a worker killed before it read a
// frame the parent sent it leaves that frame in its end's receive queue,
// and the kernel then reports the parent's read as ECONNRESET, not end of
// file. It is the worker going away all the same: a call it was running
// fails as its worker having died, not as a worker that sent bytes that
// are no frame (TestWorkerKilledMidCall read "misbehaved (unreadable
// message: connection reset by peer)" once in a full run).
func TestPeerClosedWithUnreadBytesIsHangUp(t *testing.T) {
	t.Parallel()
	c, peer := ipcPairOpen(t) // the peer is closed here, not by a cleanup
	defer c.Close()
	if _, err := c.Write([]byte("a frame the worker never reads")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Close(peer); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 16))
	if !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("read after the peer closed with bytes unread: %v, want ECONNRESET (the case this test is about)", err)
	}
	if !hungUp(err) {
		t.Errorf("hungUp(%v) = false: the call would be failed as a worker that misbehaved", err)
	}
	if hungUp(errors.New("frame type 99 is unknown")) {
		t.Error("hungUp of a malformed frame's error = true")
	}
}
