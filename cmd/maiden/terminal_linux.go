package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileIsTerminal: the terminal ioctl succeeds only on a terminal (not on a
// pipe, a file or /dev/null).
func fileIsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
