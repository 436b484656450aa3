package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The multi-row INSERTs of journal ingestion insert a power of two of
// records each, up to 1<<sqliteRowsLog on SQLite (one statement per
// record costs more than the SQL it runs; 256 measured no cheaper than
// 64) and 1<<pgRowsLog on PostgreSQL (where every statement is a round
// trip, and the process's CPU waiting for it more than the encoding:
// 9216 parameters, of the 65535 one statement may have). A batch of n
// records takes at most log2(n)+1 statements whatever n is (it took n%64
// single-row ones).
const (
	sqliteRowsLog = 6
	pgRowsLog     = 10
)

// prepareAuditRows prepares the ingestion's INSERTs (on Open: preparing
// one later would take a second connection while the batch holds one).
func (s *DB) prepareAuditRows(ctx context.Context) error {
	n := sqliteRowsLog
	if s.pg != nil {
		n = pgRowsLog
	}
	s.auditInsertRows = make([]*sql.Stmt, n+1)
	for i := range s.auditInsertRows {
		st, err := s.db.PrepareContext(ctx, auditInsertRowsSQL(1<<i))
		if err != nil {
			return err
		}
		s.auditInsertRows[i] = st
	}
	return nil
}

// insertAuditRows inserts records already chained (Seq, Prev, Hash set).
// args is a buffer for the statements' arguments (returned, maybe grown).
// A field equal to the one before it (kind, actor, agent and tool usually
// are; a record's prev is the hash before it) reuses that field's boxed
// value: boxing each string for database/sql was an allocation per field.
func (s *DB) insertAuditRows(ctx context.Context, tx *sql.Tx, rows []AuditRecord, args []any) ([]any, error) {
	var last [4]string
	var box [4]any
	var lastHash string
	var hashBox any
	for len(rows) > 0 {
		i := min(bits.Len(uint(len(rows)))-1, len(s.auditInsertRows)-1)
		stmt, k := s.auditInsertRows[i], 1<<i
		args = args[:0]
		for _, r := range rows[:k] {
			for i, v := range [...]string{r.Kind, r.Actor, r.Agent, r.Tool} {
				if box[i] == nil || v != last[i] {
					last[i], box[i] = v, v
				}
			}
			prev := any(r.Prev)
			if hashBox != nil && r.Prev == lastHash {
				prev = hashBox
			}
			lastHash, hashBox = r.Hash, r.Hash
			// The body is bound as a string without a copy: the driver
			// copies it (SQLite) or encodes it (PostgreSQL) before Exec
			// returns, and its bytes do not change meanwhile.
			body := unsafe.String(unsafe.SliceData(r.Body), len(r.Body))
			args = append(args, r.Seq, r.At.UnixNano(), box[0], box[1], box[2], box[3], body, prev, hashBox)
		}
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...); err != nil {
			return args, fmt.Errorf("append audit records: %w", err)
		}
		s.journal.yieldP()
		rows = rows[k:]
	}
	clear(args) // the next batch's rows are other values: let these go
	return args[:0], nil
}

// The audit journal (see doc.go, "The audit journal"): per-process
// append-only files of audit records beside the store, each record copied
// into a shared mapping of the file (or written with one write(2)), which
// a background ingester moves into the SQLite chain in batches.

// AuditJournalDamaged is the kind of the record the ingester appends in
// place of a journal line it refuses (a checksum that fails, a line that
// does not decode, line numbers that skip or repeat): the chain says what
// was there instead of silently leaving it out or taking it in.
const AuditJournalDamaged = "audit-journal-damaged"

// ErrJournalClosed: Append after the store (and so its journal) was
// closed.
var ErrJournalClosed = errors.New("audit journal is closed")

// ErrJournalFull: the journal's backlog (bytes written and not yet
// ingested, and the room reserved for records to come: Reserve) is past
// Options.JournalBacklog, because the store cannot keep up or cannot be
// written; Append and Reserve refuse until the ingester catches up.
var ErrJournalFull = errors.New("the audit journal's backlog is past its bound")

// ErrJournalDirUnsafe: the journal's directory is owned by another user
// or writable by its group or other users, who could then add records to
// the audit chain by dropping a file there; the store refuses to open (or
// to start a journal file) until it is fixed.
var ErrJournalDirUnsafe = errors.New("audit journal directory is writable by others")

// ErrJournalFileUnsafe: a journal file of a gone process is owned by
// another user (but root) or writable by its group or other users, so its
// lines may not be this store's: the sweep, and so Open, refuses it (it
// got there while the directory was unsafe) until the operator removes it.
var ErrJournalFileUnsafe = errors.New("audit journal file not written by this store's user")

// ErrStateUnsafe: a SQLite state file, one of the files SQLite keeps beside
// it, or their directory is owned by another user or writable by other
// users, who could then grant themselves cards, approve calls or rewrite
// the audit trail; the store refuses to open until it is fixed
// (prepareStateFile).
var ErrStateUnsafe = errors.New("state store is writable by others")

const (
	journalExt             = ".jl"
	defaultJournalInterval = 20 * time.Millisecond
	defaultJournalBatch    = 4096
	defaultJournalBacklog  = 64 << 20
	defaultJournalRotate   = 8 << 20
	// maxJournalLine bounds one encoded record, so that a reader knows
	// how far to look for a line's end.
	maxJournalLine = 16 << 20
	// journalWindow is how much of a file one batch reads at first
	// (Options.journalWindow lowers it in tests).
	journalWindow = 1 << 20
	// journalSweepEvery is how often a running ingester looks for the
	// journals of processes that died since the store was opened.
	journalSweepEvery = 30 * time.Second
	// crcSuffixLen is len(`,"crc":"XXXXXXXX"}`).
	crcSuffixLen = len(`,"crc":"`) + 8 + len(`"}`)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Journal is a store's audit journal. Append is safe for concurrent use;
// the journal's file is created on the first Append, and its ingester
// runs from then until the store is closed.
type Journal struct {
	s          *DB
	dir        string
	prefix     string // this runner's file names start with it
	sync       bool
	interval   time.Duration
	batch      int
	backlogMax int64
	rotate     int64
	window     int64 // how much of a file one batch reads at first (journalWindow)
	log        *slog.Logger

	mu       sync.Mutex // the append lock: line numbers follow file order
	f        *os.File   // the current file, opened for appending; nil until the first Append
	m        []byte     // its shared mapping, if it has one (else records are written with write(2))
	mp       *journalMap
	bg       sync.WaitGroup // populating and retiring mappings in the background
	noMap    bool           // never map (tests of the write(2) path)
	files    []*journalFile
	num      int // the current file's number
	closed   bool
	started  bool // the ingester runs
	appended int64
	wpos     atomic.Int64 // bytes written to all of this journal's files (stored under mu; Reserve reads it without)
	retired  []*os.File   // rotated-away files the syncer has yet to close (sync mode)
	syncErr  error        // a failed fsync: sticky (sync mode)
	buf      []byte

	// reserved is the room taken by Reservations not yet spent or
	// released (bytes): counted in the backlog as if written. unusable is
	// set once appends fail whatever the backlog (closed, or an fsync
	// failed), so that Reserve refuses without taking mu.
	reserved atomic.Int64
	unusable atomic.Bool

	smu    sync.Mutex // one fsync at a time; later appenders share the next
	synced int64      // wpos covered by the last fsync

	wake, flushNow, stop, done chan struct{}
	final                      chan struct{} // closed when Close has ingested what it could

	pmu       sync.Mutex // ingestion progress
	ingested  int64      // lines of this journal's files ingested (or refused as damaged)
	ingestedB atomic.Int64
	progress  chan struct{} // closed and replaced after every ingestion attempt
	lastErr   error         // the last attempt's (nil once one succeeds)
	failErr   error         // the last failed attempt's
	errSeq    int64         // failed ingestion attempts so far

	torn, damaged, swept atomic.Int64
	sweepSoon            atomic.Bool // Open could not sweep (the store was busy): the ingester sweeps at its first run

	// yielding: the ingestion running now is the low-priority thread's
	// (run), which gives its P back every yieldEvery of work (yieldP).
	yielding  atomic.Bool
	lastYield atomic.Int64 // when it last did (UnixNano)
	yields    atomic.Int64 // how many times it did (tests)
	behind    atomic.Int64 // low-priority attempts ended by errIngestBehind (tests)
}

// errIngestBehind ends a low-priority ingestion attempt whose backlog
// has passed half its bound while it ran: run goes on with it at normal
// priority. Checked between batches (an attempt ingests until no complete
// line is left, and one at low priority on a busy machine could otherwise
// go on until Append refused). Half, not the quarter run checks before an
// attempt: at a quarter, BenchmarkAuditedCall/on on a loaded machine
// handed over in most runs, and the calls then paid for ingestion at
// normal priority (on/off 1.90 against 1.51, six alternating rounds).
var errIngestBehind = errors.New("audit journal: the low-priority ingester is behind")

// yieldEvery is how much ingestion work the low-priority ingester does
// before it gives its P back (runtime.Gosched). SQLite here is Go code: a
// batch of a few thousand records holds one of the process's Ps for tens
// of milliseconds whatever the thread's nice value, and on a machine with
// two Ps everything else the process runs besides its calls (the
// collector's mark workers, the journal's page populator, timers) then
// queues on the P of the call being made, and a stop-the-world waits
// until the ingester's thread next runs. The measured cost to the calls
// and the yield's cost are in bench/README.md (issue 23).
const yieldEvery = 500 * time.Microsecond

// yieldP gives the ingester's P back if it is the low-priority ingester
// and has worked yieldEvery since it last did.
func (j *Journal) yieldP() {
	if j == nil || !j.yielding.Load() {
		return
	}
	if time.Now().UnixNano()-j.lastYield.Load() >= int64(yieldEvery) {
		runtime.Gosched()
		j.yields.Add(1)
		j.lastYield.Store(time.Now().UnixNano())
	}
}

// journalFile is one of this journal's files. name, lines, size and sealed
// are the appender's (under Journal.mu); rd (made with the file, holding
// its lock), nextLine and bytes the ingester's.
type journalFile struct {
	name      string
	seed      uint32       // its lines' checksum seed
	lines     int64        // whole lines written
	size      int64        // bytes of whole lines written
	sealed    bool         // no line will be added
	committed atomic.Int64 // size, for the ingester, stored once the line is whole

	rd       *os.File
	nextLine int64 // as of the ingester's last commit
	bytes    int64
}

func newJournal(s *DB, dir string, opts *Options) *Journal {
	host, pid, nonce := splitRunner(s.runner)
	j := &Journal{
		s: s, dir: dir, prefix: escapeHost(host) + "_" + pid + "_" + nonce + "_",
		sync: opts.JournalSync, interval: opts.JournalInterval, batch: defaultJournalBatch,
		backlogMax: opts.JournalBacklog, rotate: opts.journalRotate, window: opts.journalWindow, noMap: opts.journalNoMap, log: opts.Logger,
		wake: make(chan struct{}, 1), flushNow: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		final:    make(chan struct{}),
		progress: make(chan struct{}),
	}
	if j.interval <= 0 {
		j.interval = defaultJournalInterval
	}
	if j.backlogMax <= 0 {
		j.backlogMax = defaultJournalBacklog
	}
	if j.rotate <= 0 {
		j.rotate = defaultJournalRotate
	}
	if j.window <= 0 {
		j.window = journalWindow
	}
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	return j
}

// Journal is the store's audit journal (see Journal.Append).
func (s *DB) Journal() *Journal { return s.journal }

// Dir is the directory of the journal files: a SQLite store's path +
// ".audit"; for PostgreSQL, Options.JournalDir or its default (see
// Options.JournalDir).
func (j *Journal) Dir() string { return j.dir }

// encodePool holds buffers for the part of a line encoded outside the
// append lock.
var encodePool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Append writes r to the journal and returns once the record is in the
// journal file's page cache (copied into its shared mapping, or written
// with write(2)): from then on it survives the process's death (kill -9
// included), as a commit with SQLite's synchronous=NORMAL does;
// power loss or an OS crash may lose the last records unless the store
// was opened with Options.JournalSync (then Append returns after an fsync
// that covers the record, shared with concurrent appenders). A nil error
// means the record will be in the chain once ingested (Flush waits for
// that); an error means it was not written, and the call it records must
// not be acknowledged. r's Seq, Prev and Hash are ignored (the chain
// gives them at ingestion); a zero At is now.
func (j *Journal) Append(r AuditRecord) error { return j.append(r, nil) }

// AppendReserved is Append for a record whose room res took (Reserve)
// before what it records happened: it is not refused for the journal's
// backlog (it may still be for its content, or a journal closed or
// failing). res is spent whatever the outcome.
func (j *Journal) AppendReserved(r AuditRecord, res *Reservation) error { return j.append(r, res) }

// Reservation is room in the journal for one record, taken by Reserve
// before what the record will describe happens (a request sent, a tunnel
// opened) and spent by the record's AppendReserved after it, so that a
// backlog that grew meanwhile does not refuse it. Release gives back the
// room of one that will not be written. The zero Reservation holds
// nothing (AppendReserved with it is Append). Not for concurrent use.
type Reservation struct {
	j *Journal
	n int64
}

// Reserve takes room for one record of about n bytes (its encoded line;
// one that turns out larger is still taken, and the backlog passes its
// bound by the difference). It is refused, with ErrJournalFull, when the
// backlog with the room already reserved would pass
// Options.JournalBacklog, and when the journal is closed or its fsync
// failed (what Append would say). Cheap: an atomic add and two loads, no
// lock, no system call.
func (j *Journal) Reserve(n int64) (Reservation, error) {
	n = max(n, 1)
	if j.unusable.Load() {
		j.mu.Lock()
		err := j.usableLocked()
		j.mu.Unlock()
		if err != nil {
			return Reservation{}, err
		}
	}
	total := j.reserved.Add(n)
	if backlog := j.wpos.Load() + total - j.ingestedB.Load(); backlog > j.backlogMax {
		j.reserved.Add(-n)
		return Reservation{}, j.fullError(backlog - n)
	}
	return Reservation{j: j, n: n}, nil
}

// Release gives the reservation's room back, if it was neither spent nor
// released.
func (r *Reservation) Release() {
	if r.j != nil && r.n > 0 {
		r.j.reserved.Add(-r.n)
	}
	r.n = 0
}

// usableLocked is the error of an append to a journal that cannot take
// one whatever its backlog: closed, or an earlier fsync failed. Called
// with j.mu held.
func (j *Journal) usableLocked() error {
	if j.closed {
		return ErrJournalClosed
	}
	if j.syncErr != nil {
		return fmt.Errorf("audit journal: an earlier fsync failed, records may be lost: %w", j.syncErr)
	}
	return nil
}

// fullError is the refusal of a record when backlog bytes (reserved room
// included) are waiting: ErrJournalFull, with why.
func (j *Journal) fullError(backlog int64) error {
	j.pmu.Lock()
	why := "the ingester has not caught up"
	if j.lastErr != nil {
		why = "last ingestion error: " + j.lastErr.Error()
	}
	j.pmu.Unlock()
	return fmt.Errorf("audit journal %s: %w: %d bytes are waiting to be ingested into the store, more than %d (%s)", j.dir, ErrJournalFull, backlog, j.backlogMax, why)
}

func (j *Journal) append(r AuditRecord, res *Reservation) error {
	var reserved int64
	if res != nil && res.j == j {
		reserved = res.n
		res.n = 0
	}
	if reserved > 0 {
		// Given back once the line is written (then counted in wpos), or
		// not: the record is not taken again.
		defer j.reserved.Add(-reserved)
	}
	if err := checkName("audit kind", r.Kind); err != nil { // the body is checked as it is encoded
		return fmt.Errorf("audit journal %s: %w", r.Kind, err)
	}
	if err := checkAuditText(r); err != nil {
		return fmt.Errorf("audit journal %s: %w", r.Kind, err)
	}
	if r.At.IsZero() {
		r.At = j.s.now()
	}
	eb := encodePool.Get().(*bytes.Buffer)
	defer encodePool.Put(eb)
	eb.Reset()
	if err := encodeJournalFields(eb, r); err != nil {
		return fmt.Errorf("audit journal %s: %w", r.Kind, err)
	}
	if eb.Len() > maxJournalLine-64 {
		return fmt.Errorf("audit journal %s: %w: the record is %d bytes, more than %d", r.Kind, ErrBadInput, eb.Len(), maxJournalLine-64)
	}

	j.mu.Lock()
	pos, err := j.appendLocked(eb.Bytes(), reserved > 0)
	j.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case j.wake <- struct{}{}:
	default:
	}
	if j.sync {
		return j.syncTo(pos)
	}
	return nil
}

// appendLocked writes one line (fields is its encoded middle) and returns
// the journal's write position after it; reserved: the line spends a
// Reservation. Called with j.mu held.
func (j *Journal) appendLocked(fields []byte, reserved bool) (int64, error) {
	if err := j.usableLocked(); err != nil {
		return 0, err
	}
	// A reserved record's room was counted when it was reserved: it is
	// not refused for the backlog now (what it records has happened).
	// Any other record counts the room reserved as written.
	if !reserved {
		if backlog := j.wpos.Load() + j.reserved.Load() - j.ingestedB.Load(); backlog > j.backlogMax {
			return 0, j.fullError(backlog)
		}
	}
	// The line's length does not depend on which file it goes to (the
	// line number may grow by a digit: room is kept for that).
	need := int64(len(fields)) + 64
	if j.f == nil || j.files[len(j.files)-1].size >= j.rotate ||
		j.m != nil && j.files[len(j.files)-1].size+need > int64(len(j.m)) {
		if err := j.openNextLocked(need); err != nil {
			return 0, err
		}
	}
	cur := j.files[len(j.files)-1]
	b := appendJournalLine(j.buf[:0], cur.lines+1, fields, cur.seed)
	j.buf = b
	if j.m != nil {
		if err := copyLine(j.m, cur.size, b); err != nil {
			j.sealLocked()
			return 0, fmt.Errorf("audit journal %s: %w", filepath.Join(j.dir, cur.name), err)
		}
	} else if n, err := j.f.Write(b); err != nil {
		// Take back a partial line, so that the next one does not
		// continue it; if even that fails, leave the file (its tail is
		// torn and will be dropped as such) for a new one.
		if n > 0 {
			if terr := j.f.Truncate(cur.size); terr != nil {
				j.sealLocked()
			}
		}
		return 0, fmt.Errorf("audit journal %s: write: %w", filepath.Join(j.dir, cur.name), err)
	}
	cur.lines++
	cur.size += int64(len(b))
	cur.committed.Store(cur.size)
	pos := j.wpos.Add(int64(len(b)))
	j.appended++
	return pos, nil
}

// copyLine copies line into the mapping at off, its final '\n' last: a
// reader (or the ingester of a dead writer's file) takes a line only up to
// its '\n', so a copy cut short by the process's death leaves a partial
// line followed by zeros, never a line that looks whole. A fault (the file
// truncated under the mapping) is an error, not a crash.
func copyLine(m []byte, off int64, line []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write to the mapped journal: %v", r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	copy(m[off:], line[:len(line)-1])
	m[off+int64(len(line))-1] = '\n'
	return nil
}

// openNextLocked seals the current file (if any) and starts the next one,
// with room for a line of need bytes.
func (j *Journal) openNextLocked(need int64) error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("audit journal: create %s: %w", j.dir, err)
	}
	if err := checkJournalDir(j.dir); err != nil {
		return fmt.Errorf("audit journal: %w", err)
	}
	name := j.prefix + strconv.Itoa(j.num+1) + journalExt
	path := filepath.Join(j.dir, name)
	// Made under a name no sweeper looks at, locked, then renamed: a
	// sweeper never sees the file unlocked while this process lives (see
	// lockJournal).
	tmp := path + ".new"
	f, rd, err := createLockedNew(tmp)
	if err != nil {
		return fmt.Errorf("audit journal: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		rd.Close()
		os.Remove(tmp)
		os.Remove(path)
		return fmt.Errorf("audit journal: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	// Where it can, the journal writes into a shared mapping of a file
	// whose blocks are reserved up front (a disk that fills up is then an
	// error here, not a fault at write-back): a copy instead of a write(2)
	// per record, with the same durability (the pages are the file's page
	// cache, which outlives the process).
	var m []byte
	if !j.noMap {
		m, err = mapJournal(f, max(j.rotate, need))
		if err != nil && !errors.Is(err, errNoMap) {
			return fail(err)
		}
	}
	if j.sync {
		if err := syncDir(j.dir); err != nil {
			if m != nil {
				unmapJournal(m)
			}
			return fail(err)
		}
	}
	if err := j.sealLocked(); err != nil {
		if m != nil {
			unmapJournal(m)
		}
		return fail(err)
	}
	j.num++
	j.f, j.m, j.mp = f, m, nil
	if m != nil {
		j.mp = &journalMap{b: m}
		j.bg.Add(1)
		go j.populate(j.mp)
	}
	j.files = append(j.files, &journalFile{name: name, seed: journalSeed(name), nextLine: 1, rd: rd})
	if !j.started {
		j.started = true
		go j.run()
	}
	return nil
}

// createLockedNew creates tmp (which must not exist) for appending, with a
// second descriptor for reading that holds its lock (lockJournal). Between
// the create and the lock another process's sweep may take the new file
// for an abandoned one (removeAbandoned: unlocked, so its maker is gone)
// and remove it: the open or the lock then finds nothing, or tmp no longer
// names the file locked. Then it is made again, a few times.
func createLockedNew(tmp string) (f, rd *os.File, err error) {
	for range 5 {
		f, err = os.OpenFile(tmp, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, nil, err
		}
		rd, err = os.Open(tmp)
		if errors.Is(err, fs.ErrNotExist) {
			f.Close()
			continue // swept before it was locked
		}
		if err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, nil, err
		}
		if ok, lerr := lockJournal(rd); lerr != nil && !errors.Is(lerr, errNoLock) || lerr == nil && !ok {
			f.Close()
			rd.Close()
			os.Remove(tmp)
			return nil, nil, fmt.Errorf("lock %s: %v", tmp, lerr)
		}
		// Locked: no sweep removes it from now on. Still the file made?
		held, herr := rd.Stat()
		named, nerr := os.Stat(tmp)
		if herr == nil && nerr == nil && os.SameFile(held, named) {
			return f, rd, nil
		}
		f.Close()
		rd.Close()
		if nerr != nil && !errors.Is(nerr, fs.ErrNotExist) {
			return nil, nil, nerr
		}
		if nerr == nil {
			return nil, nil, fmt.Errorf("%s was replaced while it was made", tmp)
		}
	}
	return nil, nil, fmt.Errorf("%s was removed by another process's sweep five times while it was made", tmp)
}

// sealLocked stops appending to the current file: unmapped and cut to
// its lines (a mapped file is longer), and in sync mode synced.
func (j *Journal) sealLocked() error {
	if j.f == nil {
		return nil
	}
	cur := j.files[len(j.files)-1]
	var err error
	if j.m != nil {
		j.mp.retire()
		if !j.sync {
			// Unmapping takes ~1 ms and the cut only spares a sweeper the
			// zeros: both off the call path.
			m, f, size := j.m, j.f, cur.size
			j.bg.Go(func() {
				unmapJournal(m)
				f.Truncate(size)
				f.Close()
			})
			cur.sealed = true
			j.f, j.m, j.mp = nil, nil, nil
			return nil
		}
		err = unmapJournal(j.m)
		j.m, j.mp = nil, nil
		if terr := j.f.Truncate(cur.size); err == nil {
			err = terr
		}
	}
	if j.sync && err == nil {
		// Its records must be on disk before appends go elsewhere: the
		// syncer only syncs the current file.
		err = j.f.Sync()
		if err != nil {
			j.syncErr = err
			j.unusable.Store(true)
		}
	}
	if j.sync {
		j.retired = append(j.retired, j.f)
	} else {
		j.f.Close()
	}
	cur.sealed = true
	j.f = nil
	if err != nil {
		return fmt.Errorf("audit journal: seal %s: %w", cur.name, err)
	}
	return nil
}

// journalMap is a mapping the populator works on ahead of the writer.
type journalMap struct {
	b    []byte
	mu   sync.Mutex
	dead bool
}

// retire stops the populator (after the chunk it is on) before the
// mapping goes.
func (pm *journalMap) retire() {
	pm.mu.Lock()
	pm.dead = true
	pm.mu.Unlock()
}

// populate faults a new mapping's pages in, writable, ahead of the writer
// (MADV_POPULATE_WRITE, which touches no byte): taking a page's first
// write fault in the call path cost 15-30 µs per 4 KiB page, about 1 µs
// per record, against 7 ms for 8 MiB here. Where it is not supported the
// writer takes the faults.
func (j *Journal) populate(pm *journalMap) {
	defer j.bg.Done()
	const chunk = 256 << 10
	for off := 0; off < len(pm.b); off += chunk {
		pm.mu.Lock()
		if pm.dead {
			pm.mu.Unlock()
			return
		}
		err := populateJournal(pm.b[off:min(off+chunk, len(pm.b))])
		pm.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// syncTo returns once an fsync that began after the journal's write
// position reached pos has succeeded. Appenders waiting at once share
// one fsync.
func (j *Journal) syncTo(pos int64) error {
	j.smu.Lock()
	defer j.smu.Unlock()
	if j.synced >= pos {
		return nil
	}
	j.mu.Lock()
	f, upto, retired, serr := j.f, j.wpos.Load(), j.retired, j.syncErr
	j.retired = nil
	j.mu.Unlock()
	for _, r := range retired {
		r.Close() // synced when it was sealed
	}
	if serr != nil {
		return fmt.Errorf("audit journal: fsync: %w", serr)
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			j.mu.Lock()
			j.syncErr = err
			j.unusable.Store(true)
			j.mu.Unlock()
			return fmt.Errorf("audit journal: fsync: %w", err)
		}
	}
	j.synced = upto
	return nil
}

// Flush waits until every record appended before it was called is in the
// chain (or refused as damaged, which is in the chain too). It returns an
// ingestion error that happened while it waited, or ctx's.
func (j *Journal) Flush(ctx context.Context) error {
	j.mu.Lock()
	target, started := j.appended, j.started
	j.mu.Unlock()
	if !started {
		return nil
	}
	j.pmu.Lock()
	seq0 := j.errSeq
	j.pmu.Unlock()
	for {
		j.pmu.Lock()
		got, ch, errSeq, failErr := j.ingested, j.progress, j.errSeq, j.failErr
		j.pmu.Unlock()
		if got >= target {
			return nil
		}
		if errSeq > seq0 {
			return fmt.Errorf("audit journal: flush: %w", failErr)
		}
		select {
		case j.flushNow <- struct{}{}:
		default:
		}
		select {
		case j.wake <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("audit journal: flush: %d of %d records ingested: %w", got, target, ctx.Err())
		case <-j.final:
			j.pmu.Lock()
			got, failErr = j.ingested, j.failErr
			j.pmu.Unlock()
			if got >= target {
				return nil
			}
			return fmt.Errorf("audit journal: flush: %w (%d of %d records ingested; the rest stay in %s for the next Open: %v)",
				ErrJournalClosed, got, target, j.dir, failErr)
		}
	}
}

// JournalStats describes a journal's state.
type JournalStats struct {
	Appended int64 // records Append acknowledged
	Ingested int64 // lines of this journal's files ingested (or refused as damaged)
	Backlog  int64 // bytes written and not yet ingested
	// Torn: trailing partial lines dropped (a write cut short by the
	// writer's death), Damaged: lines refused and recorded as
	// AuditJournalDamaged, Swept: journal files of gone processes
	// ingested; all three count every journal this store ingested.
	Torn, Damaged, Swept int64
	LastError            error // the last ingestion attempt's, if it failed
}

// backlog is how many bytes are written and not yet ingested.
func (j *Journal) backlog() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.wpos.Load() - j.ingestedB.Load()
}

// Stats returns the journal's counters.
func (j *Journal) Stats() JournalStats {
	j.mu.Lock()
	st := JournalStats{Appended: j.appended, Backlog: j.wpos.Load() - j.ingestedB.Load()}
	j.mu.Unlock()
	j.pmu.Lock()
	st.Ingested, st.LastError = j.ingested, j.lastErr
	j.pmu.Unlock()
	st.Torn, st.Damaged, st.Swept = j.torn.Load(), j.damaged.Load(), j.swept.Load()
	return st
}

// run is the ingester: woken by an append, it waits out the batch window
// (or a Flush), then ingests all complete lines; after a failure it
// retries with a growing pause.
//
// It runs on a thread of lower priority (lowerThreadPriority, Linux): the
// records are already durable in the journal, so their ingestion yields
// the cores to the calls being made. Not when it must not lag: a Flush is
// waiting, or the backlog has passed a quarter of its bound (Append
// refuses beyond it); that attempt runs at normal priority on a goroutine
// of its own, since an unprivileged thread cannot raise its priority
// again.
func (j *Journal) run() {
	defer close(j.done)
	low := lowerThreadPriority()
	var backoff time.Duration
	lastSweep := time.Now()
	if j.sweepSoon.Load() { // Open's sweep found the store busy
		lastSweep = time.Time{}
	}
	for {
		wait := backoff
		urgent := false
		if backoff == 0 {
			select {
			case <-j.wake:
				wait = j.interval
			case <-j.flushNow:
				urgent = true
			case <-j.stop:
				return
			}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-j.flushNow:
				urgent = true
			case <-j.stop:
				t.Stop()
				return
			}
			t.Stop()
		}
		attempt := func() error {
			err := j.ingestOwn(context.Background())
			if err == nil && time.Since(lastSweep) > journalSweepEvery {
				lastSweep = time.Now()
				err = j.s.sweepJournals(context.Background())
			}
			return err
		}
		var err error
		if low && (urgent || j.backlog() > j.backlogMax/4) {
			done := make(chan error, 1)
			go func() { done <- attempt() }()
			err = <-done
		} else {
			j.lastYield.Store(time.Now().UnixNano())
			j.yielding.Store(low)
			err = attempt()
			j.yielding.Store(false)
			if errors.Is(err, errIngestBehind) {
				j.behind.Add(1)
				done := make(chan error, 1)
				go func() { done <- attempt() }()
				err = <-done
			}
		}
		j.publish(err)
		if err != nil {
			j.log.Error("audit journal: ingestion failed; retrying", "dir", j.dir, "err", err)
			backoff = min(max(50*time.Millisecond, 2*backoff), 5*time.Second)
			continue
		}
		backoff = 0
	}
}

func (j *Journal) publish(err error) {
	j.pmu.Lock()
	j.lastErr = err
	if err != nil {
		j.failErr = err
		j.errSeq++
	}
	close(j.progress)
	j.progress = make(chan struct{})
	j.pmu.Unlock()
}

// ingestOwn ingests this journal's files in order until no complete line
// is left, removing each sealed file once it is all in.
func (j *Journal) ingestOwn(ctx context.Context) error {
	for {
		j.mu.Lock()
		if len(j.files) == 0 {
			j.mu.Unlock()
			return nil
		}
		f := j.files[0]
		sealed, written := f.sealed, f.lines
		j.mu.Unlock()
		if f.rd == nil {
			rd, err := os.Open(filepath.Join(j.dir, f.name))
			if err != nil {
				return fmt.Errorf("audit journal: %w", err)
			}
			f.rd = rd
		}
		want := int64(-1)
		if sealed {
			want = written
		}
		res, err := j.s.ingestBatch(ctx, f.rd, j.dir, f.name, &f.committed, sealed, want, j.batch)
		if err != nil {
			return err
		}
		if res.nextLine > f.nextLine || res.bytes > f.bytes {
			j.ingestedB.Add(res.bytes - f.bytes)
			j.pmu.Lock()
			j.ingested += res.nextLine - f.nextLine
			j.pmu.Unlock()
			f.nextLine, f.bytes = res.nextLine, res.bytes
			j.publish(nil)
		}
		switch {
		case res.finished || res.gone:
			// Removed while still locked (f.rd holds the lock).
			if err := j.s.removeJournal(ctx, j.dir, f.name); err != nil {
				return err
			}
			f.rd.Close()
			f.rd = nil
			j.mu.Lock()
			j.files = j.files[1:]
			j.mu.Unlock()
		case !res.more:
			if sealed {
				return fmt.Errorf("audit journal %s: a sealed file that is neither finished nor has more lines", f.name)
			}
			return nil
		}
		if j.yielding.Load() && j.backlog() > j.backlogMax/2 {
			// The low-priority ingester is falling behind: the rest at
			// normal priority (run), before Append refuses.
			return errIngestBehind
		}
	}
}

// closeJournal stops appends, ingests what is left and removes this
// journal's files. Files it could not ingest stay for the next Open.
func (j *Journal) close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.unusable.Store(true)
	serr := j.sealLocked()
	started := j.started
	j.mu.Unlock()
	defer close(j.final)
	if !started {
		return nil
	}
	close(j.stop)
	<-j.done
	j.bg.Wait()
	j.smu.Lock()
	j.mu.Lock()
	for _, r := range j.retired {
		r.Close()
	}
	j.retired = nil
	j.mu.Unlock()
	j.smu.Unlock()
	err := j.ingestOwn(context.Background())
	if err != nil {
		j.log.Error("audit journal: records left for the next Open", "dir", j.dir, "err", err)
	}
	j.publish(err)
	j.mu.Lock()
	for _, f := range j.files {
		if f.rd != nil {
			f.rd.Close()
		}
	}
	j.mu.Unlock()
	return errors.Join(serr, err)
}

// --- ingestion (also of other processes' journals) ---------------------

// ingestResult is where ingestion of one file stands after a batch.
type ingestResult struct {
	nextLine, bytes int64 // as committed
	more            bool  // complete lines are left
	finished        bool  // sealed and read to its end
	gone            bool  // the file was finished and removed by another ingester
}

// journalNote is something to log once the batch that found it commits.
type journalNote struct {
	torn  bool
	msg   string
	attrs []any
}

// ingestBufs are the buffers an ingestion batch works in, kept for the
// next one: allocating (and zeroing) a window of the journal, the rows and
// the hashes' encodings for every batch, and a string for every field of
// every record, was a tenth of the ingester's CPU, and more of its
// garbage. One batch at a time uses them (mu).
type ingestBufs struct {
	mu    sync.Mutex
	data  []byte        // the journal's bytes read (readJournal)
	rows  []AuditRecord // the batch's records, chained
	hash  []byte        // a record's canonical encoding (auditHashBuf)
	args  []any         // an INSERT's arguments (insertAuditRows)
	names [4]string     // the last kind, actor, agent and tool decoded (decodeJournalLineNames)
}

// release lets go of what one batch held: the rows (their bodies point
// into data), and buffers grown beyond what a usual batch needs (a line of
// many MiB once need not stay in memory).
func (b *ingestBufs) release() {
	clear(b.rows)
	b.rows = b.rows[:0]
	if int64(cap(b.data)) > 2*journalWindow {
		b.data = nil
	}
	if cap(b.rows) > 2*defaultJournalBatch {
		b.rows = nil
	}
	if cap(b.hash) > 64<<10 {
		b.hash = nil
	}
}

// ingestBatch ingests up to batch complete lines of journal file name from
// where the store says its ingestion stopped, in one transaction that also
// records how far it got: whatever crashes, a line is in the chain once.
// The file's offset is read under the write lock, so concurrent ingesters
// (two processes sweeping one dead journal) never take a line twice.
// sealed means no line will be added: a trailing partial line is then a
// write cut short by the writer's death (torn: dropped, counted, logged).
// written, if not -1, is how many lines the writer wrote: fewer in the
// file is reported as lines missing at its end. committed, if not nil, is
// how far this process's own writer has committed whole lines, read once
// the batch holds its buffers.
func (s *DB) ingestBatch(ctx context.Context, rd *os.File, dir, name string, committed *atomic.Int64, sealed bool, written int64, batch int) (ingestResult, error) {
	var res ingestResult
	var notes []journalNote
	bufs := &s.ingestBufs
	bufs.mu.Lock()
	defer bufs.mu.Unlock()
	defer bufs.release()
	// Read once the batch may run: lines committed while it waited for
	// the buffers are in it too.
	limit := int64(-1)
	if committed != nil {
		limit = committed.Load()
	}
	err := s.writeAudit(ctx, func(tx *sql.Tx) error {
		res, notes = ingestResult{}, nil
		var off, next int64
		err := tx.QueryRowContext(ctx, `SELECT bytes, next_line FROM audit_journal WHERE file = ?`, name).Scan(&off, &next)
		if isNoRows(err) {
			// Never ingested, or finished and removed by another
			// ingester (which removes the file before the row).
			if _, serr := os.Stat(filepath.Join(dir, name)); errors.Is(serr, fs.ErrNotExist) {
				res.gone = true
				return nil
			}
			off, next, err = 0, 1, nil
		}
		if err != nil {
			return fmt.Errorf("read journal position of %s: %w", name, err)
		}
		data, size, nul, err := readJournal(rd, off, limit, s.journal.window, bufs.data)
		bufs.data = data[:0]
		if err != nil {
			return fmt.Errorf("read audit journal %s: %w", name, err)
		}
		seq, prev, err := s.auditHeadTx(ctx, tx)
		if err != nil {
			return err
		}
		// Chained here, inserted together at the end.
		rows := bufs.rows[:0]
		defer func() { bufs.rows = rows }()
		appendRec := func(r AuditRecord) {
			r.Seq, r.Prev = seq+1, prev
			r.Hash = auditHashBuf(r, &bufs.hash)
			seq, prev = r.Seq, r.Hash
			rows = append(rows, r)
		}
		damaged := func(line, at int64, reason string, raw []byte) error {
			body := map[string]any{"file": name, "line": line, "offset": at, "reason": reason}
			if raw != nil {
				body["raw"] = string(raw[:min(len(raw), 4096)])
			}
			notes = append(notes, journalNote{msg: "audit journal: a line refused", attrs: []any{"file", name, "line", line, "offset", at, "reason", reason}})
			r, err := s.normalAudit(AuditRecord{Kind: AuditJournalDamaged, Actor: "store", Body: auditBody(body)})
			if err != nil {
				return err
			}
			appendRec(r)
			return nil
		}
		seed := journalSeed(name)
		pos, next0 := off, next
		for n := 0; n < batch; n++ {
			if n%64 == 63 {
				s.journal.yieldP()
			}
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			line, at := data[:i], pos
			data, pos = data[i+1:], pos+int64(i)+1
			r, ln, why := decodeJournalLineNames(line, seed, &bufs.names)
			if why == "" {
				// The body is as Append compacted it (the checksum says
				// so); checked again, but not compacted again.
				if err := checkAuditRecord(r); err != nil {
					why = err.Error()
				}
			}
			switch {
			case why != "":
				if err := damaged(next, at, why, line); err != nil {
					return err
				}
				next++
				continue
			case ln < next:
				if err := damaged(ln, at, fmt.Sprintf("line number %d again after line %d (a repeated or moved line)", ln, next-1), line); err != nil {
					return err
				}
				continue
			case ln > next:
				if err := damaged(next, at, fmt.Sprintf("lines %d..%d are missing (the next present is %d)", next, ln-1, ln), nil); err != nil {
					return err
				}
			}
			appendRec(r)
			next = ln + 1
		}
		overlong := pos == off && len(data) > maxJournalLine
		if overlong {
			// No line end within the longest line Append writes: refuse
			// that much and go on after it.
			if err := damaged(next, pos, fmt.Sprintf("no line end within %d bytes", len(data)), data[:4096]); err != nil {
				return err
			}
			pos += int64(len(data))
			data = nil
			next++
		}
		// A read that held whole lines stops at the window, maybe inside
		// a longer line: that line is left for the next batch (whose read
		// starts with it and grows to its end), not taken for the file's
		// end. Only after progress, so that a file that shrank under the
		// read cannot make the caller loop.
		cut := pos > off && pos+int64(len(data)) < size
		res.more = overlong || cut || bytes.IndexByte(data, '\n') >= 0
		if sealed && !res.more && nul && pos+int64(len(data)) >= size {
			// Zeros where the lines end in a file no one writes any
			// more: its unwritten room, or (when more follows) a span
			// lost or zeroed, whose lines must not take the rest with
			// them. Ingestion goes on at the first line after it: the
			// next line's number then records the lines it held as
			// missing, and a line it cut into (its head before it, its
			// tail after it) is recorded here as one damaged line.
			st, err := rd.Stat()
			q, more := int64(0), false
			if err == nil {
				q, more, err = pastZeros(rd, size, st.Size())
			}
			var start, tail int64
			if err == nil && more {
				start, tail, err = lineAfterZeros(rd, q, st.Size())
			}
			if err != nil {
				return fmt.Errorf("read audit journal %s: %w", name, err)
			}
			if more {
				if len(data) > 0 || tail > 0 {
					raw := data
					if len(raw) == 0 {
						raw = nil
					}
					if err := damaged(next, pos, fmt.Sprintf("a line cut by %d zero bytes at offset %d (%d bytes of it before them, %d after)", q-size, size, len(data), tail), raw); err != nil {
						return err
					}
					next++
				}
				pos, data, res.more = start, nil, true
			}
		}
		if sealed && !res.more && pos+int64(len(data)) >= size {
			// The end of a file no one writes any more.
			if len(data) > 0 {
				notes = append(notes, journalNote{torn: true, msg: "audit journal: a torn last line dropped (its write was cut short: it was never acknowledged)",
					attrs: []any{"file", name, "offset", pos, "bytes", len(data)}})
				pos += int64(len(data))
			}
			if written >= 0 && next-1 < written {
				if err := damaged(next, pos, fmt.Sprintf("lines %d..%d are missing at the end of the file", next, written), nil); err != nil {
					return err
				}
				next = written + 1
			}
			res.finished = true
		}
		if pos == off && next == next0 && !res.finished {
			res.nextLine, res.bytes = next, off
			return nil
		}
		if bufs.args, err = s.insertAuditRows(ctx, tx, rows, bufs.args); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_journal (file, bytes, next_line, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (file) DO UPDATE SET bytes = excluded.bytes, next_line = excluded.next_line, updated_at = excluded.updated_at`,
			name, pos, next, s.now().UnixNano()); err != nil {
			return fmt.Errorf("record journal position of %s: %w", name, err)
		}
		res.nextLine, res.bytes = next, pos
		return nil
	})
	if err != nil {
		return ingestResult{}, fmt.Errorf("ingest audit journal %s: %w", filepath.Join(dir, name), err)
	}
	for _, n := range notes {
		if n.torn {
			s.journal.torn.Add(1)
			s.journal.log.Warn(n.msg, n.attrs...)
		} else {
			s.journal.damaged.Add(1)
			s.journal.log.Error(n.msg, n.attrs...)
		}
	}
	return res, nil
}

// readJournal reads file rd from off: at least one whole line if there is
// one (up to maxJournalLine), at most window bytes otherwise, and
// never past limit (if not -1: what its live writer has committed). end is
// where the file's written bytes end as far as it looked: its size, limit
// (or the file's size when the file is shorter: it was cut after its
// writer wrote it), or the first NUL byte (a mapped file's unwritten room
// is zeros, and no line holds a NUL; nul says so). It reads into buf if
// buf is large enough: data is then buf's (the caller keeps it for the
// next read).
func readJournal(rd *os.File, off, limit, window int64, buf []byte) (data []byte, end int64, nul bool, err error) {
	end = limit
	if end < 0 {
		st, err := rd.Stat()
		if err != nil {
			return nil, 0, false, err
		}
		end = st.Size()
	}
	for want := min(end-off, window); want > 0; want = min(end-off, max(2*want, int64(maxJournalLine)+1)) {
		if int64(cap(buf)) < want {
			buf = make([]byte, want)
		}
		data = buf[:want]
		n, err := rd.ReadAt(data, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return buf[:0], end, false, err
		}
		data = data[:n]
		if z := bytes.IndexByte(data, 0); z >= 0 {
			return data[:z], off + int64(z), true, nil
		}
		if int64(n) < want {
			// The file ends before what it was asked for: there, whatever
			// its writer said it wrote.
			end = min(end, off+int64(n))
		}
		if bytes.IndexByte(data, '\n') >= 0 || int64(n) < want || want >= end-off || want > maxJournalLine {
			return data, end, false, nil
		}
	}
	return buf[:0], end, false, nil
}

// lineAfterZeros returns where the first line after a span of zeros
// that ended at q starts: q if a line starts there, else after the tail
// of the line the zeros cut into (tail its length, the newline
// included). A tail with no newline within the longest line is left to
// ingestion (a torn or overlong last line): start q, tail 0.
func lineAfterZeros(rd *os.File, q, end int64) (start, tail int64, err error) {
	buf := make([]byte, 64<<10)
	for at := q; at < min(end, q+int64(maxJournalLine)+1); {
		n, err := rd.ReadAt(buf[:min(int64(len(buf)), end-at)], at)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err
		}
		b := buf[:n]
		if at == q && bytes.HasPrefix(b, []byte(`{"n":`)) {
			return q, 0, nil
		}
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return at + int64(i) + 1, at - q + int64(i) + 1, nil
		}
		if n == 0 {
			break
		}
		at += int64(n)
	}
	return q, 0, nil
}

// pastZeros returns where the first byte that is not zero lies in rd at
// or after from, before end; false when there is none (the file's
// unwritten room, a mapped file's tail). Holes are skipped without a read
// (SEEK_DATA where the filesystem has it).
func pastZeros(rd *os.File, from, end int64) (int64, bool, error) {
	buf := make([]byte, 64<<10)
	for from < end {
		if d, err := seekData(rd, from); err != nil {
			return 0, false, err
		} else if d < 0 || d >= end {
			return 0, false, nil
		} else {
			from = d
		}
		n, err := rd.ReadAt(buf[:min(int64(len(buf)), end-from)], from)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, false, err
		}
		for i, b := range buf[:n] {
			if b != 0 {
				return from + int64(i), true, nil
			}
		}
		if n == 0 {
			return 0, false, nil
		}
		from += int64(n)
	}
	return 0, false, nil
}

// removeJournal removes a finished journal file, then its position row:
// in that order (and the removal made durable first), so that a crash in
// between leaves a row without a file, never a file without its row,
// which would be ingested again.
func (s *DB) removeJournal(ctx context.Context, dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove ingested audit journal: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("remove ingested audit journal %s: %w", name, err)
	}
	return s.writeKeep(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM audit_journal WHERE file = ?`, name)
		return err
	})
}

// sweepJournals ingests completely, then removes, the journal files of
// processes that are gone, and forgets the position rows of files already
// removed. A file's writer is alive while it holds the file's lock
// (lockJournal, taken before the file got its name and held until it is
// removed, released by the kernel when the process dies, whatever PID
// namespace it ran in); where file locks are not available, a writer is
// gone if it ran on this host and its PID no longer exists (runnerGone).
func (s *DB) sweepJournals(ctx context.Context) error {
	dir := s.journal.dir
	if err := checkJournalDir(dir); err != nil {
		return fmt.Errorf("audit journal: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // no journal was ever written (or can be: Append says so)
	}
	if err != nil {
		return fmt.Errorf("audit journal: %w", err)
	}
	host, _ := os.Hostname()
	type jf struct {
		runner string
		num    int
		name   string
	}
	var todo []jf
	for _, e := range ents {
		runner, num, ok := parseJournalName(e.Name())
		if ok && e.Type().IsRegular() && !strings.HasPrefix(e.Name(), s.journal.prefix) {
			todo = append(todo, jf{runner, num, e.Name()})
		}
		if strings.HasSuffix(e.Name(), journalExt+".new") && !strings.HasPrefix(e.Name(), s.journal.prefix) {
			removeAbandoned(filepath.Join(dir, e.Name()))
		}
	}
	slices.SortFunc(todo, func(a, b jf) int {
		if c := strings.Compare(a.runner, b.runner); c != 0 {
			return c
		}
		return a.num - b.num
	})
	for _, f := range todo {
		swept, err := s.sweepFile(ctx, dir, f.name, host, f.runner)
		if err != nil {
			return err
		}
		if swept {
			s.journal.swept.Add(1)
			s.journal.log.Info("audit journal of a gone process ingested", "file", filepath.Join(dir, f.name))
		}
	}
	if s.pg != nil {
		// On PostgreSQL the table also holds the positions of other
		// instances' files, in directories this process cannot see (other
		// machines, other JournalDirs): a row without a file here is not
		// stale, and forgetting it would make its file be ingested again
		// from the start. Stale rows (an ingester died between removing a
		// file and its row) are left: one small row each.
		return nil
	}
	// Rows of files removed by an ingester that died before forgetting
	// them (a row is made by ingesting an existing file, and a file is
	// removed only when finished: a row without its file is stale).
	rows, err := s.db.QueryContext(ctx, `SELECT file FROM audit_journal`)
	if err != nil {
		return fmt.Errorf("audit journal positions: %w", err)
	}
	var stale []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			stale = append(stale, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range stale {
		if err := s.writeKeep(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM audit_journal WHERE file = ?`, name)
			return err
		}); err != nil {
			return fmt.Errorf("audit journal positions: %w", err)
		}
	}
	return nil
}

// removeAbandoned removes a journal file its writer died making (before
// it got its name, so before any record went in), if it can lock it.
func removeAbandoned(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if ok, err := lockJournal(f); ok && err == nil {
		os.Remove(path)
	}
}

// sweepFile ingests and removes journal file name if its writer is gone
// (swept false: alive, or swept by another process meanwhile).
func (s *DB) sweepFile(ctx context.Context, dir, name, host, runner string) (swept bool, err error) {
	rd, err := os.Open(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // another process swept it
	}
	if err != nil {
		return false, fmt.Errorf("audit journal: %w", err)
	}
	defer rd.Close() // after the removal: the lock is released last
	locked, err := lockJournal(rd)
	switch {
	case errors.Is(err, errNoLock):
		if !runnerGone(host, runner) {
			return false, nil
		}
	case err != nil:
		return false, fmt.Errorf("audit journal: lock %s: %w", name, err)
	case !locked:
		return false, nil // its writer lives (or another sweeper has it)
	}
	if err := checkJournalFile(rd); err != nil {
		return false, fmt.Errorf("audit journal: %w", err)
	}
	return true, s.ingestFile(ctx, rd, dir, name)
}

// ingestFile ingests a sealed journal file (open as rd) to its end and
// removes it.
func (s *DB) ingestFile(ctx context.Context, rd *os.File, dir, name string) error {
	for {
		res, err := s.ingestBatch(ctx, rd, dir, name, nil, true, -1, defaultJournalBatch)
		if err != nil {
			return err
		}
		if res.finished || res.gone {
			return s.removeJournal(ctx, dir, name)
		}
		if !res.more {
			return fmt.Errorf("audit journal %s: ingestion stopped before its end", name)
		}
	}
}

// --- encoding -----------------------------------------------------------

// A journal line is one JSON object on one line:
//
//	{"n":7,"at":UNIX_NS,"kind":"...","actor":"...","agent":"...","tool":"...","body":BODY,"crc":"XXXXXXXX"}
//
// n numbers the file's lines from 1 (a deleted, repeated or moved line
// shows); crc is CRC-32C, seeded with the file's name, of every byte
// before `,"crc":` (an edited line, or one copied from another journal,
// shows). A checksum, not a signature: whoever can write the file can
// recompute it, as they could the chain's hashes.

// encodeJournalFields writes the fields after "n" (without a leading
// comma): at, kind, actor, agent, tool and the compacted body.
func encodeJournalFields(b *bytes.Buffer, r AuditRecord) error {
	var num [20]byte
	b.WriteString(`"at":`)
	b.Write(strconv.AppendInt(num[:0], r.At.UnixNano(), 10))
	for _, kv := range [...]struct{ k, v string }{{`,"kind":`, r.Kind}, {`,"actor":`, r.Actor}, {`,"agent":`, r.Agent}, {`,"tool":`, r.Tool}} {
		b.WriteString(kv.k)
		writeJSONString(b, kv.v)
	}
	b.WriteString(`,"body":`)
	if len(r.Body) == 0 {
		b.WriteString("null")
		return nil
	}
	switch valid, compact := scanJSON(r.Body); {
	case !valid:
		return fmt.Errorf("%w: audit record body is not JSON", ErrBadInput)
	case compact:
		b.Write(r.Body)
	default:
		json.Compact(b, r.Body)
	}
	return nil
}

// appendJournalLine appends line number n of a file whose checksum seed
// is seed, fields being the record's encoded fields, and its '\n'.
func appendJournalLine(b []byte, n int64, fields []byte, seed uint32) []byte {
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, ',')
	b = append(b, fields...)
	sum := crc32.Update(seed, castagnoli, b)
	b = append(b, `,"crc":"`...)
	b = hex.AppendEncode(b, []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
	return append(b, "\"}\n"...)
}

// writeJSONString writes s (valid UTF-8) as a JSON string: '"', '\' and
// control characters escaped, everything else as it is, so that decoding
// gives back exactly s.
func writeJSONString(b *bytes.Buffer, s string) {
	const hexd = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&0xf])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

func journalSeed(name string) uint32 { return crc32.Checksum([]byte(name), castagnoli) }

// decodeJournalLine checks and decodes one line (without its '\n'). A
// non-empty why says why it is refused.
func decodeJournalLine(line []byte, seed uint32) (r AuditRecord, n int64, why string) {
	return decodeJournalLineNames(line, seed, nil)
}

// decodeJournalLineNames is decodeJournalLine sharing the strings of the
// kind, actor, agent and tool with the line decoded before it where they
// are the same (names holds them, if not nil).
func decodeJournalLineNames(line []byte, seed uint32, names *[4]string) (r AuditRecord, n int64, why string) {
	if len(line) < crcSuffixLen+2 || !bytes.HasPrefix(line[len(line)-crcSuffixLen:], []byte(`,"crc":"`)) || !bytes.HasSuffix(line, []byte(`"}`)) {
		return r, 0, "not a journal line (no checksum at its end)"
	}
	want, ok := parseHex32(line[len(line)-crcSuffixLen+len(`,"crc":"`) : len(line)-2])
	if !ok {
		return r, 0, "its checksum is not 8 hex digits"
	}
	got := crc32.Update(seed, castagnoli, line[:len(line)-crcSuffixLen])
	if got != want {
		return r, 0, "its checksum does not match its content (edited, damaged, or copied from another journal)"
	}
	if r, n, ok := parseJournalLineNames(line[:len(line)-crcSuffixLen], names); ok {
		return r, n, ""
	}
	// Not in the exact form Append writes (field order, number syntax):
	// decode it as any JSON object.
	var l struct {
		N     *int64          `json:"n"`
		At    *int64          `json:"at"`
		Kind  string          `json:"kind"`
		Actor string          `json:"actor"`
		Agent string          `json:"agent"`
		Tool  string          `json:"tool"`
		Body  json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return r, 0, "it does not decode: " + err.Error()
	}
	if l.N == nil || l.At == nil || *l.N < 1 {
		return r, 0, "it has no line number or no time"
	}
	return AuditRecord{At: time.Unix(0, *l.At).UTC(), Kind: l.Kind, Actor: l.Actor, Agent: l.Agent, Tool: l.Tool, Body: l.Body}, *l.N, ""
}

// parseHex32 decodes 8 hex digits (either case, as encoding/hex does).
func parseHex32(h []byte) (uint32, bool) {
	if len(h) != 8 {
		return 0, false
	}
	var v uint32
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}

// parseJournalLine reads a line in exactly the form Append writes, up to
// the checksum (p excludes `,"crc":...`): a fast path that takes no
// reflection. Strings without escapes are taken as they are; one with an
// escape is decoded by encoding/json. Anything else is not ok (and gets
// the general decoder).
func parseJournalLine(p []byte) (r AuditRecord, n int64, ok bool) {
	return parseJournalLineNames(p, nil)
}

// parseJournalLineNames is parseJournalLine with the kind, actor, agent
// and tool shared with the last line's where equal (see
// decodeJournalLineNames): a journal's records mostly repeat them.
func parseJournalLineNames(p []byte, names *[4]string) (r AuditRecord, n int64, ok bool) {
	num := func(key string) (int64, bool) {
		if !bytes.HasPrefix(p, []byte(key)) {
			return 0, false
		}
		p = p[len(key):]
		i := bytes.IndexByte(p, ',')
		if i < 1 {
			return 0, false
		}
		v, err := strconv.ParseInt(string(p[:i]), 10, 64)
		p = p[i:]
		return v, err == nil
	}
	str := func(key string, last *string) (string, bool) {
		if !bytes.HasPrefix(p, []byte(key)) || len(p) < len(key)+2 || p[len(key)] != '"' {
			return "", false
		}
		p = p[len(key):]
		esc := false
		for i := 1; i < len(p); i++ {
			switch {
			case p[i] == '\\':
				esc = true
				i++
			case p[i] < 0x20:
				return "", false
			case p[i] == '"':
				raw := p[:i+1]
				p = p[i+1:]
				if !esc {
					if v := raw[1 : len(raw)-1]; last != nil && string(v) == *last {
						return *last, true
					} else if last != nil {
						*last = string(v)
						return *last, true
					}
					return string(raw[1 : len(raw)-1]), true
				}
				var v string
				err := json.Unmarshal(raw, &v)
				return v, err == nil
			}
		}
		return "", false
	}
	var at int64
	if n, ok = num(`{"n":`); !ok || n < 1 {
		return r, 0, false
	}
	if at, ok = num(`,"at":`); !ok {
		return r, 0, false
	}
	r.At = time.Unix(0, at).UTC()
	for i, f := range [...]struct {
		key string
		to  *string
	}{{`,"kind":`, &r.Kind}, {`,"actor":`, &r.Actor}, {`,"agent":`, &r.Agent}, {`,"tool":`, &r.Tool}} {
		var last *string
		if names != nil {
			last = &names[i]
		}
		if *f.to, ok = str(f.key, last); !ok {
			return r, 0, false
		}
	}
	if !bytes.HasPrefix(p, []byte(`,"body":`)) {
		return r, 0, false
	}
	r.Body = json.RawMessage(p[len(`,"body":`):])
	return r, n, true // the body is checked with the rest of the record
}

// --- names --------------------------------------------------------------

// A journal file is named HOST_PID_NONCE_N.jl: the runner that writes it
// (runnerID, with the host's characters other than letters, digits, '.'
// and '-' as %XX) and its number.

func splitRunner(runner string) (host, pid, nonce string) {
	parts := strings.SplitN(runner, "/", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return parts[0], parts[1], parts[2]
}

func escapeHost(h string) string {
	var b strings.Builder
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func unescapeHost(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}

// parseJournalName returns the runner ("HOST/PID/NONCE") and number of a
// journal file name.
func parseJournalName(name string) (runner string, num int, ok bool) {
	base, found := strings.CutSuffix(name, journalExt)
	parts := strings.Split(base, "_")
	if !found || len(parts) != 4 {
		return "", 0, false
	}
	host, ok := unescapeHost(parts[0])
	num, err := strconv.Atoi(parts[3])
	if !ok || err != nil || num < 1 || parts[1] == "" || parts[2] == "" {
		return "", 0, false
	}
	return host + "/" + parts[1] + "/" + parts[2], num, true
}

// syncDir makes a directory's entries (a file created or removed) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
