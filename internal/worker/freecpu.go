package worker

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Spinning (spinReader) wins a call's round trip only when the spinner
// has a CPU to itself beside the process it waits for: the parent spinning
// for an answer on the CPU the worker needs delays the answer by a whole
// scheduler slice, and a process that spins is, to the kernel's fair
// scheduler, a CPU hog whose wake-ups no longer preempt anyone. Measured
// on the 2-CPU VM (bench/README.md, "Worker calls: where the time goes"):
// with 20 runnable threads from other work, spinning took a tiny call's
// p50 in a worker from ~160 µs to ~550 µs. So both ends spin only while the
// kernel says a CPU is free: the count of runnable tasks in /proc/loadavg
// (an instant count, not the averages), read at most once per
// freeCPUSample and shared by all calls.

// freeCPUSample is how long one reading of the runnable count stands.
const freeCPUSample = 500 * time.Microsecond

type freeCPUs struct {
	once sync.Once
	load *filePread // /proc/loadavg in one pread(2), nil when unreadable

	mu      sync.Mutex
	at      atomic.Int64 // UnixNano of the last reading
	running atomic.Int64 // the last reading's runnable count; -1 unreadable
}

var cpus freeCPUs

// spinnable tells whether a spinner has a CPU to itself now: fewer
// runnable tasks than CPUs, counting the caller and the worker it waits
// for (which will be running once the call is sent). ownSpinning says the
// worker is already counted: it is waiting awake after its last answer,
// so the reading holds it. Without /proc/loadavg, never.
func (c *freeCPUs) spinnable(ownSpinning bool) bool {
	c.once.Do(func() {
		if f, err := os.Open("/proc/loadavg"); err == nil {
			if r, err := newFilePread(f); err == nil {
				c.load = r
			} else {
				f.Close()
			}
		}
	})
	if c.load == nil {
		return false
	}
	now := time.Now().UnixNano()
	if now-c.at.Load() >= int64(freeCPUSample) && c.mu.TryLock() {
		// One reader at a time; the others use the last reading.
		var buf [128]byte
		n, _ := c.load.read(buf[:])
		running, ok := runnableCount(buf[:n])
		if !ok {
			running = -1
		}
		c.running.Store(int64(running))
		c.at.Store(now)
		c.mu.Unlock()
	}
	running := c.running.Load()
	if running < 0 || c.at.Load() == 0 { // unreadable, or no reading yet
		return false
	}
	// running counts this thread; the worker makes one more, unless it is
	// already counted, spinning after its last answer.
	if !ownSpinning {
		running++
	}
	return running <= int64(runtime.NumCPU())
}

// runnableCount parses the runnable count of /proc/loadavg:
// "0.50 0.40 0.30 3/255 1624" → 3.
func runnableCount(b []byte) (int, bool) {
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0, false
	}
	r, _, ok := bytes.Cut(f[3], []byte("/"))
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(r))
	return n, err == nil && n >= 0
}

// spinPolicy decides whether a call's two ends spin; a variable so the
// round-trip benchmark can compare with spinning always (the behaviour
// before freecpu.go) in the same run.
var spinPolicy = (*freeCPUs).spinnable
