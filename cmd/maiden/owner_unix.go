//go:build unix

package main

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByOther reports whether fi belongs to a user other than the one
// running maiden, and that user's ID. Replacing such a file (a temporary
// file renamed over it) would hand it to us: its owner could no longer
// edit it, and as root it would be a file its owner's client reads but
// root wrote.
func ownedByOther(fi fs.FileInfo) (uid int, other bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), int(st.Uid) != os.Geteuid()
}
