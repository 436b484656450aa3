package testkit

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestReadProcStatOfThisProcess(t *testing.T) {
	before, ok := ReadProcStat("self")
	if !ok {
		t.Skip("no Linux /proc here")
	}
	if before.PPID != os.Getppid() || before.Comm == "" || before.MinorFaults == 0 {
		t.Fatalf("ReadProcStat(self) = %+v, want PPID %d, a command name and page faults", before, os.Getppid())
	}
	if pid, ok := ReadProcStat(strconv.Itoa(os.Getpid())); !ok || pid.PPID != before.PPID {
		t.Fatalf("ReadProcStat(%d) = %+v, %v; want the same process as self", os.Getpid(), pid, ok)
	}
	th0 := ReadThreadStats("self")
	// Burn CPU until the clock's ticks (10 ms) show it, or give up.
	var after ProcStat
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		for i := 0; i < 1e6; i++ {
			_ = strconv.Itoa(i)
		}
		if after, _ = ReadProcStat("self"); after.Self > before.Self {
			break
		}
	}
	if after.Self <= before.Self {
		t.Fatalf("utime+stime did not grow after 10 s of work: %v then %v", before.Self, after.Self)
	}
	th1 := ReadThreadStats("self")
	if th1.OnCPU <= th0.OnCPU || th1.Slices < th0.Slices || th1.Voluntary+th1.Involuntary == 0 {
		t.Fatalf("thread stats did not grow with the work: %+v then %+v", th0, th1)
	}
	if _, ok := ReadProcStat("999999999"); ok {
		t.Fatal("ReadProcStat of a PID that cannot exist said ok")
	}
	if s := ReadThreadStats("999999999"); s != (ThreadStats{}) {
		t.Fatalf("ReadThreadStats of a PID that cannot exist = %+v, want zero", s)
	}
}
