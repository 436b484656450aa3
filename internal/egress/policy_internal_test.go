package egress

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadCAFileRefusesSpecialFiles: a CA bundle path is read as
// agent.toml is: a /proc file (which claims a size of 0 and can be
// endless), a FIFO (which would block) and a directory are refused, a
// regular file is read.
func TestReadCAFileRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	pem := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(pem, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/proc/self/status", "/proc"},
		{fifo, "FIFO"},
		{dir, "directory"},
	} {
		if _, err := readCAFile(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("readCAFile(%s) = %v, want an error naming %q", tc.path, err, tc.want)
		}
	}
	if b, err := readCAFile(pem); err != nil || len(b) == 0 {
		t.Errorf("readCAFile(regular file) = %d bytes, %v", len(b), err)
	}
}
