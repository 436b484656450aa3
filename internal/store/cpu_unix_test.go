//go:build unix

package store

import "syscall"

// processCPU is the CPU time (user and system) this process has used, in
// nanoseconds: benchmarks report it per operation, since on a machine
// whose cores are shared the wall time also counts other processes' turns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
