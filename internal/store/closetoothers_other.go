//go:build unix && !linux

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// closeToOthers takes every access for other users off the store's file
// at p (checked by checkStatePath: a regular file, not a link), if it has
// any and this user owns it. Without Linux's O_PATH the file is changed
// by its name, after an lstat: a file not opened takes no part in the
// locks SQLite holds on it, which closing a descriptor of it would drop.
func closeToOthers(p string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fmt.Errorf("%w: the state store's file %s is not a regular file", ErrStateUnsafe, p)
	}
	perm := uint32(st.Mode) & 0o7777
	if perm&0o007 == 0 || int(st.Uid) != os.Geteuid() {
		return nil
	}
	if err := os.Chmod(p, fs.FileMode(perm&0o770)); err != nil {
		return fmt.Errorf("%w: the state store's file %s has mode %#o, readable by other users, and could not be made private (chmod o-rwx %s): %v",
			ErrStateUnsafe, p, perm, p, err)
	}
	return nil
}
