package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// largeWindow is the journal window (Options.journalWindow) of the
// large-record tests: what they check is how a batch's read meets lines
// longer than the window, which needs records of one to a few windows, not
// megabytes. With the production window (1 MiB) the same records, 16 times
// larger, cost these two tests 52 CPU-seconds under the race detector
// (17 now), most of it the detector's bookkeeping of the copies.
const largeWindow = 64 << 10

// largeSizes are the pad lengths of the records the large-record tests
// write: small ones between records of 1 to 2.5 windows, so that a batch's
// first read holds whole small lines and then the start of a large one, at
// the end of a sealed file too.
var largeSizes = []int{100, 3 * largeWindow / 2, 200, 2 * largeWindow, 50, largeWindow, 5 * largeWindow / 2, 100, 5 * largeWindow / 4, 100}

// checkWindow fails the test if the journal does not read with
// largeWindow: with the 1 MiB default every record here fits in one read,
// and the tests would pass without checking anything about long lines.
func checkWindow(t *testing.T, j *Journal) {
	t.Helper()
	if j.window != largeWindow {
		t.Fatalf("journal window %d, want %d (Options.journalWindow ignored?)", j.window, largeWindow)
	}
}

func largeRec(i, pad int) AuditRecord {
	return AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "big",
		Body: auditBody(map[string]any{"i": i, "pad": strings.Repeat("x", pad)})}
}

// checkLargeChain checks that the chain verifies and holds n large
// records, in order, with their whole bodies, and nothing refused.
func checkLargeChain(t *testing.T, s *DB, n int) {
	t.Helper()
	got, damaged := chainByTool(t, s)
	if len(damaged) > 0 {
		t.Fatalf("lines refused as damaged: %s", damaged[0].Body[:min(len(damaged[0].Body), 300)])
	}
	wantSeq(t, "big", got["big"], n)
	recs, err := s.AuditTail(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if want := largeRec(i, largeSizes[i%len(largeSizes)]).Body; !bytes.Equal(r.Body, want) {
			t.Fatalf("record %d: body of %d bytes, want %d", i, len(r.Body), len(want))
		}
	}
}

// TestJournalLargeRecords: records of 1 to 2.5 windows between small ones,
// in files that rotate (and so are sealed) every 1.5 windows, mapped or written
// with write(2), are ingested whole by one Flush: a batch whose first read
// ends inside a large line is not a sealed file ingested short (which
// stalled the ingester, refusing every call once the backlog passed its
// bound). A record larger than a journal line may be is refused with
// ErrBadInput, is not acknowledged, and does not stop the records after it.
func TestJournalLargeRecords(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalLargeRecords)
}

func testJournalLargeRecords(t *testing.T, be backend) {
	ctx := context.Background()
	for _, noMap := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", noMap), func(t *testing.T) {
			// The ingester runs only when Flush asks: every file but the
			// last is sealed by then, whatever the machine's speed.
			s := openOpts(t, be.target(t), &Options{JournalInterval: time.Hour, journalRotate: 3 * largeWindow / 2, journalWindow: largeWindow, journalNoMap: noMap})
			j := s.Journal()
			checkWindow(t, j)
			for i, pad := range largeSizes {
				if err := j.Append(largeRec(i, pad)); err != nil {
					t.Fatalf("Append(%d: %d bytes): %v", i, pad, err)
				}
			}
			if j.mu.Lock(); j.num < 4 {
				t.Fatalf("%d journal files written, want rotations", j.num)
			}
			j.mu.Unlock()
			if err := j.Flush(ctx); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			checkLargeChain(t, s, len(largeSizes))

			err := j.Append(largeRec(len(largeSizes), maxJournalLine))
			if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "more than") {
				t.Fatalf("Append of a record over %d bytes = %v, want ErrBadInput saying how large", maxJournalLine, err)
			}
			if err := j.Append(largeRec(len(largeSizes), largeSizes[0])); err != nil {
				t.Fatalf("Append after the refused record: %v", err)
			}
			if err := j.Flush(ctx); err != nil {
				t.Fatalf("Flush after the refused record: %v", err)
			}
			if st := j.Stats(); st.Appended != int64(len(largeSizes))+1 || st.Ingested != st.Appended || st.Backlog != 0 || st.LastError != nil {
				t.Fatalf("stats %+v", st)
			}
			checkLargeChain(t, s, len(largeSizes)+1)
		})
	}
}

// TestJournalLargeRecordsSwept: the journal of a gone process holding
// the same records (one sealed file, small lines before large ones) is
// ingested whole when the store is opened, not refused as "stopped before
// its end" (which made Open fail).
func TestJournalLargeRecordsSwept(t *testing.T) {
	t.Parallel()
	eachBackend(t, testJournalLargeRecordsSwept)
}

func testJournalLargeRecordsSwept(t *testing.T, be backend) {
	// zeros: the file as a writer killed while it was mapped leaves it
	// (its reserved room after the lines is zeros: the NUL scan ends it).
	for _, zeros := range []int{0, 3 * largeWindow / 2} {
		t.Run(fmt.Sprintf("zeros=%d", zeros), func(t *testing.T) {
			path := be.target(t)
			dir := journalDirOf(t, path)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			// A writer that is gone: no process holds the file's lock.
			name := "gone.example_999999_n0nce_1" + journalExt
			seed := journalSeed(name)
			var file []byte
			var fields bytes.Buffer
			for i, pad := range largeSizes {
				fields.Reset()
				r := largeRec(i, pad)
				r.At = time.Unix(1_700_000_000, int64(i))
				if err := encodeJournalFields(&fields, r); err != nil {
					t.Fatal(err)
				}
				file = append(file, appendJournalLine(nil, int64(i+1), fields.Bytes(), seed)...)
			}
			file = append(file, make([]byte, zeros)...)
			if err := os.WriteFile(filepath.Join(dir, name), file, 0o600); err != nil {
				t.Fatal(err)
			}
			s := openOpts(t, path, &Options{journalWindow: largeWindow})
			checkWindow(t, s.Journal())
			if st := s.Journal().Stats(); st.Swept != 1 || st.Torn != 0 || st.Damaged != 0 {
				t.Fatalf("stats %+v, want the gone process's journal swept whole", st)
			}
			if files := journalFiles(t, dir); len(files) != 0 {
				t.Fatalf("journal files left after Open: %v", files)
			}
			checkLargeChain(t, s, len(largeSizes))
		})
	}
}
