package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeToOthers takes every access for other users off the store's file
// at p, if it has any and this user owns it. The file is opened as a path
// only (O_PATH, without following a link), checked through that
// descriptor (a regular file of this user's) and changed through it
// (/proc/self/fd): a group member who swapped the name for a link since
// checkStatePath (a group-writable directory is accepted) cannot have
// another of this user's files made group-accessible. An O_PATH
// descriptor takes no part in locks: closing a descriptor this process
// opened for reading or writing on the database would drop the POSIX
// locks SQLite holds on it through another, in this process. A missing
// side file is left missing, and so is the mode where /proc is not
// mounted.
func closeToOthers(p string) error {
	fd, err := syscall.Open(p, unix.O_PATH|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%w: the state store's file %s could not be opened to check its mode: %v", ErrStateUnsafe, p, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fmt.Errorf("%w: the state store's file %s is not a regular file", ErrStateUnsafe, p)
	}
	perm := st.Mode & 0o7777
	if perm&0o007 == 0 || int(st.Uid) != os.Geteuid() {
		return nil
	}
	err = syscall.Chmod("/proc/self/fd/"+strconv.Itoa(fd), perm&0o770)
	if errors.Is(err, syscall.ENOENT) {
		return nil // no /proc: left as it was
	}
	if err != nil {
		return fmt.Errorf("%w: the state store's file %s has mode %#o, readable by other users, and could not be made private (chmod o-rwx %s): %v",
			ErrStateUnsafe, p, perm, p, err)
	}
	return nil
}
