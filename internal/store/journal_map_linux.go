//go:build linux

package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// errNoMap: the journal file cannot be mapped here; records are written
// with write(2) instead.
var errNoMap = errors.New("journal mapping not supported")

// mapJournal reserves size bytes of f's blocks (fallocate: writing into
// the mapping can then not fail for want of space at write-back, which
// would be a SIGBUS) and maps them shared. A file system without
// fallocate is errNoMap.
func mapJournal(f *os.File, size int64) ([]byte, error) {
	fd := int(f.Fd())
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return nil, errNoMap
		}
		return nil, fmt.Errorf("reserve %d bytes for %s: %w", size, f.Name(), err)
	}
	m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", f.Name(), err)
	}
	return m, nil
}

func unmapJournal(m []byte) error { return unix.Munmap(m) }

// populateJournal prefaults b's pages writable without writing to them.
func populateJournal(b []byte) error { return unix.Madvise(b, unix.MADV_POPULATE_WRITE) }

// seekData returns where rd's next data (not a hole) starts at or after
// off; -1 when none does.
func seekData(rd *os.File, off int64) (int64, error) {
	d, err := unix.Seek(int(rd.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return -1, nil
	}
	return d, err
}
