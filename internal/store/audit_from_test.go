package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyAuditFrom: a check from a mark an earlier check returned reads
// the records after it (an edit before the mark is not its to find:
// VerifyAudit's, and a whole check's), finds a problem after it as
// VerifyAudit does, and finds what VerifyAudit cannot once a mark was
// taken: a chain rewritten from an edit on, every link made again, and a
// trail cut short (whole or not).
func TestVerifyAuditFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) (*DB, AuditMark) {
		s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
		appendN(t, s, 6, "t")
		m, err := s.VerifyAuditFrom(ctx, AuditMark{}, false)
		if n, head, verr := s.VerifyAudit(ctx); err != nil || verr != nil || m != (AuditMark{Records: n, Seq: 6, Head: head}) {
			t.Fatalf("VerifyAuditFrom(start) = %+v, %v; VerifyAudit = %d, %s, %v", m, err, n, head, verr)
		}
		return s, m
	}
	exec := func(t *testing.T, s *DB, sql string, args ...any) {
		t.Helper()
		if _, err := s.db.Exec(sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	problem := func(t *testing.T, err error, seq int64, reason, detail string) {
		t.Helper()
		var p *AuditProblem
		if !errors.As(err, &p) || !errors.Is(err, ErrAuditBroken) || p.Seq != seq || p.Reason != reason || !strings.Contains(p.Detail, detail) {
			t.Fatalf("VerifyAuditFrom: %v; want record %d %s saying %q", err, seq, reason, detail)
		}
	}

	t.Run("the records after the mark", func(t *testing.T) {
		s, m := setup(t)
		appendN(t, s, 4, "t")
		m2, err := s.VerifyAuditFrom(ctx, m, false)
		_, head, _ := s.VerifyAudit(ctx)
		if err != nil || m2 != (AuditMark{Records: 10, Seq: 10, Head: head}) {
			t.Fatalf("VerifyAuditFrom = %+v, %v; want 10 records, head %s", m2, err, head)
		}
		// An edit before the mark is not read: the check's cost is what
		// follows the mark, and VerifyAudit is the whole chain's check.
		exec(t, s, `UPDATE audit SET tool = 'evil' WHERE seq = 3`)
		if m3, err := s.VerifyAuditFrom(ctx, m2, false); err != nil || m3 != m2 {
			t.Fatalf("VerifyAuditFrom after an edit before its mark = %+v, %v; want %+v (it reads only after the mark)", m3, err, m2)
		}
		_, err = s.VerifyAuditFrom(ctx, m2, true)
		problem(t, err, 3, "edited", "does not match its hash")
	})
	t.Run("an edit after the mark", func(t *testing.T) {
		s, m := setup(t)
		appendN(t, s, 4, "t")
		exec(t, s, `UPDATE audit SET body = '{"i":99}' WHERE seq = 8`)
		m2, err := s.VerifyAuditFrom(ctx, m, false)
		problem(t, err, 8, "edited", "does not match its hash")
		if m2.Records != 7 {
			t.Errorf("records sound before the problem: %d, want 7", m2.Records)
		}
	})
	t.Run("the mark's record edited", func(t *testing.T) {
		s, m := setup(t)
		exec(t, s, `UPDATE audit SET tool = 'evil' WHERE seq = 6`)
		_, err := s.VerifyAuditFrom(ctx, m, false)
		problem(t, err, 6, "edited", "does not match its hash")
	})
	t.Run("rewritten from an edit on", func(t *testing.T) {
		s, m := setup(t)
		recs, err := s.AuditTail(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Record 4 edited, its hash and every link after it made again:
		// a chain that verifies on its own.
		prev := recs[2].Hash
		for _, r := range recs[3:] {
			if r.Seq == 4 {
				r.Tool = "evil"
			}
			r.Prev = prev
			r.Hash = auditHash(r)
			exec(t, s, `UPDATE audit SET tool = ?, prev = ?, hash = ? WHERE seq = ?`, r.Tool, r.Prev, r.Hash, r.Seq)
			prev = r.Hash
		}
		if n, _, err := s.VerifyAudit(ctx); err != nil || n != 6 {
			t.Fatalf("VerifyAudit of the rewritten chain = %d, %v; want it to verify (the chain has no key)", n, err)
		}
		// Found from the mark, and by a whole check given the mark.
		for _, whole := range []bool{false, true} {
			_, err = s.VerifyAuditFrom(ctx, m, whole)
			problem(t, err, 6, "rewritten", fmt.Sprintf("its hash is no longer %s", m.Head))
		}
	})
	t.Run("cut short", func(t *testing.T) {
		s, m := setup(t)
		exec(t, s, `DELETE FROM audit WHERE seq > 4`)
		if n, _, err := s.VerifyAudit(ctx); err != nil || n != 4 {
			t.Fatalf("VerifyAudit of the cut trail = %d, %v; want it to verify", n, err)
		}
		for _, whole := range []bool{false, true} {
			_, err := s.VerifyAuditFrom(ctx, m, whole)
			problem(t, err, 5, "deleted", "the trail ends at record 4, where it held record 6")
		}
	})
}
