package regfile

import (
	"os"
	"syscall"
)

// procSuperMagic is procfs's f_type (linux/magic.h).
const procSuperMagic = 0x9fa0

// onProcFS reports whether f lives on procfs.
func onProcFS(f *os.File) bool {
	// SyscallConn, not Fd: Fd would switch the descriptor to blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var st syscall.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return false
	}
	return st.Type == procSuperMagic
}
