//go:build unix

package store

import (
	"errors"
	"fmt"
	"io/fs"
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

// checkJournalDir refuses a journal directory another user could write
// to: every file in it is ingested into the audit chain as this store's
// records, so whoever can add a file there can forge history. The
// directory (followed if it is a link) must be owned by this process's
// user (or by root, who can write anywhere anyway) and writable by no
// group or other user. One that does not exist
// yet passes (it is made 0700), as does a path that is not a directory
// (nothing can be ingested from it; Append reports it).
func checkJournalDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		fix := "chown it, or set another directory"
		if uid == 0 {
			// sudo maiden ... over a service user's state: root would
			// read files that user controls and leave root's files in its
			// directory.
			fix = fmt.Sprintf("run maiden as its owner, e.g. sudo -u '#%d' maiden ...", st.Uid)
		}
		return fmt.Errorf("%w: %s is owned by uid %d, not by this process's uid %d; any file in it would be ingested into the audit chain (%s)",
			ErrJournalDirUnsafe, dir, st.Uid, uid, fix)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: %s has mode %#o, writable by its group or other users; any file they put there would be ingested into the audit chain (chmod go-w %s)",
			ErrJournalDirUnsafe, dir, perm, dir)
	}
	return nil
}

// checkJournalFile refuses a journal file (open as f) that this process's
// user did not write: one owned by another user (root's excepted, as for
// the directory) or writable by its group or other users. The directory
// check keeps others from adding files from now on; this one catches the
// files they added while it did not hold (the directory was writable by
// them once, and the operator fixed its mode as Open asked), which would
// otherwise enter the chain as this store's records at the next sweep.
func checkJournalFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		return fmt.Errorf("%w: journal file %s is owned by uid %d, not by this process's uid %d, so this store did not write it; it is not ingested into the audit chain (look at it, then remove it)",
			ErrJournalFileUnsafe, f.Name(), st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: journal file %s has mode %#o, writable by its group or other users, so this store cannot vouch for its lines; it is not ingested into the audit chain (look at it, then remove it)",
			ErrJournalFileUnsafe, f.Name(), perm)
	}
	return nil
}
