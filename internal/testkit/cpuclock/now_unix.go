//go:build unix

package cpuclock

import (
	"syscall"
	"time"
)

// Now is the CPU time (user and system) this process has used so far; 0
// if it cannot be read.
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
