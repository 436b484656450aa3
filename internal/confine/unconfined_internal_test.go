//go:build linux

package confine

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// withABI makes the package see a kernel with Landlock ABI abi (0: none)
// for one test: the refusals of kernels this machine is not.
func withABI(t *testing.T, abi int) {
	real := landlockABI
	t.Cleanup(func() { landlockABI = real })
	landlockABI = func() (int, error) {
		if abi == 0 {
			return 0, errors.New("landlock_create_ruleset: function not implemented")
		}
		return abi, nil
	}
}

func TestNoLandlockRefusesUnlessUnconfined(t *testing.T) {
	withABI(t, 0)
	_, err := Run(context.Background(), Spec{Path: "/bin/true"})
	if !errors.Is(err, ErrNotEnforced) || !strings.Contains(err.Error(), "Landlock is not available") {
		t.Fatalf("no Landlock: %v", err)
	}
	if _, err := StartCmd(exec.Command("/bin/true"), Spec{}); !errors.Is(err, ErrNotEnforced) {
		t.Fatalf("StartCmd without Landlock: %v", err)
	}
	if _, err := Probe(context.Background()); !errors.Is(err, ErrNotEnforced) || !strings.Contains(err.Error(), "Landlock is not available") {
		t.Fatalf("Probe without Landlock: %v", err)
	}
	res, err := Run(context.Background(), Spec{Path: "/bin/true", Unconfined: true})
	if err != nil || res.ExitCode != 0 || !res.Unconfined || res.Landlock != 0 {
		t.Fatalf("unconfined run: %+v %v", res, err)
	}
}

func TestOldLandlockRefusesNetwork(t *testing.T) {
	withABI(t, 3)
	_, err := Run(context.Background(), Spec{Path: "/bin/true", ProxyPort: 1})
	if !errors.Is(err, ErrNotEnforced) || !strings.Contains(err.Error(), "Landlock network rules need ABI 4; this kernel has 3") {
		t.Fatalf("ABI 3 with a proxy port: %v", err)
	}
	if _, err := Probe(context.Background()); err == nil || !strings.Contains(err.Error(), "need ABI 4; this kernel has 3") {
		t.Fatalf("Probe on ABI 3: %v", err)
	}
	// Without network, ABI 3 confines the filesystem and the run is not
	// marked unconfined (seccomp refuses every socket).
	res, err := Run(context.Background(), Spec{Path: "/bin/true"})
	if err != nil || res.Unconfined || res.Landlock != 3 {
		t.Fatalf("ABI 3 without network: %+v %v", res, err)
	}
	// With Unconfined and a port: the filesystem still confined, TCP not,
	// and the result says so.
	res, err = Run(context.Background(), Spec{Path: "/bin/true", ProxyPort: 1, Unconfined: true})
	if err != nil || !res.Unconfined || res.Landlock != 3 {
		t.Fatalf("ABI 3 unconfined with a port: %+v %v", res, err)
	}
}
