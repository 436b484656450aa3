package sandbox

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/regfile"
	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmtime"
)

// FileKey identifies one version of a file on disk. Modification time and
// size catch an edit in place; the inode catches a file replaced by rename
// (how editors and build tools usually write), even within one mtime tick.
type FileKey struct {
	mtime int64 // UnixNano
	size  int64
	ino   uint64
}

// ModTime is the file's modification time.
func (k FileKey) ModTime() time.Time { return time.Unix(0, k.mtime) }

// MaxComponentBytes bounds a tool's component file maiden reads.
const MaxComponentBytes = 512 << 20

// ReadComponentFile reads the tool's component file at path, at most
// MaxComponentBytes. It opens without blocking and refuses what is not a
// regular file when opened, not only when StatKey looked: whoever can write
// the tool's directory could rename a FIFO over the file between the two,
// and a blocking open would then hang the call past its deadline until
// someone wrote to the pipe.
func ReadComponentFile(path string) ([]byte, error) {
	return regfile.Read(path, MaxComponentBytes)
}

// StatKey is the FileKey of the regular file at path (runners that keep
// their own cache of tool versions use it too).
func StatKey(path string) (FileKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileKey{}, err
	}
	if !fi.Mode().IsRegular() {
		return FileKey{}, fmt.Errorf("%s is not a regular file", path)
	}
	k := FileKey{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k, nil
}

// loaded is a compiled tool component that matches the contract.
type loaded struct {
	comp   *wasmtime.Component
	digest string // sha256 of the component bytes
	world  string // WorldTool or WorldMiddleware

	// fromDisk tells whether the compiled code came from the disk cache.
	fromDisk bool
	compile  time.Duration
	// size is the compiled code's size (its serialized form), what the
	// entry costs in the in-memory cache.
	size int64
	// opened is the Tool Open made of this version once its description
	// was read: every later Open of the version returns it (a Tool is
	// immutable), so a call's Open allocates nothing.
	opened atomic.Pointer[Tool]
}

// entry is the cache slot of one path. ready is closed when the load that
// created it finishes; until then other callers wait for it instead of
// compiling the same file again.
type entry struct {
	path string
	key  FileKey
	// want is the digest ("sha256:HEX") the caller that created the entry
	// pinned the file to, "" for none: compile refused bytes hashing to
	// anything else before compiling them (a *DigestError).
	want  string
	ready chan struct{}
	// refused marks err as a *DigestError: the bytes hashed to another
	// digest than want.
	refused bool
	tool    *loaded
	err     error
	// unsettled marks a failure to read a file that was modified moments
	// ago: probably a build still writing it in place. It is not final
	// until the file has been quiet for settleTime.
	unsettled bool
	lru       *list.Element // in cache.lru while tool is cached
}

// cache maps a component path to its compiled form, keyed by the file's
// version. Compiled code also goes to disk, keyed by content and engine, so a
// restart (or a second maiden) deserializes instead of compiling.
//
// Memory is bounded by maxBytes of compiled code, least recently used
// entries evicted first. An evicted version is only dropped by the cache:
// whoever still holds it (a Tool, a call starting) keeps it valid, and its
// code is freed once nothing refers to it (a cleanup on the loaded value).
// A version replaced because its file changed is freed at once instead, so
// a Tool of it reports ErrStale rather than running code that is gone from
// disk.
type cache struct {
	engine *wasmtime.Engine
	disk   *compcache.Cache // nil: no disk cache
	dir    string           // the disk cache's directory; "" when disabled
	log    *slog.Logger
	// check refuses a freshly compiled component that does not match the
	// contract.
	check    func(comp *wasmtime.Component) error
	maxBytes int64
	// onCompile is told of each compile no cache spared (Options.OnCompile).
	onCompile func(path string)

	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // of *entry, most recently used first
	bytes   int64      // compiled code held by entries in lru
	// evicted holds the code of evicted versions not yet freed (someone
	// may still hold them), so close can free them and memory pressure can
	// hurry the collector that frees them.
	evicted      map[*wasmtime.Component]int64
	evictedBytes int64
	evictions    int // how many, for tests and diagnostics
	collecting   bool

	settleTime time.Duration // see entry.unsettled
	settleWait time.Duration // between looks at an unsettled file
	onSettle   func()        // test hook: called before each wait
}

// DefaultMaxCacheBytes bounds the in-memory compile cache when
// Options.MaxCacheBytes is 0: room for about twenty JavaScript tools (a
// JavaScript engine is ~45 MB of compiled code) or thousands of small ones.
const DefaultMaxCacheBytes = 1 << 30

func newCache(engine *wasmtime.Engine, dir string, maxBytes int64, log *slog.Logger, check func(*wasmtime.Component) error) *cache {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxCacheBytes
	}
	c := &cache{
		engine: engine, log: log, check: check, maxBytes: maxBytes,
		entries: map[string]*entry{}, lru: list.New(), evicted: map[*wasmtime.Component]int64{},
		settleTime: 1500 * time.Millisecond, settleWait: 25 * time.Millisecond,
	}
	if dir != "" {
		disk, err := compcache.Open(dir, engine.Fingerprint(), log)
		if err != nil {
			log.Warn("compiled-component disk cache disabled", "error", err)
		} else {
			c.disk, c.dir = disk, disk.Dir()
		}
	}
	return c
}

// get returns the compiled component for path, compiling (or loading from
// disk) when the file changed since the last call. A file that fails to load
// keeps failing from cache until it changes, except one modified moments ago
// (see entry.unsettled), which is looked at again until it settles or ctx
// ends.
//
// want ("sha256:HEX", or "" for none) is the digest the caller verified the
// file as: bytes read that hash to anything else are refused with a
// *DigestError before they are compiled, and so is a version loaded for
// another caller whose digest is not want. The hash is the one compile
// takes anyway (the disk cache's key, LoadInfo.Digest); a version already
// loaded under the same want costs nothing more (its want is the caller's
// own string, compared by pointer).
func (c *cache) get(ctx context.Context, path, want string) (*loaded, error) {
	for {
		key, err := StatKey(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidTool, err)
		}
		c.mu.Lock()
		e := c.entries[path]
		if e == nil || e.key != key || (e.unsettled && c.settled(key)) || e.refusedFor(want) {
			old := e
			e = &entry{path: path, key: key, want: want, ready: make(chan struct{})}
			c.entries[path] = e
			if old != nil {
				c.unlink(old)
			}
			c.mu.Unlock()
			if old != nil {
				go c.retire(old)
			}
			tool, err := c.load(path, key, want)
			c.mu.Lock()
			e.tool, e.err = tool, err
			e.unsettled = err != nil && unsettledFailure(err) && !c.settled(key)
			e.refused = isDigestError(err)
			if tool != nil && c.entries[path] == e {
				e.lru = c.lru.PushFront(e)
				c.bytes += tool.size
				c.evict(e)
			}
			c.mu.Unlock()
			close(e.ready)
		} else {
			if e.lru != nil {
				c.lru.MoveToFront(e.lru)
			}
			c.mu.Unlock()
		}
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			// The file may have changed while it was being read; look again.
			if errors.Is(e.err, errFileChanged) {
				continue
			}
			if e.unsettled {
				if err := c.waitSettle(ctx); err != nil {
					return nil, err
				}
				continue
			}
			if e.want != want && e.refused {
				// Refused for another caller's digest: this one's
				// compiles it, or is refused for its own (refusedFor).
				continue
			}
			return nil, e.err
		}
		if e.want != want {
			// Loaded for a caller pinning another digest, or none.
			if err := checkDigest(path, want, e.tool.digest); err != nil {
				return nil, err
			}
		}
		return e.tool, nil
	}
}

// refusedFor tells whether e is a version refused for its digest under
// another want than the caller's: it is loaded again for the caller. c.mu
// is held (e.refused is written under it).
func (e *entry) refusedFor(want string) bool {
	return e.want != want && e.refused
}

var errFileChanged = errors.New("file changed while being read")

// settled tells whether a file last modified at key.mtime has been quiet
// long enough that what it holds now is what its writer meant. An mtime
// far in the future (a skewed clock) counts as settled, so a retry never
// waits on it.
func (c *cache) settled(key FileKey) bool {
	age := time.Since(time.Unix(0, key.mtime))
	return age >= c.settleTime || age < -c.settleTime
}

// unsettledFailure tells whether err is what reading a half-written file
// gives: not a component (yet), or a component that does not compile
// (truncated). A missing file or one that breaks the contract is not.
func unsettledFailure(err error) bool {
	var half *halfWritten
	return errors.As(err, &half)
}

// halfWritten wraps a load failure that a file still being written would
// also cause.
type halfWritten struct{ err error }

func (h *halfWritten) Error() string { return h.err.Error() }
func (h *halfWritten) Unwrap() error { return h.err }

func (c *cache) waitSettle(ctx context.Context) error {
	if c.onSettle != nil {
		c.onSettle()
	}
	t := time.NewTimer(c.settleWait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlink takes e out of the memory accounting. c.mu is held.
func (c *cache) unlink(e *entry) {
	if e.lru != nil {
		c.lru.Remove(e.lru)
		e.lru = nil
		c.bytes -= e.tool.size
	}
}

// evict drops least recently used entries until the cache fits maxBytes,
// never the one just added (keep is the newest; a single component larger
// than the limit stays until the next one arrives). c.mu is held.
func (c *cache) evict(keep *entry) {
	for c.bytes > c.maxBytes {
		back := c.lru.Back()
		if back == nil || back.Value.(*entry) == keep {
			return
		}
		e := back.Value.(*entry)
		c.unlink(e)
		delete(c.entries, e.path)
		c.evicted[e.tool.comp] = e.tool.size
		c.evictedBytes += e.tool.size
		c.evictions++
		c.log.Debug("evicted compiled component from memory", "path", e.path, "bytes", e.tool.size)
	}
	// Evicted code is freed by the collector once unreferenced, but the
	// collector paces itself by Go's heap, not by this C memory: when more
	// evicted code waits than the cache may hold, ask it to run.
	if c.evictedBytes > c.maxBytes && !c.collecting {
		c.collecting = true
		go func() {
			runtime.GC()
			c.mu.Lock()
			c.collecting = false
			c.mu.Unlock()
		}()
	}
}

// release frees the code of a version nothing refers to any more. It runs
// as the cleanup of its loaded value, so it must not refer to it.
func (c *cache) release(comp *wasmtime.Component) {
	c.mu.Lock()
	if size, ok := c.evicted[comp]; ok {
		delete(c.evicted, comp)
		c.evictedBytes -= size
	}
	c.mu.Unlock()
	// Close waits for an instantiation in progress; do not hold up the
	// runtime's cleanup goroutine meanwhile.
	go comp.Close()
}

// keepAlive ends a use of l's code. The code of an evicted version is
// freed once l is unreachable, and a caller that passed l.comp on (to
// instantiate it) no longer refers to l: it defers keepAlive so that l stays
// reachable until its call is done.
func (l *loaded) keepAlive() { runtime.KeepAlive(l) }

// retire frees a replaced component once its load is done. Component.Close
// waits for instantiations in progress; instances already made keep their
// own reference inside wasmtime.
func (c *cache) retire(e *entry) {
	<-e.ready
	if e.tool != nil {
		e.tool.comp.Close()
	}
}

func (c *cache) load(path string, key FileKey, want string) (*loaded, error) {
	l, err := c.compile(path, key, want)
	if err != nil {
		return nil, err
	}
	if err := c.check(l.comp); err != nil {
		l.comp.Close()
		return nil, err
	}
	l.world = componentWorld(l.comp)
	runtime.AddCleanup(l, c.release, l.comp)
	return l, nil
}

func (c *cache) compile(path string, key FileKey, want string) (*loaded, error) {
	data, err := ReadComponentFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTool, err)
	}
	if after, err := StatKey(path); err != nil || after != key {
		return nil, errFileChanged
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	// The bytes hashed are the bytes scanned, compiled and run: pinned to
	// another digest, they are refused before any of that.
	if err := checkDigest(path, want, digest); err != nil {
		return nil, err
	}
	start := time.Now()
	if LooksLikeComponent(data) {
		// Per-instance state is bounded before anything is compiled or
		// instantiated, on a disk-cache hit too (the limits may have
		// changed since it was compiled).
		if err := CheckBinary(data); err != nil {
			if errors.Is(err, wasmscan.ErrMalformed) {
				// Cut short: perhaps still being written in place.
				err = &halfWritten{err}
			}
			return nil, err
		}
	}

	if comp, size := c.fromDisk(digest); comp != nil {
		return &loaded{comp: comp, digest: digest, fromDisk: true, compile: time.Since(start), size: size}, nil
	}
	if !LooksLikeComponent(data) {
		return nil, &halfWritten{fmt.Errorf("%w: %s is not a WebAssembly component (%s)", ErrInvalidTool, filepath.Base(path), DescribeMagic(data))}
	}
	if c.onCompile != nil {
		c.onCompile(path)
	}
	comp, err := c.engine.NewComponent(data)
	if err != nil {
		return nil, &halfWritten{fmt.Errorf("%w: compile %s: %v", ErrInvalidTool, filepath.Base(path), err)}
	}
	l := &loaded{comp: comp, digest: digest, compile: time.Since(start)}
	c.log.Debug("compiled component", "path", path, "bytes", len(data), "duration", l.compile)
	// The serialized form is both the disk artifact and the measure of
	// what the compiled code costs in memory.
	ser, err := comp.Serialize()
	if err != nil {
		comp.Close()
		return nil, fmt.Errorf("serialize compiled %s: %w", filepath.Base(path), err)
	}
	l.size = int64(len(ser))
	c.toDisk(digest, ser)
	return l, nil
}

// LooksLikeComponent tells whether b starts like a component binary: "\0asm",
// then version 0x0d 0x00 and layer 0x01 0x00 (a core module has layer 0x00
// 0x00).
func LooksLikeComponent(b []byte) bool {
	return len(b) >= 8 && string(b[:4]) == "\x00asm" && b[6] == 0x01 && b[7] == 0x00
}

// DescribeMagic says why b is not a component binary, for an error message.
func DescribeMagic(b []byte) string {
	switch {
	case len(b) < 8:
		return fmt.Sprintf("only %d bytes", len(b))
	case string(b[:4]) != "\x00asm":
		return "no WebAssembly magic number"
	case b[6] == 0 && b[7] == 0:
		return "it is a core module; wrap it into a component (maiden build does this)"
	default:
		return "unknown WebAssembly layer"
	}
}

// fromDisk loads digest's compiled code from the disk cache, or returns nil
// (then the caller compiles). compcache hashes the open artifact and checks
// it against the digest recorded when it was written; wasmtime then maps
// that same open file (/proc/self/fd/N), so the code mapped is the inode
// that was verified. Mapping rather than reading measured 2x faster for a
// 46 MB JavaScript artifact (35 ms against 70-85 ms) and costs no private
// memory (0 against 44 MiB of anonymous RSS per load), its pages shared
// with every process mapping it: BenchmarkDiskLoad. What that relies on
// (nobody rewrites a verified inode in place) is stated at
// compcache.Cache.OpenFile.
func (c *cache) fromDisk(digest string) (*wasmtime.Component, int64) {
	if c.disk == nil {
		return nil, 0
	}
	a, err := c.disk.OpenFile(digest)
	if err != nil {
		// Refused entries were logged and removed by compcache.
		return nil, 0
	}
	defer a.Close()
	comp, err := c.engine.DeserializeComponentFile(a.Path())
	if err != nil {
		// Without /proc (some containers) the open file has no path to
		// map: load the verified bytes instead.
		if b, lerr := c.disk.Load(digest); lerr == nil {
			comp, err = c.engine.DeserializeComponent(b)
		}
	}
	if err != nil {
		// Ours and intact, but not loadable (another wasmtime build with the
		// same fingerprint?): compile again and overwrite it.
		c.log.Warn("ignoring unloadable compiled component in cache", "digest", digest, "error", err)
		_ = c.disk.Remove(digest)
		return nil, 0
	}
	return comp, a.Size()
}

func (c *cache) toDisk(digest string, serialized []byte) {
	if c.disk == nil {
		return
	}
	if err := c.disk.Put(digest, serialized); err != nil {
		c.log.Warn("cannot write compiled component to cache", "error", err)
	}
}

// prepareCacheDir checks dir as the disk cache will (see package
// compcache): the files in it are native code that maiden maps and runs, so
// a directory that someone else can change would let them run code as this
// process. Returns an error if the directory cannot be trusted; the caller
// then runs without a disk cache.
func prepareCacheDir(dir string) error {
	c, err := compcache.Open(dir, "", nil)
	if err != nil {
		return err
	}
	return c.Close()
}

// close frees every cached component, including evicted ones still held.
// Loads in progress finish first.
func (c *cache) close() {
	c.mu.Lock()
	entries := c.entries
	c.entries = map[string]*entry{}
	c.lru.Init()
	c.bytes = 0
	evicted := c.evicted
	c.evicted = map[*wasmtime.Component]int64{}
	c.evictedBytes = 0
	c.mu.Unlock()
	for _, e := range entries {
		c.retire(e)
	}
	for comp := range evicted {
		comp.Close()
	}
	if c.disk != nil {
		c.disk.Close()
	}
}
