package compcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWhatPutWritesIsPrivate: whatever the umask, the cache directory Open
// makes and every subdirectory are 0700, and every artifact and record is
// 0600: compiled code and the digests of the tools it came from are this
// user's alone.
func TestWhatPutWritesIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache") // made 0700 before the umask is cleared
	old := unix.Umask(0)
	defer unix.Umask(old)
	c := open(t, dir)
	art, rec := put(t, c)
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(art): 0o700, art: 0o600, rec: 0o600} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", path, got, want)
		}
	}
}

// TestCacheDirOfAnotherUserUnderRoots: the rules are the user's, not
// root's: for another user, ancestors owned by root are trusted and the
// cache directory must be that user's. (The tests run as root, so the
// other user is asked for through openChecked's uid.)
func TestCacheDirOfAnotherUserUnderRoots(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "cache")
	mkdir(t, dir, 0o700)
	chown(t, dir, other)
	fd, err := openChecked(dir, other, cacheWhat)
	if err != nil {
		t.Fatalf("uid %d's cache under root's directories: %v; want accepted", other, err)
	}
	unix.Close(fd)
	// And root's own directory is not that user's cache.
	chown(t, dir, 0)
	if fd, err := openChecked(dir, other, cacheWhat); err == nil || !strings.Contains(err.Error(), "owned by uid 0, not by this user") {
		if err == nil {
			unix.Close(fd)
		}
		t.Fatalf("root's directory as uid %d's cache: %v; want refused as not this user's", other, err)
	}
}

// TestCheckPrivateDirRefusesALinkOnThePath: CheckPrivateDir is given a path
// whose links were resolved; one that still holds a link (swapped in since)
// is refused, even when it leads to a private directory.
func TestCheckPrivateDirRefusesALinkOnThePath(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	mkdir(t, real, 0o700)
	mkdir(t, filepath.Join(real, "store"), 0o700)
	if err := CheckPrivateDir(filepath.Join(real, "store"), "component store"); err != nil {
		t.Fatalf("the real path: %v", err)
	}
	symlink(t, real, filepath.Join(base, "link"))
	err := CheckPrivateDir(filepath.Join(base, "link", "store"), "component store")
	if err == nil || !strings.Contains(err.Error(), "(a link or not a directory)") {
		t.Fatalf("a path through a link: %v; want it refused as a link", err)
	}
}

// TestRemove: Remove deletes an entry's artifact and record; an entry that
// is not there, or only half of it, is no error.
func TestRemove(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	if err := c.Remove(key); err != nil {
		t.Fatalf("Remove with no subdirectory: %v, want nil", err)
	}
	art, rec := put(t, c)
	if err := c.Remove(key); err != nil {
		t.Fatal(err)
	}
	if exists(art) || exists(rec) {
		t.Fatalf("after Remove: artifact left %v, record left %v", exists(art), exists(rec))
	}
	art, _ = put(t, c)
	remove(t, art)
	if err := c.Remove(key); err != nil {
		t.Fatalf("Remove of a record without its artifact: %v, want nil", err)
	}
	if err := c.Remove(key); err != nil {
		t.Fatalf("Remove of nothing in an existing subdirectory: %v, want nil", err)
	}
}

// TestRefusedEntryRemovedWhole: a refused entry goes with both its files,
// so that nothing of it is left for the next reader or a trim to judge.
func TestRefusedEntryRemovedWhole(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	art, rec := put(t, c)
	b := readFile(t, art)
	b[0] ^= 1
	overwrite(t, art, b)
	if _, err := c.Load(key); !errors.Is(err, ErrRefused) {
		t.Fatalf("Load of a tampered entry: %v, want ErrRefused", err)
	}
	if exists(art) || exists(rec) {
		t.Fatalf("after the refusal: artifact left %v, record left %v; want both removed", exists(art), exists(rec))
	}
}

// TestEntryThatIsNoFileRefused: a FIFO at an artifact's or a record's name
// is refused as not a regular file, at once: the open does not wait for a
// writer, and nothing is read.
func TestEntryThatIsNoFileRefused(t *testing.T) {
	for _, which := range []string{"artifact", "record"} {
		for _, how := range []string{"Load", "OpenFile"} {
			t.Run(which+"/"+how, func(t *testing.T) {
				c := open(t, filepath.Join(t.TempDir(), "cache"))
				art, rec := put(t, c)
				path := map[string]string{"artifact": art, "record": rec}[which]
				remove(t, path)
				if err := unix.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
				err := load(c, how)
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is not a regular file") {
					t.Fatalf("%s with a FIFO as the %s: %v; want ErrRefused, not a regular file", how, which, err)
				}
			})
		}
	}
}

func load(c *Cache, how string) error {
	if how == "Load" {
		_, err := c.Load(key)
		return err
	}
	a, err := c.OpenFile(key)
	if a != nil {
		a.Close()
	}
	return err
}

// TestEntryFilesOverTheirLimitsRefused: an artifact of MaxArtifactBytes+1
// (sparse here) and a record of 129 bytes are refused for their size before
// anything is read or hashed.
func TestEntryFilesOverTheirLimitsRefused(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	art, _ := put(t, c)
	if err := os.Truncate(art, MaxArtifactBytes+1); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("is %d bytes, over the %d limit", MaxArtifactBytes+1, 1<<30)
	if err := load(c, "OpenFile"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("an artifact of MaxArtifactBytes+1: %v; want ErrRefused saying %q", err, want)
	}
	art, rec := put(t, c)
	overwrite(t, rec, []byte(digestOf(readFile(t, art))+"\n"+strings.Repeat(" ", 128-65+1)))
	if err := load(c, "Load"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is 129 bytes, over the 128 limit") {
		t.Fatalf("a record of 129 bytes: %v; want ErrRefused, over the 128 limit", err)
	}
}

// TestWriteBitsOneByOne: each write bit refuses alone: the group's or the
// others' on the cache directory (sticky or not: the cache directory is not
// an ancestor) and on an entry's file, and on an ancestor without the
// sticky bit.
func TestWriteBitsOneByOne(t *testing.T) {
	for _, tc := range []struct {
		name          string
		parent, cache os.FileMode
		refuse        string
	}{
		{"cache writable by others only", 0o755, 0o702, "is writable by group or others (mode 0702)"},
		{"cache writable by group only", 0o755, 0o720, "is writable by group or others (mode 0720)"},
		{"cache sticky and writable by all", 0o755, 0o1777, "is writable by group or others (mode 01777)"},
		{"ancestor writable by group only", 0o775, 0o700, "is writable by group or others and not sticky (mode 0775)"},
		{"ancestor writable by others only", 0o757, 0o700, "is writable by group or others and not sticky (mode 0757)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "p")
			mkdir(t, parent, tc.parent)
			cache := filepath.Join(parent, "cache")
			mkdir(t, cache, tc.cache)
			c, err := Open(cache, "fp", nil)
			if err == nil {
				c.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.refuse) {
				t.Fatalf("Open: %v; want refused: %q", err, tc.refuse)
			}
		})
	}
	for _, mode := range []os.FileMode{0o620, 0o602} {
		for _, which := range []string{"artifact", "record"} {
			t.Run(fmt.Sprintf("%s %#o", which, mode), func(t *testing.T) {
				c := open(t, filepath.Join(t.TempDir(), "cache"))
				art, rec := put(t, c)
				chmod(t, map[string]string{"artifact": art, "record": rec}[which], mode)
				want := fmt.Sprintf("is writable by group or others (mode %#o)", mode)
				if err := load(c, "Load"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
					t.Fatalf("Load of an entry whose %s is %#o: %v; want ErrRefused saying %q", which, mode, err, want)
				}
			})
		}
	}
}
