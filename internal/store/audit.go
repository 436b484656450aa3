package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Audit record kinds written by the store itself, and those the call path
// writes (the store accepts any printable kind).
const (
	AuditCallAdmitted     = "call-admitted"
	AuditCallRefused      = "call-refused"
	AuditCallFailed       = "call-failed"    // a call that failed after its call-admitted record
	AuditCallSucceeded    = "call-succeeded" // a call's outcome when its tool returned output
	AuditMiddlewareResult = "middleware-verdict"
	AuditApproval         = "approval"
	AuditDenial           = "denial"
	AuditFetch            = "fetch"
	AuditCardChange       = "card-change"
	AuditTokenChange      = "token-change"
)

// ErrAuditBroken: the audit chain does not verify; the message names the
// first bad record and why.
var ErrAuditBroken = errors.New("audit trail does not verify")

// AuditRecord is one record of the audit trail. Seq, Prev and Hash are set
// by the store when it appends; Body is a JSON value (nil means null).
type AuditRecord struct {
	Seq   int64           `json:"seq"`
	At    time.Time       `json:"at"`
	Kind  string          `json:"kind"`
	Actor string          `json:"actor"`
	Agent string          `json:"agent"`
	Tool  string          `json:"tool"`
	Body  json.RawMessage `json:"body"`
	Prev  string          `json:"prev"`
	Hash  string          `json:"hash"`
}

// genesis is the prev of the first record.
var genesis = strings.Repeat("0", 64)

// auditHash is SHA-256 over a canonical encoding of every field but the
// hash itself: a version tag, then each field as its decimal byte length,
// ':', the bytes and '\n' (length prefixes make the encoding unambiguous
// whatever the fields hold). Times are Unix nanoseconds.
func auditHash(r AuditRecord) string {
	var stack [512]byte
	return hashCanonical(appendAuditCanonical(stack[:0], r))
}

// auditHashBuf is auditHash encoding into *buf (grown if need be, and
// kept: journal ingestion hashes every record it takes in).
func auditHashBuf(r AuditRecord, buf *[]byte) string {
	b := appendAuditCanonical((*buf)[:0], r)
	*buf = b[:0]
	return hashCanonical(b)
}

// appendAuditCanonical appends auditHash's encoding of r to b. One
// buffer, one Sum256: writing the pieces to a hash.Hash one by one cost
// as much as the hashing.
func appendAuditCanonical(b []byte, r AuditRecord) []byte {
	b = append(b, "maiden-audit-v1\n"...)
	var num [20]byte
	b = appendCanonicalField(b, strconv.AppendInt(num[:0], r.Seq, 10))
	b = appendCanonicalField(b, strconv.AppendInt(num[:0], r.At.UnixNano(), 10))
	for _, f := range [...]string{r.Kind, r.Actor, r.Agent, r.Tool} {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
		b = append(b, '\n')
	}
	b = appendCanonicalField(b, r.Body)
	b = strconv.AppendInt(b, int64(len(r.Prev)), 10)
	b = append(b, ':')
	b = append(b, r.Prev...)
	return append(b, '\n')
}

func appendCanonicalField(b, f []byte) []byte {
	b = strconv.AppendInt(b, int64(len(f)), 10)
	b = append(b, ':')
	b = append(b, f...)
	return append(b, '\n')
}

func hashCanonical(b []byte) string {
	sum := sha256.Sum256(b)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]) // one allocation (EncodeToString makes two)
}

func checkAuditRecord(r AuditRecord) error {
	if err := checkName("audit kind", r.Kind); err != nil {
		return err
	}
	if valid, _ := scanJSON(r.Body); len(r.Body) > 0 && !valid {
		return fmt.Errorf("%w: audit record body is not JSON", ErrBadInput)
	}
	return nil
}

// checkAuditText refuses a record whose names are not UTF-8 text without
// NUL, or whose body is not UTF-8 (its raw NUL is not JSON: the body's
// own check refuses it). PostgreSQL's text columns refuse them, so such a
// journal line would fail its ingestion batch on every retry and hold the
// journal (and with it every audited call); and on SQLite an export
// writes U+FFFD for such bytes, so the record as exported is not the one
// hashed and every later export fails to verify. Journal.Append asks
// it, and checkAuditAppend for the direct appends.
func checkAuditText(r AuditRecord) error {
	for _, f := range [...]struct{ what, v string }{{"kind", r.Kind}, {"actor", r.Actor}, {"agent", r.Agent}, {"tool", r.Tool}} {
		if !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%w: the audit record's %s is not UTF-8 text without NUL", ErrBadInput, f.what)
		}
	}
	if !utf8.Valid(r.Body) {
		return fmt.Errorf("%w: the audit record's body is not UTF-8", ErrBadInput)
	}
	return nil
}

// checkAuditAppend is every check of a record appended directly
// (AppendAudit, AppendAuditGroup): its kind and body, and its text.
func checkAuditAppend(r AuditRecord) error {
	if err := checkAuditRecord(r); err != nil {
		return err
	}
	return checkAuditText(r)
}

// appendAudit appends r inside tx, which holds the write lock, so that the
// head read here is the head the insert extends.
func (s *DB) appendAudit(ctx context.Context, tx *sql.Tx, r AuditRecord) (AuditRecord, error) {
	r, err := s.normalAudit(r)
	if err != nil {
		return r, err
	}
	seq, prev, err := s.auditHeadTx(ctx, tx)
	if err != nil {
		return r, err
	}
	return s.insertAudit(ctx, tx, r, seq, prev)
}

// normalAudit checks r and puts it in its stored form: a time (now if
// zero) at nanosecond precision in UTC, a compact JSON body ("null" if
// none).
func (s *DB) normalAudit(r AuditRecord) (AuditRecord, error) {
	if err := checkAuditAppend(r); err != nil {
		return r, err
	}
	if r.At.IsZero() {
		r.At = s.now()
	}
	r.At = time.Unix(0, r.At.UnixNano()).UTC()
	if len(r.Body) == 0 {
		r.Body = json.RawMessage("null")
	} else {
		// Stored (and hashed) compact, so that an export, which writes
		// the body as JSON again, carries exactly the hashed bytes.
		var b bytes.Buffer
		if err := json.Compact(&b, r.Body); err != nil {
			return r, fmt.Errorf("%w: audit record body: %v", ErrBadInput, err)
		}
		r.Body = b.Bytes()
	}
	return r, nil
}

// auditHeadTx reads the chain's head inside tx (0 and the genesis hash
// when the chain is empty).
func (s *DB) auditHeadTx(ctx context.Context, tx *sql.Tx) (seq int64, prev string, err error) {
	err = tx.StmtContext(ctx, s.auditHead).QueryRowContext(ctx).Scan(&seq, &prev)
	if isNoRows(err) {
		return 0, genesis, nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("read audit head: %w", err)
	}
	return seq, prev, nil
}

// insertAudit appends normalised record r after the record (seq, prev).
func (s *DB) insertAudit(ctx context.Context, tx *sql.Tx, r AuditRecord, seq int64, prev string) (AuditRecord, error) {
	r.Seq, r.Prev = seq+1, prev
	r.Hash = auditHash(r)
	if _, err := tx.StmtContext(ctx, s.auditInsert).ExecContext(ctx,
		r.Seq, r.At.UnixNano(), r.Kind, r.Actor, r.Agent, r.Tool, string(r.Body), r.Prev, r.Hash); err != nil {
		return r, fmt.Errorf("append audit record: %w", err)
	}
	return r, nil
}

// The audit statements, prepared once on Open (parsing them is a fifth of
// an append's cost).
const (
	auditHeadSQL   = `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`
	auditInsertSQL = `INSERT INTO audit (seq, at, kind, actor, agent, tool, body, prev, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// auditInsertRowsSQL is auditInsertSQL for n records.
func auditInsertRowsSQL(n int) string {
	return auditInsertSQL + strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?, ?, ?)`, n-1)
}

// auditBody marshals v for a record body written by the store itself.
func auditBody(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of strings and numbers are passed
	}
	return b
}

// AppendAudit appends one record in its own transaction and returns it
// with its sequence number and hashes. When it returns nil the record is
// committed (synchronous=FULL: on disk).
func (s *DB) AppendAudit(ctx context.Context, r AuditRecord) (AuditRecord, error) {
	var out AuditRecord
	err := s.writeAudit(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.appendAudit(ctx, tx, r)
		return err
	})
	if err != nil {
		return AuditRecord{}, fmt.Errorf("audit %s: %w", r.Kind, err)
	}
	return out, nil
}

const auditColumns = `seq, at, kind, actor, agent, tool, body, prev, hash`

func scanAudit(row scanner) (AuditRecord, error) {
	var r AuditRecord
	var at int64
	var body string
	if err := row.Scan(&r.Seq, &at, &r.Kind, &r.Actor, &r.Agent, &r.Tool, &body, &r.Prev, &r.Hash); err != nil {
		return r, err
	}
	r.At = time.Unix(0, at).UTC()
	r.Body = json.RawMessage(body)
	return r, nil
}

// AuditTail returns up to limit records with a sequence number above
// after, in order (limit <= 0: all of them).
func (s *DB) AuditTail(ctx context.Context, after int64, limit int) ([]AuditRecord, error) {
	if limit <= 0 {
		limit = -1
	}
	q := `SELECT ` + auditColumns + ` FROM audit WHERE seq > ? ORDER BY seq`
	args := []any{after}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit tail: %w", err)
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("audit tail: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// AuditPage is AuditTail bounded by size as well as by count: the
// records with a sequence number above after, in order, at most limit of
// them, and no more once their bodies add up to maxBytes (at least one
// record however large, so that a reader always moves on). A reader of
// the whole trail page by page (a what-if, provenance) holds one page at
// a time: a count alone let records of the largest size a call can make
// (an agent's input of max_input_bytes, a tool's error) fill a page of
// gigabytes. Fewer than limit records does not mean the trail ended: the
// next page after the last one read says.
func (s *DB) AuditPage(ctx context.Context, after int64, limit int, maxBytes int64) ([]AuditRecord, error) {
	if limit <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("audit page: %w: limit %d and maxBytes %d must be positive", ErrBadInput, limit, maxBytes)
	}
	// The page's end is found from the bodies' sizes first (octet_length
	// reads no body: SQLite takes it from the record's header), then only
	// the page's records are read: a query for limit records stopped
	// early still sends all of them on PostgreSQL (the rows are read to
	// their end, then dropped).
	sizes, err := s.db.QueryContext(ctx, `SELECT seq, octet_length(body) FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("audit page: %w", err)
	}
	last, n := after, int64(0)
	for n < maxBytes && sizes.Next() {
		var size int64
		if err := sizes.Scan(&last, &size); err != nil {
			sizes.Close()
			return nil, fmt.Errorf("audit page: %w", err)
		}
		n += size
	}
	if err := errors.Join(sizes.Err(), sizes.Close()); err != nil {
		return nil, fmt.Errorf("audit page: %w", err)
	}
	if last == after {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit WHERE seq > ? AND seq <= ? ORDER BY seq`, after, last)
	if err != nil {
		return nil, fmt.Errorf("audit page: %w", err)
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("audit page: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// AuditLink checks that r comes next in a chain whose last record is
// prevSeq with hash prevHash (0 and "" before the first record): its
// sequence number follows, it links to prevHash and its own hash
// verifies. It is how a reader of part of the trail (a what-if's window)
// checks what it reads as it reads it; the error is an *AuditProblem
// (wrapping ErrAuditBroken) naming r, as VerifyAudit would name it first
// had nothing before it been changed.
func AuditLink(prevSeq int64, prevHash string, r AuditRecord) error {
	// chainCheck's judgement of r without its successor (no insertion
	// can be told) and without the records after it (no reordering by
	// link: a broken link is an edit).
	c := chainCheck{prevHash: prevHash, prevSeq: prevSeq, cur: r, has: true,
		later: func(string, int64, int64) (int64, bool, error) { return 0, false, nil }}
	if p, _ := c.judge(nil); p != nil {
		return p
	}
	return nil
}

// AuditProblem says where and how a chain is broken.
type AuditProblem struct {
	Seq    int64  // the first bad record (or the first missing one)
	Reason string // "edited", "deleted", "inserted", "reordered"; "rewritten" (VerifyAuditFrom)
	Detail string
}

func (p *AuditProblem) Error() string {
	return fmt.Sprintf("%s: record %d %s: %s", ErrAuditBroken, p.Seq, p.Reason, p.Detail)
}

func (p *AuditProblem) Unwrap() error { return ErrAuditBroken }

// chainCheck checks records handed to it one at a time in their stored
// order (by seq), so that a reader of the whole trail holds one page of
// it, not all of it. A record is judged once the one after it is known
// (or the trail ended): an insertion shows in its successor's link.
//
// How each tampering shows (the hash covers the record's seq and prev):
//   - deleted: a gap in the sequence numbers;
//   - reordered: a record's prev is the hash of a record that comes later
//     (later: asked only when a link is broken);
//   - inserted: a record's own hash does not verify and its successor
//     links past it, to its predecessor's hash;
//   - edited: a record's own hash does not verify (or its prev matches
//     nothing) while the chain around it is in place.
//
// An attacker who rewrites every record from some point on, recomputing
// each hash, leaves a chain that verifies on its own: compare the head
// with one exported or noted earlier (VerifyExport's head argument).
type chainCheck struct {
	// later reports the sequence number of a record after the i-th
	// (0-based, of sequence number seq) whose hash is hash, if one is.
	later func(hash string, i, seq int64) (int64, bool, error)

	prevHash string // "": genesis
	prevSeq  int64
	cur      AuditRecord // the record to judge once the next is known
	has      bool
	n        int64 // records judged sound
}

// add hands c the next record r and judges the one before it: its
// problem if it is bad (or later's error).
func (c *chainCheck) add(r AuditRecord) (*AuditProblem, error) {
	if c.has {
		if p, err := c.judge(&r); p != nil || err != nil {
			return p, err
		}
	}
	c.cur, c.has = r, true
	return nil, nil
}

// end judges the last record: the head hash, or the problem.
func (c *chainCheck) end() (string, *AuditProblem, error) {
	if c.has {
		if p, err := c.judge(nil); p != nil || err != nil {
			return "", p, err
		}
		c.has = false
	}
	if c.prevHash == "" {
		return genesis, nil, nil
	}
	return c.prevHash, nil, nil
}

// judge checks c.cur, whose successor is next (nil: none).
func (c *chainCheck) judge(next *AuditRecord) (*AuditProblem, error) {
	r := &c.cur
	prevHash := c.prevHash
	if prevHash == "" {
		prevHash = genesis
	}
	if r.Seq != c.prevSeq+1 {
		if r.Seq > c.prevSeq+1 {
			return &AuditProblem{c.prevSeq + 1, "deleted", fmt.Sprintf("records %d..%d are missing (the next present is %d)", c.prevSeq+1, r.Seq-1, r.Seq)}, nil
		}
		return &AuditProblem{r.Seq, "reordered", fmt.Sprintf("sequence number %d follows %d", r.Seq, c.prevSeq)}, nil
	}
	own := auditHash(*r) == r.Hash
	if r.Prev != prevHash {
		seq, ok, err := c.later(r.Prev, c.n, r.Seq)
		if err != nil {
			return nil, err
		}
		if ok {
			return &AuditProblem{r.Seq, "reordered", fmt.Sprintf("it links to record %d, which comes after it", seq)}, nil
		}
		if !own && next != nil && next.Prev == prevHash {
			return &AuditProblem{r.Seq, "inserted", fmt.Sprintf("record %d links past it to record %d", next.Seq, c.prevSeq)}, nil
		}
		return &AuditProblem{r.Seq, "edited", "its prev hash is not the hash of the record before it (edited, or a record before it deleted and the rest renumbered)"}, nil
	}
	if !own {
		if next != nil && next.Prev == prevHash {
			return &AuditProblem{r.Seq, "inserted", fmt.Sprintf("its hash does not verify and record %d links past it to record %d", next.Seq, c.prevSeq)}, nil
		}
		return &AuditProblem{r.Seq, "edited", "its content does not match its hash"}, nil
	}
	c.prevHash, c.prevSeq = r.Hash, r.Seq
	c.n++
	return nil, nil
}

// AuditPageBytes is how many bytes of bodies a reader of the whole trail
// (VerifyAudit, ExportAudit here; the what-if, the exports, the inbox's
// audit view above) reads at once, one record beyond it (AuditPage): a
// record holds an agent's input up to max_input_bytes, so that a page of
// a fixed count could be as large as everything agents ever sent.
// auditWalkPage is this package's readers' count.
const (
	AuditPageBytes = 8 << 20
	auditWalkPage  = 1000
)

// walkAudit hands each the trail's records in order, up to the last one
// present when it began (records appended meanwhile are not read: what it
// reads is the trail as of one instant, as one read of it was), a page at
// a time (at most limit records, maxBytes of bodies and one record more).
func (s *DB) walkAudit(ctx context.Context, limit int, maxBytes int64, each func(AuditRecord) error) error {
	return s.walkAuditAfter(ctx, 0, limit, maxBytes, each)
}

// walkAuditAfter is walkAudit from the record after sequence number from.
func (s *DB) walkAuditAfter(ctx context.Context, from int64, limit int, maxBytes int64, each func(AuditRecord) error) error {
	var last int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM audit`).Scan(&last); err != nil {
		return fmt.Errorf("audit: the last record: %w", err)
	}
	for after := from; after < last; {
		recs, err := s.AuditPage(ctx, after, limit, maxBytes)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		for _, r := range recs {
			if r.Seq > last {
				return nil
			}
			if err := each(r); err != nil {
				return err
			}
			after = r.Seq
		}
	}
	return nil
}

// laterAudit is chainCheck.later on the store: a record after seq with
// the given hash (a full scan: asked only of a broken link).
func (s *DB) laterAudit(ctx context.Context, hash string, seq int64) (int64, bool, error) {
	var later int64
	err := s.db.QueryRowContext(ctx, `SELECT seq FROM audit WHERE hash = ? AND seq > ? ORDER BY seq DESC LIMIT 1`, hash, seq).Scan(&later)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("audit: looking for the record a broken link names: %w", err)
	}
	return later, true, nil
}

// VerifyAudit flushes this store's audit journal (Journal.Flush), then
// checks the chain, a bounded page at a time (walkAudit), and returns the
// number of records and the head hash. A broken chain is an error
// wrapping ErrAuditBroken (an *AuditProblem naming the first bad record),
// with the number of records before it.
func (s *DB) VerifyAudit(ctx context.Context) (n int64, head string, err error) {
	return s.verifyAudit(ctx, auditWalkPage, AuditPageBytes)
}

func (s *DB) verifyAudit(ctx context.Context, limit int, maxBytes int64) (n int64, head string, err error) {
	if err := s.journal.Flush(ctx); err != nil {
		return 0, "", err
	}
	m, err := s.verifyAfter(ctx, AuditMark{}, limit, maxBytes)
	if err != nil {
		return m.Records, "", err
	}
	return m.Records, m.Head, nil
}

// AuditMark is where a check of the chain ended: the number of records,
// the last one's sequence number and hash (the head). The zero mark is
// the trail's start.
type AuditMark struct {
	Records int64
	Seq     int64
	Head    string
}

// VerifyAuditFrom is VerifyAudit for a reader that checked the chain up
// to from before (a mark an earlier call returned): it checks that
// from's record is still there with from's hash, then the records after
// it, and returns the new mark; its cost is the records after from, not
// the trail's length. With whole, or when from's record is not as it was,
// it checks the whole chain, and then a chain that verifies without from's
// record in it was rewritten or cut after from was taken: a problem too,
// which VerifyAudit cannot see (the chain has no key: a rewrite that
// relinks every record after an edit verifies on its own).
func (s *DB) VerifyAuditFrom(ctx context.Context, from AuditMark, whole bool) (AuditMark, error) {
	return s.verifyAuditFrom(ctx, from, whole, auditWalkPage, AuditPageBytes)
}

func (s *DB) verifyAuditFrom(ctx context.Context, from AuditMark, whole bool, limit int, maxBytes int64) (AuditMark, error) {
	if err := s.journal.Flush(ctx); err != nil {
		return AuditMark{}, err
	}
	if from.Seq <= 0 {
		return s.verifyAfter(ctx, AuditMark{}, limit, maxBytes)
	}
	marked := func() (bool, error) {
		recs, err := s.AuditPage(ctx, from.Seq-1, 1, 1)
		if err != nil {
			return false, err
		}
		return len(recs) == 1 && recs[0].Seq == from.Seq && recs[0].Hash == from.Head && auditHash(recs[0]) == recs[0].Hash, nil
	}
	if !whole {
		ok, err := marked()
		if err != nil {
			return AuditMark{}, err
		}
		if ok {
			return s.verifyAfter(ctx, from, limit, maxBytes)
		}
	}
	m, err := s.verifyAfter(ctx, AuditMark{}, limit, maxBytes)
	if err != nil {
		return m, err
	}
	if m.Seq < from.Seq {
		return m, &AuditProblem{m.Seq + 1, "deleted", fmt.Sprintf("the trail ends at record %d, where it held record %d with hash %s when it was checked before", m.Seq, from.Seq, from.Head)}
	}
	ok, err := marked()
	if err != nil {
		return m, err
	}
	if !ok {
		return m, &AuditProblem{from.Seq, "rewritten", fmt.Sprintf("its hash is no longer %s, the one it had when the chain was checked before, yet the chain links: the trail was rewritten from record %d on", from.Head, from.Seq)}
	}
	return m, nil
}

// verifyAfter checks the records after from (the zero mark: all of them),
// from's hash taken as the link the first must carry.
func (s *DB) verifyAfter(ctx context.Context, from AuditMark, limit int, maxBytes int64) (AuditMark, error) {
	c := chainCheck{later: func(hash string, _, seq int64) (int64, bool, error) { return s.laterAudit(ctx, hash, seq) },
		prevHash: from.Head, prevSeq: from.Seq, n: from.Records}
	var problem *AuditProblem
	err := s.walkAuditAfter(ctx, from.Seq, limit, maxBytes, func(r AuditRecord) error {
		p, err := c.add(r)
		if p != nil {
			problem = p
			return p
		}
		return err
	})
	if problem != nil {
		return AuditMark{Records: c.n}, problem
	}
	if err != nil {
		return AuditMark{Records: c.n}, err
	}
	head, p, err := c.end()
	switch {
	case p != nil:
		return AuditMark{Records: c.n}, p
	case err != nil:
		return AuditMark{Records: c.n}, err
	}
	return AuditMark{Records: c.n, Seq: c.prevSeq, Head: head}, nil
}

// auditExportHead is the last line of an export.
type auditExportHead struct {
	Head    string `json:"head"`
	Records int64  `json:"records"`
}

// ExportAudit writes the trail as JSON lines, one AuditRecord per line,
// followed by {"head": HASH, "records": N}, after flushing this store's
// audit journal: the records up to the last one present when it began
// (appended ones are not written), read a bounded page at a time
// (walkAudit). VerifyExport checks such a file elsewhere.
func (s *DB) ExportAudit(ctx context.Context, w io.Writer) (n int64, head string, err error) {
	return s.exportAudit(ctx, w, auditWalkPage, AuditPageBytes)
}

func (s *DB) exportAudit(ctx context.Context, w io.Writer, limit int, maxBytes int64) (n int64, head string, err error) {
	if err := s.journal.Flush(ctx); err != nil {
		return 0, "", err
	}
	head = genesis
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // bodies as hashed: "<" stays "<"
	err = s.walkAudit(ctx, limit, maxBytes, func(r AuditRecord) error {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("export audit: %w", err)
		}
		n, head = n+1, r.Hash
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	if err := enc.Encode(auditExportHead{Head: head, Records: n}); err != nil {
		return 0, "", fmt.Errorf("export audit: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return 0, "", fmt.Errorf("export audit: %w", err)
	}
	return n, head, nil
}

// VerifyExport verifies an export written by ExportAudit, without a store:
// the chain, then that the final head line matches the last record (a
// truncated export fails). If wantHead is not "", a record of the export
// must have it as its hash: the export extends a head noted earlier (a
// rewritten history that verifies on its own fails this).
//
// It reads the export once, holding one record at a time, not the whole
// export: every line is checked first (a line that is not a record as
// exported is the error, wherever it is), then the chain's first problem,
// then the head line. A broken link's "links to a later record" is
// answered from the hashes of the records after it, kept from there on.
func VerifyExport(r io.Reader, wantHead string) (n int64, head string, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var trailer *auditExportHead
	var canon bytes.Buffer
	canonEnc := json.NewEncoder(&canon)
	canonEnc.SetEscapeHTML(false) // as ExportAudit
	// The chain is checked as the records come; once it is broken, the
	// rest is only read for its lines. A broken link waits for the hashes
	// of the records after it (later, kept from then on) before it is
	// judged: broken and brokenNext are the check and the record after it
	// as they were, judged again at the end.
	errLater := errors.New("a later record is needed")
	var problem *AuditProblem
	var broken *chainCheck
	var brokenNext *AuditRecord
	var later map[string]int64 // hash → the sequence number of the last record after the broken one with it
	c := chainCheck{later: func(string, int64, int64) (int64, bool, error) { return 0, false, errLater }}
	found := wantHead == "" || wantHead == genesis
	line := 0
	for sc.Scan() {
		line++
		if trailer != nil {
			return 0, "", fmt.Errorf("%w: line %d follows the head line", ErrAuditBroken, line)
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
			return 0, "", fmt.Errorf("%w: line %d is not JSON: %v", ErrAuditBroken, line, err)
		}
		if _, ok := probe["head"]; ok {
			var h auditExportHead
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
				return 0, "", fmt.Errorf("%w: line %d: %v", ErrAuditBroken, line, err)
			}
			trailer = &h
			continue
		}
		var rec AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return 0, "", fmt.Errorf("%w: line %d: %v", ErrAuditBroken, line, err)
		}
		// Only the exact line ExportAudit writes for the record: what
		// encoding/json decoded (keys matched case-insensitively, the last
		// duplicate winning, unknown keys ignored) is what is hashed, and
		// another reader of a line with a second "BODY" or "agent" would
		// read what the chain never held.
		canon.Reset()
		if err := canonEnc.Encode(rec); err != nil || !bytes.Equal(bytes.TrimSuffix(canon.Bytes(), []byte("\n")), sc.Bytes()) {
			return 0, "", fmt.Errorf("%w: line %d is not the record as exported (duplicate, differently cased or unknown keys, or re-encoded)", ErrAuditBroken, line)
		}
		n++
		found = found || rec.Hash == wantHead
		switch {
		case later != nil:
			later[rec.Hash] = rec.Seq
		case problem != nil:
		default:
			before, next := c, rec
			p, err := c.add(rec)
			switch {
			case errors.Is(err, errLater):
				broken, brokenNext, later = &before, &next, map[string]int64{rec.Hash: rec.Seq}
			case p != nil:
				problem = p
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", fmt.Errorf("read audit export: %w", err)
	}
	if trailer == nil {
		return 0, "", fmt.Errorf("%w: the export has no head line (truncated?)", ErrAuditBroken)
	}
	if problem == nil {
		var err error
		if broken != nil {
			// The broken record's successor is brokenNext; a record after
			// the broken one with the hash it links to comes later.
			broken.later = func(hash string, _, _ int64) (int64, bool, error) {
				seq, ok := later[hash]
				return seq, ok, nil
			}
			problem, err = broken.judge(brokenNext)
		} else {
			head, problem, err = c.end()
			if errors.Is(err, errLater) {
				broken, brokenNext = &c, nil
				broken.later = func(string, int64, int64) (int64, bool, error) { return 0, false, nil } // nothing comes after the last
				problem, err = broken.judge(nil)
			}
		}
		if err != nil {
			return 0, "", err
		}
	}
	if problem != nil {
		return n, "", problem
	}
	if trailer.Head != head || trailer.Records != n {
		return 0, "", fmt.Errorf("%w: the head line says %d records ending in %s; the records end in %s after %d", ErrAuditBroken, trailer.Records, trailer.Head, head, n)
	}
	if !found {
		return 0, "", fmt.Errorf("%w: no record of the export has the expected head %s (the chain was rewritten or cut before it)", ErrAuditBroken, wantHead)
	}
	return n, head, nil
}

// auditGroup is AppendAuditGroup's queue: callers that arrive while a
// commit is in flight wait for the next one, which writes all their
// records in one transaction (one fsync).
type auditGroup struct {
	mu       sync.Mutex
	queue    []*groupedRecord
	flushing bool
}

type groupedRecord struct {
	in, out AuditRecord
	err     error
	done    chan struct{} // closed when out and err are set
	lead    chan struct{} // closed when this caller is to commit the queue
}

// AppendAuditGroup is AppendAudit with group commit: a caller returns only
// once its record is committed (or with the error that kept it, and every
// record of its batch, out), exactly as AppendAudit; concurrent callers
// share one transaction and one synchronous commit. A serial caller pays
// what AppendAudit costs; the saving is in throughput under concurrency.
// One caller commits at a time; when it is done with its batch, it hands
// the queue to the first waiter, so that no caller commits for others
// more than once. A waiter does not give up on ctx: its record may be in
// the transaction in flight.
func (s *DB) AppendAuditGroup(ctx context.Context, r AuditRecord) (AuditRecord, error) {
	// Checked before the record joins a batch: a refusal inside the
	// batch's transaction would fail every other caller's record in it.
	if err := checkAuditAppend(r); err != nil {
		return AuditRecord{}, fmt.Errorf("audit %s: %w", r.Kind, err)
	}
	g := &s.auditQ
	p := &groupedRecord{in: r, done: make(chan struct{}), lead: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.flushing {
		g.mu.Unlock()
		select {
		case <-p.done:
			return p.out, p.err
		case <-p.lead:
		}
		g.mu.Lock()
	}
	g.flushing = true
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	wctx := context.WithoutCancel(ctx) // the others' records are in this transaction too
	err := s.writeAudit(wctx, func(tx *sql.Tx) error {
		for _, q := range batch {
			var err error
			if q.out, err = s.appendAudit(wctx, tx, q.in); err != nil {
				return err
			}
		}
		return nil
	})
	for _, q := range batch {
		if err != nil {
			q.out, q.err = AuditRecord{}, fmt.Errorf("audit %s: %w", q.in.Kind, err)
		}
		if q != p {
			close(q.done)
		}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		close(g.queue[0].lead)
	} else {
		g.flushing = false
	}
	g.mu.Unlock()
	return p.out, p.err
}
