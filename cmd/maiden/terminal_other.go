//go:build !linux

package main

import "os"

// fileIsTerminal guesses from the file's mode: a character device (which
// /dev/null also is; reading it gives no answer, which maiden new takes as no).
func fileIsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
