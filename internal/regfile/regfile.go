// Package regfile reads a file an operator named, safely: regular files
// only (no FIFO that blocks, no device that never ends, no /proc file), the
// opened descriptor checked rather than the path, and at most a limit of
// bytes. Pure but for the file system; config (agent.toml and the files it
// names) and internal/egress (CA bundles) share it, so neither imports the
// other.
package regfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by Read's error for anything but a regular
// file: a FIFO would block forever, a device (/dev/zero) never ends.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by Read's error for a file over its cap.
var ErrTooLarge = errors.New("file too large")

// Read reads a file of at most limit bytes (limit must be
// positive). Only regular files are read: the file is opened
// without blocking (a FIFO with no writer would otherwise block the open
// itself, deaf to SIGTERM), the opened descriptor is checked (not the path,
// which could be swapped in between), and at most limit+1 bytes are read, so
// a file that grows while being read is still refused rather than followed.
// Files on /proc are refused too: they claim to be regular, but some never
// end or block. Errors are *fs.PathError naming the file.
func Read(name string, limit int64) ([]byte, error) {
	if limit <= 0 {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("no size limit given")}
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case fi.IsDir():
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	case !fi.Mode().IsRegular():
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, fileKind(fi.Mode()))}
	case onProcFS(f):
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w (a /proc file)", ErrNotRegular)}
	case fi.Size() > limit:
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, fi.Size(), limit)}
	}
	if testHookBeforeRead != nil {
		testHookBeforeRead(name)
	}
	// Sized from the file, so a 12 MB component is read into one buffer
	// rather than grown into by doubling; what is read still decides,
	// whatever the size said.
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	data := buf.Bytes()
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)}
	}
	return data, nil
}

// testHookBeforeRead, if set (by tests only), is called between the checks
// of the opened file and its read: where a file that grows is caught only
// by reading one byte past the limit.
var testHookBeforeRead func(name string)

// fileKind names a non-regular file type for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "type " + m.Type().String()
	}
}
