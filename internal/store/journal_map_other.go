//go:build !linux

package store

import (
	"errors"
	"os"
)

// errNoMap: the journal file cannot be mapped here; records are written
// with write(2) instead.
var errNoMap = errors.New("journal mapping not supported")

// mapJournal is Linux-only for now (fallocate reserves the blocks that
// make a mapped write safe from a full disk).
func mapJournal(f *os.File, size int64) ([]byte, error) { return nil, errNoMap }

func unmapJournal(m []byte) error { return nil }

func populateJournal(b []byte) error { return errNoMap }

// seekData: holes are not skipped here; every byte is read.
func seekData(rd *os.File, off int64) (int64, error) { return off, nil }
