package admin

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden/internal/store"
)

// seqStore is a store whose audit trail holds records with the given
// sequence numbers (gaps allowed), for lastAuditSeq.
type seqStore struct {
	store.Store
	seqs  []int64
	reads int
}

func (s *seqStore) AuditTail(_ context.Context, after int64, limit int) ([]store.AuditRecord, error) {
	s.reads++
	var out []store.AuditRecord
	for _, q := range s.seqs {
		if q > after && (limit <= 0 || len(out) < limit) {
			out = append(out, store.AuditRecord{Seq: q})
		}
	}
	return out, nil
}

// TestLastAuditSeq: the head's sequence number is found with O(log n)
// reads, whatever the size and the gaps.
func TestLastAuditSeq(t *testing.T) {
	seqs := func(n int64, skip ...int64) []int64 {
		var out []int64
		for i := int64(1); i <= n; i++ {
			gap := false
			for _, s := range skip {
				gap = gap || s == i
			}
			if !gap {
				out = append(out, i)
			}
		}
		return out
	}
	for _, tc := range []struct {
		seqs []int64
		want int64
	}{
		{nil, 0}, {seqs(1), 1}, {seqs(5), 5}, {seqs(1023), 1023}, {seqs(1024), 1024}, {seqs(1025), 1025},
		{seqs(5000), 5000}, {seqs(70000), 70000}, {seqs(300, 300), 299}, {seqs(2000, 1500, 1999), 2000},
		{[]int64{7}, 7}, {[]int64{4096}, 4096},
	} {
		s := &seqStore{seqs: tc.seqs}
		got, err := (&State{st: s}).LastAuditSeq(context.Background())
		if err != nil || got != tc.want {
			t.Errorf("%d records: LastAuditSeq = %d, %v; want %d", len(tc.seqs), got, err, tc.want)
		}
		if s.reads > 40 {
			t.Errorf("%d records: %d reads", len(tc.seqs), s.reads)
		}
	}
}
