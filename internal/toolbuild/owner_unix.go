//go:build unix

package toolbuild

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByOther reports whether fi belongs to a user other than the one
// running maiden, and that user's ID.
func ownedByOther(fi fs.FileInfo) (uid int, other bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), int(st.Uid) != os.Geteuid()
}
