package builtin

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/boundary"
	"golang.org/x/sys/unix"
)

// A racing goroutine swaps a real directory inside the boundary with a symlink (to the outside, or to a denied
// directory inside the boundary) atomically (renameat2 RENAME_EXCHANGE), in a loop, while the tools read, write
// and list through the name. The check (boundary.Check, lexical) always passes; whatever the kernel finds at open
// time, the outside or denied directory is never read, listed or written. Both outcomes must occur, so the race
// really happened.
func TestSymlinkSwapRace(t *testing.T) {
	for _, tc := range []struct {
		name, target string
	}{
		{"outside", "../outside"},
		{"outside-absolute", ""}, // filled below: the absolute path of outside
		{"denied", "secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			work, outside := dir+"/work", dir+"/outside"
			writeFile(t, work+"/d/f", "INSIDE")
			writeFile(t, outside+"/f", "OUTSIDE")
			writeFile(t, outside+"/only-outside", "OUTSIDE")
			writeFile(t, work+"/secrets/f", "OUTSIDE")
			writeFile(t, work+"/secrets/only-outside", "OUTSIDE")
			target := tc.target
			if target == "" {
				target = outside
			}
			if err := os.Symlink(target, work+"/swap"); err != nil {
				t.Fatal(err)
			}
			b := restricted([]boundary.Entry{sub(work, boundary.Write)}, []string{work + "/secrets"}, nil)

			stop := make(chan struct{})
			var swaps atomic.Int64
			var wg sync.WaitGroup
			var once sync.Once
			halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
			defer halt() // also on a failure below: the swapper must not outlive the test's directory
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := unix.Renameat2(unix.AT_FDCWD, work+"/d", unix.AT_FDCWD, work+"/swap", unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("RENAME_EXCHANGE: %v", err)
						return
					}
					swaps.Add(1)
				}
			}()

			var inside, refused int
			// At least 0.6 s and 200 rounds, and on until both outcomes were seen (a loaded machine can starve
			// one side for a while), for at most 10 s.
			start := time.Now()
			for i := 0; time.Since(start) < 600*time.Millisecond || i < 200 || (inside == 0 || refused == 0) && time.Since(start) < 10*time.Second; i++ {
				out, err := call(t, FSRead, b, map[string]any{"path": work + "/d/f"})
				switch {
				case err == nil && out.(*FSReadOutput).Content == "OUTSIDE":
					t.Fatalf("read the other side through the swapped name (iteration %d)", i)
				case err == nil:
					inside++
				case strings.Contains(err.Error(), "OUTSIDE"):
					t.Fatalf("the error quotes the other side: %v", err)
				default:
					refused++
				}
				if _, err := call(t, FSWrite, b, map[string]any{"path": work + "/d/f", "content": "WRITTEN"}); err == nil {
					inside++
				} else {
					refused++
				}
				out, err = call(t, FSList, b, map[string]any{"path": work + "/d"})
				if err == nil {
					for _, e := range out.(*FSListOutput).Entries {
						if e.Name == "only-outside" {
							t.Fatalf("listed the other side through the swapped name (iteration %d)", i)
						}
					}
					inside++
				} else {
					refused++
				}
			}
			halt()
			for _, other := range []string{outside, work + "/secrets"} {
				if got := readFile(t, other+"/f"); got != "OUTSIDE" {
					t.Fatalf("%s/f was written: %q", other, got)
				}
				if ents, _ := os.ReadDir(other); len(ents) != 2 {
					t.Fatalf("something was planted in %s: %v", other, ents)
				}
			}
			t.Logf("%d swaps; %d operations reached the real directory, %d were refused", swaps.Load(), inside, refused)
			if inside == 0 || refused == 0 {
				t.Fatalf("the race did not happen both ways: %d inside, %d refused", inside, refused)
			}
		})
	}
}
