package mcpimport_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/maiden-run/maiden/api"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/mcpimport"
)

// TestBackoffGrowsAndCaps: an upstream that dies at once (here /bin/false,
// which is no MCP server) is started again after delays that double from
// BackoffInitial and stop growing at BackoffMax; calls meanwhile say when
// the next attempt is.
func TestBackoffGrowsAndCaps(t *testing.T) {
	falseBin, err := exec.LookPath("false")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var starts []time.Time
	const initial, maxDelay = 40 * time.Millisecond, 160 * time.Millisecond
	u, err := mcpimport.New(mcpimport.Options{Name: "dies", Command: []string{falseBin}, Logger: testLogger(t),
		BackoffInitial: initial, BackoffMax: maxDelay,
		Start: func(c *exec.Cmd) error {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return c.Start()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err == nil {
		t.Fatal("Start of /bin/false succeeded")
	}
	_, err = u.Call(ctx, "x", nil, nil, nil)
	var ue *mcpimport.UnavailableError
	if !errors.As(err, &ue) || (ue.NextAttempt.IsZero() && !strings.Contains(err.Error(), "restarting")) {
		t.Errorf("call: %v", err)
	}
	waitFor(t, 20*time.Second, "fewer than 6 starts", func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) >= 6 })
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := initial
	for i := 1; i < len(starts); i++ {
		gap := starts[i].Sub(starts[i-1])
		if gap < want {
			t.Errorf("start %d came %s after the previous, want at least %s", i, gap, want)
		}
		// The cap: well under twice the maximum even on a loaded machine.
		if gap > maxDelay+time.Second {
			t.Errorf("start %d came %s after the previous: the delay is not capped at %s", i, gap, maxDelay)
		}
		want = min(2*want, maxDelay)
	}
	n := len(starts)
	time.Sleep(3 * maxDelay)
	if len(starts) != n {
		t.Errorf("started again after Close")
	}
	if _, err := u.Call(ctx, "x", json.RawMessage(`{}`), nil, nil); !errors.Is(err, api.ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
}
