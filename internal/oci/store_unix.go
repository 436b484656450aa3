//go:build unix

package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// checkOwnDirs applies OpenStore's rules to the store directory dir (an
// absolute path with no links in it) and its subdirectories subs: each
// ancestor of dir, from /, must be a directory owned by root or this
// process's user and writable by no group or other user unless sticky
// (others can then add names but not replace this user's); dir and subs
// must be directories of this user's that no group or other user can
// write. Nothing on the way may be a link: links were resolved before, so
// one found now was swapped in. The rules are the compiled-component
// cache's (internal/compcache), whose files are trusted the same way.
func checkOwnDirs(dir string, subs []string) error {
	uid := os.Geteuid()
	check := func(p string, own bool) error {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return fmt.Errorf("stat %s: %v", p, err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return fmt.Errorf("%s is not a directory (a link?)", p)
		}
		perm := st.Mode & 0o7777
		if own {
			if int(st.Uid) != uid {
				return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d), who could swap a component's file after it was verified; use a directory of your own", p, st.Uid, uid)
			}
			if perm&0o022 != 0 {
				return fmt.Errorf("%s has mode %#o; want a directory only its owner can write (chmod 700)", p, perm)
			}
			return nil
		}
		if st.Uid != 0 && int(st.Uid) != uid {
			return fmt.Errorf("ancestor %s is owned by uid %d, neither root nor this user (uid %d), who could replace the store", p, st.Uid, uid)
		}
		if perm&0o022 != 0 && perm&syscall.S_ISVTX == 0 {
			return fmt.Errorf("ancestor %s is writable by group or others and not sticky (mode %#o), so they could replace the store", p, perm)
		}
		return nil
	}
	at := "/"
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Clean(dir), "/"), "/") {
		if err := check(at, false); err != nil {
			return err
		}
		at = filepath.Join(at, part)
	}
	for _, p := range append([]string{dir}, subs...) {
		if err := check(p, true); err != nil {
			return err
		}
	}
	return nil
}
