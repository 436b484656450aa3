// Package childproc starts the child processes whose life is tied to maiden's
// (exec.Cmd with SysProcAttr.Pdeathsig: workers, confined CLIs and MCP
// servers, the network-namespace helper) from one OS thread that never
// exits.
//
// Linux sends a child its parent-death signal when the thread that forked
// it exits, not when the process does (prctl(2), PR_SET_PDEATHSIG: "the
// parent thread"). Go ends a thread when a goroutine locked to it returns
// without unlocking, which maiden does on purpose: the audit journal's
// ingester lowers its own thread's priority, a network namespace is made on
// a thread of its own. A child that an unrelated goroutine had forked from
// such a thread earlier was killed with it: a worker or a wrapped CLI died
// "from outside" in the middle of a call. Forked from this thread instead,
// a child gets its signal only when maiden itself ends.
package childproc

import (
	"os/exec"
	"runtime"
	"sync"
)

var (
	once sync.Once
	reqs chan func()
)

// Do runs f on the spawning thread and returns when f has: for a child
// made some other way than exec.Cmd (internal/confine's vfork through
// cgo). f must not block for long: every child maiden starts waits for it.
func Do(f func()) {
	once.Do(func() {
		reqs = make(chan func())
		go func() {
			// Never unlocked and never returns: the thread lives as
			// long as the process.
			runtime.LockOSThread()
			for f := range reqs {
				f()
			}
		}()
	})
	done := make(chan struct{})
	reqs <- func() { defer close(done); f() }
	<-done
}

// Start is cmd.Start, run on the spawning thread.
func Start(cmd *exec.Cmd) error {
	var err error
	Do(func() { err = cmd.Start() })
	return err
}
