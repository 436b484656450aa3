package multiinstance

import (
	"os"
	"strconv"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// CPU accounting for the benchmark: on a machine whose cores every process
// shares, calls per second through N instances is about one over the CPU
// a call costs summed over every process that serves it, and that sum moves
// far less with the machine's other load than calls per second do. So the
// benchmark reads, before and after its calls, the CPU time (user and
// system) of each instance's process tree (the instance and its workers),
// of the PostgreSQL cluster's (the postmaster and every backend), and of
// this process (the client), from /proc.

// procCPU is a process's own CPU time and its reaped children's, its
// parent's PID and the context switches of its live threads.
type procCPU struct {
	ppid int
	cs   int64 // context switches of its live threads, voluntary or not
	comm string
	cpu  time.Duration // its own CPU time and its reaped children's
	self time.Duration // its own
}

func readProcStat(pid int) (procCPU, bool) {
	id := strconv.Itoa(pid)
	st, ok := testkit.ReadProcStat(id)
	if !ok {
		return procCPU{}, false
	}
	th := testkit.ReadThreadStats(id)
	return procCPU{ppid: st.PPID, comm: st.Comm, self: st.Self, cpu: st.Self + st.Reaped,
		cs: int64(th.Voluntary + th.Involuntary)}, true
}

// cpuSnapshot is the CPU time of this process and of each of its
// children's trees, by the child's PID, with each child's command name.
type cpuSnapshot struct {
	client time.Duration
	cs     int64                 // context switches of this process and every tree
	trees  map[int]time.Duration // the child's tree
	top    map[int]time.Duration // the child itself (its own CPU only)
	comm   map[int]string
}

func takeCPU() cpuSnapshot {
	all := map[int]procCPU{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProcStat(pid); ok {
			all[pid] = p
		}
	}
	me := os.Getpid()
	s := cpuSnapshot{client: all[me].self, trees: map[int]time.Duration{}, top: map[int]time.Duration{}, comm: map[int]string{}}
	// Each live process's total (its own and its reaped children's) is
	// added to the child of this process its tree hangs from.
	for pid, p := range all {
		top, at := -1, pid
		for range 64 {
			q, ok := all[at]
			if !ok {
				break
			}
			if q.ppid == me {
				top = at
				break
			}
			at = q.ppid
		}
		if top > 0 || pid == me {
			s.cs += p.cs
		}
		if top > 0 {
			s.trees[top] += p.cpu
			if top == pid {
				s.comm[top] = p.comm
				s.top[top] = p.self
			}
		}
	}
	return s
}

// cpuSplit is the CPU time between two snapshots: the given instances'
// own and their trees' (the rest: their workers), the PostgreSQL
// cluster's (children named postgres) and this process's.
type cpuSplit struct {
	instances []time.Duration // each instance's tree
	own       time.Duration   // the instances' own processes, summed
	postgres  time.Duration
	client    time.Duration
	cs        int64 // context switches of all of them
}

func (a cpuSnapshot) to(b cpuSnapshot, instances []int) cpuSplit {
	var out cpuSplit
	for _, pid := range instances {
		out.instances = append(out.instances, b.trees[pid]-a.trees[pid])
		out.own += b.top[pid] - a.top[pid]
	}
	for pid, c := range b.comm {
		if c == "postgres" {
			out.postgres += b.trees[pid] - a.trees[pid]
		}
	}
	out.client = b.client - a.client
	out.cs = b.cs - a.cs
	return out
}
