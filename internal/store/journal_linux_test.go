//go:build linux

package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runFsizeChild is the child of TestJournalFileSizeLimit: with its soft
// RLIMIT_FSIZE at MAIDEN_STORE_TEST_FROM bytes (no write of SQLite's is
// needed while the ingester is held off), it appends until Append fails,
// printing each acknowledged number, then "refused: ERROR"; it raises the
// limit again and appends 20 more, the refused one first (a partial line
// left behind would corrupt the next), and exits without closing the
// store (its journal is left for the next Open).
func runFsizeChild() int {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv("MAIDEN_STORE_TEST_PATH"), &Options{JournalInterval: time.Hour,
		journalNoMap: os.Getenv("MAIDEN_STORE_TEST_NOMAP") == "1", journalRotate: 64 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hard := lim.Cur
	lim.Cur, _ = strconv.ParseUint(os.Getenv("MAIDEN_STORE_TEST_FROM"), 10, 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	end := 1_000_000
	for i := 0; i < end; i++ {
		// Bodies of varying length, so that a write can be cut anywhere.
		err := s.Journal().Append(AuditRecord{Kind: AuditCallAdmitted, Agent: "a", Tool: "t",
			Body: auditBody(map[string]any{"i": i, "pad": strings.Repeat("x", i%97)})})
		if err != nil {
			if end != 1_000_000 {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Printf("refused: %v\n", err)
			lim.Cur = hard
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			end = i + 20
			i--
			continue
		}
		fmt.Println(i)
	}
	// This process's own ingester reads its file past the refused
	// write's place (no hole there: the file is opened O_APPEND).
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Journal().Flush(fctx); err != nil {
		fmt.Printf("flush: %v\n", err)
	}
	return 0
}

// TestJournalFileSizeLimit: a child process whose file size limit cuts a
// journal write short (EFBIG, the write(2) path: a mapped file's room is
// reserved when it is made, which TestJournalRefuses covers): Append
// returns the error and takes the partial line back, so that the records
// the child appends once the limit is lifted are whole; opening the store
// ingests exactly the acknowledged records, none damaged or torn.
func TestJournalFileSizeLimit(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalFileSizeLimit)
}

func testJournalFileSizeLimit(t *testing.T, be backend) {
	path := be.target(t)
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Below the journal's 64 KiB rotation: its first file hits the limit.
	cmd := journalChild(path, "journal-fsize", "t", 0)
	cmd.Env = append(cmd.Env, "MAIDEN_STORE_TEST_FROM=40000", "MAIDEN_STORE_TEST_NOMAP=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	acked, refusal, flush := -1, "", ""
	for sc.Scan() {
		if r, ok := strings.CutPrefix(sc.Text(), "refused: "); ok {
			refusal = r
			continue
		}
		if r, ok := strings.CutPrefix(sc.Text(), "flush: "); ok {
			flush = r
			continue
		}
		acked, _ = strconv.Atoi(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if flush != "" {
		// A hole where the refused write was (its file not O_APPEND)
		// holds the live file's ingestion before it until the file is
		// sealed (pass 36's open plant).
		t.Fatalf("the child's Flush after the refused write: %s; want its own records ingested past the refusal", flush)
	}
	if !strings.Contains(refusal, "file too large") || acked < 120 {
		t.Fatalf("the child acknowledged 0..%d, then %q; want a refusal for the file size", acked, refusal)
	}
	s = openOpts(t, path, nil)
	got, damaged := chainByTool(t, s)
	wantSeq(t, "t", got["t"], acked+1)
	if st := s.Journal().Stats(); len(damaged) != 0 || st.Torn != 0 {
		t.Fatalf("damaged: %v; stats %+v", damaged, st)
	}
	t.Logf("acknowledged 0..%d with one refusal: %s", acked, refusal)
	if files := journalFiles(t, journalDirOf(t, path)); len(files) != 0 {
		t.Fatalf("left: %v", files)
	}
}

// TestJournalLockMeansAlive: a journal whose writer's PID is gone but
// whose file lock is held (as by a writer in another PID namespace under
// the same host name, to which the PID means nothing) is not swept; once
// the lock is released, it is.
func TestJournalLockMeansAlive(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalLockMeansAlive)
}

func testJournalLockMeansAlive(t *testing.T, be backend) {
	path := be.target(t)
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	file := heldJournal(t, path, "t", 30) // its writer was killed: its PID is gone
	holder, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := lockJournal(holder); !ok || err != nil {
		t.Fatalf("lockJournal = %v, %v", ok, err)
	}
	s = openOpts(t, path, nil)
	if n, _, err := s.VerifyAudit(context.Background()); err != nil || n != 0 {
		t.Fatalf("a locked journal was swept: %d records, %v", n, err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the locked journal is gone: %v", err)
	}
	s.Close()
	holder.Close()
	s = openOpts(t, path, nil)
	got, _ := chainByTool(t, s)
	wantSeq(t, "t", got["t"], 30)
}

// TestJournalAbandonedNewFile: a journal file its writer died making
// (still under its temporary name, so never written) is removed by the
// next sweep; one whose maker still holds its lock is left alone.
func TestJournalAbandonedNewFile(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalAbandonedNewFile)
}

func testJournalAbandonedNewFile(t *testing.T, be backend) {
	path := be.target(t)
	dir := journalDirOf(t, path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, "host_1_dead_1.jl.new")
	live := filepath.Join(dir, "host_2_live_1.jl.new")
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if ok, err := lockJournal(holder); !ok || err != nil {
		t.Fatal(ok, err)
	}
	openOpts(t, path, nil)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the abandoned file is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the file being made was removed: %v", err)
	}
}

// TestJournalIngesterYields: the low-priority ingester (run, not a Flush
// or a backlog past a quarter of its bound) gives its P back while it
// works, so that a batch does not hold one of the process's Ps for its
// whole length (yieldP); and what it ingests so is the chain, exactly
// once.
func TestJournalIngesterYields(t *testing.T) {
	t.Parallel()
	const n = 6000 // two batches of thousands of rows: each well over yieldEvery
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Millisecond, JournalBacklog: 4 << 30})
	j := s.Journal()
	for i := range n {
		if err := j.Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the ingester's own pace (Flush would make it urgent).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		j.pmu.Lock()
		got, ch, err := j.ingested, j.progress, j.lastErr
		j.pmu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%d of %d records ingested: %v", got, n, ctx.Err())
		}
	}
	if y := j.yields.Load(); y == 0 {
		t.Fatalf("the low-priority ingester ingested %d records without giving its P back", n)
	}
	got, damaged := chainByTool(t, s)
	if len(damaged) > 0 {
		t.Fatalf("damaged: %v", damaged)
	}
	wantSeq(t, "t", got["t"], n)
}

// TestJournalIngesterBehindGoesUrgent: a low-priority ingestion attempt
// that finds, between batches, a backlog past half its bound
// hands the rest to a normal-priority attempt (an attempt ingests until no
// complete line is left: at low priority on a busy machine it could
// otherwise go on until Append refused calls).
func TestJournalIngesterBehindGoesUrgent(t *testing.T) {
	t.Parallel()
	const n1, n = 100, 400 // ~110 bytes a line: a sixth of the bound, then over half; many windows
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Millisecond, JournalBacklog: 64 << 10, journalWindow: 2 << 10})
	j := s.Journal()
	// Hold the ingester at its first batch (it takes the batch buffers'
	// lock): its attempt begins at low priority (the backlog is under a
	// quarter of the bound), and the rest of the backlog is written while
	// it waits.
	s.ingestBufs.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.ingestBufs.mu.Unlock()
		}
	}()
	appendRecs := func(from, to int) {
		for i := from; i < to; i++ {
			if err := j.Append(journalRec("t", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendRecs(0, n1)
	deadline := time.Now().Add(time.Minute)
	for !j.yielding.Load() { // the low-priority attempt has begun
		if time.Now().After(deadline) {
			t.Fatal("the ingester's low-priority attempt did not begin")
		}
		time.Sleep(100 * time.Microsecond)
	}
	appendRecs(n1, n)
	if b := j.backlog(); b <= j.backlogMax/2 || b > j.backlogMax {
		t.Fatalf("backlog %d, not between half of %d and all of it: the test does not test", b, j.backlogMax)
	}
	s.ingestBufs.mu.Unlock()
	locked = false
	if err := j.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := j.behind.Load(); got != 1 {
		t.Fatalf("low-priority attempts handed to normal priority: %d, want 1", got)
	}
	got, damaged := chainByTool(t, s)
	if len(damaged) > 0 {
		t.Fatalf("damaged: %v", damaged)
	}
	wantSeq(t, "t", got["t"], n)
}

// TestJournalDirMustBePrivate: every file in the journal directory is
// ingested into the audit chain, so a directory another user can write
// to (group- or other-writable, or owned by another uid) would let them
// forge audit records: Open refuses it with ErrJournalDirUnsafe, naming
// the directory and the fix; a directory only its owner writes (0700,
// 0755) opens.
func TestJournalDirMustBePrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path, nil)
	if err := s.Journal().Append(journalRec("made the directory", 0)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	dir := journalDirOf(t, path)
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the journal directory %s: %v %v, want mode 0700", dir, fi.Mode(), err)
	}
	for _, mode := range []os.FileMode{0o777, 0o770, 0o702, 0o720} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, path, &Options{})
		if !errors.Is(err, ErrJournalDirUnsafe) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("mode %#o: Open = %v, want ErrJournalDirUnsafe naming %s and the fix", mode, err, dir)
		}
	}
	for _, mode := range []os.FileMode{0o755, 0o700} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, path, &Options{})
		if err != nil {
			t.Fatalf("mode %#o: %v", mode, err)
		}
		s.Close()
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the owner case needs a directory owned by another uid")
		return
	}
	if err := os.Chown(dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	defer os.Chown(dir, 0, 0)
	// Root (sudo maiden audit over a service user's state) is told to run
	// as the owner, not to chown the service's directory.
	if _, err := Open(ctx, path, &Options{}); !errors.Is(err, ErrJournalDirUnsafe) || !strings.Contains(err.Error(), "owned by uid 4242") ||
		!strings.Contains(err.Error(), "sudo -u '#4242' maiden") {
		t.Errorf("a directory owned by uid 4242: Open = %v, want ErrJournalDirUnsafe naming the owner and how to run as it", err)
	}
}
