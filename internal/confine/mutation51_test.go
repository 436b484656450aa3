//go:build linux

package confine_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/maiden-run/maiden/internal/confine"
)

// Pass 51 (docs/security-tests.md, "Fifty-first pass"): what a wrapped
// CLI or a stdio import is run with, and the probe's grandchild.

// TestMutation51CallersMarkerIgnored: a trampoline marker already in the
// command's environment (empty, or "N": no Landlock, no namespace) is
// dropped; the process is confined as StartCmd decided, and its
// environment holds no marker.
func TestMutation51CallersMarkerIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, marker := range []string{"MAIDEN_CONFINE_TRAMPOLINE=", "MAIDEN_CONFINE_TRAMPOLINE=N"} {
		cmd := exec.Command(self(t))
		cmd.Env = []string{marker, modeEnv + "=serve"}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd.Stdout = &out
		if _, err := confine.StartCmd(cmd, confine.Spec{}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(in, "read %s\nenv\n", secret)
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%q: %v", marker, err)
		}
		want := "refused: open " + secret + ": permission denied\n" + modeEnv + "=serve\n"
		if out.String() != want {
			t.Errorf("command environment holding %q: %q; want %q", marker, out.String(), want)
		}
	}
}

// TestMutation51StartCmdNilEnvIsEmpty: a command with no environment gets
// none, never maiden's.
func TestMutation51StartCmdNilEnvIsEmpty(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/usr/bin/env")
	var out bytes.Buffer
	cmd.Stdout = &out
	if _, err := confine.StartCmd(cmd, confine.Spec{}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("a command with a nil environment saw %q; want none", out.String())
	}
}

// TestMutation51DefaultLimits: zero Limits are the documented defaults
// (1 GiB of data, 256 processes, 64 MiB files, 256 descriptors), for Run and
// StartCmd.
func TestMutation51DefaultLimits(t *testing.T) {
	t.Parallel()
	const want = "core 0/0, data 1073741824/1073741824, nproc 256/256, fsize 67108864/67108864, nofile 256/256, nnp 1"
	if got := netMode(t, confine.Spec{}, "rlimits"); got != want {
		t.Errorf("Run with zero Limits: %q; want %q", got, want)
	}
	_, in, out := startCmd(t, "serve", confine.Spec{})
	if got := serveNet(t, in, out, "rlimits"); got != want {
		t.Errorf("StartCmd with zero Limits: %q; want %q", got, want)
	}
}

// TestMutation51DefaultOutputCap: MaxOutput 0 keeps 1 MiB of each stream
// and counts the rest.
func TestMutation51DefaultOutputCap(t *testing.T) {
	t.Parallel()
	const n = 1<<20 + 100
	res := run(t, confine.Spec{Path: self(t), Args: []string{fmt.Sprint(n)}, Env: []string{modeEnv + "=spew"}})
	if len(res.Stdout) != 1<<20 || res.StdoutDropped != 100 || len(res.Stderr) != 1<<20 || res.StderrDropped != 100 {
		t.Errorf("%d bytes each way with MaxOutput 0: kept %d+%d, dropped %d+%d; want 1048576 kept and 100 dropped each",
			n, len(res.Stdout), len(res.Stderr), res.StdoutDropped, res.StderrDropped)
	}
}

// TestMutation51LeaveGroupCountsEitherCall: the probe's grandchild reports
// having left its group when either setsid or setpgid succeeded: here it
// leads its group, so setsid fails (EPERM) and setpgid(0, 0) succeeds, and
// it reports nothing (the probe then says the filter let it out).
func TestMutation51LeaveGroupCountsEitherCall(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(self(t))
	cmd.Env = []string{"MAIDEN_CONFINE_PROBE=leave-group"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 0 {
		t.Errorf("the grandchild whose setpgid succeeded reported %q; want nothing (it left)", out)
	}
}
