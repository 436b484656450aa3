package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/store"
)

// newlyStore is a SQLite store holding agents research and ops.
func newlyStore(t testing.TB) *State {
	t.Helper()
	ctx := context.Background()
	s, err := OpenStore(ctx, filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, a := range []string{"research", "ops"} {
		if err := s.st.EnsureAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// refusePay appends n records of agent's calls of pay --to=to refused for
// want of a card, through the journal (as the call path writes them), and
// waits until they are in the chain.
func refusePay(t testing.TB, s *State, agent, to string, n int) {
	t.Helper()
	target := "tool:invoke pay --to=" + to
	body, _ := json.Marshal(map[string]any{"rendered": "--to=" + to,
		"decision": map[string]any{"allow": false, "rule": "no card", "reason": "no card allows " + target, "target": target}})
	for range n {
		if err := s.st.Journal().Append(store.AuditRecord{At: time.Now(), Kind: store.AuditCallRefused, Actor: "agent:" + agent, Agent: agent, Tool: "pay", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.st.Journal().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestNewlyReplayKept: the replay behind a view of what a card would newly
// allow is kept and extended, and answers as a fresh one would: records
// appended since the last view count, another agent's do not, and a card
// granted since (another wallet revision) is a new replay, not the kept
// one (which would still count the calls that card now allows).
func TestNewlyReplayKept(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	since := time.Now().Add(-time.Hour)
	calls := func(want int, why string) {
		t.Helper()
		np, err := s.NewlyPossible(ctx, "research", []string{"tool:invoke pay --..."}, "", since)
		if err != nil {
			t.Fatal(err)
		}
		if np.Calls != want {
			t.Fatalf("%s: %d calls would newly be allowed, want %d", why, np.Calls, want)
		}
	}
	refusePay(t, s, "research", "bob", 3)
	calls(3, "first view")
	calls(3, "the same view again")
	refusePay(t, s, "research", "carol", 2)
	calls(5, "two more refused since")
	refusePay(t, s, "ops", "carol", 4)
	calls(5, "another agent's")
	if _, err := s.Grant(ctx, "research", CardSpec{Allow: []string{"tool:invoke pay --to=bob"}}); err != nil {
		t.Fatal(err)
	}
	calls(2, "a card allowing bob granted since")

	// Views at once, with records appended meanwhile (run with -race):
	// each sees at least what was there before it began, and the last
	// view, after them, sees all of it.
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 4 {
				np, err := s.NewlyPossible(ctx, "research", []string{"tool:invoke pay --..."}, "", since)
				if err != nil || np.Calls < 2 {
					t.Errorf("a concurrent view: %d calls, %v", np.Calls, err)
				}
			}
		})
	}
	refusePay(t, s, "research", "erin", 3)
	wg.Wait()
	calls(5, "after the concurrent views")
}

// BenchmarkNewlyPossible100k is one view of what a card would newly allow
// over a trail of 100,000 records (half of them the agent's refused
// calls), with 10 records appended between views: Fresh replays the
// whole window each time (the kept replays dropped), Kept extends the
// replay kept from the view before. Both in one run, so compare their
// ratio: go test -run '^$' -bench NewlyPossible100k ./admin/
func BenchmarkNewlyPossible100k(b *testing.B) {
	ctx := context.Background()
	s := newlyStore(b)
	for i := range 10 {
		refusePay(b, s, "research", fmt.Sprint("bob", i), 5_000)
		refusePay(b, s, "ops", "carol", 5_000)
	}
	since := time.Now().Add(-time.Hour)
	for _, kept := range []bool{false, true} {
		name := "Fresh"
		if kept {
			name = "Kept"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				refusePay(b, s, "research", "dave", 10)
				if !kept {
					newlyCache.mu.Lock()
					clear(newlyCache.m)
					newlyCache.mu.Unlock()
				}
				b.StartTimer()
				np, err := s.NewlyPossible(ctx, "research", []string{"tool:invoke pay --..."}, "", since)
				if err != nil || np.Calls < 50_000 {
					b.Fatalf("%d calls, %v", np.Calls, err)
				}
			}
		})
	}
}
