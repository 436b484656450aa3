//go:build unix

package store

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestRunnerOfAnotherHostNotGone: a runner of another host is never taken
// for gone, even when its PID exists on no process here (that host's
// maiden judges it); the same runner of this host is.
func TestRunnerOfAnotherHostNotGone(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(cmd.Process.Pid) // ended and reaped
	if runnerGone(host+"-other", host+"/"+pid+"/deadbeef") {
		t.Errorf("a runner of host %q judged gone on host %q", host, host+"-other")
	}
	if !runnerGone(host, host+"/"+pid+"/deadbeef") {
		t.Errorf("the runner of ended PID %s on this host: not gone", pid)
	}
}

// TestProcessMarkTellsStartsApart: processes started at different times
// have different marks (the start time, /proc/PID/stat's 22nd field), so
// a PID another process took is told apart from the runner's.
func TestProcessMarkTellsStartsApart(t *testing.T) {
	t.Parallel()
	first, self := processMark(1), processMark(os.Getpid())
	if first == "" || self == "" {
		t.Skip("no /proc here")
	}
	if first == self {
		t.Errorf("processMark(1) = processMark(self) = %q: starts not told apart", self)
	}
}
