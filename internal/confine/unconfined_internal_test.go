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

// The canary fails closed on each hole of issue 22: with one rule of the
// seccomp filter left out, Probe returns ErrNotEnforced naming the attempt
// that got through.
func TestProbeCatchesEachMissingRule(t *testing.T) {
	for _, c := range []struct{ rule, want string }{
		// In a network namespace the send finds nothing (connection
		// refused), elsewhere it connects: either way the probe says so.
		{ruleFastOpen, "a TCP Fast Open send (sendto MSG_FASTOPEN) to a loopback port that is not the proxy's "},
		{ruleListen, "listen on an unbound TCP socket (an implicit bind) succeeded"},
		{ruleIOUring, "io_uring (setup, enter, register) succeeded"},
		{ruleNetNS, "a TCP connect to the proxy's port on another loopback address (127.0.0.2), which Landlock allows and the network namespace must not have succeeded"},
	} {
		if c.rule == ruleNetNS {
			if ok, why := netnsAvailable(); !ok {
				t.Logf("no network namespace here: %v", why)
				continue
			}
		}
		t.Run(c.rule, func(t *testing.T) {
			omitRule = c.rule
			t.Cleanup(func() { omitRule = "" })
			_, err := Probe(context.Background())
			if !errors.Is(err, ErrNotEnforced) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Probe without the %s rule: %v, want ErrNotEnforced naming %q", c.rule, err, c.want)
			}
			t.Log(err)
		})
	}
}
