//go:build unix

package store

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// runnerGone: runner ("HOST/PID/NONCE") ran on this host and its PID no
// longer exists (signal 0 reports ESRCH), or another process has it now
// (the nonce's processMark, where the runner's has one, is not the PID's
// now: the machine booted again, or the PID's process started at another
// time), or it is this process's PID and none of this process's stores
// made it (an earlier process with the same PID: ownRunners).
func runnerGone(host, runner string) bool {
	parts := strings.Split(runner, "/")
	if len(parts) != 3 || parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		_, mine := ownRunners.Load(runner)
		return !mine // this process's own calls are not interrupted
	}
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	_, mark, marked := strings.Cut(parts[2], "-")
	if !marked {
		return false // a runner of a maiden before the mark: the PID alone
	}
	now := processMark(pid)
	return now != "" && now != mark
}

// processMark names when process pid started, "BOOT.TICKS": the first 8
// hexadecimal digits of this boot's ID and the start time in clock ticks
// since boot (/proc/PID/stat's 22nd field); "" where the system does not
// say (no /proc, or the process is gone).
func processMark(pid int) string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	b := strings.ReplaceAll(strings.TrimSpace(string(boot)), "-", "")
	if len(b) < 8 {
		return ""
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command's name, in parentheses, may hold spaces and ')': the
	// fields are counted from after its last ')'; the third field (the
	// state) comes first there, so the 22nd is the 20th.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return ""
	}
	if _, err := strconv.ParseUint(f[19], 10, 64); err != nil {
		return ""
	}
	return b[:8] + "." + f[19]
}
