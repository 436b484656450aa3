package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/maiden-run/maiden/internal/confine"
)

// TestProbeProvenOncePerProcess: a Host's first wrapped CLI proves
// confinement once for the whole process: a later Host takes the proof
// without probing again, and a failed probe is not kept (the next Host
// probes again, and each refused until one succeeds). Not parallel: it
// replaces probeFunc and the process's proof.
func TestProbeProvenOncePerProcess(t *testing.T) {
	ctx := context.Background()
	savedFunc, savedOK, savedStatus := probeFunc, proven.ok, proven.status
	t.Cleanup(func() { probeFunc, proven.ok, proven.status = savedFunc, savedOK, savedStatus })
	proven.ok, proven.status = false, confine.Status{}
	calls := 0
	probeFunc = func(context.Context) (confine.Status, error) {
		calls++
		if calls == 1 {
			return confine.Status{}, errors.New("confine: the kernel has no Landlock")
		}
		return confine.Status{Landlock: 4}, nil
	}
	var first, second, third probe
	if _, err := first.confinement(ctx); err == nil || err.Error() != "confine: the kernel has no Landlock" {
		t.Fatalf("the first Host's probe: %v; want its failure", err)
	}
	if _, err := first.confinement(ctx); err == nil || calls != 1 {
		t.Fatalf("the first Host asked again: %v after %d probes; want its failure kept for it, 1 probe", err, calls)
	}
	if st, err := second.confinement(ctx); err != nil || st.Landlock != 4 || calls != 2 {
		t.Fatalf("the second Host: %+v, %v after %d probes; want a probe of its own (the failure not kept), Landlock 4", st, err, calls)
	}
	if st, err := third.confinement(ctx); err != nil || st.Landlock != 4 || calls != 2 {
		t.Fatalf("the third Host: %+v, %v after %d probes; want the proof taken, no third probe", st, err, calls)
	}
}
