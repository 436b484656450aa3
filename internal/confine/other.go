//go:build !linux

package confine

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
)

// StartPaths are the system paths a run may read to start (Linux only).
var StartPaths []string

// Main returns at once: there is no trampoline outside Linux.
func Main() {}

// Status is what Probe found.
type Status struct {
	Landlock   int
	NetNS      bool
	NetNSError string
	Checks     []Check
}

// Check is one attempt of the probe's confined child.
type Check struct {
	Name      string
	Forbidden bool
	OK        bool
	Detail    string
}

var errNotLinux = errors.New("confinement needs Linux (Landlock)")

// Probe fails: confinement is implemented on Linux only.
func Probe(ctx context.Context) (Status, error) {
	return Status{}, fmt.Errorf("confine: %w: %w", ErrNotEnforced, errNotLinux)
}

// Run refuses: confinement is implemented on Linux only.
func Run(ctx context.Context, s Spec) (Result, error) {
	return Result{}, fmt.Errorf("confine: %w: %w", ErrNotEnforced, errNotLinux)
}

// Started says how StartCmd confined a process.
type Started struct {
	Landlock   int
	Unconfined bool
	NetNS      bool
}

// StartCmd refuses: confinement is implemented on Linux only.
func StartCmd(cmd *exec.Cmd, s Spec) (Started, error) {
	return Started{}, fmt.Errorf("confine: %w: %w", ErrNotEnforced, errNotLinux)
}
