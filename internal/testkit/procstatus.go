package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// ProcStatus reads one "Vm…:" or "Rss…:" line of /proc/self/status, in
// bytes; the test is skipped where there is none.
func ProcStatus(t testing.TB, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key+":")); ok {
			if f := bytes.Fields(v); len(f) > 0 {
				if kb, err := strconv.ParseUint(string(f[0]), 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	t.Skipf("no %s in /proc/self/status", key)
	return 0
}

// HeavyMemory makes t the only test, among all the test binaries go test
// runs at once on this machine, that takes gigabytes of host memory: it
// waits for a lock file that every such test takes, and holds it until t
// ends. make test runs four packages at once; two multi-gigabyte lifts
// side by side (with the race detector's overhead and whatever else is
// running) made peaks and times depend on which packages happened to
// overlap. Call it before the memory-heavy part, after anything slow that
// needs no lock (building a component).
func HeavyMemory(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "maiden-test-heavy-memory.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("heavy-memory lock: %v", err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("heavy-memory lock: %v", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %v for another memory-heavy test to end", waited.Round(time.Millisecond))
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}
