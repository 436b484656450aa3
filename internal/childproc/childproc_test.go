package childproc

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestChildOutlivesTheThreadThatAsked: a goroutine locked to its thread
// starts a child with Pdeathsig SIGKILL, then returns, so Go ends that
// thread. Started through Start, the child does not get the signal; started
// with cmd.Start on that thread (the plant: what Start prevents), it does.
func TestChildOutlivesTheThreadThatAsked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(*exec.Cmd) error
		dies  bool
	}{
		{"childproc.Start", Start, false},
		{"cmd.Start on the ending thread", (*exec.Cmd).Start, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "600")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var err error
			testkit.OnEndingThread(t, func() { err = tc.start(cmd) })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if killed := testkit.Killed(t, cmd.Process.Pid); killed != tc.dies {
				t.Fatalf("child %d killed: %v, want %v", cmd.Process.Pid, killed, tc.dies)
			}
		})
	}
}
