package worker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Compiled code reaches a worker as a descriptor, not as bytes: the parent
// holds each artifact in a sealed memfd and passes it over the worker's
// code channel (a socketpair of its own, SCM_RIGHTS); the worker maps it
// read-only and wasmtime copies the code out of the mapping. Sent through
// the frame socket instead, a JS tool's 46 MB of code was read into the
// parent's heap, copied into a frame, pushed through the socket in 200 KB
// writes and read into the worker's heap before wasmtime copied it once
// more: ~0.9 s of a `maiden call` that took 0.19 s in process
// (bench/README.md, "Code by descriptor").
//
// The seals (no write, no resize, no new seal) make the memfd the bytes
// the parent verified, whatever a worker holding it does: every worker
// loading the artifact maps the same pages, and none can change them for
// another. The channel carries only these descriptors, parent to worker;
// the worker's seccomp filter lets recvmsg(2) through on that one
// descriptor (confine_linux.c), and the parent never receives on it.

// envCode names the worker's end of its code channel, for its constructor
// (the seccomp filter) and for the child.
const envCode = "MAIDEN_WORKER_CODE"

// codeSeals are the seals a code memfd carries before any worker sees it.
const codeSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// newCodeFile returns a sealed memfd holding what fill writes into it. The
// caller closes it.
func newCodeFile(fill func(io.Writer) error) (*os.File, int64, error) {
	f, err := memfd()
	if err != nil {
		return nil, 0, err
	}
	if err := fill(f); err != nil {
		f.Close()
		return nil, 0, err
	}
	size, err := seal(f)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, size, nil
}

// memfd makes an empty memfd that can be sealed (a variable: tests make
// one that fails).
var memfd = newMemfd

func newMemfd() (*os.File, error) {
	fd, err := unix.MemfdCreate("maiden-code", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	return os.NewFile(uintptr(fd), "maiden-code"), nil
}

// seal seals f against any change (codeSeals) and returns its size.
func seal(f *os.File) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, codeSeals); err != nil {
		return 0, fmt.Errorf("sealing compiled code: %w", err)
	}
	return st.Size, nil
}

// codeFileOf is newCodeFile of bytes already in memory.
func codeFileOf(code []byte) (*os.File, int64, error) {
	return newCodeFile(func(w io.Writer) error {
		_, err := w.Write(code)
		return err
	})
}

// codeSink takes compiled code as the disk cache reads it out
// (compcache.LoadTo): as bytes while it is under min bytes, in a memfd from
// there on. So one read of the cache serves an artifact of either kind,
// with no memfd made for a small one, and where no memfd can be made or
// written (no memfds, a memory limit) the code is kept as bytes instead.
type codeSink struct {
	min    int
	buf    []byte
	f      *os.File
	n      int64 // bytes in f
	noFile bool
}

func (s *codeSink) Write(p []byte) (int, error) {
	if s.f == nil && !s.noFile && len(s.buf)+len(p) >= s.min {
		f, err := memfd()
		if err == nil {
			if _, err = f.Write(s.buf); err != nil {
				f.Close()
			}
		}
		if err != nil {
			s.noFile = true
		} else {
			s.f, s.n, s.buf = f, int64(len(s.buf)), nil
		}
	}
	if s.f != nil {
		if _, err := s.f.Write(p); err == nil {
			s.n += int64(len(p))
			return len(p), nil
		}
		// The memfd is given up: what it holds is kept as bytes.
		held := make([]byte, s.n, int(s.n)+len(p))
		if _, err := s.f.ReadAt(held, 0); err != nil {
			return 0, err
		}
		s.f.Close()
		s.f, s.noFile, s.buf = nil, true, held
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

// artifact is what the sink took as an artifact under key: the memfd,
// sealed, or the bytes; it owns the memfd. A sink whose memfd cannot be
// sealed is an error (and its memfd closed).
func (s *codeSink) artifact(key string) (*memArtifact, error) {
	if s.f == nil {
		return &memArtifact{key: key, code: s.buf, size: len(s.buf)}, nil
	}
	size, err := seal(s.f)
	if err != nil {
		s.discard()
		return nil, err
	}
	return &memArtifact{key: key, file: s.f, size: int(size)}, nil
}

// discard releases what the sink holds.
func (s *codeSink) discard() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	s.buf = nil
}

// loadable is compiled code as ensureLoaded sends it: a sealed memfd of
// its own (a duplicate, closed by close), or bytes where no memfd could be
// made.
type loadable struct {
	file *os.File
	code []byte
	size int
}

func (l loadable) close() {
	if l.file != nil {
		l.file.Close()
	}
}

// codeChannel is the parent's end of a worker's code channel. Sends and
// the close are serialised, so a send never reaches a descriptor number
// the close freed and something else reused.
type codeChannel struct {
	mu sync.Mutex
	fd int // -1 once closed
}

func (c *codeChannel) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// errChannelFull: the worker left earlier descriptors unread (the channel
// holds a few messages): it broke the protocol.
var errChannelFull = errors.New("the worker did not take the compiled code it was sent before")

// send passes f to the worker, without waiting.
func (c *codeChannel) send(f *os.File) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return os.ErrClosed
	}
	err := unix.Sendmsg(c.fd, []byte{1}, unix.UnixRights(int(f.Fd())), nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	if err == unix.EAGAIN {
		return errChannelFull
	}
	return err
}

// unread tells whether the worker has left a message sent on the channel
// untaken (SIOCOUTQ: what the worker's end has not consumed yet). A worker
// takes the descriptor before it answers the load that names it, so once
// it answered, anything unread is a worker that broke the protocol (and
// would otherwise pile descriptors up in its channel, a few hundred at
// most, until the socket's buffer refused: errChannelFull).
func (c *codeChannel) unread() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return false
	}
	n, err := unix.IoctlGetInt(c.fd, unix.SIOCOUTQ)
	return err != nil || n > 0
}

// newCodeChannel makes a code channel: the parent's end, and the worker's
// to pass at its start.
func newCodeChannel() (*codeChannel, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("worker code channel: %w", err)
	}
	return &codeChannel{fd: fds[0]}, os.NewFile(uintptr(fds[1]), "maiden-code-channel"), nil
}

// childCodeFD is the worker's end of its code channel, from its
// environment; -1 without one.
func childCodeFD() int {
	n, err := strconv.Atoi(os.Getenv(envCode))
	if err != nil || n < 3 || n > 255 {
		return -1
	}
	return n
}

// receiveCode takes the descriptor the parent sent ahead of a load frame
// for code of size bytes, and maps it read-only. unmap releases the
// mapping (the descriptor is closed before receiveCode returns).
func receiveCode(channel int, size uint64) (code []byte, unmap func(), err error) {
	if channel < 3 {
		return nil, nil, errors.New("compiled code sent by descriptor, but this worker has no code channel")
	}
	if size == 0 || size > maxFrame {
		return nil, nil, fmt.Errorf("compiled code of %d bytes", size)
	}
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := unix.Recvmsg(channel, b[:], oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("receiving compiled code: %w", err)
	}
	msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	if n != 1 || perr != nil || len(fds) != 1 || flags&unix.MSG_CTRUNC != 0 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, fmt.Errorf("receiving compiled code: a message of %d bytes with %d descriptors (flags %#x)", n, len(fds), flags)
	}
	fd := fds[0]
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) != size {
		return nil, nil, fmt.Errorf("compiled code: a descriptor of mode %#o and %d bytes, want a file of %d", st.Mode, st.Size, size)
	}
	m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mapping compiled code: %w", err)
	}
	return m, func() { _ = unix.Munmap(m) }, nil
}
