//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// prepareStateFile makes a SQLite state file safe to open at path, before
// SQLite touches it. The file holds who may do what (cards, agents' and
// operators' token hashes, approvals) and the audit trail with every call's
// rendered arguments, and whoever can write it, or the -wal, -shm and
// -journal files SQLite keeps beside it, can grant themselves anything and
// rewrite history. So:
//
//   - the directory that holds it (links followed, as SQLite follows them)
//     must be owned by this process's user or root and not writable by
//     other users; sticky or not, since SQLite makes and removes the
//     side files there, names another user could take first;
//   - a missing file is created here, empty (which SQLite takes for a new
//     database) and mode 0600: SQLite would make it 0644 less the umask,
//     readable by every local user, and gives the side files the main
//     file's mode; so is the missing file a link leads to, once the
//     directory it would be in passes the rule above (SQLite follows the
//     link and would make it there, unchecked);
//   - the file and any side file must be regular, owned by this user or
//     root, and not writable by other users.
//
// Group write is left to the operator (a user-private group's umask 002
// makes every directory group-writable). An existing file readable by
// other users (maiden before 2026-12-05 let SQLite make it 0644) loses
// its access for others (chmod o-rwx), the group's bits kept: an operator
// may share it with a backup user's group on purpose, never with every
// local user.
func prepareStateFile(path string) error {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return err // SQLite would fail too; its message is no better
	}
	if err := checkStatePath(dir, true); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err == nil {
		err = f.Close()
	} else if errors.Is(err, fs.ErrExist) {
		err = nil
	}
	if err != nil {
		return err
	}
	// New or not, the side files are checked: one planted before the
	// database existed would be read as its log.
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A link to a file not there yet: SQLite would follow it and make
		// the store there with its own mode, in a directory nobody
		// checked. Made here instead, as a missing file is above.
		if real, err = createLinkTarget(path); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if d := filepath.Dir(real); d != dir {
		if err := checkStatePath(d, true); err != nil {
			return err
		}
	}
	for _, p := range []string{real, real + "-wal", real + "-shm", real + "-journal"} {
		if err := checkStatePath(p, false); err != nil {
			return err
		}
		if err := closeToOthers(p); err != nil {
			return err
		}
	}
	return nil
}

// createLinkTarget creates, empty and mode 0600, the missing file that
// the link at path leads to (through links, as SQLite follows them), once
// its directory passes checkStatePath; it returns the file's real path.
func createLinkTarget(path string) (string, error) {
	p := path
	for range 40 { // the kernel's limit on links in a path
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			dir, err := filepath.EvalSymlinks(filepath.Dir(p))
			if err != nil {
				return "", err
			}
			if err := checkStatePath(dir, true); err != nil {
				return "", fmt.Errorf("%w (the state store's path %s is a link to %s, not made yet)", err, path, p)
			}
			f, err := os.OpenFile(filepath.Join(dir, filepath.Base(p)), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
			if err != nil {
				return "", err
			}
			if err := f.Close(); err != nil {
				return "", err
			}
			break // the kernel's resolution, below, must now find it
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			break // it exists now: another process made it
		}
		to, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(to) {
			dir, err := filepath.EvalSymlinks(filepath.Dir(p))
			if err != nil {
				return "", err
			}
			to = filepath.Join(dir, to)
		}
		p = to
	}
	// Resolved again as SQLite will: its directory is checked by the
	// caller, and a link this walk read otherwise than the kernel leaves
	// the file missing, an error.
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: the state store's path %s is a link to a file that could not be made", ErrStateUnsafe, path)
	}
	return real, err
}

// checkStatePath applies prepareStateFile's rules to a directory (isDir)
// or to one of the store's files, which must not be a link (SQLite's path
// to the main file is resolved before; a side file is never a link of
// SQLite's making). A side file that does not exist passes.
func checkStatePath(p string, isDir bool) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		if !isDir && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	kind, want, what := "file", uint32(syscall.S_IFREG), "a regular file"
	if isDir {
		kind, want, what = "directory", syscall.S_IFDIR, "a directory"
	}
	if st.Mode&syscall.S_IFMT != want {
		return fmt.Errorf("%w: the state store's %s %s is not %s", ErrStateUnsafe, kind, p, what)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		fix := "chown it, or choose another place"
		if uid == 0 {
			fix = fmt.Sprintf("run maiden as its owner, e.g. sudo -u '#%d' maiden ...", st.Uid)
		}
		return fmt.Errorf("%w: the state store's %s %s is owned by uid %d, not by this process's uid %d, who could change grants, approvals and the audit trail in it (%s)",
			ErrStateUnsafe, kind, p, st.Uid, uid, fix)
	}
	if perm := st.Mode & 0o7777; perm&0o002 != 0 {
		return fmt.Errorf("%w: the state store's %s %s has mode %#o, writable by other users, who could change grants, approvals and the audit trail in it (chmod o-w %s, or choose a private directory)",
			ErrStateUnsafe, kind, p, perm, p)
	}
	return nil
}
