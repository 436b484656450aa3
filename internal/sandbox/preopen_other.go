//go:build !linux

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/maiden-run/maiden/internal/wasmtime"
)

// openDirNoFollow checks that no component of path is a symlink and opens
// it. Without openat2 or /proc/self/fd, wasmtime opens the path again by
// name: a swap between the check and that open is not caught here (Linux
// closes that gap).
func openDirNoFollow(path string) (*os.File, error) {
	p := "/"
	for _, name := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if name == "" {
			continue
		}
		p = filepath.Join(p, name)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &PreopenError{Path: path, Reason: "a symlink is on its path (preopened directories are named by their real path)"}
		}
		if !fi.IsDir() {
			return nil, &PreopenError{Path: path, Reason: "is not a directory"}
		}
	}
	return os.Open(path)
}

func preopenOpenError(path string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &PreopenError{Path: path, Reason: "does not exist", Err: os.ErrNotExist}
	case errors.Is(err, os.ErrPermission):
		return &PreopenError{Path: path, Reason: "cannot be opened", Err: os.ErrPermission}
	}
	return &PreopenError{Path: path, Reason: "cannot be opened", Err: err}
}

func wasmtimePreopens(dirs []OpenedPreopen) ([]wasmtime.Preopen, error) {
	out := make([]wasmtime.Preopen, len(dirs))
	for i, d := range dirs {
		out[i] = wasmtime.Preopen{HostPath: d.HostPath, GuestPath: d.GuestPath, Write: d.Write}
	}
	return out, nil
}
