package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func openOpts(t *testing.T, path string, opts *Options) *DB {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func journalRec(tool string, i int) AuditRecord {
	return AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: tool, Body: auditBody(map[string]int{"i": i})}
}

// chainByTool reads the whole chain (verifying it) and returns, per tool,
// the body numbers of its call records in chain order, and the records of
// kind AuditJournalDamaged.
func chainByTool(t *testing.T, s *DB) (map[string][]int, []AuditRecord) {
	t.Helper()
	ctx := context.Background()
	n, _, err := s.VerifyAudit(ctx)
	if err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil || int64(len(recs)) != n {
		t.Fatalf("AuditTail: %d records, %v; VerifyAudit counted %d", len(recs), err, n)
	}
	out := map[string][]int{}
	var damaged []AuditRecord
	for _, r := range recs {
		switch r.Kind {
		case AuditJournalDamaged:
			damaged = append(damaged, r)
		case AuditCallAdmitted:
			var b struct{ I int }
			if err := json.Unmarshal(r.Body, &b); err != nil {
				t.Fatal(err)
			}
			out[r.Tool] = append(out[r.Tool], b.I)
		}
	}
	return out, damaged
}

// wantSeq fails unless got is exactly 0..n-1 in order (each record once).
func wantSeq(t *testing.T, what string, got []int, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%s: %d records, want %d (%v)", what, len(got), n, clip(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("%s: record %d is number %d: missing, repeated or out of order (%v)", what, i, v, clip(got))
		}
	}
}

func clip(v []int) []int { return v[:min(len(v), 40)] }

func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func journalChild(path, mode, tool string, count int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAIDEN_STORE_TEST_CHILD="+mode, "MAIDEN_STORE_TEST_PATH="+path,
		"MAIDEN_STORE_TEST_WRITER="+tool, "MAIDEN_STORE_TEST_COUNT="+strconv.Itoa(count))
	cmd.Stderr = os.Stderr
	return cmd
}

// heldJournal runs a journal-hold child that appends n records of tool and
// is then killed with SIGKILL before its ingester ever ran: the records
// are only in its journal file, which it returns.
func heldJournal(t *testing.T, path, tool string, n int) string {
	t.Helper()
	before := map[string]bool{}
	for _, f := range journalFiles(t, journalDirOf(t, path)) {
		before[f] = true
	}
	cmd := journalChild(path, "journal-hold", tool, n)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	acked := 0
	for sc.Scan() && sc.Text() != "held" {
		acked++
	}
	if acked != n {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child acknowledged %d records, want %d", acked, n)
	}
	cmd.Process.Kill() // SIGKILL
	cmd.Wait()
	var mine []string
	for _, f := range journalFiles(t, journalDirOf(t, path)) {
		if !before[f] {
			mine = append(mine, f)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("the child left journal files %v, want one", mine)
	}
	return filepath.Join(journalDirOf(t, path), mine[0])
}

// TestJournalAppendFlush: four goroutines here and two child processes
// append at once; after Flush (and the children's Close) the chain holds
// every record exactly once, each writer's in its order, and verifies;
// the children's files are gone.
func TestJournalAppendFlush(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalAppendFlush)
}

func testJournalAppendFlush(t *testing.T, be backend) {
	const per, kids, gs = 300, 2, 4
	path := be.target(t)
	s := openOpts(t, path, nil)
	var cmds []*exec.Cmd
	for k := range kids {
		cmd := journalChild(path, "journal", "kid"+strconv.Itoa(k), per)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	for g := range gs {
		wg.Go(func() {
			for i := range per {
				if err := s.Journal().Append(journalRec("go"+strconv.Itoa(g), i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	if err := s.Journal().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, damaged := chainByTool(t, s)
	if len(damaged) > 0 || len(got) != kids+gs {
		t.Fatalf("writers %v, damaged %v", len(got), damaged)
	}
	for w, is := range got {
		wantSeq(t, w, is, per)
	}
	st := s.Journal().Stats()
	if st.Appended != gs*per || st.Ingested != gs*per || st.Backlog != 0 || st.Torn != 0 || st.Damaged != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Only this store's current file is left; Close ingests and removes it.
	if files := journalFiles(t, s.Journal().Dir()); len(files) != 1 {
		t.Fatalf("journal files after Flush: %v", files)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if files := journalFiles(t, s.Journal().Dir()); len(files) != 0 {
		t.Fatalf("journal files after Close: %v", files)
	}
	if err := s.Journal().Append(journalRec("late", 0)); !errors.Is(err, ErrJournalClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
}

// TestJournalKill9: a child appending as fast as it can is killed with
// SIGKILL three times, at varying moments (its ingester has moved some
// records into the chain, others are only in its file, its last write
// may be cut short); then a child is killed after appending with its
// ingester held off. Each time, opening the store ingests every record
// the child acknowledged, exactly once, and nothing it did not write.
func TestJournalKill9(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalKill9)
}

func testJournalKill9(t *testing.T, be backend) {
	path := be.target(t)
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for round := range 3 {
		tool := "kid" + strconv.Itoa(round)
		cmd := journalChild(path, "journal", tool, 0)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		acked := -1
		for sc.Scan() {
			acked, _ = strconv.Atoi(sc.Text())
			if acked >= 2000+round*1500 {
				break
			}
		}
		time.Sleep(time.Duration(round*7) * time.Millisecond)
		cmd.Process.Kill()
		for sc.Scan() { // acknowledgments printed before it died
			if v, err := strconv.Atoi(sc.Text()); err == nil {
				acked = v
			}
		}
		cmd.Wait()
		if acked < 0 {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}
		s := openOpts(t, path, nil)
		got, damaged := chainByTool(t, s)
		if len(damaged) > 0 {
			t.Fatalf("round %d: damaged records %v", round, damaged)
		}
		is := got[tool]
		if len(is) < acked+1 {
			t.Fatalf("round %d: the child acknowledged records 0..%d; the chain holds %d", round, acked, len(is))
		}
		wantSeq(t, tool, is, len(is)) // 0..m, each once, m >= acked
		st := s.Journal().Stats()
		t.Logf("round %d: killed after record %d was acknowledged; the chain holds 0..%d; swept %d files, torn lines %d",
			round, acked, len(is)-1, st.Swept, st.Torn)
		if files := journalFiles(t, journalDirOf(t, path)); len(files) != 0 {
			t.Fatalf("round %d: journal files left after the sweep: %v", round, files)
		}
		s.Close()
	}
	// Killed between writing and ingesting.
	heldJournal(t, path, "held", 500)
	s = openOpts(t, path, nil)
	got, _ := chainByTool(t, s)
	wantSeq(t, "held", got["held"], 500)
	if st := s.Journal().Stats(); st.Swept != 1 {
		t.Fatalf("stats %+v: want one file swept", st)
	}
}

// TestJournalTornLine: a dead writer's file ending in a partial line (a
// write cut short by SIGKILL): the complete lines are ingested, the
// partial one dropped and counted, the file removed.
func TestJournalTornLine(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalTornLine)
}

func testJournalTornLine(t *testing.T, be backend) {
	path := be.target(t)
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	file := heldJournal(t, path, "t", 20)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The written lines end at the first NUL (a mapped file's unused
	// room is zeros) or at the end of the file.
	used := bytes.IndexByte(data, 0)
	if used < 0 {
		used = len(data)
	}
	lines := bytes.SplitAfter(data[:used], []byte("\n"))
	last := lines[len(lines)-2] // lines[-1] is the empty rest
	// The next line as the writer would have written it, cut in half,
	// where the writer would have put it.
	torn := bytes.Replace(last, []byte(`"n":20,`), []byte(`"n":21,`), 1)
	torn = torn[:len(torn)/2]
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn, int64(used)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = openOpts(t, path, nil)
	got, damaged := chainByTool(t, s)
	wantSeq(t, "t", got["t"], 20)
	if st := s.Journal().Stats(); st.Torn != 1 || st.Damaged != 0 || len(damaged) != 0 {
		t.Fatalf("stats %+v, damaged %v: want one torn line", st, damaged)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the swept file is still there: %v", err)
	}
}

// TestJournalDamagedLines: lines of a dead writer's journal edited on
// disk (without recomputing the checksum), deleted, repeated and copied
// in from another journal before ingestion are refused: each appears in
// the chain as an AuditJournalDamaged record naming the file and line,
// the rest is ingested, and the chain verifies.
func TestJournalDamagedLines(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalDamagedLines)
}

func testJournalDamagedLines(t *testing.T, be backend) {
	path := be.target(t)
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	other := heldJournal(t, path, "other", 3)
	otherData, _ := os.ReadFile(other)
	os.Remove(other) // lines to copy in; this file itself is not ingested
	file := heldJournal(t, path, "t", 10)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1]
	// Line 4 (record 3): its tool edited from "t" to "x".
	lines[3] = bytes.Replace(lines[3], []byte(`"tool":"t"`), []byte(`"tool":"x"`), 1)
	// Line 2 repeated after line 5 (record 4).
	lines = append(lines[:5], append([][]byte{lines[1]}, lines[5:]...)...)
	// Line 7 (record 6) deleted: at index 7 now.
	lines = append(lines[:7], lines[8:]...)
	// A valid line of another journal put after the last one.
	otherLines := bytes.SplitAfter(otherData, []byte("\n"))
	lines = append(lines, otherLines[0])
	if err := os.WriteFile(file, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}

	s = openOpts(t, path, nil)
	got, damaged := chainByTool(t, s)
	if fmt.Sprint(got["t"]) != "[0 1 2 4 5 7 8 9]" || len(got["x"]) != 0 || len(got["other"]) != 0 {
		t.Fatalf("ingested %v", got)
	}
	var reasons []string
	for _, r := range damaged {
		var b struct {
			File   string
			Line   int
			Reason string
		}
		json.Unmarshal(r.Body, &b)
		if b.File != filepath.Base(file) {
			t.Fatalf("damaged record names file %q, want %q", b.File, filepath.Base(file))
		}
		reasons = append(reasons, fmt.Sprintf("line %d: %s", b.Line, b.Reason))
	}
	want := []string{
		"line 4: its checksum does not match its content (edited, damaged, or copied from another journal)",
		"line 2: line number 2 again after line 5 (a repeated or moved line)",
		"line 7: lines 7..7 are missing (the next present is 8)",
		"line 11: its checksum does not match its content (edited, damaged, or copied from another journal)",
	}
	if strings.Join(reasons, "\n") != strings.Join(want, "\n") {
		t.Fatalf("damaged records:\n%s\nwant:\n%s", strings.Join(reasons, "\n"), strings.Join(want, "\n"))
	}
	if st := s.Journal().Stats(); st.Damaged != 4 {
		t.Fatalf("stats %+v: want 4 damaged", st)
	}
}

// TestJournalEditedOwnFile: a line of a live store's own journal edited
// before its ingester reached it is refused the same way.
func TestJournalEditedOwnFile(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalEditedOwnFile)
}

func testJournalEditedOwnFile(t *testing.T, be backend) {
	ctx := context.Background()
	s := openOpts(t, be.target(t), &Options{JournalInterval: time.Hour})
	j := s.Journal()
	for i := range 5 {
		if err := j.Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, err := s.VerifyAudit(ctx); err != nil || n != 5 {
		// VerifyAudit flushed first.
		t.Fatalf("VerifyAudit = %d, %v", n, err)
	}
	for i := 5; i < 8; i++ {
		if err := j.Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	files := journalFiles(t, j.Dir())
	file := filepath.Join(j.Dir(), files[0])
	data, _ := os.ReadFile(file)
	edited := bytes.Replace(data, []byte(`{"i":6}`), []byte(`{"i":9}`), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("record 6 not found in the journal")
	}
	os.WriteFile(file, edited, 0o600)
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, damaged := chainByTool(t, s)
	if fmt.Sprint(got["t"]) != "[0 1 2 3 4 5 7]" || len(damaged) != 1 {
		t.Fatalf("ingested %v, damaged %v", got, damaged)
	}
}

// TestJournalConcurrentSweepers: four stores in this process and two
// child processes open a store at once while a dead writer's journal
// waits there; each sweeps it (they take turns on its batches, and one
// removes it while the others hold it open), and the chain holds each of
// its records exactly once.
//
// Every store here waits up to a minute for the write lock, not the
// default 10 s: six stores ingest one 12,000-record journal in turns of
// 4,096-record transactions, and under the race detector on a machine
// running the whole suite a store waited longer than 10 s behind the
// others (SQLITE_BUSY from the child's first write). What this test
// guards is that each record is taken exactly once, not how long a
// writer waits; ErrLocked's own test is TestOpenMigrationWaitsForLock.
func TestJournalConcurrentSweepers(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalConcurrentSweepers)
}

func testJournalConcurrentSweepers(t *testing.T, be backend) {
	const n = 12000
	path := be.target(t)
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	heldJournal(t, path, "t", n)
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MAIDEN_STORE_TEST_CHILD=open", "MAIDEN_STORE_TEST_PATH="+path, "MAIDEN_STORE_TEST_BUSY=1m")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	swept := make([]int64, 4)
	for i := range 4 {
		wg.Go(func() {
			s, err := Open(context.Background(), path, &Options{BusyTimeout: time.Minute})
			if err != nil {
				t.Error(err)
				return
			}
			swept[i] = s.Journal().Stats().Swept
			s.Close()
		})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	s = openOpts(t, path, nil)
	got, damaged := chainByTool(t, s)
	wantSeq(t, "t", got["t"], n)
	if len(damaged) != 0 {
		t.Fatalf("damaged %v", damaged)
	}
	t.Logf("the stores of this process swept %v files", swept)
}

// TestJournalRotation: small files rotate; each sealed file is removed
// once ingested, and the records keep their order across files; with and
// without fsync, mapped and written with write(2).
func TestJournalRotation(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalRotation)
}

func testJournalRotation(t *testing.T, be backend) {
	ctx := context.Background()
	for _, c := range []struct{ fsync, noMap bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("sync=%v,write=%v", c.fsync, c.noMap), func(t *testing.T) {
			s := openOpts(t, be.target(t), &Options{JournalSync: c.fsync, journalRotate: 2048, journalNoMap: c.noMap})
			var wg sync.WaitGroup
			for g := range 3 {
				wg.Go(func() {
					for i := range 150 {
						if err := s.Journal().Append(journalRec("g"+strconv.Itoa(g), i)); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := s.Journal().Flush(ctx); err != nil {
				t.Fatal(err)
			}
			got, _ := chainByTool(t, s)
			for g := range 3 {
				wantSeq(t, "g"+strconv.Itoa(g), got["g"+strconv.Itoa(g)], 150)
			}
			s.Journal().mu.Lock()
			num := s.Journal().num
			s.Journal().mu.Unlock()
			if files := journalFiles(t, s.Journal().Dir()); num < 10 || len(files) != 1 {
				t.Fatalf("%d files written, %v left: want many rotations and only the current file left", num, files)
			}
		})
	}
}

// TestJournalRoundTrip: what the journal ingests is what AppendAudit
// stores for the same record (strings with quotes, backslashes, control
// characters and non-ASCII; a body with spaces and '<'; the time to the
// nanosecond).
func TestJournalRoundTrip(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalRoundTrip)
}

func testJournalRoundTrip(t *testing.T, be backend) {
	ctx := context.Background()
	at := time.Unix(1_700_000_000, 123_456_789)
	rec := AuditRecord{At: at, Kind: "fetch", Actor: "operator:\"ann\"\\", Agent: "a\tb\x01ü", Tool: "wé<a>\u2028",
		Body: json.RawMessage(`{ "url": "https://x/?a=1&b=<2>", "s": "\u00e9\n", "n": [1, 2] }`)}
	direct := openOpts(t, be.target(t), nil)
	want, err := direct.AppendAudit(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	s := openOpts(t, be.target(t), nil)
	if err := s.Journal().Append(rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, _ := s.AuditTail(ctx, 0, 0)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	if d := cmp.Diff(want, recs[0]); d != "" {
		t.Fatalf("through the journal (+) and directly (-):\n%s", d)
	}
}

// TestJournalBatchSizes: batches of every shape the ingester's INSERTs
// take (one record; fewer, as many and more than one statement carries on
// each backend; several statements and a remainder), with fields that
// repeat and change from one record to the next, give exactly the chain
// that appending the same records one by one directly gives: the same
// records, sequence numbers, prev and hashes.
func TestJournalBatchSizes(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalBatchSizes)
}

func testJournalBatchSizes(t *testing.T, be backend) {
	ctx := context.Background()
	opts := &Options{Synchronous: "NORMAL", JournalInterval: time.Hour}
	direct := openOpts(t, be.target(t), opts)
	s := openOpts(t, be.target(t), opts)
	at := time.Unix(1_700_000_000, 0)
	i := 0
	for _, n := range []int{1, 2, 3, 63, 64, 65, 200, 1023, 1025, 1500} {
		for range n {
			i++
			r := AuditRecord{At: at.Add(time.Duration(i)), Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "t" + strconv.Itoa(i/7),
				Body: auditBody(map[string]int{"i": i})}
			if i%5 == 0 {
				r.Kind, r.Actor = AuditCallSucceeded, "agent:b"
			}
			if i%11 == 0 {
				r.Body = nil
			}
			if _, err := direct.AppendAudit(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := s.Journal().Append(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Journal().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		want, err := direct.AuditTail(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.AuditTail(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("after a batch of %d: through the journal (+) and directly (-):\n%s", n, d)
		}
	}
	if _, _, err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestJournalRefuses: bad records, a journal directory that cannot be
// made, and a backlog beyond its bound are refused with an error, and
// nothing is acknowledged.
func TestJournalRefuses(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalRefuses)
}

func testJournalRefuses(t *testing.T, be backend) {
	ctx := context.Background()
	s := openOpts(t, be.target(t), nil)
	// A NUL or invalid UTF-8 anywhere: PostgreSQL's text columns refuse
	// them, so such a line would fail its ingestion batch on every retry
	// and hold the journal (the fourth review's note).
	for _, r := range []AuditRecord{{}, {Kind: "x", Body: json.RawMessage("{")}, {Kind: "x", Agent: "a\xff"},
		{Kind: "x", Agent: "a\x00b"}, {Kind: "x", Actor: "agent:\x00"}, {Kind: "x", Tool: "t\x00"},
		{Kind: "x", Body: json.RawMessage("{\"a\":\"\xff\"}")}, {Kind: "x", Body: json.RawMessage("{\"a\":\"x\x00\"}")}} {
		if err := s.Journal().Append(r); !errors.Is(err, ErrBadInput) {
			t.Fatalf("Append(%+v) = %v", r, err)
		}
	}
	// The journal's directory is taken by a file (as root, which this
	// test may run as, a read-only directory would not stop a write).
	path := be.target(t)
	// (PostgreSQL's default directory sits under the test's state home,
	// which no earlier test may have made when this one runs alone.)
	if err := os.MkdirAll(filepath.Dir(journalDirOf(t, path)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journalDirOf(t, path), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openOpts(t, path, nil)
	err := s2.Journal().Append(journalRec("t", 0))
	if err == nil || !strings.Contains(err.Error(), journalDirOf(t, path)) {
		t.Fatalf("Append with no journal directory = %v; want an error naming it", err)
	}
	if st := s2.Journal().Stats(); st.Appended != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Backlog: the ingester held off, appends beyond 4 KiB are refused
	// until a Flush moves the records into the chain.
	s3 := openOpts(t, be.target(t), &Options{JournalInterval: time.Hour, JournalBacklog: 4096})
	n := 0
	for ; n < 1000; n++ {
		if err := s3.Journal().Append(journalRec("t", n)); err != nil {
			if !strings.Contains(err.Error(), "waiting to be ingested") {
				t.Fatal(err)
			}
			break
		}
	}
	if n == 1000 || n < 10 {
		t.Fatalf("%d appends before the backlog bound refused one", n)
	}
	if err := s3.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s3.Journal().Append(journalRec("t", n)); err != nil {
		t.Fatalf("after Flush: %v", err)
	}
	got, _ := chainByTool(t, s3)
	wantSeq(t, "t", got["t"], n+1)
}

// TestJournalGeneration: an Append does not change Generation (the call
// path keeps its pinned wallets); on SQLite the ingestion commit does,
// once per batch (every commit moves the WAL index's counter); on
// PostgreSQL it does not (an audit append moves no counter and notifies no
// one: TestPostgresAuditWakesNoOne).
func TestJournalGeneration(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalGeneration)
}

func testJournalGeneration(t *testing.T, be backend) {
	ctx := context.Background()
	s := openOpts(t, be.target(t), &Options{JournalInterval: time.Hour})
	g0, _ := s.Generation(ctx)
	for i := range 100 {
		if err := s.Journal().Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	if g1, _ := s.Generation(ctx); g1 != g0 {
		t.Fatalf("Generation changed on Append: %d -> %d", g0, g1)
	}
	if err := s.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if g2, _ := s.Generation(ctx); g2 == g0 && !be.pg {
		t.Fatal("Generation did not change when the batch was committed")
	} else if g2 != g0 && be.pg {
		t.Fatalf("Generation changed when the batch was committed on PostgreSQL: %d -> %d", g0, g2)
	}
}

// TestJournalCloseWhileAppending: goroutines append and flush while the
// store is closed under them. Every Append either returns nil, and its
// record is in the chain once the store is opened again, or
// ErrJournalClosed, and it is not; nothing is left in the journal.
func TestJournalCloseWhileAppending(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalCloseWhileAppending)
}

func testJournalCloseWhileAppending(t *testing.T, be backend) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", fsync), func(t *testing.T) {
			path := be.target(t)
			s, err := Open(context.Background(), path, &Options{JournalSync: fsync, JournalInterval: time.Millisecond, journalRotate: 16 << 10})
			if err != nil {
				t.Fatal(err)
			}
			const gs = 4
			acked := make([]int, gs)
			var wg sync.WaitGroup
			for g := range gs {
				wg.Go(func() {
					for i := 0; ; i++ {
						err := s.Journal().Append(journalRec("g"+strconv.Itoa(g), i))
						if errors.Is(err, ErrJournalClosed) {
							acked[g] = i
							return
						}
						if err != nil {
							t.Error(err)
							return
						}
						if i%40 == 0 {
							// Close ingests what was appended: a Flush it
							// interrupts still ends in nil.
							if err := s.Journal().Flush(context.Background()); err != nil {
								t.Errorf("Flush: %v", err)
							}
						}
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if files := journalFiles(t, journalDirOf(t, path)); len(files) != 0 {
				t.Fatalf("left after Close: %v", files)
			}
			s = openOpts(t, path, nil)
			got, damaged := chainByTool(t, s)
			for g := range gs {
				wantSeq(t, "g"+strconv.Itoa(g), got["g"+strconv.Itoa(g)], acked[g])
			}
			if len(damaged) != 0 {
				t.Fatalf("damaged %v", damaged)
			}
			t.Logf("acknowledged %v before Close", acked)
		})
	}
}

// TestJournalStoreLocked: another process's connection holds the store's
// write lock, so the ingester cannot commit: Flush reports the ingestion
// error, Append refuses once the backlog is full (naming the cause), and
// once the lock is released everything acknowledged reaches the chain,
// once.
func TestJournalStoreLocked(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalStoreLocked)
}

func testJournalStoreLocked(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := openOpts(t, path, &Options{BusyTimeout: 50 * time.Millisecond, JournalInterval: time.Millisecond, JournalBacklog: 8 << 10})
	other := openOpts(t, path, nil)
	tx, err := other.db.BeginTx(ctx, nil) // IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	if be.pg {
		if _, err := tx.Exec(other.pg.lock); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	var refusal error
	for ; n < 10000; n++ {
		if refusal = s.Journal().Append(journalRec("t", n)); refusal != nil {
			break
		}
	}
	if refusal == nil || !strings.Contains(refusal.Error(), "waiting to be ingested") {
		t.Fatalf("after %d appends: %v; want the backlog refused", n, refusal)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Journal().Flush(fctx); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("Flush while the store is locked = %v; want the ingestion error", err)
	}
	t.Logf("refused after %d: %v", n, refusal)
	tx.Rollback()
	var err2 error
	for range 100 { // the ingester retries with a growing pause
		if err2 = s.Journal().Flush(ctx); err2 == nil {
			break
		}
	}
	if err2 != nil {
		t.Fatal(err2)
	}
	if err := s.Journal().Append(journalRec("t", n)); err != nil {
		t.Fatal(err)
	}
	got, _ := chainByTool(t, s)
	wantSeq(t, "t", got["t"], n+1)
}

// FuzzJournalLine: a record Append accepts comes back from its journal
// line exactly (the body compacted), through the fast parser, which
// agrees with encoding/json; and no line, however damaged, makes the
// decoder panic or take a line with a wrong checksum.
func FuzzJournalLine(f *testing.F) {
	f.Add(int64(1), int64(1_700_000_000_123_456_789), "call-admitted", "agent:a", "a", "weather", []byte(`{"rendered":"weather --city=Paris","n":[1,2]}`), []byte{})
	f.Add(int64(7), int64(-5), "fetch", "op \"x\"\\", "a\tb\x01ü", "wé<a>", []byte(` { "a" : "\u00e9\n" } `), []byte(`{"n":1,"crc":"00000000"}`))
	f.Fuzz(func(t *testing.T, n, at int64, kind, actor, agent, tool string, body, junk []byte) {
		seed := journalSeed("host_1_abc_1.jl")
		decodeJournalLine(junk, seed) // must not panic
		if len(junk) > crcSuffixLen {
			if _, _, why := decodeJournalLine(junk, seed); why == "" {
				sum := crc32.Update(seed, castagnoli, junk[:len(junk)-crcSuffixLen])
				if got := fmt.Sprintf("%08x", sum); !bytes.Contains(bytes.ToLower(junk[len(junk)-crcSuffixLen:]), []byte(got)) {
					t.Fatalf("a line with a wrong checksum decoded: %q", junk)
				}
			}
		}
		r := AuditRecord{At: time.Unix(0, at), Kind: kind, Actor: actor, Agent: agent, Tool: tool, Body: body}
		if n < 1 || checkName("kind", kind) != nil {
			return
		}
		var fields bytes.Buffer
		if encodeJournalFields(&fields, r) != nil {
			return // not JSON: Append refuses it
		}
		for _, s := range []string{kind, actor, agent, tool} {
			if !utf8.ValidString(s) {
				return // Append refuses it
			}
		}
		line := appendJournalLine(nil, n, fields.Bytes(), seed)
		if bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("the line holds a newline before its end: %q", line)
		}
		line = line[:len(line)-1]
		got, gotN, why := decodeJournalLine(line, seed)
		if why != "" || gotN != n {
			t.Fatalf("decode(%q) = line %d, %q", line, gotN, why)
		}
		fast, _, ok := parseJournalLine(line[:len(line)-crcSuffixLen])
		if !ok {
			t.Fatalf("the fast parser refused %q", line)
		}
		var want bytes.Buffer
		if len(body) == 0 {
			want.WriteString("null")
		} else {
			json.Compact(&want, body)
		}
		r.At, r.Body = r.At.UTC(), want.Bytes()
		for _, g := range []AuditRecord{got, fast} {
			if d := cmp.Diff(r, g); d != "" {
				t.Fatalf("round trip of %q (-sent +decoded):\n%s", line, d)
			}
		}
		var slow struct {
			Kind, Actor, Agent, Tool string
		}
		if err := json.Unmarshal(line, &slow); err != nil || slow.Kind != kind || slow.Actor != actor || slow.Agent != agent || slow.Tool != tool {
			t.Fatalf("encoding/json reads %q as %+v, %v", line, slow, err)
		}
		// One byte changed anywhere before the checksum is refused.
		bad := bytes.Clone(line)
		bad[int(uint64(n)%uint64(len(line)-crcSuffixLen))] ^= 0x20
		if _, _, why := decodeJournalLine(bad, seed); why == "" {
			t.Fatalf("an edited line decoded: %q", bad)
		}
	})
}

// TestJournalReserve: room reserved for a record to come (a fetch's,
// written after its request went out) is counted in the backlog as if
// written. Reserve is refused with ErrJournalFull once the backlog and
// the room already reserved would pass the bound, and an unreserved
// Append is refused once they do; a reserved record is written whatever
// the backlog has become meanwhile; Release gives the room back; a closed
// journal refuses a reservation as it refuses an Append.
func TestJournalReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const bound = 16 << 10
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, JournalBacklog: bound})
	j := s.Journal()
	// fill appends unreserved records from number n until one is refused
	// for the backlog; it returns the next number.
	fill := func(n int) int {
		t.Helper()
		for k := 0; k < 1000; k, n = k+1, n+1 {
			if err := j.Append(journalRec("t", n)); err != nil {
				if !errors.Is(err, ErrJournalFull) || !strings.Contains(err.Error(), "waiting to be ingested") {
					t.Fatal(err)
				}
				if k == 0 {
					t.Fatal("no room for an unreserved record")
				}
				return n
			}
		}
		t.Fatal("1000 records and the bound never refused one")
		return n
	}

	// Reservations alone fill the bound.
	a, err := j.Reserve(6 << 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := j.Reserve(6 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Reserve(6 << 10); !errors.Is(err, ErrJournalFull) {
		t.Fatalf("a third reservation past the bound = %v; want ErrJournalFull", err)
	}
	// Unreserved records count the room reserved: 4 KiB are left.
	n := fill(0)
	if got := j.Stats().Backlog; got > 5<<10 {
		t.Fatalf("backlog %d after the unreserved records: the 12 KiB reserved were not counted", got)
	}
	b.Release()
	b.Release() // once only
	if got := j.reserved.Load(); got != 6<<10 {
		t.Fatalf("%d bytes reserved after one of two 6 KiB reservations was released", got)
	}
	n = fill(n)
	// The backlog and a's room are past the bound: a's record is written
	// anyway, and spends its room.
	if err := j.AppendReserved(journalRec("r", 0), &a); err != nil {
		t.Fatalf("a reserved record with the backlog past its bound: %v", err)
	}
	if got := j.reserved.Load(); got != 0 {
		t.Fatalf("%d bytes still reserved after every reservation was spent or released", got)
	}
	a.Release() // spent: gives nothing back
	if got := j.reserved.Load(); got != 0 {
		t.Fatalf("%d bytes reserved after a spent reservation was released", got)
	}
	if _, err := j.Reserve(6 << 10); !errors.Is(err, ErrJournalFull) {
		t.Fatalf("a reservation with the backlog near its bound = %v; want ErrJournalFull", err)
	}

	// Ingested, the room is there again.
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := j.Reserve(6 << 10)
	if err != nil {
		t.Fatalf("after Flush: %v", err)
	}
	if err := j.AppendReserved(journalRec("r", 1), &c); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := chainByTool(t, s)
	wantSeq(t, "t", got["t"], n)
	wantSeq(t, "r", got["r"], 2)

	s.Close()
	if _, err := j.Reserve(1); !errors.Is(err, ErrJournalClosed) {
		t.Fatalf("Reserve on a closed journal = %v; want ErrJournalClosed", err)
	}
}
