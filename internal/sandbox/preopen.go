package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/maiden-run/maiden/internal/wasmtime"
)

// Preopen is a host directory a call's WASI filesystem sees. Which
// directories a call gets is policy (the session's boundary and the tool's
// fs key, decided by the caller); the sandbox checks the paths, opens each
// directory when the call starts and hands it to wasmtime, which resolves
// every guest path beneath it itself: `..`, absolute paths and symlinks
// never leave it.
type Preopen struct {
	// HostPath is the directory on the host: absolute and clean, and no
	// component of it may be a symlink (a symlink there could be swapped
	// between calls to point anywhere).
	HostPath string
	// GuestPath is where the tool sees it: absolute and clean.
	GuestPath string
	// Write lets the tool create, write, rename and remove files and
	// directories beneath it; without it the directory and every file in
	// it are read-only.
	Write bool
}

// MaxPreopens bounds the directories one call may be given.
const MaxPreopens = 32

// maxPreopenPath bounds a host or guest path, in bytes (Linux's PATH_MAX).
const maxPreopenPath = 4096

// PreopenError says which directory could not be given to a call and why.
// A call that carries one did not run.
type PreopenError struct {
	// Path is the host path (or, for a bad guest path, the guest path).
	Path string
	// Reason says what is wrong with it.
	Reason string
	// Err is the system error, if any (os.ErrNotExist for a missing
	// directory).
	Err error
}

func (e *PreopenError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("preopened directory %s: %s: %v", e.Path, e.Reason, e.Err)
	}
	return fmt.Sprintf("preopened directory %s: %s", e.Path, e.Reason)
}

func (e *PreopenError) Unwrap() error { return e.Err }

// ValidatePreopens checks the paths without touching the filesystem:
// at most MaxPreopens, host and guest paths absolute, clean, without NUL
// bytes and at most 4096 bytes long, no guest path twice.
func ValidatePreopens(dirs []Preopen) error {
	if len(dirs) > MaxPreopens {
		return &PreopenError{Path: dirs[MaxPreopens].HostPath, Reason: fmt.Sprintf("a call may be given at most %d directories, not %d", MaxPreopens, len(dirs))}
	}
	guests := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		if err := checkPreopenPath(d.HostPath, "host"); err != nil {
			return err
		}
		if err := checkPreopenPath(d.GuestPath, "guest"); err != nil {
			return err
		}
		if guests[d.GuestPath] {
			return &PreopenError{Path: d.GuestPath, Reason: "guest path given twice"}
		}
		guests[d.GuestPath] = true
	}
	return nil
}

func checkPreopenPath(p, which string) error {
	switch {
	case p == "":
		return &PreopenError{Path: `""`, Reason: "empty " + which + " path"}
	case strings.IndexByte(p, 0) >= 0:
		return &PreopenError{Path: fmt.Sprintf("%q", p), Reason: which + " path contains a NUL byte"}
	case len(p) > maxPreopenPath:
		return &PreopenError{Path: p[:64] + "…", Reason: fmt.Sprintf("%s path is %d bytes long, over %d", which, len(p), maxPreopenPath)}
	case !filepath.IsAbs(p):
		return &PreopenError{Path: p, Reason: which + " path is not absolute"}
	case filepath.Clean(p) != p:
		return &PreopenError{Path: p, Reason: fmt.Sprintf("%s path is not clean (%s)", which, filepath.Clean(p))}
	}
	return nil
}

// OpenedPreopen is a directory opened for a call, by the caller of a worker
// (who holds the filesystem) or by the sandbox itself.
type OpenedPreopen struct {
	Preopen
	// Dir is the directory, opened O_PATH without following any symlink.
	Dir *os.File
}

// OpenPreopens validates dirs and opens each directory, refusing a missing
// one, one that is not a directory and one reached through a symlink. The
// caller closes every Dir (ClosePreopens).
func OpenPreopens(dirs []Preopen) ([]OpenedPreopen, error) {
	if err := ValidatePreopens(dirs); err != nil {
		return nil, err
	}
	out := make([]OpenedPreopen, 0, len(dirs))
	for _, d := range dirs {
		f, err := openDirNoFollow(d.HostPath)
		if err != nil {
			ClosePreopens(out)
			var pe *PreopenError
			if errors.As(err, &pe) {
				return nil, pe
			}
			return nil, preopenOpenError(d.HostPath, err)
		}
		out = append(out, OpenedPreopen{Preopen: d, Dir: f})
	}
	return out, nil
}

// ClosePreopens closes the directories OpenPreopens opened.
func ClosePreopens(dirs []OpenedPreopen) {
	for _, d := range dirs {
		if d.Dir != nil {
			d.Dir.Close()
		}
	}
}

// preopensOf opens a call's directories (or takes those its caller opened)
// and names them for wasmtime; release closes what it opened.
func preopensOf(c Call) ([]wasmtime.Preopen, func(), error) {
	opened := c.Opened
	release := func() {}
	if len(opened) == 0 {
		if len(c.Preopens) == 0 {
			return nil, release, nil
		}
		var err error
		if opened, err = OpenPreopens(c.Preopens); err != nil {
			return nil, release, err
		}
		release = func() { ClosePreopens(opened) }
	} else {
		given := make([]Preopen, len(opened))
		for i, d := range opened {
			if d.Dir == nil {
				return nil, release, &PreopenError{Path: d.HostPath, Reason: "no open directory given"}
			}
			given[i] = d.Preopen
		}
		if err := ValidatePreopens(given); err != nil {
			return nil, release, err
		}
	}
	dirs, err := wasmtimePreopens(opened)
	if err != nil {
		release()
		return nil, func() {}, err
	}
	return dirs, release, nil
}
