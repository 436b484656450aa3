package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/wasmtime"
)

// fileKey identifies one version of a file on disk. Modification time and
// size catch an edit in place; the inode catches a file replaced by rename
// (how editors and build tools usually write), even within one mtime tick.
type fileKey struct {
	mtime int64
	size  int64
	ino   uint64
}

func statKey(path string) (fileKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileKey{}, err
	}
	if !fi.Mode().IsRegular() {
		return fileKey{}, fmt.Errorf("%s is not a regular file", path)
	}
	k := fileKey{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k, nil
}

// loaded is a compiled tool component that matches the contract.
type loaded struct {
	comp   *wasmtime.Component
	digest string // sha256 of the component bytes

	// What the tool says about itself, asked once per component version and
	// only when someone wants it (listing, checking): a tool whose describe
	// misbehaves can still be called, and reports its own failure kinds.
	infoOnce sync.Once
	info     Info
	infoErr  error

	// fromDisk tells whether the compiled code came from the disk cache.
	fromDisk bool
	compile  time.Duration
}

// entry is the cache slot of one path. ready is closed when the load that
// created it finishes; until then other callers wait for it instead of
// compiling the same file again.
type entry struct {
	key   fileKey
	ready chan struct{}
	tool  *loaded
	err   error
}

// cache maps a component path to its compiled form, keyed by the file's
// version. Compiled code also goes to disk, keyed by content and engine, so a
// restart (or a second maiden) deserializes instead of compiling.
type cache struct {
	engine *wasmtime.Engine
	dir    string // "" disables the disk cache
	log    *slog.Logger
	// check refuses a freshly compiled component that does not match the
	// contract.
	check func(comp *wasmtime.Component) error

	mu      sync.Mutex
	entries map[string]*entry
}

func newCache(engine *wasmtime.Engine, dir string, log *slog.Logger, check func(*wasmtime.Component) error) *cache {
	return &cache{engine: engine, dir: dir, log: log, check: check, entries: map[string]*entry{}}
}

// get returns the compiled component for path, compiling (or loading from
// disk) when the file changed since the last call. A file that fails to load
// keeps failing from cache until it changes.
func (c *cache) get(ctx context.Context, path string) (*loaded, error) {
	for {
		key, err := statKey(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidTool, err)
		}
		c.mu.Lock()
		e := c.entries[path]
		if e == nil || e.key != key {
			old := e
			e = &entry{key: key, ready: make(chan struct{})}
			c.entries[path] = e
			c.mu.Unlock()
			if old != nil {
				go c.retire(old)
			}
			e.tool, e.err = c.load(path, key)
			close(e.ready)
		} else {
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
			return nil, e.err
		}
		return e.tool, nil
	}
}

var errFileChanged = errors.New("file changed while being read")

// retire frees a replaced component once its load is done. Component.Close
// waits for instantiations in progress; instances already made keep their
// own reference inside wasmtime.
func (c *cache) retire(e *entry) {
	<-e.ready
	if e.tool != nil {
		e.tool.comp.Close()
	}
}

func (c *cache) load(path string, key fileKey) (*loaded, error) {
	l, err := c.compile(path, key)
	if err != nil {
		return nil, err
	}
	if err := c.check(l.comp); err != nil {
		l.comp.Close()
		return nil, err
	}
	return l, nil
}

func (c *cache) compile(path string, key fileKey) (*loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTool, err)
	}
	if after, err := statKey(path); err != nil || after != key {
		return nil, errFileChanged
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	start := time.Now()

	if comp := c.fromDisk(digest); comp != nil {
		return &loaded{comp: comp, digest: digest, fromDisk: true, compile: time.Since(start)}, nil
	}
	if !looksLikeComponent(data) {
		return nil, fmt.Errorf("%w: %s is not a WebAssembly component (%s)", ErrInvalidTool, filepath.Base(path), describeMagic(data))
	}
	comp, err := c.engine.NewComponent(data)
	if err != nil {
		return nil, fmt.Errorf("%w: compile %s: %v", ErrInvalidTool, filepath.Base(path), err)
	}
	l := &loaded{comp: comp, digest: digest, compile: time.Since(start)}
	c.log.Debug("compiled component", "path", path, "bytes", len(data), "duration", l.compile)
	c.toDisk(digest, comp)
	return l, nil
}

// The component binary starts with "\0asm", then version 0x0d 0x00 and layer
// 0x01 0x00; a core module has layer 0x00 0x00.
func looksLikeComponent(b []byte) bool {
	return len(b) >= 8 && string(b[:4]) == "\x00asm" && b[6] == 0x01 && b[7] == 0x00
}

func describeMagic(b []byte) string {
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

// diskPath names a serialized component by content and engine: the same
// bytes compiled by a different wasmtime or engine configuration get a
// different file, since wasmtime refuses to load a mismatched artifact.
func (c *cache) diskPath(digest string) string {
	fp := sha256.Sum256([]byte(c.engine.Fingerprint() + "\x00maiden-" + cacheFormat))
	return filepath.Join(c.dir, digest[:2], digest+"-"+hex.EncodeToString(fp[:8])+".cwasm")
}

// cacheFormat changes when maiden changes how it writes the disk cache.
const cacheFormat = "1"

func (c *cache) fromDisk(digest string) *wasmtime.Component {
	if c.dir == "" {
		return nil
	}
	p := c.diskPath(digest)
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	comp, err := c.engine.DeserializeComponentFile(p)
	if err != nil {
		// Stale or damaged: compile again and overwrite it.
		c.log.Warn("ignoring unloadable compiled component in cache", "path", p, "error", err)
		_ = os.Remove(p)
		return nil
	}
	return comp
}

func (c *cache) toDisk(digest string, comp *wasmtime.Component) {
	if c.dir == "" {
		return
	}
	p := c.diskPath(digest)
	b, err := comp.Serialize()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o700)
	}
	if err == nil {
		err = atomicfile.Write(p, b, 0o600)
	}
	if err != nil {
		c.log.Warn("cannot write compiled component to cache", "path", p, "error", err)
	}
}

// prepareCacheDir creates dir and makes sure it is private to this user: the
// files in it are native code that maiden maps and runs, so a directory that
// someone else can write to would let them run code as this process. Returns
// an error if the directory cannot be trusted; the caller then runs without a
// disk cache.
func prepareCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %v); make it private (chmod 700)", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d)", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// close frees every cached component. Loads in progress finish first.
func (c *cache) close() {
	c.mu.Lock()
	entries := c.entries
	c.entries = map[string]*entry{}
	c.mu.Unlock()
	for _, e := range entries {
		c.retire(e)
	}
}
