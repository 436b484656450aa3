package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
)

func labelled(i int, writer string) cards.Spec {
	g, err := grant.Parse(fmt.Sprintf("tool:invoke t --n=%d --w=%s", i, writer))
	if err != nil {
		panic(err)
	}
	return cards.Spec{LowerPos: cards.Any(g)}
}

var labelRE = regexp.MustCompile(`--n=(\d+) --w=(\S+)$`)

// labels reads back the (n, writer) labels of agent burst's cards in the
// order they were made.
func labels(t *testing.T, s *DB) map[string][]int {
	t.Helper()
	cs, err := s.Cards(context.Background(), "burst")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for _, c := range cs {
		m := labelRE.FindStringSubmatch(c.LowerPos[0].Grant.String())
		if m == nil {
			t.Fatalf("unexpected card %s", c.LowerPos[0].Grant)
		}
		n, _ := strconv.Atoi(m[1])
		out[m[2]] = append(out[m[2]], n)
	}
	return out
}

func child(t *testing.T, path, writer string, from, count int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"MAIDEN_STORE_TEST_CHILD=grants", "MAIDEN_STORE_TEST_PATH="+path, "MAIDEN_STORE_TEST_WRITER="+writer,
		"MAIDEN_STORE_TEST_FROM="+strconv.Itoa(from), "MAIDEN_STORE_TEST_COUNT="+strconv.Itoa(count))
	cmd.Stderr = os.Stderr
	return cmd
}

// TestKill9DuringGrants: a real child process grants cards in a loop and
// is killed with SIGKILL mid-burst, three times over. Each time the store
// opens cleanly (integrity_check ok) and holds a prefix of the grants: no
// gap, and at least every grant the child reported committed.
func TestKill9DuringGrants(t *testing.T) {
	t.Parallel()
	eachBackend(t, testKill9DuringGrants)
}

func testKill9DuringGrants(t *testing.T, be backend) {
	path := be.target(t)
	s := open(t, path, nil)
	mustAgents(t, s, "burst")
	s.Close()
	next := 0
	for round := range 3 {
		cmd := child(t, path, "kid", next, 0)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		reported := -1
		for sc.Scan() {
			reported, _ = strconv.Atoi(sc.Text())
			if reported >= next+25+round*10 {
				break
			}
		}
		// Kill at a varying moment, so that some rounds land inside a
		// transaction or its fsync rather than between two.
		time.Sleep(time.Duration(round*700) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		cmd.Wait()
		if reported < next {
			t.Fatalf("round %d: the child reported no grant", round)
		}

		s := open(t, path, nil)
		integrityCheck(t, s)
		got := labels(t, s)["kid"]
		for i, n := range got {
			if n != i {
				t.Fatalf("round %d: card %d is grant %d: not a prefix (%v)", round, i, n, got)
			}
		}
		if len(got)-1 < reported {
			t.Fatalf("round %d: the child reported grant %d committed, the store holds %d grants", round, reported, len(got))
		}
		t.Logf("round %d: killed after grant %d was reported; the store holds grants 0..%d", round, reported, len(got)-1)
		next = len(got)
		s.Close()
	}
}

// TestConcurrentWriters: two *DB on one file in this process and a
// third in a child process grant cards at the same time; every grant
// arrives, each writer's in its order, and nothing fails with "database
// is locked".
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	eachBackend(t, testConcurrentWriters)
}

func testConcurrentWriters(t *testing.T, be backend) {
	const n = 40
	path := be.target(t)
	a := open(t, path, nil)
	b := open(t, path, nil)
	mustAgents(t, a, "burst")
	cmd := child(t, path, "proc", 0, n)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, w := range []struct {
		s    *DB
		name string
	}{{a, "a"}, {b, "b"}} {
		wg.Go(func() {
			for i := range n {
				if _, err := w.s.Grant(context.Background(), "burst", labelled(i, w.name)); err != nil {
					errs <- fmt.Errorf("writer %s, grant %d: %w", w.name, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child writer: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := labels(t, a)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	for _, w := range []string{"a", "b", "proc"} {
		if !slices.Equal(got[w], want) {
			t.Errorf("writer %s: grants %v, want 0..%d in order", w, got[w], n-1)
		}
	}
}

// TestHammer: many goroutines grant, derive, revoke and read wallets on
// one store at once (run with -race); afterwards every revoked card's
// descendants are revoked too.
func TestHammer(t *testing.T) {
	t.Parallel()
	eachBackend(t, testHammer)
}

func testHammer(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	mustAgents(t, s, "burst", "sub")
	root, err := s.Grant(ctx, "burst", labelled(0, "root"))
	if err != nil {
		t.Fatal(err)
	}
	rootAny, err := s.Grant(ctx, "burst", cards.Spec{LowerPos: cards.Any(mustGrant(t, "tool:invoke t --..."))})
	if err != nil {
		t.Fatal(err)
	}
	_ = root
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	deadline := time.Now().Add(2 * time.Second)
	for g := range 6 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				switch (g + i) % 4 {
				case 0:
					c, err := s.Derive(ctx, Operator(), rootAny.ID, "sub", labelled(i, fmt.Sprint("g", g)))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					ids = append(ids, c.ID)
					mu.Unlock()
				case 1:
					mu.Lock()
					var id string
					if len(ids) > 0 {
						id = ids[(i*7)%len(ids)]
					}
					mu.Unlock()
					if id != "" {
						s.Revoke(ctx, Operator(), id) // may be revoked already: card-revoked
					}
				case 2:
					if _, err := s.Wallet(ctx, "sub", time.Now()); err != nil {
						t.Error(err)
						return
					}
				default:
					if _, err := s.Cards(ctx, ""); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if n, err := s.Revoke(ctx, Operator(), rootAny.ID); err != nil || n < 1 {
		t.Fatalf("final revoke: %d, %v", n, err)
	}
	cs, _ := s.Cards(ctx, "sub")
	for _, c := range cs {
		if c.Revoked.IsZero() {
			t.Fatalf("card %s outlived its revoked parent", c.ID)
		}
	}
	t.Logf("%d derived cards", len(cs))
}

func mustGrant(t *testing.T, s string) grant.Grant {
	t.Helper()
	g, err := grant.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestConcurrentOpen: four processes open one new file at the same moment;
// each succeeds, and the migration ran once.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	eachBackend(t, testConcurrentOpen)
}

func testConcurrentOpen(t *testing.T, be backend) {
	path := be.target(t)
	var cmds []*exec.Cmd
	for range 4 {
		cmd := child(t, path, "", 0, 0)
		for i, e := range cmd.Env {
			if e == "MAIDEN_STORE_TEST_CHILD=grants" {
				cmd.Env[i] = "MAIDEN_STORE_TEST_CHILD=open"
			}
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v", i, err)
		}
	}
	s := open(t, path, nil)
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("schema_migrations rows: %d, %v; want %d", n, err, SchemaVersion())
	}
	if as, err := s.Agents(context.Background()); err != nil || len(as) != 1 {
		t.Fatalf("agents: %v, %v", as, err)
	}
}

// TestGenerationSeesEveryWriter: the generation a store reads (from the
// WAL index in shared memory) changes when another *DB on the file or
// another process commits, stays put while nobody writes, and never stays
// the same across a change of the wallet it guards, while a child process
// grants as fast as it can.
func TestGenerationSeesEveryWriter(t *testing.T) {
	t.Parallel()
	eachBackend(t, testGenerationSeesEveryWriter)
}

func testGenerationSeesEveryWriter(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	a := open(t, path, nil)
	b := open(t, path, nil)
	if a.shm == nil && !be.pg {
		t.Fatal("the WAL index could not be mapped: Generation falls back to a query on every call")
	}
	mustAgents(t, a, "burst")
	g0, _ := a.Generation(ctx)
	if g0 >= 0 && !be.pg {
		t.Fatalf("generation %#x does not come from the WAL index", g0)
	}
	if g, _ := a.Generation(ctx); g != g0 {
		t.Fatalf("generation moved with no writer: %#x → %#x", g0, g)
	}
	if _, err := b.Grant(ctx, "burst", labelled(0, "b")); err != nil {
		t.Fatal(err)
	}
	g1, _ := a.Generation(ctx)
	if g1 == g0 {
		t.Fatal("a commit by another store on the file left the generation unchanged")
	}

	cmd := child(t, path, "kid", 0, 300)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{} // generation → wallet size, read while stable
	checks := 0
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			running = false
		default:
		}
		before, _ := a.Generation(ctx)
		w, err := a.Wallet(ctx, "burst", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		after, _ := a.Generation(ctx)
		if before != after {
			continue // a commit landed during the read
		}
		n := len(w.Cards())
		if m, ok := seen[before]; ok && m != n {
			t.Fatalf("generation %#x was read with %d cards and later with %d: a change went unseen", before, m, n)
		}
		seen[before] = n
		checks++
	}
	g2, _ := a.Generation(ctx)
	if w, _ := a.Wallet(ctx, "burst", time.Now()); len(w.Cards()) != 301 || seen[g2] != 0 && seen[g2] != 301 {
		t.Fatalf("after the child: %d cards", len(w.Cards()))
	}
	t.Logf("%d stable reads over %d generations", checks, len(seen))

	// Without the WAL index the counters table answers, and still moves.
	a.shm = nil
	h0, _ := a.Generation(ctx)
	if _, err := b.Grant(ctx, "burst", labelled(1, "b")); err != nil {
		t.Fatal(err)
	}
	if h1, _ := a.Generation(ctx); h1 == h0 || h1 < 0 {
		t.Fatalf("fallback generation %#x → %#x", h0, h1)
	}
}

// TestShmSurvivesGC: after garbage collections (which run the finalizer
// of any unreachable *os.File), a child process opening the store and
// writing beside this one neither rebuilds the WAL index under it nor
// makes its writes fail: the -shm descriptor Generation reads through
// must stay open, or the process's POSIX locks on the file go with it.
func TestShmSurvivesGC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path, nil)
	mustAgents(t, s, "burst")
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // let the finalizers run
	}
	cmd := child(t, path, "kid", 0, 30)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := s.Grant(ctx, "burst", labelled(i, "parent")); err != nil {
			t.Fatalf("grant %d beside the child: %v", i, err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	got := labels(t, s)
	if len(got["kid"]) != 30 || len(got["parent"]) != 30 {
		t.Fatalf("grants: kid %d, parent %d; want 30 each", len(got["kid"]), len(got["parent"]))
	}
}
