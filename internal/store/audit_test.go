package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/pgtest"
)

func appendN(t *testing.T, s *DB, n int, tool string) {
	t.Helper()
	for i := range n {
		if _, err := s.AppendAudit(context.Background(), AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: tool,
			Body: auditBody(map[string]int{"i": i})}); err != nil {
			t.Fatal(err)
		}
	}
}

func verifyOK(t *testing.T, s *DB, want int64) string {
	t.Helper()
	n, head, err := s.VerifyAudit(context.Background())
	if err != nil || n != want {
		t.Fatalf("VerifyAudit = %d, %v; want %d records intact", n, err, want)
	}
	return head
}

// TestAuditCardAndTokenChanges: every card and token change appends its
// record in its own transaction; a refused operation appends none.
func TestAuditCardAndTokenChanges(t *testing.T) {
	t.Parallel()
	eachBackend(t, testAuditCardAndTokenChanges)
}

func testAuditCardAndTokenChanges(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	mustAgents(t, s, "a", "b")
	_, tok, err := s.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.Grant(ctx, "a", spec(t, "tool:invoke t", "card:derive *", "card:transfer *", "card:install *"))
	if err != nil {
		t.Fatal(err)
	}
	kid, err := s.Derive(ctx, AgentActor("a"), root.ID, "a", spec(t, "tool:invoke t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transfer(ctx, AgentActor("a"), kid.ID, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, Operator(), root.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SyncSystemCards(ctx, "b", []cards.Spec{spec(t, "tool:invoke sys")}); err != nil {
		t.Fatal(err)
	}
	before := dump(t, s)
	// Refused: nothing written, no record either.
	if _, err := s.Derive(ctx, AgentActor("b"), root.ID, "b", spec(t, "tool:invoke t")); err == nil {
		t.Fatal("derive from a revoked card by a non-holder succeeded")
	}
	if _, err := s.Grant(ctx, "ghost", spec(t, "tool:invoke t")); err == nil {
		t.Fatal("grant to an unknown agent succeeded")
	}
	if after := dump(t, s); after != before {
		t.Fatalf("a refused operation wrote:\n%s", after)
	}
	recs, err := s.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %v", r.Kind, r.Actor, r.Agent, body["op"]))
	}
	want := []string{
		"token-change operator a mint", "card-change operator a grant", "card-change agent:a a derive",
		"card-change agent:a b transfer", "card-change operator a revoke", "token-change operator a revoke",
		"card-change operator b install-system",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	verifyOK(t, s, int64(len(want)))
	// Tail pages.
	page, err := s.AuditTail(ctx, 2, 3)
	if err != nil || len(page) != 3 || page[0].Seq != 3 || page[2].Seq != 5 {
		t.Fatalf("AuditTail(2, 3) = %v, %v", page, err)
	}
}

// TestAuditExport: an export verifies on its own; a cut, an edit, or a
// rewritten history (every hash recomputed, which no local check can
// see) fail, the last against a head noted earlier.
func TestAuditExport(t *testing.T) {
	t.Parallel()
	eachBackend(t, testAuditExport)
}

func testAuditExport(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	appendN(t, s, 4, "t")
	// A body with spaces and characters JSON encoders like to escape
	// exports as it was hashed.
	if _, err := s.AppendAudit(ctx, AuditRecord{Kind: AuditFetch, Agent: "a", Tool: "t",
		Body: json.RawMessage(`{ "url": "https://x/?a=1&b=<2>", "n": [1, 2] }`)}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, head, err := s.ExportAudit(ctx, &buf)
	if err != nil || n != 5 {
		t.Fatal(n, err)
	}
	noted := head
	// Read a page at a time (two records, or one byte of bodies: one
	// record), the export is the same bytes.
	for _, pg := range []struct {
		limit    int
		maxBytes int64
	}{{2, 1 << 20}, {1000, 1}} {
		var paged bytes.Buffer
		if n2, h2, err := s.exportAudit(ctx, &paged, pg.limit, pg.maxBytes); err != nil || n2 != n || h2 != head || !bytes.Equal(paged.Bytes(), buf.Bytes()) {
			t.Fatalf("the export in pages of %d records, %d bytes: %d records, head %s, %v:\n%s\nwant %d, %s:\n%s", pg.limit, pg.maxBytes, n2, h2, err, paged.Bytes(), n, head, buf.Bytes())
		}
		if n2, h2, err := s.verifyAudit(ctx, pg.limit, pg.maxBytes); err != nil || n2 != n || h2 != head {
			t.Fatalf("VerifyAudit in pages of %d records, %d bytes: %d records, head %s, %v; want %d, %s", pg.limit, pg.maxBytes, n2, h2, err, n, head)
		}
	}
	if n2, h2, err := VerifyExport(bytes.NewReader(buf.Bytes()), noted); err != nil || n2 != 5 || h2 != head {
		t.Fatalf("VerifyExport = %d, %s, %v", n2, h2, err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(buf.String(), "\n"), "\n")
	// Cut: the last record dropped, head line kept.
	cut := strings.Join(append(append([]string{}, lines[:4]...), lines[5]), "")
	if _, _, err := VerifyExport(strings.NewReader(cut), ""); !errors.Is(err, ErrAuditBroken) {
		t.Fatalf("a cut export verified: %v", err)
	}
	// No head line.
	if _, _, err := VerifyExport(strings.NewReader(strings.Join(lines[:5], "")), ""); !errors.Is(err, ErrAuditBroken) {
		t.Fatalf("an export without its head line verified: %v", err)
	}
	// Edited.
	edited := strings.Replace(buf.String(), `"tool":"t"`, `"tool":"x"`, 1)
	var p *AuditProblem
	if _, _, err := VerifyExport(strings.NewReader(edited), ""); !errors.As(err, &p) || p.Reason != "edited" || p.Seq != 1 {
		t.Fatalf("an edited export: %v", err)
	}
	// Every line is checked before the chain's problem is said: a line
	// that is not a record, after an edited one, is the error.
	bad := strings.Replace(edited, lines[3], "not json\n", 1)
	if _, _, err := VerifyExport(strings.NewReader(bad), ""); !errors.Is(err, ErrAuditBroken) || !strings.Contains(err.Error(), "line 4 is not JSON") {
		t.Fatalf("an edited export with a line that is not JSON after the edit: %v; want the line named", err)
	}
	// Rewritten: record 2 changed and every hash from it on recomputed.
	recs, _ := s.AuditTail(ctx, 0, 0)
	recs[1].Tool = "forged"
	var rw bytes.Buffer
	prev := recs[0].Hash
	for i := 1; i < len(recs); i++ {
		recs[i].Prev = prev
		recs[i].Hash = auditHash(recs[i])
		prev = recs[i].Hash
	}
	enc := json.NewEncoder(&rw)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		enc.Encode(r)
	}
	enc.Encode(auditExportHead{Head: prev, Records: int64(len(recs))})
	if _, _, err := VerifyExport(bytes.NewReader(rw.Bytes()), ""); err != nil {
		t.Fatalf("the rewritten chain should verify on its own (that is why a noted head matters): %v", err)
	}
	if _, _, err := VerifyExport(bytes.NewReader(rw.Bytes()), noted); !errors.Is(err, ErrAuditBroken) {
		t.Fatalf("a rewritten history verified against the noted head: %v", err)
	}
}

// tamperCases are edits of the audit table, as someone with write access
// to the store would make them, and what VerifyAudit must say.
var tamperCases = []struct {
	name, sql, reason string
	seq               int64
	// build, if set, makes the edit from the intact records (for an
	// edit that recomputes a hash); detail is what the problem must say.
	build  func(recs []AuditRecord) string
	detail string
}{
	{"edit a field", `UPDATE audit SET tool = 'evil' WHERE seq = 3`, "edited", 3, nil, ""},
	{"edit the body", `UPDATE audit SET body = '{"i":99}' WHERE seq = 5`, "edited", 5, nil, ""},
	{"delete a record", `DELETE FROM audit WHERE seq = 3`, "deleted", 3, nil, ""},
	{"delete and renumber", `DELETE FROM audit WHERE seq = 3; UPDATE audit SET seq = seq - 1 WHERE seq > 3`, "edited", 3, nil, ""},
	{"insert a forged record", `UPDATE audit SET seq = seq + 100 WHERE seq >= 4; UPDATE audit SET seq = seq - 99 WHERE seq >= 104;
			INSERT INTO audit (seq, at, kind, actor, agent, tool, body, prev, hash)
			SELECT 4, at, 'call-admitted', 'operator', 'a', 'forged', body, hash, hash FROM audit WHERE seq = 3`, "inserted", 4, nil, ""},
	// A forged record whose link is wrong too: only its successor, which
	// links past it, tells an insertion from an edit.
	{"insert a record that links nowhere", `UPDATE audit SET seq = seq + 100 WHERE seq >= 4; UPDATE audit SET seq = seq - 99 WHERE seq >= 104;
			INSERT INTO audit (seq, at, kind, actor, agent, tool, body, prev, hash)
			SELECT 4, at, 'call-admitted', 'operator', 'a', 'forged', body, '` + strings.Repeat("f", 64) + `', hash FROM audit WHERE seq = 3`, "inserted", 4, nil, "record 5 links past it to record 3"},
	{"swap two records", `UPDATE audit SET seq = -1 WHERE seq = 3; UPDATE audit SET seq = 3 WHERE seq = 4; UPDATE audit SET seq = 4 WHERE seq = -1`, "reordered", 3, nil, ""},
	// Record 3 edited and its own hash recomputed, so it verifies on its
	// own: only the link from record 4 (its prev, the old hash) shows the
	// edit. A verifier that checked each record's hash but not the prev
	// links would pass this chain.
	{"edit a record and recompute its hash", "", "edited", 4, func(recs []AuditRecord) string {
		r := recs[2]
		r.Tool = "evil"
		return fmt.Sprintf(`UPDATE audit SET tool = 'evil', hash = '%s' WHERE seq = 3`, auditHash(r))
	}, "its prev hash is not the hash of the record before it"},
}

// tamper runs every tamper case on a fresh store of backend be, edited
// by edit (a command-line client on the store) while it is closed.
func tamper(t *testing.T, be backend, edit func(t *testing.T, target, sql string)) {
	for _, tc := range tamperCases {
		t.Run(tc.name, func(t *testing.T) {
			path := be.target(t)
			s := open(t, path, nil)
			appendN(t, s, 6, "t")
			verifyOK(t, s, 6)
			recs, err := s.AuditTail(context.Background(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			sql := tc.sql
			if tc.build != nil {
				sql = tc.build(recs)
			}
			// Where a reader that checked the chain before stopped: every
			// edit is after record 2.
			mark := AuditMark{Records: 2, Seq: 2, Head: recs[1].Hash}
			s.Close()
			edit(t, path, sql)
			s = open(t, path, nil)
			_, _, err = s.VerifyAudit(context.Background())
			var p *AuditProblem
			if !errors.As(err, &p) || !errors.Is(err, ErrAuditBroken) {
				t.Fatalf("VerifyAudit after %q: %v; want a problem", sql, err)
			}
			if p.Reason != tc.reason || p.Seq != tc.seq {
				t.Fatalf("VerifyAudit: %v; want record %d %s", err, tc.seq, tc.reason)
			}
			if !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("VerifyAudit: %v; want it to say %q", err, tc.detail)
			}
			// The same verdict read a page at a time, the edit and the
			// record that shows it on either side of a page's end: pages
			// of 1, 2 and 3 records, and of one byte of bodies (one
			// record each).
			for _, pg := range []struct {
				limit    int
				maxBytes int64
			}{{1, 1 << 20}, {2, 1 << 20}, {3, 1 << 20}, {1000, 1}} {
				_, _, perr := s.verifyAudit(context.Background(), pg.limit, pg.maxBytes)
				var pp *AuditProblem
				if !errors.As(perr, &pp) || *pp != *p {
					t.Fatalf("VerifyAudit in pages of %d records, %d bytes, after %q: %v; want %v", pg.limit, pg.maxBytes, sql, perr, err)
				}
				// And from the mark taken before the edit, reading only
				// what follows it.
				_, ferr := s.verifyAuditFrom(context.Background(), mark, false, pg.limit, pg.maxBytes)
				var fp *AuditProblem
				if !errors.As(ferr, &fp) || *fp != *p {
					t.Fatalf("VerifyAuditFrom record 2 in pages of %d records, %d bytes, after %q: %v; want %v", pg.limit, pg.maxBytes, sql, ferr, err)
				}
			}
			// An export of the edited trail, checked without the store
			// (VerifyExport, reading one record at a time), says the same.
			var exp bytes.Buffer
			if _, _, err := s.ExportAudit(context.Background(), &exp); err != nil {
				t.Fatal(err)
			}
			_, _, eerr := VerifyExport(bytes.NewReader(exp.Bytes()), "")
			var ep *AuditProblem
			if !errors.As(eerr, &ep) || *ep != *p {
				t.Fatalf("VerifyExport of the trail after %q: %v; want %v", sql, eerr, err)
			}
			// A reader of the trail a page at a time, checking each record
			// against the one before it (a what-if's window: AuditPage and
			// AuditLink), stops at the same record. Without the whole chain
			// before it, it may call an insertion or a swap an edit.
			if got, err := walkLinks(s); got != tc.seq || !errors.Is(err, ErrAuditBroken) {
				t.Fatalf("the page-by-page walk after %q: stopped at record %d, %v; want record %d", sql, got, err, tc.seq)
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
}

// walkLinks reads s's trail two records a page and checks each against
// the one before it (AuditLink), as a what-if reads its window; it
// returns the record it stopped at (0: none) and the problem.
func walkLinks(s *DB) (int64, error) {
	var seq int64
	var hash string
	for {
		recs, err := s.AuditPage(context.Background(), seq, 2, 1<<20)
		if err != nil || len(recs) == 0 {
			return 0, err
		}
		for _, r := range recs {
			if err := AuditLink(seq, hash, r); err != nil {
				var p *AuditProblem
				if errors.As(err, &p) {
					return p.Seq, err
				}
				return 0, err
			}
			seq, hash = r.Seq, r.Hash
		}
	}
}

// TestAuditPage: a page stops at its count, or once its bodies reach the
// byte bound (the record that reaches it included, so a record larger than
// the bound is read alone and a reader moves on); an intact trail walks
// through page by page with every link checked.
func TestAuditPage(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := open(t, be.target(t), nil)
		sizes := []int{100, 5000, 100, 100, 100}
		for _, n := range sizes {
			body, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", n)})
			if _, err := s.AppendAudit(ctx, AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "t", Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			after    int64
			limit    int
			maxBytes int64
			want     []int64
		}{
			{0, 10, 1000, []int64{1, 2}},
			{0, 10, 1, []int64{1}},
			{1, 10, 1, []int64{2}},
			{2, 10, 1 << 20, []int64{3, 4, 5}},
			{0, 3, 1 << 20, []int64{1, 2, 3}},
			{5, 10, 1 << 20, nil},
		} {
			recs, err := s.AuditPage(ctx, tc.after, tc.limit, tc.maxBytes)
			var got []int64
			for _, r := range recs {
				got = append(got, r.Seq)
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("AuditPage(%d, %d, %d) = %v, %v; want %v", tc.after, tc.limit, tc.maxBytes, got, err, tc.want)
			}
		}
		if _, err := s.AuditPage(ctx, 0, 0, 1); !errors.Is(err, ErrBadInput) {
			t.Errorf("AuditPage with limit 0: %v; want ErrBadInput", err)
		}
		if seq, err := walkLinks(s); seq != 0 || err != nil {
			t.Errorf("walking the intact trail: stopped at record %d, %v", seq, err)
		}
	})
}

// TestAuditTamperWithSQLiteCLI edits the store file with the sqlite3
// command-line shell, as someone with the file would, and checks that
// VerifyAudit names the first bad record and what was done to it.
func TestAuditTamperWithSQLiteCLI(t *testing.T) {
	t.Parallel()
	cli, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatal("the sqlite3 command-line shell is needed (Debian package sqlite3; make test installs it, see scripts/deps)")
	}
	tamper(t, backends[0], func(t *testing.T, path, sql string) {
		out, err := exec.Command(cli, path, sql).CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3: %v: %s", err, out)
		}
	})
}

// TestAuditTamperWithPsql makes the same edits to a PostgreSQL store
// through psql, as a role that may write the tables would.
func TestAuditTamperWithPsql(t *testing.T) {
	t.Parallel()
	tamper(t, backends[1], func(t *testing.T, url, sql string) {
		pgtest.Exec(t, url, sql)
	})
}

// TestAuditMultiProcess: three child processes and two goroutines append
// at once; the result is one chain holding every record, each writer's
// in its order.
func TestAuditMultiProcess(t *testing.T) {
	t.Parallel()
	eachBackend(t, testAuditMultiProcess)
}

func testAuditMultiProcess(t *testing.T, be backend) {
	const per = 60
	path := be.target(t)
	s := open(t, path, nil)
	var cmds []*exec.Cmd
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MAIDEN_STORE_TEST_CHILD=audit", "MAIDEN_STORE_TEST_PATH="+path,
			"MAIDEN_STORE_TEST_WRITER=kid"+strconv.Itoa(i), "MAIDEN_STORE_TEST_COUNT="+strconv.Itoa(per))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() { appendN(t, s, per, "go"+strconv.Itoa(g)) })
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	recs, _ := s.AuditTail(context.Background(), 0, 0)
	seen := map[string][]int{}
	for _, r := range recs {
		var b struct{ I int }
		json.Unmarshal(r.Body, &b)
		seen[r.Tool] = append(seen[r.Tool], b.I)
	}
	if len(seen) != 5 {
		t.Fatalf("writers %v", seen)
	}
	for w, is := range seen {
		if len(is) != per {
			t.Errorf("writer %s: %d records: %v", w, len(is), is)
		}
	}
	verifyOK(t, s, 5*per)
	for w, is := range seen {
		for i, v := range is {
			if v != i {
				t.Fatalf("writer %s: records out of order or missing: %v", w, is)
			}
		}
	}
}

// TestAuditKill9: a child appending in a loop is killed once it has
// committed some records (it says so, still appending); the chain still
// verifies (no half-written record) and holds every record it reported.
func TestAuditKill9(t *testing.T) {
	t.Parallel()
	eachBackend(t, testAuditKill9)
}

func testAuditKill9(t *testing.T, be backend) {
	const before = 20 // records the child reports committed before the kill
	path := be.target(t)
	s := open(t, path, nil)
	s.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAIDEN_STORE_TEST_CHILD=audit", "MAIDEN_STORE_TEST_PATH="+path,
		"MAIDEN_STORE_TEST_WRITER=kid", "MAIDEN_STORE_TEST_COUNT=100000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the child's own word, not a fixed time: on a loaded machine
	// it may not have written anything 300 ms after it started.
	sc := bufio.NewScanner(stdout)
	committed := 0
	for committed < before && sc.Scan() {
		committed++
	}
	cmd.Process.Kill()
	werr := cmd.Wait()
	if committed < before {
		t.Fatalf("the child stopped after reporting %d records (%v): %v\n%s", committed, sc.Err(), werr, stderr.Bytes())
	}
	s = open(t, path, nil)
	n, _, err := s.VerifyAudit(context.Background())
	if err != nil || n < before {
		t.Fatalf("after kill -9: %d records, %v; the child had reported %d committed", n, err, before)
	}
	t.Logf("after kill -9: %d records verify", n)
}

// TestAuditRejectsBadInput: a record without a kind or with a body that
// is not JSON is refused, and nothing is appended.
func TestAuditRejectsBadInput(t *testing.T) {
	t.Parallel()
	eachBackend(t, testAuditRejectsBadInput)
}

func testAuditRejectsBadInput(t *testing.T, be backend) {
	s := open(t, be.target(t), nil)
	for _, r := range []AuditRecord{{}, {Kind: "x", Body: json.RawMessage("{")}} {
		if _, err := s.AppendAudit(context.Background(), r); !errors.Is(err, ErrBadInput) {
			t.Fatalf("AppendAudit(%+v) = %v", r, err)
		}
	}
	verifyOK(t, s, 0)

}

// TestAuditGroupCommit: concurrent AppendAuditGroup callers each get
// their own committed record (distinct sequence numbers, as read back),
// and the chain holds exactly them.
func TestAuditGroupCommit(t *testing.T) {
	t.Parallel()
	eachBackend(t, testAuditGroupCommit)
}

func testAuditGroupCommit(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	const workers, per = 8, 40
	var mu sync.Mutex
	seqs := map[int64]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				tool := fmt.Sprintf("w%d-%d", w, i)
				r, err := s.AppendAuditGroup(ctx, AuditRecord{Kind: AuditCallAdmitted, Agent: "a", Tool: tool})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := seqs[r.Seq]; dup {
					t.Errorf("seq %d returned to %s and %s", r.Seq, prev, tool)
				}
				seqs[r.Seq] = tool
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	verifyOK(t, s, workers*per)
	recs, _ := s.AuditTail(ctx, 0, 0)
	for _, r := range recs {
		if seqs[r.Seq] != r.Tool {
			t.Fatalf("record %d is %q; the caller was told %q", r.Seq, r.Tool, seqs[r.Seq])
		}
	}
	if _, err := s.AppendAuditGroup(ctx, AuditRecord{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("a record without a kind: %v", err)
	}
}

// TestAuditHashVector pins the record hash to a vector computed outside
// Go, with the shell: a verifier elsewhere (or the PostgreSQL store) must
// produce the same hash from the same fields.
//
//	Z=$(printf '0%.0s' $(seq 64))
//	printf 'maiden-audit-v1\n1:1\n19:1700000000000000000\n5:fetch\n8:operator\n1:a\n1:t\n7:{"x":1}\n64:%s\n' "$Z" | sha256sum
func TestAuditHashVector(t *testing.T) {
	t.Parallel()
	r := AuditRecord{Seq: 1, At: time.Unix(0, 1_700_000_000_000_000_000), Kind: "fetch", Actor: "operator", Agent: "a", Tool: "t",
		Body: json.RawMessage(`{"x":1}`), Prev: genesis}
	if got, want := auditHash(r), "b622b16263b6687b42efb367fd68cb445c380c8a15fa94ce985042f347184e00"; got != want {
		t.Fatalf("auditHash = %s; want %s", got, want)
	}
}
