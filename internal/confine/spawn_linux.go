package confine

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include "spawn_linux.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/internal/childproc"
)

// spawnParent is the pid the confined child must find as its parent once
// its parent-death signal is set (this process); a test stands in a
// parent that died.
var spawnParent = os.Getpid

// spawn starts ws.Path confined (spawn_linux.c) with fds as its stdin,
// stdout, stderr and the status pipe, in the network namespace netns (-1:
// this one; joined after the user namespace userns, if not -1), and returns
// its PID. Everything
// handed to C is in C memory, freed when the child has executed or failed
// (vfork returns only then).
func spawn(ws *wireSpec, dir string, ruleset, netns, userns int, filter []unix.SockFilter, fds [4]*os.File) (int, error) {
	for _, s := range append(append([]string{ws.Path, dir}, ws.Argv...), ws.Env...) {
		if strings.IndexByte(s, 0) >= 0 {
			return 0, fmt.Errorf("a NUL byte in the path, an argument or the environment")
		}
	}
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	cstr := func(s string) *C.char {
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	cvec := func(ss []string) **C.char {
		n := len(ss) + 1
		v := (*[1 << 28]*C.char)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[:n:n]
		frees = append(frees, unsafe.Pointer(&v[0]))
		for i, s := range ss {
			v[i] = cstr(s)
		}
		v[len(ss)] = nil
		return &v[0]
	}
	a := (*C.struct_maiden_spawn)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_maiden_spawn{}))))
	frees = append(frees, unsafe.Pointer(a))
	a.path = cstr(ws.Path)
	a.argv = cvec(ws.Argv)
	a.envp = cvec(ws.Env)
	if dir != "" {
		a.dir = cstr(dir)
	}
	a.stdin_fd = C.int(fds[0].Fd())
	a.stdout_fd = C.int(fds[1].Fd())
	a.stderr_fd = C.int(fds[2].Fd())
	a.status_fd = C.int(fds[3].Fd())
	a.ruleset_fd = C.int(ruleset)
	a.netns_fd = C.int(netns)
	a.userns_fd = C.int(userns)
	a.parent_pid = C.int(spawnParent())
	l := ws.Limits
	for i, v := range []uint64{0, l.Memory, l.Processes, l.FileSize, l.Files} {
		a.limits[i] = C.uint64_t(v)
	}
	size := C.size_t(len(filter)) * C.size_t(unsafe.Sizeof(unix.SockFilter{}))
	f := C.malloc(size)
	frees = append(frees, f)
	copy(unsafe.Slice((*unix.SockFilter)(f), len(filter)), filter)
	a.filter = f
	a.filter_len = C.uint(len(filter))
	// The fds must stay open until the child has them: Fd() keeps them
	// alive only as long as the *os.File is reachable.
	// As os/exec does: no descriptor is half-made (without close-on-exec)
	// while the child is created. The child also marks every descriptor
	// above 2 close-on-exec itself.
	//
	// The child's parent-death signal (SIGKILL, spawn_linux.c) follows
	// the thread that forks it, not the process: forked from whatever
	// thread this goroutine was on, it was killed as soon as any goroutine
	// that had locked that thread returned (the journal's ingester at a
	// Host's Close, every network namespace made), in the middle of a
	// wrapped CLI's call or the probe before an MCP import starts. So it
	// is forked from internal/childproc's thread, which never ends.
	var pid C.int
	childproc.Do(func() {
		syscall.ForkLock.Lock()
		pid = C.maiden_spawn(a)
		syscall.ForkLock.Unlock()
	})
	for _, f := range fds {
		_ = f.Fd()
	}
	if pid < 0 {
		return 0, fmt.Errorf("vfork: %v", unix.Errno(-pid))
	}
	return int(pid), nil
}
