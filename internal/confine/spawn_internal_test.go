//go:build linux

package confine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOrphanedStartRunsNothing: a confined child whose parent is not
// maiden once its parent-death signal is set (maiden died while it was
// being started: vfork stops only the calling thread, and the signal is
// never sent for a death that came before it) runs nothing: it fails the
// start, and the program, which would write a file, never runs. The
// parent's death is stood in by an expected parent pid that is not this
// process's.
func TestOrphanedStartRunsNothing(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	planted := filepath.Join(dir, "planted")
	spawnParent = func() int { return 1 }
	t.Cleanup(func() { spawnParent = os.Getpid })
	res, err := Run(context.Background(), Spec{Path: exe, Args: []string{planted}, Env: []string{"CONFINE_TEST_MODE=write"}, Writable: []string{dir}})
	if err == nil || !strings.Contains(err.Error(), "parent gone") || !strings.Contains(err.Error(), unix.ESRCH.Error()) {
		t.Errorf("a start whose parent is gone: %v (exit %d, stdout %q), want it refused as parent gone", err, res.ExitCode, res.Stdout)
	}
	if _, err := os.Stat(planted); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran: %s: %v", planted, err)
	}
}
