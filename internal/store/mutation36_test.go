package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// mutation36Fill appends unreserved records to j until one is refused for
// its backlog and returns how many were acknowledged.
func mutation36Fill(t *testing.T, j *Journal, tool string) int {
	t.Helper()
	for n := range 100000 {
		if err := j.Append(journalRec(tool, n)); err != nil {
			if !errors.Is(err, ErrJournalFull) {
				t.Fatalf("append %d: %v; want ErrJournalFull or nil", n, err)
			}
			return n
		}
	}
	t.Fatal("100000 records and the backlog bound never refused one")
	return 0
}

// TestMutation36LineBound: a record whose encoded fields pass
// maxJournalLine-64 bytes is refused with ErrBadInput (its line, with its
// number and checksum, could pass maxJournalLine, beyond which a reader no
// longer looks for its end), and nothing is written.
func TestMutation36LineBound(t *testing.T) {
	t.Parallel()
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, JournalBacklog: 64 << 20})
	r := AuditRecord{At: time.Unix(0, 1_700_000_000_000_000_000), Kind: AuditCallAdmitted, Agent: "a", Tool: "t"}
	// Fields of exactly want bytes: the pad makes up the difference.
	fieldsOf := func(want int) AuditRecord {
		r.Body = json.RawMessage(`{"p":""}`)
		var b bytes.Buffer
		if err := encodeJournalFields(&b, r); err != nil {
			t.Fatal(err)
		}
		r.Body = json.RawMessage(`{"p":"` + strings.Repeat("x", want-b.Len()) + `"}`)
		b.Reset()
		if err := encodeJournalFields(&b, r); err != nil || b.Len() != want {
			t.Fatalf("fields of %d bytes, %v; want %d", b.Len(), err, want)
		}
		return r
	}
	for _, size := range []int{maxJournalLine - 63, maxJournalLine - 8} {
		if err := s.Journal().Append(fieldsOf(size)); !errors.Is(err, ErrBadInput) {
			t.Fatalf("Append of a record whose fields are %d bytes (the bound is %d) = %v; want ErrBadInput", size, maxJournalLine-64, err)
		}
	}
	if st := s.Journal().Stats(); st.Appended != 0 || st.Backlog != 0 {
		t.Fatalf("after the refusals: stats %+v; want nothing written", st)
	}
}

// TestMutation36ForeignReservation: a Reservation taken from one journal
// does not let a record past another journal's backlog bound, and stays
// its own journal's room until released.
func TestMutation36ForeignReservation(t *testing.T) {
	t.Parallel()
	s1 := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour})
	s2 := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, JournalBacklog: 4096})
	res, err := s1.Journal().Reserve(1000)
	if err != nil {
		t.Fatal(err)
	}
	mutation36Fill(t, s2.Journal(), "t")
	if err := s2.Journal().AppendReserved(journalRec("r", 0), &res); !errors.Is(err, ErrJournalFull) {
		t.Fatalf("a record spending another journal's reservation, past this one's bound = %v; want ErrJournalFull", err)
	}
	if got := s1.Journal().reserved.Load(); got != 1000 {
		t.Fatalf("the first journal holds %d bytes reserved after its reservation was offered to another; want 1000", got)
	}
	if got := s2.Journal().reserved.Load(); got != 0 {
		t.Fatalf("the second journal holds %d bytes reserved; want 0", got)
	}
	res.Release()
	if got := s1.Journal().reserved.Load(); got != 0 {
		t.Fatalf("%d bytes reserved after the release; want 0", got)
	}
}

// TestMutation36NegativeReservation: a reservation of a negative size
// takes one byte, not room away from the bound: the backlog still stops
// at the bound.
func TestMutation36NegativeReservation(t *testing.T) {
	t.Parallel()
	const bound = 4096
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, JournalBacklog: bound})
	j := s.Journal()
	res, err := j.Reserve(-1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if got := j.reserved.Load(); got != 1 {
		t.Fatalf("Reserve(-1 MiB) holds %d bytes; want 1", got)
	}
	n := mutation36Fill(t, j, "t")
	if st := j.Stats(); st.Backlog > bound+200 {
		t.Fatalf("%d records acknowledged, a backlog of %d bytes, after Reserve(-1 MiB); want the bound %d to hold", n, st.Backlog, bound)
	}
}

// TestMutation36BacklogAfterFlush: once Flush has ingested everything the
// backlog is zero, and the bound refuses as many records as the first time.
func TestMutation36BacklogAfterFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, JournalBacklog: 4096})
	j := s.Journal()
	n1 := mutation36Fill(t, j, "a")
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.Backlog != 0 {
		t.Fatalf("backlog %d after Flush; want 0", st.Backlog)
	}
	if n2 := mutation36Fill(t, j, "b"); n2 > n1+1 {
		t.Fatalf("%d records acknowledged before the bound after a Flush, %d before it; want the same bound", n2, n1)
	}
}

// TestMutation36CloseIngests: Close ingests what its journal holds before
// it returns: the records are in the chain and the journal's files are
// gone, without waiting for the next Open's sweep.
func TestMutation36CloseIngests(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(context.Background(), path, &Options{JournalInterval: time.Hour, journalRotate: 2048})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := s.Journal().Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.Journal().Stats(); st.Ingested != n || st.Backlog != 0 {
		t.Fatalf("after Close: stats %+v; want all %d records ingested", st, n)
	}
	if files := journalFiles(t, path+".audit"); len(files) != 0 {
		t.Fatalf("after Close the journal holds %v; want its files ingested and removed", files)
	}
	s2 := openOpts(t, path, nil)
	got, damaged := chainByTool(t, s2)
	wantSeq(t, "t", got["t"], n)
	if len(damaged) != 0 {
		t.Fatalf("damaged: %v", damaged)
	}
}

// TestMutation36PageBoundInBytes: AuditPage's bound is on the bodies'
// bytes, not their characters: bodies of two-byte characters fill it at
// half the characters.
func TestMutation36PageBoundInBytes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		body, _ := json.Marshal(map[string]string{"p": strings.Repeat("é", 100)}) // 208 bytes, 108 characters
		for range 3 {
			if _, err := s.AppendAudit(ctx, AuditRecord{Kind: AuditCallAdmitted, Agent: "a", Tool: "t", Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := s.AuditPage(ctx, 0, 10, 200)
		if err != nil || len(recs) != 1 {
			t.Fatalf("AuditPage(0, 10, 200) over bodies of %d bytes (%d characters): %d records, %v; want 1",
				len(body), len([]rune(string(body))), len(recs), err)
		}
		// Bodies adding up to maxBytes exactly: no more records after them.
		if recs, err := s.AuditPage(ctx, 0, 10, int64(len(body))); err != nil || len(recs) != 1 {
			t.Fatalf("AuditPage(0, 10, %d) over bodies of %d bytes: %d records, %v; want 1", len(body), len(body), len(recs), err)
		}
		if recs, err := s.AuditPage(ctx, 0, 10, int64(len(body))+1); err != nil || len(recs) != 2 {
			t.Fatalf("AuditPage(0, 10, %d) over bodies of %d bytes: %d records, %v; want 2", len(body)+1, len(body), len(recs), err)
		}
		if _, err := s.AuditPage(ctx, 0, 10, 0); !errors.Is(err, ErrBadInput) {
			t.Fatalf("AuditPage with maxBytes 0: %v; want ErrBadInput", err)
		}
	})
}

// TestMutation36WalkIsASnapshot: a walk of the trail reads the records
// present when it began, page after page, each once, and none appended
// while it runs (it would otherwise never end under a steady writer).
func TestMutation36WalkIsASnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	for i := range 5 {
		if _, err := s.AppendAudit(ctx, journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	err := s.walkAudit(ctx, 2, 1<<20, func(r AuditRecord) error {
		seen = append(seen, r.Seq)
		if len(seen) > 20 {
			return errors.New("too many")
		}
		_, err := s.AppendAudit(ctx, journalRec("later", int(r.Seq)))
		return err
	})
	if err != nil || fmt.Sprint(seen) != "[1 2 3 4 5]" {
		t.Fatalf("a walk with a record appended per record read: %v, %v; want [1 2 3 4 5]", seen, err)
	}
}

// TestMutation36GroupCanceledCaller: a caller of AppendAuditGroup whose
// context is canceled still has its record committed (the transaction
// carries the records of others too) and is told so.
func TestMutation36GroupCanceledCaller(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	r, err := s.AppendAuditGroup(ctx, journalRec("t", 0))
	if err != nil || r.Seq != 1 {
		t.Fatalf("AppendAuditGroup with a canceled context: seq %d, %v; want the record committed as 1", r.Seq, err)
	}
	verifyOK(t, s, 1)
}

// TestMutation36GroupBadRecord: callers append at once, some with a body
// that is not JSON. Those are refused with ErrBadInput; every other caller
// has its record committed (a bad record never joins, and so never fails,
// a batch of others), and the chain holds exactly the records whose
// callers were told they were committed.
func TestMutation36GroupBadRecord(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		const workers, per = 6, 30
		var mu sync.Mutex
		var failed []string
		told := map[int64]string{}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range per {
					r := AuditRecord{Kind: AuditCallAdmitted, Agent: "a", Tool: fmt.Sprintf("w%d-%d", w, i)}
					bad := w == 0
					if bad {
						r.Body = json.RawMessage(`{"a":`)
					}
					got, err := s.AppendAuditGroup(ctx, r)
					mu.Lock()
					switch {
					case bad && !errors.Is(err, ErrBadInput):
						failed = append(failed, fmt.Sprintf("%s (bad): %v", r.Tool, err))
					case !bad && err != nil:
						failed = append(failed, fmt.Sprintf("%s: %v", r.Tool, err))
					case !bad:
						told[got.Seq] = r.Tool
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(failed) > 0 {
			t.Fatalf("%d callers refused, first %q; want only the bad records refused, with ErrBadInput", len(failed), failed[0])
		}
		recs, err := s.AuditTail(ctx, 0, 0)
		if err != nil || len(recs) != (workers-1)*per {
			t.Fatalf("the chain holds %d records, %v; want %d", len(recs), err, (workers-1)*per)
		}
		for _, r := range recs {
			if told[r.Seq] != r.Tool {
				t.Fatalf("record %d is %q; its caller was told %q", r.Seq, r.Tool, told[r.Seq])
			}
		}
	})
}

// TestMutation36GroupFailedBatch (PostgreSQL, whose text columns refuse a
// NUL): callers append at once, some with a NUL in the actor, which fails
// the transaction of the batch it is in. A caller is told its record is
// committed only if it is: every nil error's record is in the chain at the
// sequence number returned, and the chain holds nothing else.
func TestMutation36GroupFailedBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, backends[1].target(t), nil)
	const workers, per = 6, 30
	var mu sync.Mutex
	told := map[int64]string{}
	var wrong []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				r := AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: fmt.Sprintf("w%d-%d", w, i)}
				if w == 0 {
					r.Actor = "agent:\x00"
				}
				got, err := s.AppendAuditGroup(ctx, r)
				mu.Lock()
				switch {
				case err != nil:
				case got.Seq == 0 || got.Tool != r.Tool:
					wrong = append(wrong, fmt.Sprintf("%s told committed as %d %q", r.Tool, got.Seq, got.Tool))
				default:
					told[got.Seq] = r.Tool
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d callers told nil without their record, first: %s", len(wrong), wrong[0])
	}
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(told) {
		t.Fatalf("the chain holds %d records; %d callers were told theirs is committed", len(recs), len(told))
	}
	for _, r := range recs {
		if told[r.Seq] != r.Tool || strings.IndexByte(r.Actor, 0) >= 0 {
			t.Fatalf("record %d is %q (actor %q); its caller was told %q", r.Seq, r.Tool, r.Actor, told[r.Seq])
		}
	}
}

// TestMutation36SyncCoversRecord: with Options.JournalSync, Append
// returns only once an fsync that began after its record was written has
// succeeded: the synced position covers the record, every time.
func TestMutation36SyncCoversRecord(t *testing.T) {
	t.Parallel()
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, JournalSync: true, journalRotate: 2048})
	j := s.Journal()
	for i := range 40 {
		if err := j.Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
		j.smu.Lock()
		synced := j.synced
		j.smu.Unlock()
		if w := j.wpos.Load(); synced < w {
			t.Fatalf("record %d acknowledged with the journal written to %d and synced to %d; want an fsync covering it", i, w, synced)
		}
	}
}

// TestMutation36AuditTail: AuditTail returns the records after after, at
// most limit of them: a reader paging with it (after = the last record
// read) sees each record once.
func TestMutation36AuditTail(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		for i := range 5 {
			if _, err := s.AppendAudit(ctx, journalRec("t", i)); err != nil {
				t.Fatal(err)
			}
		}
		var pages [][]int64
		for after := int64(0); len(pages) < 10; {
			recs, err := s.AuditTail(ctx, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			var page []int64
			for _, r := range recs {
				page = append(page, r.Seq)
			}
			pages = append(pages, page)
			after = recs[len(recs)-1].Seq
		}
		if got := fmt.Sprint(pages); got != "[[1 2] [3 4] [5]]" {
			t.Fatalf("AuditTail(after, 2) page by page: %s; want [[1 2] [3 4] [5]]", got)
		}
		if recs, err := s.AuditTail(ctx, 0, 0); err != nil || len(recs) != 5 {
			t.Fatalf("AuditTail(0, 0): %d records, %v; want all 5", len(recs), err)
		}
	})
}

// TestMutation36MappedFileCut: the mapped journal file cut short under
// its writer (by whoever can write the journal, or a disk error) makes
// the Append that faults on it fail, and the file is given up: the next
// Append starts a new file and succeeds, and its record is ingested.
func TestMutation36MappedFileCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openOpts(t, path, &Options{JournalInterval: time.Hour})
	j := s.Journal()
	if err := j.Append(journalRec("t", 0)); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	mapped, name := j.m != nil, j.files[len(j.files)-1].name
	j.mu.Unlock()
	if !mapped {
		t.Skip("the journal is not mapped here")
	}
	if err := os.Truncate(filepath.Join(path+".audit", name), 0); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(journalRec("t", 1)); err == nil {
		t.Fatal("an Append into a mapping whose file was cut to nothing = <nil>; want an error")
	}
	for i := 2; i < 4; i++ {
		if err := j.Append(journalRec("u", i-2)); err != nil {
			t.Fatalf("Append %d after the failed one: %v; want the cut file given up and a new one started", i, err)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := chainByTool(t, s)
	wantSeq(t, "u", got["u"], 2)
}

// TestMutation36FlushAfterCloseLeftRecords: a store closed while its
// write lock is held by another writer cannot ingest its journal at
// Close; a Flush then says so (ErrJournalClosed), never nil, and the
// records are ingested by the next Open.
func TestMutation36FlushAfterCloseLeftRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path, &Options{BusyTimeout: 50 * time.Millisecond, JournalInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	other := openOpts(t, path, nil)
	tx, err := other.db.BeginTx(ctx, nil) // IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Journal().Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close with the store locked by another writer = <nil>; want the ingestion's error")
	}
	if err := s.Journal().Flush(ctx); !errors.Is(err, ErrJournalClosed) {
		t.Fatalf("Flush after a Close that could not ingest the records = %v; want ErrJournalClosed", err)
	}
	tx.Rollback()
	other.Close()
	s2 := openOpts(t, path, nil)
	got, _ := chainByTool(t, s2)
	wantSeq(t, "t", got["t"], 3)
}

// TestMutation36LineIsOneLine: whatever its names and body hold (a
// newline, control bytes, a body with white space between its tokens), a
// record is written as one line, so that it is ingested as it was given,
// nothing refused as damaged or torn.
func TestMutation36LineIsOneLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openOpts(t, path, &Options{JournalInterval: time.Hour})
	recs := []AuditRecord{
		{Kind: AuditCallAdmitted, Actor: "agent:a\nb", Agent: "a", Tool: "t\x10\x1f\x01", Body: json.RawMessage("{\n  \"a\": [1,\n 2]\n}")},
		{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a\r\n", Tool: "t", Body: json.RawMessage("\n\"x\"\n")},
	}
	for _, r := range recs {
		if err := s.Journal().Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Journal().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, r := range got {
		summary = append(summary, fmt.Sprintf("%s %q %q %q %s", r.Kind, r.Actor, r.Agent, r.Tool, r.Body))
	}
	want := []string{
		fmt.Sprintf("%s %q %q %q %s", AuditCallAdmitted, "agent:a\nb", "a", "t\x10\x1f\x01", `{"a":[1,2]}`),
		fmt.Sprintf("%s %q %q %q %s", AuditCallAdmitted, "agent:a", "a\r\n", "t", `"x"`),
	}
	if st := s.Journal().Stats(); fmt.Sprint(summary) != fmt.Sprint(want) || st.Damaged != 0 || st.Torn != 0 {
		t.Fatalf("ingested %q (stats %+v); want %q, nothing damaged or torn", summary, st, want)
	}
}
