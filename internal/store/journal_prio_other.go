//go:build !linux

package store

// lowerThreadPriority is Linux's only (a thread's own nice value): here
// the ingester runs at the process's priority.
func lowerThreadPriority() bool { return false }
