package compcache

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Trimming keeps the cache from growing without end. Compiled code is
// large (a JavaScript tool is ~50 MB) and a rebuilt tool is a new entry, so
// a cache that only grows fills the disk of anyone who edits tools. The
// policy is least recently used, like wasmtime's and Go's build caches:
//
//   - Load and OpenFile mark an entry used by setting its artifact's
//     modification time, at most once per useInterval (so a hot entry costs
//     no write per load).
//   - Put trims the cache at most once per trimInterval across every
//     process sharing it (the time of the last trim is the stamp file's),
//     or sooner when this process alone has written an eighth of the limit
//     since its last trim: entries unused for MaxAge go, then, while the
//     rest is over the size limit, the least recently used ones until
//     trimTarget percent of the limit is left.
//
// Trimming removes only names the cache writes (two-hex-digit
// subdirectories holding artifacts, records and temporary files of the
// cache's own pattern), never follows a link, and works relative to the
// checked directory's handle like every other operation here: a cache
// pointed at a directory that holds other files leaves those alone. A file
// removed while another process maps it stays readable to that process
// (Linux keeps an unlinked inode until its last user lets go); its next
// load compiles again.
//
// A trim runs inside the Put that found it due, after the write: listing
// 10,000 entries took ~85 ms here, and removing 6,342 of them ~270 ms, paid
// by the Put of a fresh compile at most hourly (or sooner when this process
// writes an eighth of the limit).
const (
	// DefaultMaxBytes is the size limit when MAIDEN_CACHE_MAX is unset:
	// room for about forty JavaScript tools or thousands of small ones.
	DefaultMaxBytes = 2 << 30
	// MaxAge removes an entry nobody used for this long, whatever the
	// size (an old engine's artifacts, a tool since deleted).
	MaxAge = 14 * 24 * time.Hour

	// MaxBytesEnv names the environment variable that sets the size limit:
	// a size such as 512MiB or 4G (units are powers of 1024), or "off" for
	// no size limit (entries unused for MaxAge are still removed).
	MaxBytesEnv = "MAIDEN_CACHE_MAX"

	useInterval  = time.Hour
	trimInterval = time.Hour
	trimTarget   = 70 // percent of the limit left by a size trim
	// staleAfter is how old a temporary file, a record without its
	// artifact or an artifact without its record must be to be removed:
	// younger ones may be a Put in progress in another process.
	staleAfter = time.Hour
	stampName  = "trim-stamp"
)

// MaxBytesFromEnv reads the size limit from MaxBytesEnv: DefaultMaxBytes
// when unset, 0 (no size limit) for "off". A value it cannot read is an
// error naming it, with DefaultMaxBytes.
func MaxBytesFromEnv() (int64, error) {
	v, ok := os.LookupEnv(MaxBytesEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return DefaultMaxBytes, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return DefaultMaxBytes, fmt.Errorf("%s=%q: %v; using the default limit of %d bytes", MaxBytesEnv, v, err, int64(DefaultMaxBytes))
	}
	return n, nil
}

// ParseSize reads a cache size: a whole number of bytes with an optional
// unit K, M, G or T (powers of 1024; "KiB", "KB" and "k" mean the same), or
// "off" (returned as 0: no size limit).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("not a size (want a number of bytes such as 512MiB or 4G, or off)")
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("number out of range")
	}
	unit := strings.ToUpper(strings.TrimSpace(s[i:]))
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "I")
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (want K, M, G or T)", strings.TrimSpace(s[i:]))
	}
	if n > (1<<62)>>sh {
		return 0, fmt.Errorf("number out of range")
	}
	if n == 0 {
		return 0, fmt.Errorf("a limit of 0 bytes would remove every entry; use off for no size limit")
	}
	return n << sh, nil
}

// SetMaxBytes changes the size limit (0: none). Open sets it from
// MaxBytesEnv.
func (c *Cache) SetMaxBytes(n int64) { c.maxBytes.Store(n) }

// touch marks an entry used now if its artifact's time is older than
// useInterval. A failure (a read-only cache) only loses recency.
func (c *Cache) touch(dfd int, file string, mtime time.Time) {
	if time.Since(mtime) < useInterval {
		return
	}
	now := unix.NsecToTimespec(time.Now().UnixNano())
	_ = unix.UtimesNanoAt(dfd, file, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
}

// maybeTrim runs after a Put of n bytes: it trims when the last trim by
// any process is older than trimInterval, or when this process has written
// an eighth of the limit since its last trim. The artifact just put (file
// name justPut) is kept even if it alone is over the limit.
func (c *Cache) maybeTrim(justPut string, n int64) {
	written := c.written.Add(n)
	max := c.maxBytes.Load()
	due := max > 0 && written > max/8
	if !due {
		var st unix.Stat_t
		err := unix.Fstatat(c.fd, stampName, &st, unix.AT_SYMLINK_NOFOLLOW)
		due = err != nil || time.Since(time.Unix(st.Mtim.Unix())) >= trimInterval
	}
	if !due || !c.trimming.TryLock() {
		return
	}
	defer c.trimming.Unlock()
	st, err := c.startTrim(justPut)
	if err != nil {
		c.log.Warn("trimming the compiled-component cache", "dir", c.dir, "error", err)
		return
	}
	if st.Removed > 0 {
		c.log.Debug("compiled-component cache trimmed", "dir", c.dir, "removed", st.Removed, "freed_bytes", st.Freed, "kept_bytes", st.Kept)
	}
}

// startTrim stamps and trims, keeping the artifact named keep; the caller
// holds c.trimming.
func (c *Cache) startTrim(keep string) (TrimStats, error) {
	c.written.Store(0)
	c.stamp()
	return c.trim(keep)
}

// stamp records that a trim starts now, for every process sharing the
// cache. The stamp is never followed if it is a link (its own time is set).
func (c *Cache) stamp() {
	fd, err := unix.Openat(c.fd, stampName, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err == nil {
		unix.Close(fd)
	}
	now := unix.NsecToTimespec(time.Now().UnixNano())
	_ = unix.UtimesNanoAt(c.fd, stampName, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
}

// TrimStats says what a trim did.
type TrimStats struct {
	Removed int   // entries and stray files removed
	Freed   int64 // bytes they held
	Kept    int64 // bytes of the entries left
}

// cached is one entry found by a trim.
type cached struct {
	sub, file   string // file is the artifact's name
	bytes       int64  // artifact and record
	used        time.Time
	artifact    bool
	record      bool
	recordBytes int64
	recordTime  time.Time
}

// staleHalf tells whether e is half an entry (a record without its
// artifact, or an artifact without its record) old enough not to be a Put
// in progress in another process.
func (e *cached) staleHalf(now time.Time) bool {
	switch {
	case !e.artifact:
		return now.Sub(e.recordTime) >= staleAfter
	case !e.record:
		return now.Sub(e.used) >= staleAfter
	}
	return false
}

// testHookTrimScanned is called by trim between listing the cache and
// removing from it; nil outside tests, which pause a trim there.
var testHookTrimScanned func(*Cache)

// trim removes what the policy above says should go, now, except the
// artifact named keep (the one just put; "" for none). It returns what it
// removed and how much is left; an error means the cache directory could
// not be listed (a subdirectory that cannot be is skipped).
func (c *Cache) trim(keep string) (TrimStats, error) {
	now := time.Now()
	entries, st, err := c.scan(now, true)
	if err != nil {
		return st, err
	}
	if testHookTrimScanned != nil {
		testHookTrimScanned(c)
	}
	var live []*cached
	var total int64
	for _, e := range entries {
		switch {
		case e.staleHalf(now), e.artifact && now.Sub(e.used) >= MaxAge:
			st.Removed++
			st.Freed += c.removeEntry(e)
		case e.artifact:
			live = append(live, e)
			total += e.bytes
		}
	}
	if max := c.maxBytes.Load(); max > 0 && total > max {
		target := max / 100 * trimTarget
		sort.Slice(live, func(i, j int) bool { return live[i].used.Before(live[j].used) })
		for _, e := range live {
			if total <= target {
				break
			}
			if e.file == keep {
				continue
			}
			st.Removed++
			freed := c.removeEntry(e)
			st.Freed += freed
			total -= freed
		}
	}
	st.Kept = total
	return st, nil
}

// scan lists the cache's entries in every subdirectory, removing stale
// temporary files on the way if removeStale (the stats count those).
func (c *Cache) scan(now time.Time, removeStale bool) ([]*cached, TrimStats, error) {
	var st TrimStats
	subs, err := c.list(".")
	if err != nil {
		return nil, st, err
	}
	var entries []*cached
	for _, sub := range subs {
		if len(sub) != 2 || !isHex(sub) {
			continue
		}
		found, removed, freed := c.scanSub(sub, now, removeStale)
		entries = append(entries, found...)
		st.Removed += removed
		st.Freed += freed
	}
	return entries, st, nil
}

// scanSub lists one subdirectory: the cache's entries in it, and stale
// temporary files, which it removes if removeStale.
func (c *Cache) scanSub(sub string, now time.Time, removeStale bool) (entries []*cached, removed int, freed int64) {
	d, err := c.openList(sub)
	if err != nil {
		return nil, 0, 0 // a link or not a directory: not the cache's
	}
	defer d.Close()
	dfd := int(d.Fd())
	if checkDir(dfd, sub, c.uid, true, cacheWhat) != nil {
		return nil, 0, 0 // refused (and removed) when an entry in it is used
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, 0, 0
	}
	byName := map[string]*cached{}
	get := func(file string) *cached {
		e := byName[file]
		if e == nil {
			e = &cached{sub: sub, file: file}
			byName[file] = e
			entries = append(entries, e)
		}
		return e
	}
	for _, name := range names {
		kind, file := classify(name)
		if kind == notOurs {
			continue
		}
		var fst unix.Stat_t
		if unix.Fstatat(dfd, name, &fst, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		mtime := time.Unix(fst.Mtim.Unix())
		switch kind {
		case tempFile:
			if removeStale && now.Sub(mtime) >= staleAfter && unix.Unlinkat(dfd, name, 0) == nil {
				removed++
				freed += fst.Size
			}
		case artifactFile:
			e := get(file)
			e.artifact, e.used = true, mtime
			e.bytes += fst.Size
		case recordFile:
			e := get(file)
			e.record, e.recordTime, e.recordBytes = true, mtime, fst.Size
			e.bytes += fst.Size
		}
	}
	return entries, removed, freed
}

type fileKind int

const (
	notOurs fileKind = iota
	artifactFile
	recordFile
	tempFile
)

// classify names the kind of a file in a subdirectory by the patterns Put
// writes: "<64 hex>-<16 hex>.cwasm", the same plus recordSuffix, and either
// of those as ".<name>.tmp-<16 hex>". It returns the artifact's name for
// an artifact or record. Anything else is not the cache's.
func classify(name string) (fileKind, string) {
	isArtifact := func(s string) bool {
		const n = 64 + 1 + 16 + len(".cwasm")
		return len(s) == n && s[64] == '-' && strings.HasSuffix(s, ".cwasm") && isHex(s[:64]) && isHex(s[65:81])
	}
	if rest, ok := strings.CutPrefix(name, "."); ok {
		i := strings.LastIndex(rest, ".tmp-")
		if i < 0 || len(rest)-i-len(".tmp-") != 16 || !isHex(rest[i+len(".tmp-"):]) {
			return notOurs, ""
		}
		base := strings.TrimSuffix(rest[:i], recordSuffix)
		if !isArtifact(base) {
			return notOurs, ""
		}
		return tempFile, ""
	}
	if base, ok := strings.CutSuffix(name, recordSuffix); ok {
		if isArtifact(base) {
			return recordFile, base
		}
		return notOurs, ""
	}
	if isArtifact(name) {
		return artifactFile, name
	}
	return notOurs, ""
}

// removeEntry removes an entry's artifact, then its record (a reader
// between the two finds no artifact and compiles). It returns the bytes
// freed.
func (c *Cache) removeEntry(e *cached) int64 {
	dfd, err := unix.Openat(c.fd, e.sub, dirFlags|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(dfd)
	var freed int64
	if e.artifact && unix.Unlinkat(dfd, e.file, 0) == nil {
		freed += e.bytes - e.recordBytes
	}
	if e.record && unix.Unlinkat(dfd, e.file+recordSuffix, 0) == nil {
		freed += e.recordBytes
	}
	return freed
}

// openList opens the directory name (relative to the cache's handle)
// for listing, without following a link.
func (c *Cache) openList(name string) (*os.File, error) {
	fd, err := unix.Openat(c.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// list names what the directory name (relative to the cache's handle)
// holds.
func (c *Cache) list(name string) ([]string, error) {
	d, err := c.openList(name)
	if err != nil {
		return nil, fmt.Errorf("compiled-component cache: list %s: %w", c.dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("compiled-component cache: list %s: %w", c.dir, err)
	}
	return names, nil
}
