package testkit

import "errors"

// ErrNoI386 is I386Syscalls's answer where there is no i386 system call
// to make: the kernel faults on int 0x80 (IA32 emulation off), or this is
// not linux/amd64. A test of what a filter does to i386 calls skips on it,
// and fails on any other error of I386Syscalls (the question could not be
// asked: that is not a reason to test less).
var ErrNoI386 = errors.New("no i386 system calls here")
