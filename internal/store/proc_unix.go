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
// longer exists (signal 0 reports ESRCH).
func runnerGone(host, runner string) bool {
	parts := strings.Split(runner, "/")
	if len(parts) != 3 || parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false // this process's own calls are not interrupted
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
