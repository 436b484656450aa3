package compcache

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// entryKey is the digest of the i-th distinct component of a test.
func entryKey(i int) string { return digestOf([]byte(fmt.Sprintf("component %d", i))) }

// putAt stores entry i and dates its artifact to when (its last use).
func putAt(t *testing.T, c *Cache, i int, when time.Time) (artifactPath string) {
	t.Helper()
	if err := c.Put(entryKey(i), artifact); err != nil {
		t.Fatal(err)
	}
	sub, file, _ := c.name(entryKey(i))
	p := filepath.Join(c.Dir(), sub, file)
	setTime(t, p, when)
	return p
}

func setTime(t *testing.T, path string, when time.Time) {
	t.Helper()
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

func lsetTime(t *testing.T, path string, when time.Time) {
	t.Helper()
	// os.Chtimes follows links; a link's own time needs lutimes.
	if err := lutimes(path, when); err != nil {
		t.Fatal(err)
	}
}

func isCached(t *testing.T, c *Cache, i int) bool {
	t.Helper()
	b, err := c.Load(entryKey(i))
	switch {
	case err == nil && bytes.Equal(b, artifact):
		return true
	case errors.Is(err, ErrNotFound):
		return false
	}
	t.Fatalf("entry %d: %d bytes, %v", i, len(b), err)
	return false
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestTrimRemovesLeastRecentlyUsed: over the size limit, the entries used
// longest ago go first, until 70 % of the limit is left.
func TestTrimRemovesLeastRecentlyUsed(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	c.SetMaxBytes(0)
	now := time.Now()
	for i := range 5 {
		putAt(t, c, i, now.Add(time.Duration(i-10)*time.Hour)) // entry 0 oldest
	}
	entry := int64(len(artifact)) + 65 // the artifact and its record
	c.SetMaxBytes(3 * entry)           // over by two; trimmed to 2.1 entries
	st, err := c.trim("")
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 3 || st.Freed != 3*entry || st.Kept != 2*entry {
		t.Errorf("Trim: %+v, want 3 removed, %d freed, %d kept", st, 3*entry, 2*entry)
	}
	for i := range 5 {
		if got, want := isCached(t, c, i), i >= 3; got != want {
			t.Errorf("entry %d (used %d hours ago) cached = %v after the trim, want %v", i, 10-i, got, want)
		}
	}
	// Under the limit, a trim removes nothing.
	if st, err := c.trim(""); err != nil || st.Removed != 0 || st.Kept != 2*entry {
		t.Errorf("second Trim: %+v, %v", st, err)
	}
}

// TestLoadMarksUsed: a load makes an entry the most recently used, so the
// trim removes the one not loaded; a load within useInterval of the last
// mark writes nothing.
func TestLoadMarksUsed(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	now := time.Now()
	older := putAt(t, c, 0, now.Add(-3*time.Hour))
	putAt(t, c, 1, now.Add(-2*time.Hour))
	if !isCached(t, c, 0) {
		t.Fatal("entry 0 not cached")
	}
	fi, err := os.Stat(older)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(fi.ModTime()) > time.Minute {
		t.Fatalf("Load left entry 0 dated %v ago", time.Since(fi.ModTime()))
	}
	c.SetMaxBytes(3 * (int64(len(artifact)) + 65) / 2) // 70 % of it holds one
	if _, err := c.trim(""); err != nil {
		t.Fatal(err)
	}
	if !isCached(t, c, 0) || isCached(t, c, 1) {
		t.Error("the trim kept the entry not loaded and removed the loaded one")
	}

	// Within useInterval a load does not write the time again.
	recent := now.Add(-time.Minute).Truncate(time.Second)
	setTime(t, older, recent)
	a, err := c.OpenFile(entryKey(0))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if fi, err := os.Stat(older); err != nil || !fi.ModTime().Equal(recent) {
		t.Errorf("a load a minute after the last mark rewrote the time: %v, %v", fi.ModTime(), err)
	}
}

// TestTrimRemovesWhatNobodyUsed: whatever the size, an entry unused for
// MaxAge goes, with stray halves of entries and temporary files left by a
// writer that died; young ones may be a Put in progress and stay. Clear
// removes the entry used an hour ago too, and leaves the same young halves.
func TestTrimRemovesWhatNobodyUsed(t *testing.T) {
	t.Run("trim", func(t *testing.T) {
		removesWhatNobodyUsed(t, func(c *Cache) (TrimStats, error) { return c.trim("") }, false)
	})
	t.Run("Clear", func(t *testing.T) { removesWhatNobodyUsed(t, (*Cache).Clear, true) })
}

func removesWhatNobodyUsed(t *testing.T, op func(*Cache) (TrimStats, error), clear bool) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	c.SetMaxBytes(0)
	now := time.Now()
	putAt(t, c, 0, now.Add(-MaxAge-time.Hour))
	putAt(t, c, 1, now.Add(-MaxAge+time.Hour))
	sub, file, _ := c.name(entryKey(2))
	mkdir(t, filepath.Join(c.Dir(), sub), 0o700)
	stray := func(name string, age time.Duration) string {
		p := filepath.Join(c.Dir(), sub, name)
		overwrite(t, p, []byte("half"))
		setTime(t, p, now.Add(-age))
		return p
	}
	oldTemp := stray("."+file+".tmp-0123456789abcdef", 2*time.Hour)
	newTemp := stray("."+file+recordSuffix+".tmp-fedcba9876543210", time.Minute)
	oldRecord := stray(file+recordSuffix, 2*time.Hour) // its artifact is gone
	_, file3, _ := c.name(entryKey(3))
	oldArtifact := stray(file3, 2*time.Hour)
	_, file4, _ := c.name(entryKey(4))
	newArtifact := stray(file4, time.Minute) // its record not written yet

	st, err := op(c)
	if err != nil {
		t.Fatal(err)
	}
	if isCached(t, c, 0) || isCached(t, c, 1) != !clear {
		t.Errorf("unused for MaxAge+1h cached: %v, for MaxAge-1h: %v; want false, %v", isCached(t, c, 0), isCached(t, c, 1), !clear)
	}
	for _, p := range []string{oldTemp, oldRecord, oldArtifact} {
		if exists(p) {
			t.Errorf("stale %s left", filepath.Base(p))
		}
	}
	for _, p := range []string{newTemp, newArtifact} {
		if !exists(p) {
			t.Errorf("young %s (a Put in progress?) removed", filepath.Base(p))
		}
	}
	want := 4 // an entry, a temporary file, a record, an artifact
	if clear {
		want = 5 // and the entry used an hour ago
	}
	if st.Removed != want {
		t.Errorf("removed %d, want %d", st.Removed, want)
	}
}

// TestTrimTouchesOnlyTheCachesOwnFiles: the cache directory may be one the
// user shares with other files, and whoever can plant a link in it must
// not make a trim remove something outside. Every planted file is dated
// far past MaxAge and the limit is tiny, so a trim that took any of them
// for an entry would remove it.
func TestTrimTouchesOnlyTheCachesOwnFiles(t *testing.T) {
	ops := []struct {
		name string
		run  func(c *Cache) error
	}{
		{"trim", func(c *Cache) error { _, err := c.trim(""); return err }},
		{"Trim", func(c *Cache) error { _, err := c.Trim(); return err }},
		{"Clear", func(c *Cache) error { _, err := c.Clear(); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) { touchesOnlyOwnFiles(t, op.name, op.run) })
	}
}

// touchesOnlyOwnFiles plants look-alikes of the cache's files and links
// out of it, then runs op, which must remove the one real entry and
// nothing else (Usage, before it, counts that entry alone).
func touchesOnlyOwnFiles(t *testing.T, name string, op func(c *Cache) error) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	ancient := time.Now().Add(-10 * MaxAge)
	_, file, _ := c.name(entryKey(0))
	outside := t.TempDir()
	plant := func(path string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		overwrite(t, path, []byte("someone else's"))
		setTime(t, path, ancient)
		return path
	}
	keep := []string{
		plant(filepath.Join(c.Dir(), "notes.txt")),
		plant(filepath.Join(c.Dir(), "zz", file)),                          // not a hex subdirectory
		plant(filepath.Join(c.Dir(), "abc", file)),                         // not two digits
		plant(filepath.Join(c.Dir(), "ab", "notes.txt")),                   // not an entry's name
		plant(filepath.Join(c.Dir(), "ab", strings.ToUpper(file))),         // not lowercase
		plant(filepath.Join(c.Dir(), "ab", file+".bak")),                   // not exactly the pattern
		plant(filepath.Join(c.Dir(), "ab", ".notes.tmp-0123456789abcdef")), // a temp name not of an entry
		plant(filepath.Join(outside, "linked-dir", file)),
		plant(filepath.Join(outside, "linked-dir", file+recordSuffix)),
		plant(filepath.Join(outside, "linked-dir", "."+file+".tmp-0123456789abcdef")),
		plant(filepath.Join(outside, "target")),
	}
	// A subdirectory that is a link to a directory outside, holding files
	// of an entry's names.
	symlink(t, filepath.Join(outside, "linked-dir"), filepath.Join(c.Dir(), "cd"))
	// An entry's names in a real subdirectory, as links to a file outside:
	// removing them must remove the links, not the file.
	mkdir(t, filepath.Join(c.Dir(), "ef"), 0o700)
	for _, name := range []string{file, file + recordSuffix} {
		l := filepath.Join(c.Dir(), "ef", name)
		symlink(t, filepath.Join(outside, "target"), l)
		lsetTime(t, l, ancient)
	}
	// The stamp as a link to a file outside, dated so that the next Put
	// trims: stamping must set the link's own time, not the file's.
	stampTarget := plant(filepath.Join(outside, "stamp-target"))
	keep = append(keep, stampTarget)
	symlink(t, stampTarget, filepath.Join(c.Dir(), stampName))
	lsetTime(t, filepath.Join(c.Dir(), stampName), ancient)
	putAt(t, c, 1, ancient) // a real entry, so the trim has work; its Put stamps
	if fi, err := os.Lstat(filepath.Join(c.Dir(), stampName)); err != nil || time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("the Put did not stamp (the link's own time): %v", err)
	}
	c.SetMaxBytes(1)

	if u, err := c.Usage(); err != nil || u.Entries != 1 {
		t.Errorf("Usage = %+v, %v; want the one real entry", u, err)
	}
	if err := op(c); err != nil {
		t.Fatal(err)
	}
	for _, p := range keep {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			t.Errorf("%s removed %s, which is not the cache's", name, p)
		case !fi.ModTime().Equal(ancient) && !fi.IsDir():
			t.Errorf("%s changed the time of %s, which is not the cache's, to %v", name, p, fi.ModTime())
		}
	}
	if isCached(t, c, 1) {
		t.Errorf("%s left the real entry (dated 10×MaxAge ago, over a 1-byte limit)", name)
	}
}

// TestPutTrimsWhenDue: Put trims when no trim ran for trimInterval (the
// stamp says when, across processes), or when this process has written an
// eighth of the limit since its last trim; otherwise it only writes.
func TestPutTrimsWhenDue(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	c.SetMaxBytes(1 << 40)
	stale := time.Now().Add(-2 * MaxAge)
	stamp := filepath.Join(c.Dir(), stampName)
	first := putAt(t, c, 0, stale)
	remove(t, stamp) // as if no process had trimmed yet
	putAt(t, c, 1, time.Now())
	if exists(first) {
		t.Fatal("a Put with no stamp did not trim")
	}
	fi, err := os.Stat(stamp)
	if err != nil || time.Since(fi.ModTime()) > time.Minute {
		t.Fatalf("stamp after a trim: %v", err)
	}

	second := putAt(t, c, 2, stale)
	putAt(t, c, 3, time.Now())
	if !exists(second) {
		t.Fatal("a Put within trimInterval of the last trim trimmed")
	}

	// Another process trimmed long ago: due again.
	setTime(t, stamp, time.Now().Add(-trimInterval-time.Minute))
	putAt(t, c, 4, time.Now())
	if exists(second) {
		t.Fatal("a Put after trimInterval did not trim")
	}

	// Writing an eighth of the limit makes a trim due at once.
	third := putAt(t, c, 5, stale)
	c.SetMaxBytes(8 * int64(len(artifact)))
	c.written.Store(0)
	putAt(t, c, 6, time.Now())
	if !exists(third) {
		t.Fatal("trimmed before an eighth of the limit was written")
	}
	putAt(t, c, 7, time.Now())
	if exists(third) {
		t.Fatal("did not trim after an eighth of the limit was written")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"512MiB": 512 << 20, "4G": 4 << 30, "4g": 4 << 30, "4 GB": 4 << 30, "100": 100,
		"1k": 1 << 10, "2Ti": 2 << 40, "off": 0, "OFF": 0, " 3M ": 3 << 20,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"": "not a size", "-1G": "not a size", "1.5G": "unknown unit", "4X": "unknown unit",
		"0": "use off", "99999999999999999999": "out of range", "9999999999T": "out of range",
	} {
		if _, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseSize(%q): %v, want an error saying %q", in, err, why)
		}
	}
}

// TestLimitFromEnvironment: Open takes the limit from MAIDEN_CACHE_MAX, and
// a value it cannot read is named in a warning and the default applies.
func TestLimitFromEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	t.Setenv(MaxBytesEnv, "64MiB")
	if c := open(t, dir); c.maxBytes.Load() != 64<<20 {
		t.Errorf("limit %d, want 64 MiB", c.maxBytes.Load())
	}
	t.Setenv(MaxBytesEnv, "lots")
	var logged bytes.Buffer
	c, err := Open(dir, "engine-A", slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.maxBytes.Load() != DefaultMaxBytes || !strings.Contains(logged.String(), `MAIDEN_CACHE_MAX=\"lots\"`) {
		t.Errorf("limit %d, log %q; want the default and a warning naming the value", c.maxBytes.Load(), logged.String())
	}
}

func lutimes(path string, when time.Time) error {
	ts := unix.NsecToTimespec(when.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// TestTrimDuringUse: trims over a 1-byte limit racing writers and readers
// of the same entries (two processes, say). A reader may find an entry
// gone, but never gets other bytes and never finds a half that fails
// verification.
func TestTrimDuringUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	caches := []*Cache{open(t, dir), open(t, dir)}
	caches[1].SetMaxBytes(1)
	stop := make(chan struct{})
	trimmed := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				trimmed <- n
				return
			default:
			}
			st, err := caches[1].trim("")
			if err != nil {
				t.Error(err)
			}
			n += st.Removed
		}
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			c := caches[g%2]
			for i := range 100 {
				k := entryKey(i % 3)
				if (g+i)%2 == 0 {
					if err := c.Put(k, artifact); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				b, err := c.Load(k)
				if err == nil && !bytes.Equal(b, artifact) {
					t.Error("served bytes that are not the artifact")
					return
				}
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("load during a trim: %v, want the artifact or ErrNotFound", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if n := <-trimmed; n == 0 {
		t.Error("the trims removed nothing: the race was not run")
	}
}
