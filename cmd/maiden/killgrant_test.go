package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/maiden-run/maiden/admin"
)

// TestGrantBurstHelper is not a test: run by TestKillDuringGrants as a
// separate process (this test binary, which runs the CLI in-process as the
// maiden binary does), it grants card after card and prints "N ID" for each
// as soon as the grant has returned, until it is killed.
func TestGrantBurstHelper(t *testing.T) {
	t.Parallel()
	cfg := os.Getenv("MAIDEN_TEST_GRANT_BURST")
	if cfg == "" {
		return // the ordinary test run: nothing to do
	}
	for i := 0; ; i++ {
		r := cli(t, "", "cards", "grant", "-config", cfg, "-agent", "research", "-json", fmt.Sprintf("tool:invoke echo --message=m%d", i))
		if r.code != exitOK {
			fmt.Fprintf(os.Stdout, "error %d %s\n", r.code, r.stderr)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stdout, "%d %s\n", i, strings.Join(strings.Fields(r.stdout), ""))
	}
}

// TestKillDuringGrants kills (SIGKILL) a process in the middle of a burst of
// `maiden cards grant`: the store opens cleanly afterwards and holds a
// prefix of the grants: every grant whose ID was printed, in order, and at
// most the one in flight beyond them.
func TestKillDuringGrants(t *testing.T) {
	t.Parallel()
	cfg := agentsConfig(t)
	db := filepath.Join(filepath.Dir(cfg), "maiden-state.db")
	total := 0
	for round, after := range []int{5, 23, 41} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGrantBurstHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MAIDEN_TEST_GRANT_BURST="+cfg)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var printed []string // the IDs printed, in order
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("round %d: the helper failed: %s", round, line)
			}
			var n int
			var js string
			if _, err := fmt.Sscanf(line, "%d %s", &n, &js); err != nil || n != len(printed) {
				continue // the test framework's own lines
			}
			printed = append(printed, strings.TrimSuffix(strings.TrimPrefix(js, `{"id":"`), `"}`))
			if len(printed) == after {
				// By PID, while the next grant is under way.
				if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		_ = cmd.Wait()
		if st := cmd.ProcessState; st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the helper was not killed: %v", round, cmd.ProcessState)
		}

		st, err := admin.OpenStore(context.Background(), db, nil)
		if err != nil {
			t.Fatalf("round %d: the store does not open after kill -9: %v", round, err)
		}
		cs, err := st.Cards(context.Background(), "research")
		st.Close()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got := cs[total:]
		if len(got) < len(printed) || len(got) > len(printed)+1 {
			t.Fatalf("round %d: %d grants printed, %d in the store", round, len(printed), len(got))
		}
		for i, c := range got {
			want := fmt.Sprintf("tool:invoke echo --message=m%d", i)
			if len(c.LowerPos) != 1 || c.LowerPos[0].Grant != want {
				t.Fatalf("round %d: card %d of the burst is %v, want %s (not a prefix)", round, i, c.LowerPos, want)
			}
			if i < len(printed) && c.ID != printed[i] {
				t.Fatalf("round %d: card %d is %s, printed %s", round, i, c.ID, printed[i])
			}
		}
		t.Logf("round %d: killed after %d printed; the store holds %d of the burst", round, len(printed), len(got))
		total += len(got)
	}
	// And it still takes writes.
	op(t, exitOK, cfg, "cards", "grant", "-agent", "research", "tool:invoke echo --message=after")
}
