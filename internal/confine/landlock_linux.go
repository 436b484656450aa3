package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// landlockABI returns the kernel's Landlock ABI version, or 0 and why
// there is none. It is asked once per process.
var landlockABI = sync.OnceValues(func() (int, error) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Errorf("landlock_create_ruleset: %v", errno)
	}
	return int(abi), nil
})

// Access rights.
const (
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fileRights are those a rule on a file (not a directory) may hold.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS is every filesystem right the ABI knows: all of them are
// denied unless a rule grants them.
func handledFS(abi int) uint64 {
	switch {
	case abi >= 5:
		return 1<<16 - 1 // + IOCTL_DEV
	case abi >= 3:
		return 1<<15 - 1 // + TRUNCATE
	case abi >= 2:
		return 1<<14 - 1 // + REFER
	default:
		return 1<<13 - 1
	}
}

// StartPaths are the read-only paths every run gets besides the declared
// ones, so that a dynamically linked executable can start: the dynamic
// loader and the shared libraries (the library directories, as the loader
// searches them) and the loader's cache. The executable itself is added
// per run (its path and, if it is a link, the file it names), and /dev/null
// is readable and writable. Paths that do not exist here are skipped.
// Nothing else is readable: not /etc, not /usr/bin, not /proc, not $HOME.
var StartPaths = []string{"/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/etc/ld.so.cache"}

type pathRule struct {
	path  string
	write bool
	// optional paths are skipped when missing (the start paths).
	optional bool
	// noFollow: opened without following a symlink anywhere on the path
	// (the declared read-only and writable paths: openNoFollow).
	noFollow bool
}

// rules lists the path rules of s, start paths first.
func rules(s *wireSpec) []pathRule {
	var out []pathRule
	for _, p := range StartPaths {
		out = append(out, pathRule{path: p, optional: true})
	}
	out = append(out, pathRule{path: s.Path})
	if real, err := filepath.EvalSymlinks(s.Path); err == nil && real != s.Path {
		out = append(out, pathRule{path: real})
	}
	out = append(out, pathRule{path: "/dev/null", write: true, optional: true})
	for _, p := range s.SystemReadOnly {
		out = append(out, pathRule{path: p})
	}
	for _, p := range s.ReadOnly {
		out = append(out, pathRule{path: p, noFollow: true})
	}
	for _, p := range s.Writable {
		out = append(out, pathRule{path: p, write: true, noFollow: true})
	}
	return out
}

type rulesetAttr struct {
	fs, net, scoped uint64
}

type pathBeneath struct {
	access uint64
	fd     int32
	_      [4]byte // the kernel reads 12 packed bytes
}

type netPort struct {
	access, port uint64
}

// buildRuleset makes the Landlock ruleset for s at abi and returns its fd
// (close-on-exec). It opens every path (O_PATH): a declared path that does
// not exist is an error.
func buildRuleset(s *wireSpec, abi int) (int, error) {
	attr := rulesetAttr{fs: handledFS(abi)}
	size := unsafe.Sizeof(uint64(0))
	if abi >= 4 {
		attr.net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size = 2 * unsafe.Sizeof(uint64(0))
	}
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset (ABI %d): %v", abi, errno)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(int(fd))
		}
	}()
	for _, r := range rules(s) {
		open := openFollow
		if r.noFollow {
			open = openNoFollow
		}
		pfd, err := open(r.path)
		if err != nil {
			if r.optional && os.IsNotExist(err) {
				continue
			}
			if r.noFollow && errors.Is(err, unix.ELOOP) {
				kind := "read path"
				if r.write {
					kind = "writable path"
				}
				return -1, fmt.Errorf("%s %s: a symlink is on its path (%ss are named by their real path: a link there could lead anywhere)", kind, r.path, kind)
			}
			return -1, fmt.Errorf("path %s: %v", r.path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			unix.Close(pfd)
			return -1, fmt.Errorf("path %s: %v", r.path, err)
		}
		access := uint64(fsRead)
		if r.write {
			access = handledFS(abi)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &= fileRights
		}
		access &= handledFS(abi)
		pb := pathBeneath{access: access, fd: int32(pfd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
		unix.Close(pfd)
		if errno != 0 {
			return -1, fmt.Errorf("landlock rule for %s: %v", r.path, errno)
		}
	}
	// Below ABI 4 TCP is not handled at all: Run allows that only with
	// Spec.Unconfined (and says so in the Result).
	if s.ProxyPort != 0 && abi >= 4 {
		np := netPort{access: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(s.ProxyPort)}
		const ruleNetPort = 2 // LANDLOCK_RULE_NET_PORT
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, ruleNetPort, uintptr(unsafe.Pointer(&np)), 0, 0, 0)
		if errno != 0 {
			return -1, fmt.Errorf("landlock rule for TCP port %d: %v", s.ProxyPort, errno)
		}
	}
	ok = true
	return int(fd), nil
}

// openFollow opens path as O_PATH, following symlinks: a path maiden adds itself (the start paths: the system's
// library directories are links on merged-/usr systems; the executable; Spec.SystemReadOnly, the CA bundle's
// directory is a link on some).
func openFollow(path string) (int, error) {
	return unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
}

// openNoFollow opens path as O_PATH without following a symlink anywhere on it (ELOOP if there is one): a declared
// path is decided by its name (a wrapped CLI's write_paths by the session's boundary and the agent's fs:read/fs:write cards,
// its read_paths and an MCP server's by the operator), and a Landlock rule binds what the name resolves to, so a
// link there (which whoever writes its parent can make between two runs: the agent, through a CLI whose
// write_paths hold it) would make its target writable, or readable. openat2 with RESOLVE_NO_SYMLINKS, else a walk
// from / opening one component at a time with O_NOFOLLOW.
func openNoFollow(path string) (int, error) {
	if !walkForTesting {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		if err == nil || !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return fd, err
		}
	}
	// No openat2 (or a seccomp filter refuses it): walk.
	if !filepath.IsAbs(path) {
		return -1, unix.EINVAL
	}
	cur, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			unix.Close(cur)
			return -1, unix.EINVAL
		}
		next, err := unix.Openat(cur, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
		// O_PATH|O_NOFOLLOW opens a symlink itself: refuse it, whichever component it is.
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			unix.Close(cur)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(cur)
			return -1, unix.ELOOP
		}
	}
	return cur, nil
}

// walkForTesting makes openNoFollow take the walk on kernels that have openat2.
var walkForTesting bool
