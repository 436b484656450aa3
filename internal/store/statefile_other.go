//go:build !unix

package store

import (
	"errors"
	"io/fs"
	"os"
)

// prepareStateFile creates a missing state file privately (mode 0600, as
// far as this system has modes); ownership and modes are not checked here
// (see the unix version).
func prepareStateFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close()
	}
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}
