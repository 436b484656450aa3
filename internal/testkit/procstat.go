package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ProcStat is what /proc/PID/stat says of a process (proc(5)).
type ProcStat struct {
	PPID        int
	Comm        string
	MinorFaults uint64
	Self        time.Duration // its own CPU time: utime + stime
	Reaped      time.Duration // its reaped children's: cutime + cstime
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux this runs on.
const clockTick = 10 * time.Millisecond

// ReadProcStat reads /proc/PID/stat (pid "self" for this process); false
// for a process that ended, or where /proc is not Linux's.
func ReadProcStat(pid string) (ProcStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return ProcStat{}, false
	}
	// The command may hold spaces and parentheses: it ends at the last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return ProcStat{}, false
	}
	// After "pid (comm)": state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime ...
	f := bytes.Fields(b[end+1:])
	if len(f) < 15 {
		return ProcStat{}, false
	}
	n := func(i int) uint64 { v, _ := strconv.ParseUint(string(f[i]), 10, 64); return v }
	return ProcStat{
		PPID:        int(n(1)),
		Comm:        string(b[open+1 : end]),
		MinorFaults: n(7),
		Self:        time.Duration(n(11)+n(12)) * clockTick,
		Reaped:      time.Duration(n(13)+n(14)) * clockTick,
	}, true
}

// ThreadStats is summed over a process's live threads, from
// /proc/PID/task/TID/status and schedstat.
type ThreadStats struct {
	Voluntary   uint64        // context switches to wait
	Involuntary uint64        // taken off a CPU while it could still run (preempted)
	OnCPU       time.Duration // time on a CPU
	Runnable    time.Duration // time runnable, waiting for a CPU
	Slices      uint64        // times put on a CPU (wake-ups and preemptions)
}

// ReadThreadStats reads the threads of pid ("self" for this process); a
// process that ended reads as zero.
func ReadThreadStats(pid string) ThreadStats {
	var s ThreadStats
	dir := filepath.Join("/proc", pid, "task")
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		if b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status")); err == nil {
			for line := range bytes.SplitSeq(b, []byte("\n")) {
				k, v, ok := bytes.Cut(line, []byte(":"))
				if !ok {
					continue
				}
				n, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
				switch string(k) {
				case "voluntary_ctxt_switches":
					s.Voluntary += n
				case "nonvoluntary_ctxt_switches":
					s.Involuntary += n
				}
			}
		}
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue
		}
		if f := bytes.Fields(b); len(f) == 3 {
			run, _ := strconv.ParseUint(string(f[0]), 10, 64)
			wait, _ := strconv.ParseUint(string(f[1]), 10, 64)
			n, _ := strconv.ParseUint(string(f[2]), 10, 64)
			s.OnCPU += time.Duration(run)
			s.Runnable += time.Duration(wait)
			s.Slices += n
		}
	}
	return s
}
