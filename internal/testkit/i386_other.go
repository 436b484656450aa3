//go:build !(linux && amd64)

package testkit

import (
	"errors"
	"fmt"
)

// I386 makes 32-bit x86 system calls; only on linux/amd64.
type I386 struct{}

// I386Syscalls says there is no i386 entry here.
func I386Syscalls() error {
	return fmt.Errorf("%w: not linux/amd64: %w", ErrNoI386, errors.ErrUnsupported)
}

// NewI386 fails: there is no i386 entry here.
func NewI386() (*I386, error) { return nil, errors.ErrUnsupported }

// Put is unreachable (NewI386 fails).
func (x *I386) Put(b []byte) uint32 { return 0 }

// Words is unreachable (NewI386 fails).
func (x *I386) Words(w ...uint32) uint32 { return 0 }

// Syscall is unreachable (NewI386 fails).
func (x *I386) Syscall(nr uint32, args ...uint32) int32 { return 0 }

// Close is unreachable (NewI386 fails).
func (x *I386) Close() error { return nil }

// CloneExit fails: only on linux/amd64.
func CloneExit(flags uint32) (int32, error) { return 0, errors.ErrUnsupported }
