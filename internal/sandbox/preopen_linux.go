package sandbox

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/internal/wasmtime"
	"golang.org/x/sys/unix"
)

// openDirNoFollow opens path as an O_PATH directory descriptor, refusing
// any symlink on the way: openat2 with RESOLVE_NO_SYMLINKS where the kernel
// has it, else a walk from / that opens one component at a time with
// O_NOFOLLOW.
func openDirNoFollow(path string) (*os.File, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !forceWalk {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
			Flags:   flags,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return nil, err
		}
	}
	// No openat2 (or a seccomp filter refuses it): walk.
	dir, err := unix.Open("/", flags, 0)
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if name == "" {
			continue
		}
		next, err := unix.Openat(dir, name, flags, 0)
		unix.Close(dir)
		if err != nil {
			return nil, err
		}
		dir = next
	}
	return os.NewFile(uintptr(dir), path), nil
}

// forceWalk makes tests take the walk on kernels that have openat2.
var forceWalk bool

// preopenOpenError words an open failure.
func preopenOpenError(path string, err error) error {
	var reason string
	switch {
	case errors.Is(err, unix.ENOENT):
		reason, err = "does not exist", os.ErrNotExist
	case errors.Is(err, unix.ELOOP):
		reason = "a symlink is on its path (preopened directories are named by their real path)"
	case errors.Is(err, unix.ENOTDIR):
		// O_NOFOLLOW|O_DIRECTORY on a symlink is ENOTDIR too.
		reason = "is not a directory, or a symlink is on its path"
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		reason, err = "cannot be opened", os.ErrPermission
	default:
		reason = "cannot be opened"
	}
	return &PreopenError{Path: path, Reason: reason, Err: err}
}

// wasmtimePreopens names each opened directory by its descriptor
// (/proc/self/fd/N), so wasmtime opens the very directory that was checked,
// not whatever its path names by then.
func wasmtimePreopens(dirs []OpenedPreopen) ([]wasmtime.Preopen, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return nil, &PreopenError{Path: dirs[0].HostPath, Reason: "cannot be handed to the tool: /proc is not available", Err: err}
	}
	out := make([]wasmtime.Preopen, len(dirs))
	for i, d := range dirs {
		out[i] = wasmtime.Preopen{HostPath: "/proc/self/fd/" + strconv.Itoa(int(d.Dir.Fd())), GuestPath: d.GuestPath, Write: d.Write}
	}
	return out, nil
}
