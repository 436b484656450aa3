package worker

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// TestSpinOnlyWithAFreeCPU: the two ends of a call spin only when the
// kernel's runnable count leaves a CPU for the spinner beside the worker;
// a busy machine (the slow mode in bench/README.md, "Worker calls: where the time goes") gets no spinning, and
// neither does a machine whose count cannot be read.
func TestSpinOnlyWithAFreeCPU(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: never spins")
	}
	cases := []struct {
		name, loadavg string
		want          bool
	}{
		{"idle", "0.10 0.20 0.30 1/255 1624\n", true},
		{"busy", "20.10 20.20 20.30 22/255 1624\n", false},
		{"every CPU taken", "2.00 2.00 2.00 " + strconv.Itoa(runtime.NumCPU()) + "/255 1624\n", false},
		{"garbage", "no numbers here\n", false},
		{"negative", "0 0 0 -1/255 1624\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loadavg")
			if err := os.WriteFile(path, []byte(c.loadavg), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var fc freeCPUs
			fc.once.Do(func() {})
			if fc.load, err = newFilePread(f); err != nil {
				t.Fatal(err)
			}
			if got := fc.spinnable(false); got != c.want {
				t.Errorf("spinnable with %q = %t, want %t", c.loadavg, got, c.want)
			}
		})
	}
	// The call's own worker, waiting awake after its last answer, is in
	// the count already: counted once, not twice.
	for _, c := range []struct {
		running int
		want    bool
	}{{runtime.NumCPU(), true}, {runtime.NumCPU() + 1, false}} {
		path := filepath.Join(t.TempDir(), "loadavg")
		if err := os.WriteFile(path, []byte("2.00 2.00 2.00 "+strconv.Itoa(c.running)+"/255 1624\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var fc freeCPUs
		fc.once.Do(func() {})
		if fc.load, err = newFilePread(f); err != nil {
			t.Fatal(err)
		}
		if got := fc.spinnable(true); got != c.want {
			t.Errorf("spinnable beside its own spinning worker with %d runnable = %t, want %t", c.running, got, c.want)
		}
		f.Close()
	}
	var none freeCPUs
	none.once.Do(func() {}) // no /proc/loadavg
	if none.spinnable(false) {
		t.Error("spinnable without /proc/loadavg = true, want false")
	}
}
