package testkit

import (
	"os"
	"syscall"
	"testing"
)

// WriteExecutable writes data to path as an executable (mode 0755) that
// this process can run at once. A program file is "text file busy"
// (ETXTBSY) to execve while any process holds it open for writing, and a
// child another test of the same binary forks between this open and close
// inherits the descriptor until it execs (close-on-exec closes it only
// then): seen in full runs as a test's fresh copy of /bin/true or of its
// own binary failing to start. The file is written holding
// syscall.ForkLock for reading, which os/exec and internal/confine hold for
// writing to fork, so no child of this process is forked while it is open.
func WriteExecutable(t testing.TB, path string, data []byte) {
	t.Helper()
	syscall.ForkLock.RLock()
	err := os.WriteFile(path, data, 0o755)
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
}
