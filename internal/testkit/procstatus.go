package testkit

import (
	"bytes"
	"os"
	"strconv"
	"testing"
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
