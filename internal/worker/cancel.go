package worker

import (
	"os"
	"os/signal"
	"syscall"
)

// How a cancel reaches a worker whose only goroutine reading the socket is
// busy running the call (child.loop serves a run frame on the goroutine
// that read it). The parent writes the cancel frame and then sends the
// worker wakeSignal; the worker's signal goroutine starts a goroutine that
// reads the parent's frames (startReader), which finds the cancel and
// interrupts the guest. A call that asks the parent something (a fetch, a
// reveal) starts the same reader at once (startReader).
//
// This replaced a timer each call that started the reader 3 ms into the
// call whether or not a cancel ever came: arming it was the earliest timer
// of the process, so Go woke an idle thread to watch it, on every call
// (bench/README.md, "A cancel without a timer"). The signal costs nothing
// until a call is cancelled.
//
// SIGWINCH, whose default action is to be ignored: a worker that does not
// watch it (one that has not reached serve yet, or a hostile one that
// stopped watching) ignores it, and is killed at the end of the grace as
// before; it never dies of the signal itself. The parent sends it through
// os.Process (a pidfd on Linux), so never to another process that reused
// an exited worker's PID.
const wakeSignal = syscall.SIGWINCH

// The states of child.reader.
const (
	readerIdle    int32 = iota // no call armed: a signal now is kept for the next call
	readerArmed                // a call runs and nothing else reads the socket
	readerStarted              // a call runs and a reader goroutine was started for it
)

// watchCancelSignal starts the goroutine that turns the parent's
// wakeSignal into a reader for the call in progress.
func (c *child) watchCancelSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, wakeSignal)
	go func() {
		for range sig {
			// Kept first, then tried: if the call is not armed yet,
			// armReader sees the mark once it is (whichever runs second
			// starts the reader; the CAS lets only one).
			c.cancelSignal.Store(true)
			c.startReader()
		}
	}()
}

// armReader marks a call as running with nobody else reading the socket.
// It reports whether to start the reader at once: the parent's signal came
// before (a cancel of this call that arrived while its run frame was being
// read; or a late signal of an earlier call, which costs only an early
// reader).
func (c *child) armReader() bool {
	c.reader.Store(readerArmed)
	return c.cancelSignal.Load() && c.claimReader()
}

// startReader starts the goroutine that reads the parent's frames while
// the armed call runs, once per call: at the parent's signal, or when the
// call asks the parent something (a fetch, a reveal) and waits for its
// answer.
func (c *child) startReader() {
	if c.claimReader() {
		go c.loop(c.rd)
	}
}

// claimReader reports whether the caller is the one to start the armed
// call's reader (only one is).
func (c *child) claimReader() bool {
	if c.reader.CompareAndSwap(readerArmed, readerStarted) {
		c.cancelSignal.Store(false)
		return true
	}
	return false
}

// disarmReader ends the call's reading state and reports whether the
// goroutine that served the call still reads the socket (no reader was
// started for it).
func (c *child) disarmReader() bool {
	if c.reader.CompareAndSwap(readerArmed, readerIdle) {
		return true
	}
	c.reader.Store(readerIdle)
	return false
}
