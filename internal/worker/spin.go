package worker

import (
	"errors"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// spinReader reads a non-blocking socket, first trying for a while without
// parking when an answer is expected soon, then through Go's poller. A
// call's round trip is two wake-ups across processes; on a virtual machine
// with idle CPUs each costs tens of microseconds once the reader has gone
// to sleep (measured here: 21 µs parent → worker, ~30 µs back), more than a
// tiny tool's whole call. The parent spins while a call is out (the worker
// is running on the other CPU); a worker spins for a moment after it
// answers, when the next call of a busy server is most likely.
type spinReader struct {
	f  *os.File
	rc syscall.RawConn // reads under the file's own reference to the fd
	// One attempt's buffer and result, and the bound method that makes it:
	// made once, so spinning allocates nothing (garbage would wake the
	// collector on both CPUs while the worker runs).
	buf     []byte
	n       int
	err     error
	attempt func(fd uintptr) bool
	// until is the UnixNano time up to which Read spins; 0: do not.
	until atomic.Int64
}

func newSpinReader(f *os.File) *spinReader {
	rc, _ := f.SyscallConn()
	r := &spinReader{f: f, rc: rc}
	r.attempt = r.readOnce
	return r
}

func (r *spinReader) readOnce(fd uintptr) bool {
	r.n, r.err = syscall.Read(int(fd), r.buf)
	return true
}

// spinFor makes reads spin for d from now.
func (r *spinReader) spinFor(d time.Duration) { r.until.Store(time.Now().Add(d).UnixNano()) }

// stop ends spinning.
func (r *spinReader) stop() { r.until.Store(0) }

func (r *spinReader) Read(p []byte) (int, error) {
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
			break // let the poller report it
		}
		runtime.Gosched()
	}
	return r.f.Read(p)
}
