//go:build unix && !linux

package compcache

import (
	"strconv"

	"golang.org/x/sys/unix"
)

const dirFlags = unix.O_RDONLY | unix.O_CLOEXEC

func fdPath(fd int) string { return "/dev/fd/" + strconv.Itoa(fd) }
