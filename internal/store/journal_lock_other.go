//go:build !unix

package store

import (
	"errors"
	"os"
)

// errNoLock: file locks are not available here (the sweep then asks
// runnerGone).
var errNoLock = errors.New("journal file locks not supported")

func lockJournal(f *os.File) (bool, error) { return false, errNoLock }

// checkJournalDir: ownership and modes are not checked here (see the unix
// version).
func checkJournalDir(dir string) error { return nil }

// checkJournalFile: ownership and modes are not checked here (see the unix
// version).
func checkJournalFile(f *os.File) error { return nil }
