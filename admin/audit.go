package admin

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the hash-chained audit trail: read, verified, exported.

// Kinds of audit record (AuditRecord.Kind).
const (
	AuditCallAdmitted     = store.AuditCallAdmitted     // a call let through, before its tool runs
	AuditCallRefused      = store.AuditCallRefused      // a call refused (cards, middleware, a boundary)
	AuditMiddlewareResult = store.AuditMiddlewareResult // a middleware's verdict
	AuditApproval         = store.AuditApproval         // a human approved a request
	AuditDenial           = store.AuditDenial           // a human denied one
	AuditFetch            = store.AuditFetch            // an http-fetch decision
	AuditCardChange       = store.AuditCardChange       // a card granted, derived, transferred or revoked
	AuditTokenChange      = store.AuditTokenChange      // a token minted or revoked
	AuditCallFailed       = store.AuditCallFailed       // a call that failed after call-admitted
	AuditCallSucceeded    = store.AuditCallSucceeded    // a call's outcome when its tool returned output
)

// AuditTail returns up to limit records after sequence number after
// (limit <= 0: all), oldest first. Records a running maiden appends reach
// the chain within its journal's ingestion interval.
func (s *State) AuditTail(ctx context.Context, after int64, limit int) ([]api.AuditRecord, error) {
	recs, err := s.st.AuditTail(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	return adminlink.Audits(recs), nil
}

// AuditPageBytes bounds the bodies of one page a reader of the whole
// trail reads (one record beyond it), besides its count: a record holds
// an agent's input up to max_input_bytes, so that a thousand of the
// largest were a gigabyte in one read. Every such reader uses it (the
// what-if, the exports, provenance, maiden audit, the inbox).
const AuditPageBytes = store.AuditPageBytes

// AuditPage is AuditTail bounded by size as well: at most limit records
// (limit > 0) after after, and none more once their bodies reach
// maxBytes, though always one when there is one. Fewer than limit records
// does not mean the trail ended; an empty page does. A reader of the
// whole trail (an export, a search) pages with it.
func (s *State) AuditPage(ctx context.Context, after int64, limit int, maxBytes int64) ([]api.AuditRecord, error) {
	recs, err := s.st.AuditPage(ctx, after, limit, maxBytes)
	if err != nil {
		return nil, err
	}
	return adminlink.Audits(recs), nil
}

// VerifyAudit checks the whole chain: every record's hash, and that each
// links to the one before it. It returns the number of records and the
// head hash, or an error wrapping ErrAuditBroken that names the first bad
// record and what was done to it (edited, deleted, inserted, reordered).
// The chain has no key: compare the head with one noted earlier.
func (s *State) VerifyAudit(ctx context.Context) (n int64, head string, err error) {
	return s.st.VerifyAudit(ctx)
}

// AuditMark is where a check of the chain ended: the records, the last
// one's sequence number and hash (the head). The zero mark is the
// trail's start.
type AuditMark struct {
	Records int64
	Seq     int64
	Head    string
}

// VerifyAuditFrom checks the records after from, a mark an earlier check
// returned (the zero mark: every record), and that from's record is still
// as it was; with whole, every record. It returns the new mark. Its cost
// is what follows from, where VerifyAudit's is the trail's length; and it
// finds a chain rewritten or cut after from was taken, which VerifyAudit
// cannot (the chain has no key).
func (s *State) VerifyAuditFrom(ctx context.Context, from AuditMark, whole bool) (AuditMark, error) {
	m, err := s.st.VerifyAuditFrom(ctx, store.AuditMark(from), whole)
	return AuditMark(m), err
}

// ExportAudit writes the whole trail to w as JSON lines, one record per
// line, then a head line {"head": HASH, "records": N}; VerifyExport checks
// such a file without a store.
func (s *State) ExportAudit(ctx context.Context, w io.Writer) (n int64, head string, err error) {
	return s.st.ExportAudit(ctx, w)
}

// VerifyExport checks an ExportAudit file without a store: the chain,
// then that the final head line matches the last record (a truncated
// export fails). If wantHead is not "", a record of the export must have
// it as its hash: the export extends a head noted earlier.
func VerifyExport(r io.Reader, wantHead string) (n int64, head string, err error) {
	return store.VerifyExport(r, wantHead)
}

// LastAuditSeq is the highest sequence number in the trail (0 if empty),
// found with O(log n) one-record reads: "some record comes after k" is
// monotone in k whatever gaps the trail has.
func (s *State) LastAuditSeq(ctx context.Context) (int64, error) {
	return lastAuditSeq(ctx, s.st)
}

func lastAuditSeq(ctx context.Context, st store.Store) (int64, error) {
	exists := func(k int64) (bool, error) {
		recs, err := st.AuditTail(ctx, k, 1)
		return len(recs) > 0, err
	}
	lo, hi := int64(0), int64(1024) // some record comes after lo; hi is to be checked
	for {
		ok, err := exists(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		if hi == math.MaxInt64 {
			return 0, fmt.Errorf("the audit trail holds a record numbered past %d", hi)
		}
		// Doubling stops at the largest number there is: a row numbered
		// near it (written by whoever can write the table) made hi wrap
		// and the search spin for ever.
		lo = hi
		if hi > math.MaxInt64/2 {
			hi = math.MaxInt64
		} else {
			hi *= 2
		}
	}
	if ok, err := exists(0); err != nil || !ok {
		return 0, err
	}
	// Invariant: a record comes after lo, none after hi.
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}
