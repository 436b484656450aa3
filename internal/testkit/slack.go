package testkit

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Slack scales d, a bound on how long something should take on an idle
// machine (a call past its deadline ending, a kill reaching a worker), by
// how loaded this machine is now: the one-minute load average over the
// number of CPUs, at least 1 and at most 10. make test runs four test
// binaries at once on two cores beside lint, and the same bound that
// holds with room to spare alone was missed there for want of CPU, not
// because a deadline was not enforced. On an idle machine Slack(d) is d:
// the bound is as tight as it was. A promise's speed is measured by a
// benchmark, not here; what these bounds catch is a deadline or a kill that
// does not happen at all.
func Slack(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	f := loadFactor()
	if f > 1 {
		t.Logf("bound %v scaled by %.1f for this machine's load: %v", d, f, time.Duration(float64(d)*f).Round(time.Millisecond))
	}
	return time.Duration(float64(d) * f)
}

// loadFactor is the one-minute load average per CPU, clamped to [1, 10]; 1
// where /proc/loadavg cannot be read.
func loadFactor() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 1
	}
	load, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 1
	}
	return min(max(load/float64(runtime.NumCPU()), 1), 10)
}
