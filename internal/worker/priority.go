package worker

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A call marked sandbox.Call.LowPriority (its tool lost workers recently:
// issue 22's crash storm) runs on a worker whose every thread is at
// SCHED_IDLE, the lowest CPU weight Linux has (3, against 1024 for nice 0
// and 15 for nice 19): a tool that spends its calls lifting a host-call
// argument bomb until its worker dies then takes CPU only when no other
// tool's call wants it. The parent sets it from outside (the worker's
// seccomp filter refuses scheduling calls to the worker itself), before
// the call is sent, and puts the worker back to SCHED_OTHER, nice 0, before
// it serves anyone else; a worker that cannot be put back is replaced.
//
// A call of another tool that must wait for a worker (all Size of them
// busy or starting) may wait for a replacement starting at SCHED_IDLE:
// under load from other calls that start is slow. The one-call-at-a-time
// share of a tool in trouble (admission.go) keeps that to one such start.
//
// Scheduling policy is per thread on Linux, so every thread is set; a
// thread created later inherits its creator's policy. A thread the worker
// starts while the list is being walked may be missed; the walk repeats
// until it finds no thread it has not set (a missed thread runs at normal
// priority, nothing worse).

// setIdlePriority moves every thread of the worker to SCHED_IDLE (on) or
// back to SCHED_OTHER at nice 0 (off).
func (p *proc) setIdlePriority(on bool) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedOther}
	if on {
		attr.Policy, attr.Nice = unix.SCHED_IDLE, 19
	}
	done := map[int]bool{}
	for pass := 0; pass < 4; pass++ {
		tids, err := threads(p.pid)
		if err != nil {
			return err
		}
		fresh := false
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh = true
			if err := schedSetAttr(tid, &attr, 0); err != nil && err != unix.ESRCH {
				return fmt.Errorf("worker %d thread %d: sched_setattr: %w", p.pid, tid, err)
			}
			done[tid] = true
		}
		if !fresh {
			break
		}
	}
	p.idlePriority = on
	return nil
}

// threads lists the thread IDs of process pid.
func threads(pid int) ([]int, error) {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// schedSetAttr is unix.SchedSetAttr; a test stands in a kernel that
// refuses to put a worker back (an unprivileged parent).
var schedSetAttr = unix.SchedSetAttr

// schedOther is Linux's SCHED_OTHER (SCHED_NORMAL), which x/sys/unix does
// not name.
const schedOther = 0

// acquirePriority is acquireFor with the worker's threads at the call's
// priority: SCHED_IDLE for a low-priority call (without the right to, it
// runs as any other), normal for any other call. A worker that cannot be
// put back to normal priority is not to serve another tool at the lowest:
// it is replaced.
func (p *Pool) acquirePriority(ctx context.Context, art string, low bool) (*proc, error) {
	for {
		w, err := p.acquireFor(ctx, art, low)
		if err != nil || w.idlePriority == low {
			return w, err
		}
		perr := w.setIdlePriority(low)
		if perr == nil || low {
			if perr != nil {
				p.log.Debug("cannot lower a worker's priority", "error", perr)
			}
			return w, nil
		}
		p.log.Debug("cannot restore a worker's priority; replacing it", "error", perr)
		p.cannotRestore.Store(true)
		p.release(w, false)
	}
}
