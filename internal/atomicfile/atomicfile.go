// Package atomicfile writes files so that a reader sees the old content or
// the new, never half of it, and serialises work across processes with file
// locks. maiden writes compiled components, built tools and toolchain
// markers this way: a server hot-reloading a .wasm, or a parallel test
// process reading the compile cache, must never load a torn file.
//
//	unlock, err := atomicfile.Lock(ctx, dir+".lock", nil)
//	if err != nil { ... }
//	defer unlock()
//	err = atomicfile.Write(path, data, 0o644)
package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Write writes data to path through a temporary file in the same directory,
// renamed over path once complete (rename is atomic within a filesystem).
// The directory must exist. On failure path is untouched and the temporary
// file removed.
func Write(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, perm)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}

// Lock takes an exclusive flock on path (created if missing), polling so
// that ctx can end the wait; waiting, if not nil, is called once if someone
// else holds the lock. flock locks belong to the open file, so goroutines of
// one process exclude each other as well as other processes. The lock is
// released by calling unlock, or when the process exits.
func Lock(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// OwnedByOther reports whether fi belongs to a user other than the one
// running maiden, and that user's ID. Replacing such a file (Write renames
// a new file over it) would hand it to this user: its owner could no
// longer edit it, and as root it would be a file its owner's programs read
// but root wrote; writing into such a directory lets its owner change what
// is written meanwhile.
func OwnedByOther(fi os.FileInfo) (uid int, other bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), int(st.Uid) != os.Geteuid()
}
