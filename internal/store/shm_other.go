//go:build !unix

package store

import "errors"

// shmWatch is unix-only; elsewhere Generation always asks the database.
type shmWatch struct{}

func openShm(string) (*shmWatch, error) {
	return nil, errors.New("no shared-memory change counter on this system")
}

func (*shmWatch) version() (uint64, bool) { return 0, false }

func (*shmWatch) close() {}
