package worker

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// filePread reads a small file from its start in one pread(2): the
// parent's per-call reads of a worker's cgroup usage and of /proc/loadavg.
// os.File.ReadAt would make two, since it reads on until its buffer is
// full or the file ends, and a system call costs ~1.3 µs on this VM
// (kernel page-table isolation without PCID: bench/README.md, "System
// calls"), on the path of every call. Both files give their whole content
// to the first read (the kernel renders them at once). It reads through
// the file's RawConn, under the file's own reference to its descriptor, so
// a Close meanwhile cannot hand the number to another file under the read.
// Not safe for concurrent use (its callers hold a worker, or a lock).
type filePread struct {
	rc  syscall.RawConn
	buf []byte
	n   int
	err error
	// attempt is the bound method, made once: reading allocates nothing.
	attempt func(fd uintptr) bool
}

func newFilePread(f *os.File) (*filePread, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &filePread{rc: rc}
	r.attempt = r.once
	return r, nil
}

func (r *filePread) once(fd uintptr) bool {
	for {
		r.n, r.err = unix.Pread(int(fd), r.buf, 0)
		if r.err != unix.EINTR {
			return true
		}
	}
}

// read reads up to len(buf) bytes from the file's start.
func (r *filePread) read(buf []byte) (int, error) {
	r.buf = buf
	if err := r.rc.Read(r.attempt); err != nil {
		// The only refusal of a file that is not polled: it is closed.
		r.buf = nil
		return 0, fmt.Errorf("%w (%v)", os.ErrClosed, err)
	}
	r.buf = nil
	if r.err != nil {
		return 0, r.err
	}
	return r.n, nil
}
