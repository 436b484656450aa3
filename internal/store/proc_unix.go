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
// longer exists (signal 0 reports ESRCH), or it is this process's PID and
// none of this process's stores made it (an earlier process with the same
// PID: ownRunners).
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
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
