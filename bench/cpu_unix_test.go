//go:build unix

package bench

import "syscall"

// processCPU is the CPU time (user and system) this process has used, in
// nanoseconds (measure's cpu-ns/op).
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
