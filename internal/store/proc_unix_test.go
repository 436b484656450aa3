//go:build linux

package store

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestRunnerGoneWhenPIDReused: a runner whose PID a live process has is
// gone when that process is not the runner: its start mark (the boot and
// the start time, which runnerID puts in the nonce) is not the PID's now,
// as after a reboot or once an unrelated process took the PID. Judged by
// the PID alone, a dead maiden's started calls and pending boundary
// requests stayed "alive" until they expired. A runner of a maiden before
// the mark (no mark) keeps the PID-only rule; a process that ended is gone.
func TestRunnerGoneWhenPIDReused(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	ended := false
	defer func() {
		if !ended {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	mark := processMark(pid)
	boot, ticks, ok := strings.Cut(mark, ".")
	if !ok || len(boot) != 8 || ticks == "" {
		t.Fatalf("processMark(%d) = %q, want BOOT.TICKS", pid, mark)
	}
	n, _ := strconv.ParseUint(ticks, 10, 64)
	otherBoot := "00000000"
	if boot == otherBoot {
		otherBoot = "11111111"
	}
	runner := func(nonce string) string { return host + "/" + strconv.Itoa(pid) + "/" + nonce }
	for _, c := range []struct {
		what, nonce string
		gone        bool
	}{
		{"the live process that made the runner", "deadbeef-" + mark, false},
		{"a process started a tick later with the PID", "deadbeef-" + boot + "." + strconv.FormatUint(n+1, 10), true},
		{"a process with the PID since a reboot", "deadbeef-" + otherBoot + "." + ticks, true},
		{"a runner of a maiden before the mark (the PID alone)", "deadbeef", false},
	} {
		if got := runnerGone(host, runner(c.nonce)); got != c.gone {
			t.Errorf("%s: runnerGone(%q) = %v, want %v", c.what, runner(c.nonce), got, c.gone)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	ended = true
	if !runnerGone(host, runner("deadbeef-"+mark)) {
		t.Errorf("the runner's process ended: runnerGone = false")
	}
	// This process's own runners carry its mark.
	if id := runnerID(); !strings.HasSuffix(id, "-"+processMark(os.Getpid())) || runnerGone(host, id) {
		t.Errorf("runnerID() = %q: want this process's mark %q, and not gone", id, processMark(os.Getpid()))
	}
}
