package compcache

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestTrimPolicyAsDocumented: the numbers ARCHITECTURE.md and trim.go
// promise, spelt out: a 2 GiB limit by default (an empty MAIDEN_CACHE_MAX
// is unset); an entry unused for 14 days goes; a half entry or temporary
// file older than an hour goes, a younger one stays; a load marks an entry
// used an hour ago, not one used 59 minutes ago; a Put trims an hour after
// the last trim, not 59 minutes after; a size trim leaves 70 % of the
// limit.
func TestTrimPolicyAsDocumented(t *testing.T) {
	t.Setenv(MaxBytesEnv, " ")
	if n, err := MaxBytesFromEnv(); n != 2<<30 || err != nil {
		t.Errorf("MAIDEN_CACHE_MAX blank: %d, %v; want 2 GiB and no error", n, err)
	}
	os.Unsetenv(MaxBytesEnv)
	if n, err := MaxBytesFromEnv(); n != 2<<30 || err != nil {
		t.Errorf("MAIDEN_CACHE_MAX unset: %d, %v; want 2 GiB", n, err)
	}

	now := time.Now()
	t.Run("ages", func(t *testing.T) {
		c := open(t, filepath.Join(t.TempDir(), "cache"))
		c.SetMaxBytes(0)
		putAt(t, c, 0, now.Add(-14*24*time.Hour-time.Minute))
		putAt(t, c, 1, now.Add(-14*24*time.Hour+time.Hour))
		// An artifact without its record, a record without its artifact and
		// a temporary file, 61 and 59 minutes old.
		halves := map[string]bool{} // path: old enough to go
		for i, age := range map[int]time.Duration{2: 61 * time.Minute, 3: 59 * time.Minute} {
			sub, file, _ := c.name(entryKey(i))
			_, other, _ := c.name(entryKey(i + 10))
			mkdir(t, filepath.Join(c.Dir(), sub), 0o700)
			for _, name := range []string{file, other + recordSuffix, "." + file + ".tmp-0123456789abcdef"} {
				p := filepath.Join(c.Dir(), sub, name)
				overwrite(t, p, []byte("half"))
				setTime(t, p, now.Add(-age))
				halves[p] = age > time.Hour
			}
		}
		if _, err := c.trim(""); err != nil {
			t.Fatal(err)
		}
		if isCached(t, c, 0) || !isCached(t, c, 1) {
			t.Errorf("unused 14 days and a minute cached: %v, 13 days and 23 hours: %v; want false, true", isCached(t, c, 0), isCached(t, c, 1))
		}
		for p, gone := range halves {
			if exists(p) == gone {
				t.Errorf("%s (61 minutes old: %v) left: %v; want removed only when older than an hour", filepath.Base(p), gone, exists(p))
			}
		}
	})
	t.Run("marks", func(t *testing.T) {
		c := open(t, filepath.Join(t.TempDir(), "cache"))
		for i, age := range map[int]time.Duration{0: 61 * time.Minute, 1: 59 * time.Minute} {
			when := now.Add(-age).Truncate(time.Second)
			p := putAt(t, c, i, when)
			isCached(t, c, i)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if marked := !fi.ModTime().Equal(when); marked != (age > time.Hour) {
				t.Errorf("a load of an entry used %v ago marked it used: %v; want only after an hour", age, marked)
			}
		}
	})
	t.Run("stamp", func(t *testing.T) {
		c := open(t, filepath.Join(t.TempDir(), "cache"))
		c.SetMaxBytes(1 << 40)
		stamp := filepath.Join(c.Dir(), stampName)
		for _, age := range []time.Duration{59 * time.Minute, 61 * time.Minute} {
			old := putAt(t, c, 0, now.Add(-2*MaxAge))
			setTime(t, stamp, now.Add(-age))
			putAt(t, c, 1, now)
			if trimmed := !exists(old); trimmed != (age > time.Hour) {
				t.Errorf("a Put %v after the last trim trimmed: %v; want only after an hour", age, trimmed)
			}
		}
	})
	t.Run("size", func(t *testing.T) {
		c := open(t, filepath.Join(t.TempDir(), "cache"))
		c.SetMaxBytes(0)
		for i := range 11 {
			putAt(t, c, i, now.Add(time.Duration(i-20)*time.Minute))
		}
		entry := int64(len(artifact)) + 65
		c.SetMaxBytes(10*entry + 1000) // 70 % of it holds 7 entries, 80 % 8
		st, err := c.trim("")
		if err != nil {
			t.Fatal(err)
		}
		if st.Kept != 7*entry {
			t.Errorf("a size trim of 11 entries over a limit of 10: kept %d bytes (%d entries); want 7 entries, 70 %% of the limit", st.Kept, st.Kept/entry)
		}
	})
}

// TestPutKeepsWhatItJustPut: the trim a Put starts never removes the entry
// it put, even one larger than the whole limit.
func TestPutKeepsWhatItJustPut(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	c.SetMaxBytes(1)
	if err := c.Put(entryKey(0), artifact); err != nil {
		t.Fatal(err)
	}
	if !isCached(t, c, 0) {
		t.Fatal("the entry a Put just wrote was removed by its own trim")
	}
}

// TestWrittenBytesCountSinceTheLastTrim: the eighth of the limit that
// makes a trim due is counted from the last trim; with no limit only the
// hour does.
func TestWrittenBytesCountSinceTheLastTrim(t *testing.T) {
	n := int64(len(artifact))
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	c.SetMaxBytes(16 * n) // an eighth is two artifacts
	putAt(t, c, 0, time.Now())
	c.written.Store(0)
	putAt(t, c, 1, time.Now())
	putAt(t, c, 2, time.Now()) // 2n: not over an eighth
	putAt(t, c, 3, time.Now()) // 3n: trims, and counts from 0 again
	old := putAt(t, c, 4, time.Now().Add(-2*MaxAge))
	putAt(t, c, 5, time.Now()) // 2n since the trim
	if !exists(old) {
		t.Fatal("a Put trimmed after an eighth of the limit counted since before the last trim")
	}

	c.SetMaxBytes(0)
	putAt(t, c, 6, time.Now())
	if !exists(old) {
		t.Fatal("with no size limit, a Put within the hour trimmed")
	}
}

// TestStampNeverCreatesThroughALink: a stamp that is a link to a name
// outside the cache (nothing there yet) creates nothing there.
func TestStampNeverCreatesThroughALink(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	target := filepath.Join(t.TempDir(), "created-by-maiden")
	symlink(t, target, filepath.Join(c.Dir(), stampName))
	if _, err := c.Trim(); err != nil {
		t.Fatal(err)
	}
	if exists(target) {
		t.Fatal("stamping created a file outside the cache through the stamp's link")
	}
}

// TestUsageChangesNothing: maiden cache show lists; even a temporary file
// old enough for a trim to remove stays.
func TestUsageChangesNothing(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	art, _ := put(t, c)
	tmp := filepath.Join(filepath.Dir(art), "."+filepath.Base(art)+".tmp-0123456789abcdef")
	overwrite(t, tmp, []byte("half"))
	setTime(t, tmp, time.Now().Add(-2*time.Hour))
	u, err := c.Usage()
	if err != nil || u.Entries != 1 {
		t.Fatalf("Usage = %+v, %v", u, err)
	}
	if !exists(tmp) {
		t.Fatal("Usage removed a stale temporary file")
	}
}

// TestTrimLeavesLookAlikes: names that differ from the cache's patterns by
// one part (the '-', the suffix, a digit that is not lower-case hex, a
// temporary name's random part) are not the cache's, whatever their age.
func TestTrimLeavesLookAlikes(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	_, file, _ := c.name(entryKey(0))
	sub := filepath.Join(c.Dir(), "ab")
	mkdir(t, sub, 0o700)
	ancient := time.Now().Add(-10 * MaxAge)
	var keep []string
	for _, name := range []string{
		file[:64] + "_" + file[65:],                          // not the '-'
		strings.TrimSuffix(file, ".cwasm") + ".cwasX",        // not .cwasm
		strings.ToUpper(file[:64]) + file[64:],               // the digest not lower case
		file[:65] + strings.ToUpper(file[65:81]) + file[81:], // the engine tag not lower case
		"." + file + ".tmp-0123456789abcde",                  // 15 random digits
		"." + file + ".tmp-0123456789abcdeg",                 // not hex
		"notes" + recordSuffix,                               // a record of no artifact's name
		"." + "notes" + recordSuffix + ".tmp-0123456789abcdef",
	} {
		p := filepath.Join(sub, name)
		overwrite(t, p, []byte("someone else's"))
		setTime(t, p, ancient)
		keep = append(keep, p)
	}
	c.SetMaxBytes(1)
	for _, op := range []func() (TrimStats, error){func() (TrimStats, error) { return c.trim("") }, c.Clear} {
		if _, err := op(); err != nil {
			t.Fatal(err)
		}
		for _, p := range keep {
			if !exists(p) {
				t.Errorf("%s removed; it is not the cache's", filepath.Base(p))
			}
		}
	}
	if u, err := c.Usage(); err != nil || u.Entries != 0 || u.Bytes != 0 {
		t.Errorf("Usage = %+v, %v; want nothing counted", u, err)
	}
}

// TestTrimHoldsTheCache: a trim works through the cache's directory
// handle, so every trim (a Put's, Trim's) holds the cache's trim lock
// while it runs, and Close waits for it: closed under a trim, the handle's
// number could name another directory by the time the trim removes.
func TestTrimHoldsTheCache(t *testing.T) {
	for _, how := range []string{"Put", "Trim"} {
		t.Run(how, func(t *testing.T) {
			c, err := Open(filepath.Join(t.TempDir(), "cache"), "engine-A", nil)
			if err != nil {
				t.Fatal(err)
			}
			old := putAt(t, c, 0, time.Now().Add(-2*MaxAge))
			setTime(t, filepath.Join(c.Dir(), stampName), time.Now().Add(-2*trimInterval))
			paused, release := make(chan bool), make(chan struct{})
			testHookTrimScanned = func(tc *Cache) {
				if tc != c {
					return
				}
				locked := !c.trimming.TryLock()
				if !locked {
					c.trimming.Unlock()
				}
				paused <- locked
				<-release
			}
			defer func() { testHookTrimScanned = nil }()
			trimmed := make(chan error, 1)
			go func() {
				if how == "Put" {
					trimmed <- c.Put(entryKey(1), artifact)
				} else {
					_, err := c.Trim()
					trimmed <- err
				}
			}()
			if !<-paused {
				close(release)
				t.Fatalf("a trim started by %s runs without the cache's trim lock", how)
			}
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			// Close blocked on the trim lock is what a stack shows; a
			// minute without it (Close renamed, or blocked elsewhere)
			// fails rather than spin to the run's timeout.
			for deadline := time.Now().Add(time.Minute); !waitingIn("(*Cache).Close"); {
				select {
				case <-closed:
					close(release)
					t.Fatal("Close returned while a trim was using the cache's handle")
				default:
					if time.Now().After(deadline) {
						close(release)
						t.Fatal("no goroutine blocked in (*Cache).Close on the trim lock after a minute")
					}
					runtime.Gosched()
				}
			}
			close(release)
			if err := <-trimmed; err != nil {
				t.Fatal(err)
			}
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			if exists(old) {
				t.Fatal("the trim did not remove the entry unused for 2×MaxAge")
			}
		})
	}
}

// waitingIn reports whether a goroutine is blocked taking a mutex inside
// fn (a name in its stack).
func waitingIn(fn string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "sync.(*Mutex).Lock") && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}

// TestUsage: maiden cache show's numbers: the entries (artifacts), every
// byte of the cache's files, the least and most recent use, the last trim.
func TestUsage(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	c.SetMaxBytes(0)
	base := time.Now().Add(-5 * time.Hour).Truncate(time.Second)
	for i, h := range []int{2, 0, 4, 1} { // listed in no order of use
		putAt(t, c, i, base.Add(time.Duration(h)*time.Hour))
	}
	sub, _, _ := c.name(entryKey(9))
	mkdir(t, filepath.Join(c.Dir(), sub), 0o700)
	_, file, _ := c.name(entryKey(9))
	overwrite(t, filepath.Join(c.Dir(), sub, file+recordSuffix), []byte("half")) // a record alone
	stamped := base.Add(90 * time.Minute)
	setTime(t, filepath.Join(c.Dir(), stampName), stamped)
	u, err := c.Usage()
	if err != nil {
		t.Fatal(err)
	}
	entry := int64(len(artifact)) + 65
	if u.Entries != 4 || u.Bytes != 4*entry+4 || !u.Oldest.Equal(base) || !u.Newest.Equal(base.Add(4*time.Hour)) || !u.LastTrim.Equal(stamped) || u.MaxAge != 14*24*3600 {
		t.Fatalf("Usage = %+v; want 4 entries, %d bytes, oldest %v, newest %v, last trim %v, max age 14 days", u, 4*entry+4, base, base.Add(4*time.Hour), stamped)
	}
}

// TestDefaultDir: the user's cache directory, maiden/components under it,
// and none when the user has none.
func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/var/cache/someone")
	if d := DefaultDir(); d != "/var/cache/someone/maiden/components" {
		t.Errorf("DefaultDir = %q, want /var/cache/someone/maiden/components", d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if d := DefaultDir(); d != "" {
		t.Errorf("DefaultDir with no $XDG_CACHE_HOME and no $HOME = %q, want none", d)
	}
}

// TestParseSizeAtItsBound: 2^62 bytes is the largest size, in any unit.
func TestParseSizeAtItsBound(t *testing.T) {
	for _, s := range []string{"4611686018427387904", "4194304T", "4294967296G"} {
		if n, err := ParseSize(s); n != 1<<62 || err != nil {
			t.Errorf("ParseSize(%q) = %d, %v; want 2^62", s, n, err)
		}
	}
	for _, s := range []string{"4611686018427387905", "4194305T", "4294967297G"} {
		if _, err := ParseSize(s); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("ParseSize(%q): %v; want out of range", s, err)
		}
	}
}
