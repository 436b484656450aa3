//go:build unix

package oci

import "github.com/maiden-run/maiden/internal/compcache"

// checkOwnDirs applies OpenStore's rules to the store directory dir (an
// absolute path with no links in it) and its subdirectories subs: the
// compiled-component cache's (compcache.CheckPrivateDir), whose files are
// trusted the same way. Each ancestor of each, from /, must be a
// directory owned by root or this process's user and writable by no group
// or other user unless sticky (others can then add names but not replace
// this user's); dir and subs must be directories of this user's that no
// group or other user can write. Nothing on the way may be a link: links
// were resolved before, so one found now was swapped in.
func checkOwnDirs(dir string, subs []string) error {
	for _, p := range append([]string{dir}, subs...) {
		if err := compcache.CheckPrivateDir(p, "component store"); err != nil {
			return err
		}
	}
	return nil
}
