// Package compcache is maiden's disk cache of compiled components: native
// code that a later run (or a worker process) maps and executes instead of
// compiling again. Because what it holds runs as this user, it trusts only
// bytes it wrote itself, in a directory nobody else can change:
//
//   - Open checks the cache directory and every ancestor (owned by root or
//     this user; not writable by group or others, except a sticky ancestor
//     such as /tmp) and keeps a handle to the checked directory. Every later
//     file operation is relative to that handle and never follows a link, so
//     swapping a directory or file for a symlink after the check gains
//     nothing.
//   - Put records the SHA-256 of the serialized bytes beside the artifact,
//     under the same protection; Load and OpenFile hash what they return
//     and refuse (and delete) anything that does not match, so a damaged or
//     overwritten artifact is recompiled, never run.
//
// Entries are named by the digest of the component's .wasm bytes plus a
// fingerprint of the engine that compiled them (wasmtime version and
// configuration): the same component compiled by another engine is another
// entry, since wasmtime refuses mismatched code anyway. The cache trims
// itself, least recently used first, under a size limit (trim.go).
//
//	c, err := compcache.Open(dir, engine.Fingerprint(), log)
//	if err != nil { /* warn; run without a disk cache */ }
//	b, err := c.Load(digest)      // verified bytes, or an error: compile
//	err = c.Put(digest, serialized)
package compcache

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Errors for a digest that cannot be served. Every error from Load and
// OpenFile means the same to the caller (compile instead); these say why.
var (
	// ErrNotFound means nothing is cached for the digest.
	ErrNotFound = errors.New("not in the compiled-component cache")
	// ErrRefused means a cache entry failed verification (digest mismatch,
	// missing record, a link, wrong owner or mode) and was removed.
	ErrRefused = errors.New("compiled-component cache entry refused")
)

// MaxArtifactBytes bounds what Load reads into memory. wasmtime's largest
// artifacts here (a JavaScript engine) are ~50 MB; anything far larger in
// the cache was not written by maiden.
const MaxArtifactBytes = 1 << 30

// Cache is one checked cache directory. It is safe for concurrent use, and
// by several processes at once: writes are atomic (temporary file, then
// rename), and readers verify.
type Cache struct {
	dir string // absolute, symlinks resolved
	fd  int    // handle to dir, opened while checking it
	tag string // engine fingerprint, hashed for file names
	log *slog.Logger
	uid int

	maxBytes atomic.Int64 // size limit (0: none); see trim.go
	written  atomic.Int64 // bytes this process put since its last trim
	trimming sync.Mutex   // held by the trim in progress
}

// Open creates dir if needed (mode 0700), checks it and every ancestor, and
// returns a cache writing artifacts for engines with this fingerprint. A
// directory that fails a check is refused with an error naming it and what
// is wrong; the caller should run without a disk cache.
func Open(dir, fingerprint string, log *slog.Logger) (*Cache, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("compiled-component cache %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("compiled-component cache: %w", err)
	}
	// Resolve links once, then walk the real path refusing any link: a link
	// swapped in after this point fails the walk rather than redirecting it.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("compiled-component cache: %w", err)
	}
	uid := os.Geteuid()
	fd, err := openChecked(real, uid, cacheWhat)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte("maiden-compcache-" + format + "\x00" + fingerprint))
	c := &Cache{dir: real, fd: fd, tag: hex.EncodeToString(sum[:8]), log: log, uid: uid}
	max, err := MaxBytesFromEnv()
	if err != nil {
		log.Warn("compiled-component cache size limit", "error", err)
	}
	c.SetMaxBytes(max)
	return c, nil
}

// cacheWhat names the cache in the errors of its checks.
const cacheWhat = "compiled-component cache"

// format changes when the layout or record format of the cache changes, so
// an older maiden's files are simply not found.
const format = "2"

// Dir returns the cache directory (absolute, links resolved), for granting
// a confined worker read-only access to it.
func (c *Cache) Dir() string { return c.dir }

// Close releases the directory handle, after a trim in progress ends (a
// trim works through the handle). Nothing may use the cache after it.
func (c *Cache) Close() error {
	c.trimming.Lock()
	defer c.trimming.Unlock()
	return unix.Close(c.fd)
}

// openChecked walks path from the root, one component at a time relative
// to the previous one's handle, refusing links and checking each directory
// as it is opened (the check is on the handle, so it is of the directory
// that will be used). It returns a handle to the last directory.
func openChecked(path string, uid int, what string) (int, error) {
	if !filepath.IsAbs(path) {
		return -1, fmt.Errorf("%s %s: not an absolute path", what, path)
	}
	fd, err := unix.Open("/", dirFlags, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: open /: %w", what, err)
	}
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	if parts[0] == "" {
		parts = nil
	}
	at := "/"
	for i := 0; ; i++ {
		last := i == len(parts)
		if err := checkDir(fd, at, uid, last, what); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if last {
			return fd, nil
		}
		next, err := unix.Openat(fd, parts[i], dirFlags|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		at = filepath.Join(at, parts[i])
		if err != nil {
			return -1, fmt.Errorf("%s: %s: %w (a link or not a directory)", what, at, err)
		}
		fd = next
	}
}

// CheckPrivateDir checks dir (absolute, its links resolved) by the rules
// the cache holds its own directory to, for another directory whose files
// maiden trusts the same way (oci's component store): walked from the
// root without following a link, every ancestor owned by root or this
// user and writable by nobody else unless sticky, dir itself this user's
// and writable by nobody else. what names it in errors.
func CheckPrivateDir(dir, what string) error {
	fd, err := openChecked(dir, os.Geteuid(), what)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// checkDir applies the ownership rules to an open directory. An ancestor
// may be owned by root or this user and may be writable by others only if
// sticky (others can then add entries but not replace ours). The cache
// directory itself must be this user's and writable by nobody else.
func checkDir(fd int, path string, uid int, cacheDir bool, what string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: stat %s: %w", what, path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: %s is not a directory", what, path)
	}
	perm := st.Mode & 0o7777
	if cacheDir {
		if int(st.Uid) != uid {
			return fmt.Errorf("%s: %s is owned by uid %d, not by this user (uid %d)", what, path, st.Uid, uid)
		}
		if perm&0o022 != 0 {
			return fmt.Errorf("%s: %s is writable by group or others (mode %#o); make it private (chmod 700)", what, path, perm)
		}
		return nil
	}
	if st.Uid != 0 && int(st.Uid) != uid {
		return fmt.Errorf("%s: ancestor %s is owned by uid %d, neither root nor this user (uid %d), who could replace the %s", what, path, st.Uid, uid, what)
	}
	if perm&0o022 != 0 && perm&unix.S_ISVTX == 0 {
		return fmt.Errorf("%s: ancestor %s is writable by group or others and not sticky (mode %#o), so they could replace the %s", what, path, perm, what)
	}
	return nil
}

// name returns the subdirectory and file name of digest's artifact; the
// record is the same name plus ".sha256". The digest is checked to be what
// maiden computes (64 lowercase hex digits), so it cannot name a path.
func (c *Cache) name(digest string) (sub, file string, err error) {
	if len(digest) != 64 || !isHex(digest) {
		return "", "", fmt.Errorf("compiled-component cache: %q is not a SHA-256 hex digest", digest)
	}
	return digest[:2], digest + "-" + c.tag + ".cwasm", nil
}

const recordSuffix = ".sha256"

// isHex reports whether s is lowercase hexadecimal digits, at least one.
func isHex(s string) bool { return s != "" && strings.Trim(s, "0123456789abcdef") == "" }

// Put stores serialized (the compiled form of the component whose .wasm
// has this digest) and the record of its SHA-256, each written atomically,
// then trims the cache when a trim is due (trim.go).
func (c *Cache) Put(digest string, serialized []byte) error {
	sub, file, err := c.name(digest)
	if err != nil {
		return err
	}
	if err := unix.Mkdirat(c.fd, sub, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("compiled-component cache: mkdir %s: %w", filepath.Join(c.dir, sub), err)
	}
	dfd, err := c.openSub(sub)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	sum := sha256.Sum256(serialized)
	// The artifact first, then its record: a reader between the two sees a
	// mismatch or no record and compiles, which is safe.
	if err := c.writeAt(dfd, sub, file, serialized); err != nil {
		return err
	}
	if err := c.writeAt(dfd, sub, file+recordSuffix, []byte(hex.EncodeToString(sum[:])+"\n")); err != nil {
		return err
	}
	c.maybeTrim(file, int64(len(serialized)))
	return nil
}

// openSub opens a subdirectory of the cache without following a link and
// checks it like the cache directory itself.
func (c *Cache) openSub(sub string) (int, error) {
	path := filepath.Join(c.dir, sub)
	fd, err := unix.Openat(c.fd, sub, dirFlags|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return -1, fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %v (a link or not a directory)", ErrRefused, path, err)
	}
	if err := checkDir(fd, path, c.uid, true, cacheWhat); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	return fd, nil
}

func (c *Cache) writeAt(dfd int, sub, file string, data []byte) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + file + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("compiled-component cache: create %s: %w", filepath.Join(c.dir, sub, tmp), err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(dfd, tmp, dfd, file)
	}
	if werr != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("compiled-component cache: write %s: %w", filepath.Join(c.dir, sub, file), werr)
	}
	return nil
}

// Artifact is a verified cache entry held open. Its content was hashed
// through this handle and matched the record.
type Artifact struct {
	f    *os.File
	size int64
}

// Path names the open file itself (/proc/self/fd/N), not the cache entry:
// opening it reaches the inode that was verified even if the entry has
// since been replaced. Use it while the Artifact is open.
func (a *Artifact) Path() string { return fdPath(int(a.f.Fd())) }

// Size is the artifact's size in bytes.
func (a *Artifact) Size() int64 { return a.size }

// Close closes the file.
func (a *Artifact) Close() error { return a.f.Close() }

// OpenFile opens digest's artifact, hashes it through the open handle and
// returns it if it matches its record. Map it (by Path) rather than reading
// it: the pages are then shared through the page cache by every process
// that maps the same artifact, and nothing is copied.
//
// Between the hash and the mapping the inode could change only by someone
// who can write it: the file must be this user's, writable by nobody else,
// in directories only this user can write, and maiden never writes a cache
// file in place (always a new file renamed over the name), so nothing does.
// Load has no such gap, at the price of a private copy.
func (c *Cache) OpenFile(digest string) (*Artifact, error) {
	var a *Artifact
	err := c.verified(digest, func(f *os.File, size int64) (string, error) {
		h := sha256.New()
		n, err := io.Copy(h, io.NewSectionReader(f, 0, size+1))
		if err != nil || n != size {
			return "", fmt.Errorf("read %d of %d bytes: %v", n, size, err)
		}
		a = &Artifact{f: f, size: size}
		return hex.EncodeToString(h.Sum(nil)), nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Load returns digest's serialized bytes, read once through an open handle
// and hashed in memory: the bytes returned are the bytes that matched the
// record, whatever happens to the file afterwards.
func (c *Cache) Load(digest string) ([]byte, error) {
	var b []byte
	err := c.verified(digest, func(f *os.File, size int64) (string, error) {
		defer f.Close()
		buf := make([]byte, size+1)
		n, err := io.ReadFull(f, buf)
		if n != int(size) || (err != nil && !errors.Is(err, io.ErrUnexpectedEOF)) {
			return "", fmt.Errorf("read %d of %d bytes: %v", n, size, err)
		}
		b = buf[:size]
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]), nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// LoadTo writes digest's serialized bytes to dst as it reads and hashes
// them through one open handle, and returns how many it wrote. dst holds
// the artifact only if LoadTo returns no error: on a mismatch it has
// received bytes that did not match, and the caller discards it. Unlike
// Load, no copy of the artifact is made in this process's memory.
//
// A failure of dst's is returned as it is, and the entry stays: only the
// artifact's own failures refuse it.
func (c *Cache) LoadTo(digest string, dst io.Writer) (int64, error) {
	sink := &stickyWriter{w: dst}
	err := c.verified(digest, func(f *os.File, size int64) (string, error) {
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(h, sink), io.NewSectionReader(f, 0, size+1))
		if err != nil || n != size {
			return "", fmt.Errorf("read %d of %d bytes: %v", n, size, err)
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	})
	if err != nil {
		return 0, err
	}
	if sink.err != nil {
		return 0, sink.err
	}
	return sink.n, nil
}

// stickyWriter writes to w until w fails, then only counts: the artifact
// is still read and hashed to its end, so a full destination is not taken
// for a damaged entry.
type stickyWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err == nil {
		n, err := s.w.Write(p)
		s.n += int64(n)
		if err == nil && n < len(p) {
			err = io.ErrShortWrite
		}
		s.err = err
	}
	return len(p), nil
}

// verified opens digest's record and artifact, checking both files, and
// compares the record with the digest hash computes from the open artifact.
// On any failure verified closes f; on success f is hash's to keep or close.
// An entry that fails a check is logged, removed and reported as ErrRefused.
func (c *Cache) verified(digest string, hash func(f *os.File, size int64) (string, error)) error {
	sub, file, err := c.name(digest)
	if err != nil {
		return err
	}
	dfd, err := c.openSub(sub)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			c.refuse(-1, sub, "", err)
		}
		return err
	}
	defer unix.Close(dfd)
	want, err := c.readRecord(dfd, sub, file+recordSuffix)
	if err == nil {
		var f *os.File
		var size int64
		var mtime time.Time
		f, size, mtime, err = c.openFile(dfd, sub, file, MaxArtifactBytes)
		if err == nil {
			name := f.Name()
			var got string
			got, err = hash(f, size)
			switch {
			case err != nil:
				f.Close()
				err = fmt.Errorf("%w: %s: %v", ErrRefused, name, err)
			case got != want:
				f.Close()
				err = fmt.Errorf("%w: %s: SHA-256 %s does not match the %s recorded when it was written", ErrRefused, name, got, want)
			default:
				c.touch(dfd, file, mtime)
			}
		}
	}
	if errors.Is(err, ErrRefused) {
		c.refuse(dfd, sub, file, err)
	}
	return err
}

// openFile opens one entry file relative to the checked subdirectory,
// never through a link, and checks it: a regular file of this user's,
// writable by nobody else, with no other names, at most max bytes. It
// returns the file, its size and its modification time.
func (c *Cache) openFile(dfd int, sub, file string, max int64) (*os.File, int64, time.Time, error) {
	path := filepath.Join(c.dir, sub, file)
	fd, err := unix.Openat(dfd, file, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, 0, time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	if err != nil {
		return nil, 0, time.Time{}, fmt.Errorf("%w: %s: %v (a link?)", ErrRefused, path, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	switch {
	case err != nil:
		err = fmt.Errorf("%w: stat %s: %v", ErrRefused, path, err)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%w: %s is not a regular file", ErrRefused, path)
	case int(st.Uid) != c.uid:
		err = fmt.Errorf("%w: %s is owned by uid %d, not this user (uid %d)", ErrRefused, path, st.Uid, c.uid)
	case st.Mode&0o022 != 0:
		err = fmt.Errorf("%w: %s is writable by group or others (mode %#o)", ErrRefused, path, st.Mode&0o7777)
	case st.Nlink == 0:
		// Removed (a trim) or replaced (a Put renamed a new file over it)
		// since the open: not the cache's any more, and nothing wrong.
		err = fmt.Errorf("%w: %s (removed while it was being opened)", ErrNotFound, path)
	case st.Nlink != 1:
		err = fmt.Errorf("%w: %s has %d names (a hard link into the cache)", ErrRefused, path, st.Nlink)
	case st.Size > max:
		err = fmt.Errorf("%w: %s is %d bytes, over the %d limit", ErrRefused, path, st.Size, max)
	}
	if err != nil {
		unix.Close(fd)
		return nil, 0, time.Time{}, err
	}
	return os.NewFile(uintptr(fd), path), st.Size, time.Unix(st.Mtim.Unix()), nil
}

func (c *Cache) readRecord(dfd int, sub, file string) (string, error) {
	f, size, _, err := c.openFile(dfd, sub, file, 128)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return "", fmt.Errorf("%w: read %s: %v", ErrRefused, f.Name(), err)
	}
	rec := strings.TrimSuffix(string(b), "\n")
	if len(rec) != 64 || !isHex(rec) {
		return "", fmt.Errorf("%w: %s does not hold a SHA-256 digest", ErrRefused, f.Name())
	}
	return rec, nil
}

// refuse logs why an entry was refused and removes it, so the next Put
// writes a good one. Removing never follows a link: unlinking a symlink
// removes the link, not what it points to.
func (c *Cache) refuse(dfd int, sub, file string, why error) {
	c.log.Warn("refusing compiled component from disk cache; it will be compiled again", "error", why)
	if dfd < 0 {
		c.removeSub(sub)
		return
	}
	_ = unix.Unlinkat(dfd, file, 0)
	_ = unix.Unlinkat(dfd, file+recordSuffix, 0)
}

// removeSub removes a subdirectory that failed its check: a link or a file
// in its place is unlinked (not followed); a real directory (wrong mode or
// owner) is emptied of what it directly holds and removed, so Put can make
// a good one. Its files were never trusted: every entry is verified anyway.
func (c *Cache) removeSub(sub string) {
	err := unix.Unlinkat(c.fd, sub, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return
	}
	d, err := c.openList(sub)
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		_ = unix.Unlinkat(int(d.Fd()), n, 0)
	}
	_ = unix.Unlinkat(c.fd, sub, unix.AT_REMOVEDIR)
}

// Remove deletes digest's entry, for an artifact that verified but that the
// engine would not load.
func (c *Cache) Remove(digest string) error {
	sub, file, err := c.name(digest)
	if err != nil {
		return err
	}
	dfd, err := c.openSub(sub)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	defer unix.Close(dfd)
	for _, f := range []string{file, file + recordSuffix} {
		if err := unix.Unlinkat(dfd, f, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("compiled-component cache: remove %s: %w", filepath.Join(c.dir, sub, f), err)
		}
	}
	return nil
}
