//go:build linux

package store

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// ingestNice is the nice value of the ingester's thread: below the call
// path's threads when the cores are contended (CFS gives a nice-10 thread
// about a tenth of a nice-0 one's share), and all of an idle core
// otherwise.
const ingestNice = 10

// lowerThreadPriority pins the calling goroutine to its thread and lowers
// that thread's scheduling priority (Linux's nice applies per thread). It
// must be called by a goroutine that ends without unlocking: Go then
// destroys the thread instead of giving it, niced, to other goroutines. It
// reports whether it did.
func lowerThreadPriority() bool {
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), ingestNice); err != nil {
		runtime.UnlockOSThread()
		return false
	}
	return true
}
