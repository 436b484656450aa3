package store

// Three defects pass 33 found (docs/security-tests.md, "Thirty-third
// pass"), each red on the code before its fix.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOwnJournalCutShortIsRecorded: this store's own sealed journal file
// cut short before ingestion (its last line removed by anyone who can
// write the journal) should become an AuditJournalDamaged record for the
// missing line, the later files' records ingested. Instead ingestion of the
// file stops for good: ingestBatch reads up to the size the writer
// committed (limit), finds nothing past the real end, and ingestOwn
// returns "a sealed file that is neither finished nor has more lines" on
// every attempt: the later files are never ingested, Flush (so VerifyAudit
// and ExportAudit) fail, and once the backlog passes its bound every
// Append is refused (every audited call). After a restart the file is a
// dead writer's, swept to its (new) end: the lines are lost silently.
func TestOwnJournalCutShortIsRecorded(t *testing.T) {
	ctx := context.Background()
	// One record a file (each append after the first starts a new one).
	s, first := ownJournalFiles(t, 1, 3)
	j := s.Journal()
	if err := os.Truncate(first, 0); err != nil { // its one line removed
		t.Fatal(err)
	}
	for try := range 2 {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := j.Flush(fctx)
		cancel()
		if err != nil {
			t.Fatalf("Flush %d after the first file's line was removed: %v", try+1, err)
		}
	}
	got, damaged := mutation33Chain(t, s)
	reasons := mutation33Damaged(t, damaged)
	if fmt.Sprint(got) != `[{"i":1} {"i":2}]` || fmt.Sprint(reasons) != "[line 1: lines 1..1 are missing at the end of the file]" {
		t.Fatalf("the first file's line removed: ingested %v, damaged %q; want records 1 and 2 and line 1 recorded missing", got, reasons)
	}
}

// TestForeignJournalFileRefused: a journal file that another user put in
// the journal directory while it was writable by others was ingested into
// the chain as this store's records once the operator followed Open's
// advice (chmod go-w): checkJournalDir checks the directory, and no one
// checked the files' owner or mode. Anyone who could write the directory
// once forged history, with valid checksums (the seed is the file's
// name). Now Open refuses the file (ErrJournalFileUnsafe, naming it and
// its owner) until it is removed; nothing of it enters the chain. A file
// of this user's that its group or others may write is refused the same.
func TestForeignJournalFileRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file of another uid")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		uid  int
		want string
	}{
		{"another user's", 0o600, 4242, "is owned by uid 4242"},
		{"group-writable", 0o620, 0, "has mode 0620"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s := open(t, path, nil)
			if err := s.Journal().Append(journalRec("mine", 0)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			dir := journalDirOf(t, path)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			name := "elsewhere_4242_forged_1.jl"
			var data []byte
			for i := range 3 {
				data = append(data, mutation33Line(t, name, int64(i+1), journalRec("forged", i), nil)...)
			}
			f := filepath.Join(dir, name)
			if err := os.WriteFile(f, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(f, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(f, tc.uid, tc.uid); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(ctx, path, &Options{}); !errors.Is(err, ErrJournalDirUnsafe) {
				t.Fatalf("Open with the journal directory at 0777: %v; want ErrJournalDirUnsafe", err)
			}
			if err := os.Chmod(dir, 0o700); err != nil { // the fix Open's error names
				t.Fatal(err)
			}
			s2, err := Open(ctx, path, &Options{})
			if err == nil {
				recs, _ := s2.AuditTail(ctx, 0, 0)
				var tools []string
				for _, r := range recs {
					tools = append(tools, r.Tool)
				}
				s2.Close()
				t.Fatalf("Open with %s journal file in the directory: <nil>, tools in the chain %v; want ErrJournalFileUnsafe, nothing of it ingested", tc.name, tools)
			}
			if !errors.Is(err, ErrJournalFileUnsafe) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open with %s journal file in the directory: %v; want ErrJournalFileUnsafe naming %s and saying it %s", tc.name, err, name, tc.want)
			}
			if err := os.Remove(f); err != nil { // the fix this error names
				t.Fatal(err)
			}
			s3, err := Open(ctx, path, &Options{})
			if err != nil {
				t.Fatalf("Open once the file was removed: %v", err)
			}
			defer s3.Close()
			mutation33Chain(t, s3) // the chain verifies
			recs, _ := s3.AuditTail(ctx, 0, 0)
			for _, r := range recs {
				if r.Tool == "forged" {
					t.Fatalf("a record of the refused file is in the chain: %+v", r)
				}
			}
		})
	}
}

// TestZerosInsideADeadJournal: a dead writer's journal file with a span
// of zeros before intact lines (a page of the mapped file lost at power
// loss, or zeroed by anyone who can write the journal). readJournal took
// the first NUL for the end of what was written, so ingestion stopped
// there, called the file finished and removed it: the lines after the
// zeros were dropped with no AuditJournalDamaged record, not even a torn
// count when the zeros began at a line's start. Now ingestion goes on at
// the first line after the zeros; the lines they held are recorded as
// missing, a line they cut into as damaged (once, whatever part of it
// they took). Zeros with nothing after them are still the file's
// unwritten room: TestMutation33ZeroRoomIsNotATornLine.
func TestZerosInsideADeadJournal(t *testing.T) {
	name := mutation33Gone
	line := func(n int) []byte { return mutation33Line(t, name, int64(n), journalRec("t", n-1), nil) }
	zeros := func(n int) []byte { return make([]byte, n) }
	l2 := line(2)
	long := journalRec("t", 1) // a line past the 64 KiB a look for its tail reads at once
	long.Body = auditBody(map[string]any{"i": 1, "pad": strings.Repeat("x", 200<<10)})
	l2long := mutation33Line(t, name, 2, long, nil)
	for _, tc := range []struct {
		name    string
		content [][]byte
		want    string // the records ingested
		reasons []string
	}{
		{"line 2 zeroed", [][]byte{line(1), zeros(len(l2)), line(3)},
			`[{"i":0} {"i":2}]`, []string{"line 2: lines 2..2 are missing (the next present is 3)"}},
		{"lines 2 and 3 zeroed", [][]byte{line(1), zeros(len(l2) + len(line(3))), line(4)},
			`[{"i":0} {"i":3}]`, []string{"line 2: lines 2..3 are missing (the next present is 4)"}},
		{"line 2's second half zeroed", [][]byte{line(1), l2[:40], zeros(len(l2) - 40), line(3)},
			`[{"i":0} {"i":2}]`, []string{fmt.Sprintf("line 2: a line cut by %d zero bytes at offset %d (40 bytes of it before them, 0 after)", len(l2)-40, len(line(1))+40)}},
		{"line 2's middle zeroed", [][]byte{line(1), l2[:40], zeros(20), l2[60:], line(3)},
			`[{"i":0} {"i":2}]`, []string{fmt.Sprintf("line 2: a line cut by 20 zero bytes at offset %d (40 bytes of it before them, %d after)", len(line(1))+40, len(l2)-60)}},
		{"line 2's first half zeroed", [][]byte{line(1), zeros(40), l2[40:], line(3)},
			`[{"i":0} {"i":2}]`, []string{fmt.Sprintf("line 2: a line cut by 40 zero bytes at offset %d (0 bytes of it before them, %d after)", len(line(1)), len(l2)-40)}},
		{"a long line 2's first bytes zeroed", [][]byte{line(1), zeros(40), l2long[40:], line(3)},
			`[{"i":0} {"i":2}]`, []string{fmt.Sprintf("line 2: a line cut by 40 zero bytes at offset %d (0 bytes of it before them, %d after)", len(line(1)), len(l2long)-40)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := mutation33Swept(t, tc.content...)
			got, damaged := mutation33Chain(t, s)
			reasons := mutation33Damaged(t, damaged)
			if fmt.Sprint(got) != tc.want || fmt.Sprintf("%q", reasons) != fmt.Sprintf("%q", tc.reasons) {
				t.Fatalf("ingested %v, damaged %q, torn %d, files left %v; want %s, damaged %q",
					got, reasons, s.Journal().Stats().Torn, journalFiles(t, journalDirOf(t, path)), tc.want, tc.reasons)
			}
			if left := journalFiles(t, journalDirOf(t, path)); len(left) != 0 {
				t.Fatalf("files left after the sweep: %v; want the dead journal removed", left)
			}
		})
	}
}
