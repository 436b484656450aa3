package compcache

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// dirFlags opens directories for lookups only: O_PATH needs no read
// permission, so a traverse-only ancestor (mode 0711) can still be checked.
const dirFlags = unix.O_PATH | unix.O_CLOEXEC

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
