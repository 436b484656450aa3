//go:build !unix

package oci

import (
	"fmt"
	"os"
)

// checkOwnDirs: ownership is not checked here (see the unix version); dir
// and subs must still be directories, not links.
func checkOwnDirs(dir string, subs []string) error {
	for _, p := range append([]string{dir}, subs...) {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory (a link?)", p)
		}
	}
	return nil
}
