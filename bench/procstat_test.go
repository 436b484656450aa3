package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// procCounts is what /proc says of a process over its threads: minor page
// faults, CPU time on the CPU, time spent runnable waiting for a CPU, the
// number of times a thread was put on a CPU (wake-ups and preemptions),
// and of those the times it was taken off while it could still run
// (preempted: involuntary context switches).
type procCounts struct {
	minflt, cpuNS, waitNS, slices, preempted uint64
}

func (a procCounts) sub(b procCounts) procCounts {
	return procCounts{a.minflt - b.minflt, a.cpuNS - b.cpuNS, a.waitNS - b.waitNS, a.slices - b.slices, a.preempted - b.preempted}
}

func (a *procCounts) add(b procCounts) {
	a.minflt += b.minflt
	a.cpuNS += b.cpuNS
	a.waitNS += b.waitNS
	a.slices += b.slices
	a.preempted += b.preempted
}

// readCounts reads the counts of process pid ("self" for this one). A
// process that ended reads as zero.
func readCounts(pid string) procCounts {
	st, _ := testkit.ReadProcStat(pid)
	th := testkit.ReadThreadStats(pid)
	return procCounts{minflt: st.MinorFaults, cpuNS: uint64(th.OnCPU), waitNS: uint64(th.Runnable), slices: th.Slices, preempted: th.Involuntary}
}

// childPIDs lists this process's child processes alive now (the workers
// a host started).
func childPIDs() []string {
	var pids []string
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			continue
		}
		pids = append(pids, strings.Fields(string(b))...)
	}
	return pids
}

// procSample is the counts of this process and of each child alive.
type procSample struct {
	self     procCounts
	children map[string]procCounts
}

func sampleProcs() procSample {
	if !procMetrics {
		return procSample{}
	}
	s := procSample{self: readCounts("self"), children: map[string]procCounts{}}
	for _, pid := range childPIDs() {
		s.children[pid] = readCounts(pid)
	}
	return s
}

// procMetrics: the /proc metrics are reported only with MAIDEN_BENCH_PROC=1
// (nine more columns in every row of bench/run's table otherwise).
var procMetrics = os.Getenv("MAIDEN_BENCH_PROC") == "1"

// reportProcs reports, per operation, the page faults, CPU, run-queue
// wait and times on a CPU of this process and of its children (summed
// over the children alive both at start and at the end: the workers that
// served the calls). A child reads nothing where /proc is not Linux's.
func reportProcs(b *testing.B, start procSample, n int) {
	if n == 0 || !procMetrics {
		return
	}
	end := sampleProcs()
	self := end.self.sub(start.self)
	var kids procCounts
	for pid, c0 := range start.children {
		if c1, ok := end.children[pid]; ok {
			kids.add(c1.sub(c0))
		}
	}
	per := func(v uint64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(self.minflt), "faults/op")
	b.ReportMetric(per(self.slices), "oncpu/op")
	b.ReportMetric(per(self.waitNS), "wait-ns/op")
	b.ReportMetric(per(self.preempted), "preempted/op")
	if len(start.children) > 0 {
		b.ReportMetric(per(kids.minflt), "w-faults/op")
		b.ReportMetric(per(kids.cpuNS), "w-cpu-ns/op")
		b.ReportMetric(per(kids.slices), "w-oncpu/op")
		b.ReportMetric(per(kids.waitNS), "w-wait-ns/op")
		b.ReportMetric(per(kids.preempted), "w-preempted/op")
	}
}
