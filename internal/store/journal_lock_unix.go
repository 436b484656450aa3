//go:build unix

package store

import (
	"errors"
	"os"
	"syscall"
)

// errNoLock: file locks are not available here (the sweep then asks
// runnerGone).
var errNoLock = errors.New("journal file locks not supported")

// lockJournal tries to take an exclusive flock on f without waiting:
// false when another open file holds it. A journal's writer holds it from
// before the file has its name until the file is removed; the kernel
// drops it when the writer dies, in whatever PID namespace (or, over NFS,
// on whatever host) it ran.
func lockJournal(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
