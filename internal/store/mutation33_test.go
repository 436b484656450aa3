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
	"testing"
	"time"
)

// mutation33Line is one journal line of a file named name: line number n,
// the record's encoded fields with body replacing the encoded body when
// not nil (bytes Append would never write, checksummed as if it had).
func mutation33Line(t *testing.T, name string, n int64, r AuditRecord, body []byte) []byte {
	t.Helper()
	var fields bytes.Buffer
	if err := encodeJournalFields(&fields, r); err != nil {
		t.Fatal(err)
	}
	f := fields.Bytes()
	if body != nil {
		i := bytes.LastIndex(f, []byte(`,"body":`))
		f = append(f[:i+len(`,"body":`):i+len(`,"body":`)], body...)
	}
	return appendJournalLine(nil, n, f, journalSeed(name))
}

// mutation33Gone is the name of the journal file mutation33Swept writes:
// a writer on another host, gone.
const mutation33Gone = "elsewhere_4242_gone_1.jl"

// mutation33Swept makes a store, writes lines as the journal file of a
// writer that is gone (no lock held) into its journal directory, and opens
// the store again, which sweeps that file in. It returns the store and its
// path.
func mutation33Swept(t *testing.T, lines ...[]byte) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	open(t, path, nil).Close()
	dir := journalDirOf(t, path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, mutation33Gone), bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	return open(t, path, nil), path
}

// mutation33Damaged is the reasons of the AuditJournalDamaged records of
// the chain, as "line N: reason".
func mutation33Damaged(t *testing.T, damaged []AuditRecord) []string {
	t.Helper()
	var out []string
	for _, r := range damaged {
		var b struct {
			Line   int
			Reason string
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("line %d: %s", b.Line, b.Reason))
	}
	return out
}

// mutation33Chain verifies s's chain and returns the bodies of its
// call-admitted records, in order, and its AuditJournalDamaged records.
func mutation33Chain(t *testing.T, s *DB) (bodies []string, damaged []AuditRecord) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.VerifyAudit(ctx); err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		switch r.Kind {
		case AuditJournalDamaged:
			damaged = append(damaged, r)
		case AuditCallAdmitted:
			bodies = append(bodies, string(r.Body))
		}
	}
	return bodies, damaged
}

// TestMutation33LineBodyNotJSON: a journal line whose checksum holds but
// whose body is not one JSON value (trailing bytes after it: what a body
// that broke out of its field would look like) is refused as damaged, not
// taken into the chain; the lines around it are.
func TestMutation33LineBodyNotJSON(t *testing.T) {
	t.Parallel()
	name := mutation33Gone
	s, _ := mutation33Swept(t,
		mutation33Line(t, name, 1, journalRec("t", 0), nil),
		mutation33Line(t, name, 2, journalRec("t", 1), []byte(`{"i":1},"tool":"x"`)),
		mutation33Line(t, name, 3, journalRec("t", 2), nil))
	got, damaged := mutation33Chain(t, s)
	reasons := mutation33Damaged(t, damaged)
	if fmt.Sprint(got) != "[{\"i\":0} {\"i\":2}]" || len(reasons) != 1 || !strings.HasPrefix(reasons[0], "line 2: ") || !strings.Contains(reasons[0], "not JSON") {
		t.Fatalf("a line whose body is not JSON: ingested %v, damaged %q; want the bodies of lines 1 and 3 and line 2 refused as not JSON", got, reasons)
	}
}

// TestMutation33SequenceGoesBack: a record whose sequence number is below
// its predecessor's is refused as reordered even when it links to its
// predecessor and its own hash verifies (someone who can write an export
// can compute both).
func TestMutation33SequenceGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	appendN(t, s, 3, "t")
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	again := recs[1]
	again.Seq, again.Prev, again.Tool = 2, recs[2].Hash, "forged"
	again.Hash = auditHash(again)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, r := range append(recs, again) {
		enc.Encode(r)
	}
	enc.Encode(auditExportHead{Head: again.Hash, Records: 4})
	_, _, err = VerifyExport(bytes.NewReader(buf.Bytes()), "")
	var p *AuditProblem
	if !errors.As(err, &p) || p.Seq != 2 || p.Reason != "reordered" || !strings.Contains(p.Detail, "sequence number 2 follows 3") {
		t.Fatalf("an export whose fourth record is numbered 2, linked and hashed: %v; want record 2 reordered", err)
	}
	// A reader of a window (AuditLink) says the same.
	if err := AuditLink(3, recs[2].Hash, again); !errors.As(err, &p) || p.Reason != "reordered" {
		t.Fatalf("AuditLink(3, record 3's hash, a record numbered 2 linking to it) = %v; want reordered", err)
	}
}

// TestMutation33ExportHeadLine: the head line must say both the last
// record's hash and the number of records: an export cut by its last
// record whose head line's count was lowered to match, or one whose count
// alone was changed, is refused.
func TestMutation33ExportHeadLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	appendN(t, s, 3, "t")
	var buf bytes.Buffer
	_, head, err := s.ExportAudit(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(buf.String(), "\n"), "\n")
	headLine := lines[3]
	if !strings.Contains(headLine, `"records":3`) {
		t.Fatalf("the head line: %s", headLine)
	}
	for _, c := range []struct{ what, export string }{
		{"the last record dropped, the count lowered", lines[0] + lines[1] + strings.Replace(headLine, `"records":3`, `"records":2`, 1)},
		{"the count raised", lines[0] + lines[1] + lines[2] + strings.Replace(headLine, `"records":3`, `"records":4`, 1)},
	} {
		if _, _, err := VerifyExport(strings.NewReader(c.export), ""); !errors.Is(err, ErrAuditBroken) || !strings.Contains(err.Error(), "the head line says") {
			t.Errorf("%s: VerifyExport = %v; want the head line refused", c.what, err)
		}
	}
	if _, _, err := VerifyExport(strings.NewReader(buf.String()), head); err != nil {
		t.Fatalf("the export as written: %v", err)
	}
}

// TestMutation33ScanRefuses: the scanner that checks every journaled body
// refuses what encoding/json refuses, among them an object key that is
// not a string and an escape with a digit that is not hex; Append refuses
// such a body with ErrBadInput and writes nothing.
func TestMutation33ScanRefuses(t *testing.T) {
	t.Parallel()
	bad := []string{`{a":1}`, `{1":2}`, `"\u00eg"`, `"\u0g00"`, `["\uG000"]`}
	for _, b := range bad {
		if valid, _ := scanJSON([]byte(b)); valid || json.Valid([]byte(b)) {
			t.Errorf("scanJSON(%q) valid = %v (json.Valid %v); want false", b, valid, json.Valid([]byte(b)))
		}
	}
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	for _, b := range bad {
		r := journalRec("t", 0)
		r.Body = json.RawMessage(b)
		if err := s.Journal().Append(r); !errors.Is(err, ErrBadInput) {
			t.Errorf("Append with body %q = %v; want ErrBadInput", b, err)
		}
	}
	if st := s.Journal().Stats(); st.Appended != 0 {
		t.Fatalf("%d records appended; want none", st.Appended)
	}
}

// ownJournalFiles opens a store whose journal starts a new file once one
// holds rotate bytes, written with write(2) and ingested only when asked
// (Flush), appends records 0..n-1 of tool "t", and returns the store and
// the path of its journal's first file.
func ownJournalFiles(t *testing.T, rotate int64, n int) (*DB, string) {
	t.Helper()
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, journalRotate: rotate, journalNoMap: true})
	j := s.Journal()
	for i := range n {
		if err := j.Append(journalRec("t", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range journalFiles(t, j.Dir()) {
		if strings.HasSuffix(f, "_1"+journalExt) {
			return s, filepath.Join(j.Dir(), f)
		}
	}
	t.Fatalf("no first journal file in %s", j.Dir())
	return nil, ""
}

// TestMutation33OwnFileShortAtItsEnd: this store's own sealed journal
// file holding fewer lines than its writer wrote (two lines joined into
// one, before ingestion) gets an AuditJournalDamaged record for the lines
// missing at its end, besides the one for the line that does not check.
func TestMutation33OwnFileShortAtItsEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Three records in the first file (a record's line is 100-150
	// bytes; the fourth starts the next file).
	s, first := ownJournalFiles(t, 300, 4)
	j := s.Journal()
	data, err := os.ReadFile(first)
	if err != nil || bytes.Count(data, []byte("\n")) != 3 {
		t.Fatalf("the first journal file %q: %v; want three lines:\n%s", first, err, data)
	}
	// Lines 2 and 3 joined: the file's size is what its writer wrote.
	i := bytes.IndexByte(data, '\n')
	i += 1 + bytes.IndexByte(data[i+1:], '\n')
	data[i] = ' '
	if err := os.WriteFile(first, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Bounded: a journal that never accounts for the missing line waits
	// for it forever.
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := j.Flush(fctx); err != nil {
		t.Fatalf("Flush after lines 2 and 3 of the first file were joined: %v", err)
	}
	got, damaged := mutation33Chain(t, s)
	reasons := mutation33Damaged(t, damaged)
	want := "[line 2: its checksum does not match its content (edited, damaged, or copied from another journal) line 3: lines 3..3 are missing at the end of the file]"
	if fmt.Sprint(got) != `[{"i":0} {"i":3}]` || fmt.Sprint(reasons) != want {
		t.Fatalf("lines 2 and 3 of the first file joined: ingested %v, damaged %q; want records 0 and 3 and damaged %s", got, reasons, want)
	}
}

// TestMutation33NameWithControlByte: a journal line whose checksum holds
// but whose actor holds a raw control byte (not JSON: Append escapes it)
// is refused as damaged, not read as a name.
func TestMutation33NameWithControlByte(t *testing.T) {
	t.Parallel()
	name := mutation33Gone
	raw := journalRec("t", 1)
	raw.Actor = "agent:a\x01"
	line := mutation33Line(t, name, 2, raw, nil)
	line = bytes.Replace(line, []byte(`agent:a\u0001`), []byte("agent:a\x01"), 1)
	// The checksum made again over the raw byte (whoever writes the file
	// can).
	i := bytes.Index(line, []byte(`,"crc":"`))
	line = appendJournalLine(nil, 2, bytes.TrimPrefix(line[:i], []byte(`{"n":2,`)), journalSeed(name))
	if !bytes.Contains(line, []byte("agent:a\x01\"")) {
		t.Fatalf("the line: %q", line)
	}
	s, _ := mutation33Swept(t,
		mutation33Line(t, name, 1, journalRec("t", 0), nil),
		line,
		mutation33Line(t, name, 3, journalRec("t", 2), nil))
	got, damaged := mutation33Chain(t, s)
	reasons := mutation33Damaged(t, damaged)
	if fmt.Sprint(got) != `[{"i":0} {"i":2}]` || len(reasons) != 1 || !strings.HasPrefix(reasons[0], "line 2: it does not decode") {
		t.Fatalf("a line with a raw control byte in its actor: ingested %v, damaged %q; want line 2 refused as not decoding", got, reasons)
	}
}

// TestMutation33NewFileInUnsafeDir: a journal file is started only in a
// directory no one else can write: one made writable by others after the
// store opened refuses the append that would start the next file.
func TestMutation33NewFileInUnsafeDir(t *testing.T) {
	t.Parallel()
	s := openOpts(t, filepath.Join(t.TempDir(), "state.db"), &Options{JournalInterval: time.Hour, journalRotate: 1, journalNoMap: true})
	j := s.Journal()
	if err := j.Append(journalRec("t", 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(j.Dir(), 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(j.Dir(), 0o700)
	if err := j.Append(journalRec("t", 1)); !errors.Is(err, ErrJournalDirUnsafe) {
		t.Fatalf("an append that starts a file in a directory of mode 0777 = %v; want ErrJournalDirUnsafe", err)
	}
}

// TestMutation33ZeroRoomIsNotATornLine: a dead writer's mapped journal
// file that was never cut to its lines (the writer died before sealing
// it) ends in zeros, its unwritten room: that is the end of what was
// written, not a torn line, and every line before it is ingested.
func TestMutation33ZeroRoomIsNotATornLine(t *testing.T) {
	t.Parallel()
	name := mutation33Gone
	s, _ := mutation33Swept(t,
		mutation33Line(t, name, 1, journalRec("t", 0), nil),
		mutation33Line(t, name, 2, journalRec("t", 1), nil),
		make([]byte, 4096))
	got, damaged := mutation33Chain(t, s)
	if st := s.Journal().Stats(); fmt.Sprint(got) != `[{"i":0} {"i":1}]` || len(damaged) != 0 || st.Torn != 0 || st.Swept != 1 {
		t.Fatalf("two lines and 4 KiB of zeros: ingested %v, damaged %d, stats %+v; want both lines, nothing damaged or torn, one file swept", got, len(damaged), st)
	}
}
