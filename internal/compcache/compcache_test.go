package compcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// other is a uid that is neither root nor the test's user: the tests run
// as root here, so they can give files to it with chown.
const other = 4242

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// artifact stands in for serialized code: what matters here is that any
// change to it is seen, not what it is.
var artifact = bytes.Repeat([]byte("native code "), 10_000)

var key = digestOf([]byte("the component's .wasm"))

func open(t *testing.T, dir string) *Cache {
	t.Helper()
	c, err := Open(dir, "engine-A", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func put(t *testing.T, c *Cache) (artifactPath, recordPath string) {
	t.Helper()
	if err := c.Put(key, artifact); err != nil {
		t.Fatal(err)
	}
	sub, file, _ := c.name(key)
	return filepath.Join(c.Dir(), sub, file), filepath.Join(c.Dir(), sub, file+recordSuffix)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
}

func TestPutLoad(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	if _, err := c.Load(key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty cache: %v, want ErrNotFound", err)
	}
	put(t, c)
	b, err := c.Load(key)
	if err != nil || !bytes.Equal(b, artifact) {
		t.Fatalf("Load: %d bytes, %v", len(b), err)
	}
	a, err := c.OpenFile(key)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if b, err := os.ReadFile(a.Path()); err != nil || !bytes.Equal(b, artifact) || a.Size() != int64(len(artifact)) {
		t.Fatalf("OpenFile: %d bytes (size %d), %v", len(b), a.Size(), err)
	}
	// Another engine's artifact is another entry.
	d, err := Open(c.Dir(), "engine-B", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Load(key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other fingerprint: %v, want ErrNotFound", err)
	}
}

// TestOpenChecksEveryAncestor: a cache someone else could replace, at any
// level of its path, is refused.
func TestOpenChecksEveryAncestor(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name   string
		setup  func(t *testing.T, parent, cache string) // cache is parent/cache
		refuse string                                   // "" means accepted
	}{
		{"private", func(*testing.T, string, string) {}, ""},
		{"cache writable by others", func(t *testing.T, _, cache string) { mkdir(t, cache, 0o777) }, "writable by group or others"},
		{"cache writable by group", func(t *testing.T, _, cache string) { mkdir(t, cache, 0o770) }, "writable by group or others"},
		{"cache owned by another user", func(t *testing.T, _, cache string) { mkdir(t, cache, 0o700); chown(t, cache, other) }, "owned by uid 4242"},
		{"ancestor writable by others, not sticky", func(t *testing.T, parent, _ string) { chmod(t, parent, 0o777) }, "not sticky"},
		{"ancestor writable by others, sticky (like /tmp)", func(t *testing.T, parent, _ string) { chmod(t, parent, 0o1777) }, ""},
		{"ancestor owned by another user", func(t *testing.T, parent, _ string) { chown(t, parent, other) }, "owned by uid 4242"},
		{"grandparent owned by another user", func(t *testing.T, parent, _ string) { chown(t, filepath.Dir(parent), other) }, "owned by uid 4242"},
		{"cache is a link into a directory others can write", func(t *testing.T, parent, cache string) {
			bad := filepath.Join(parent, "shared")
			mkdir(t, bad, 0o777)
			mkdir(t, filepath.Join(bad, "c"), 0o700)
			symlink(t, filepath.Join(bad, "c"), cache)
		}, "not sticky"},
		{"cache is a file", func(t *testing.T, _, cache string) {
			if err := os.WriteFile(cache, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "a", "b")
			mkdir(t, filepath.Dir(parent), 0o755)
			mkdir(t, parent, 0o755)
			cache := filepath.Join(parent, "cache")
			tc.setup(t, parent, cache)
			c, err := Open(cache, "fp", nil)
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("refused a trustworthy cache: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("accepted; want refusal containing %q", tc.refuse)
			}
			if !strings.Contains(err.Error(), tc.refuse) {
				t.Fatalf("refused with %q; want it to say %q", err, tc.refuse)
			}
		})
	}
}

// TestTamperedEntriesAreRefused: an entry is served only if it is the
// regular file this cache wrote, reached without links, holding the bytes
// its record names. Each hostile change is refused, the entry removed, and
// a fresh Put serves again.
func TestTamperedEntriesAreRefused(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, c *Cache, art, rec string)
		want   error // ErrRefused, or ErrNotFound for a half-present entry
	}{
		{"flipped byte in the middle", func(t *testing.T, _ *Cache, art, _ string) {
			b := readFile(t, art)
			b[len(b)/2] ^= 0x01
			overwrite(t, art, b)
		}, ErrRefused},
		{"overwritten with other code, same size", func(t *testing.T, _ *Cache, art, _ string) {
			overwrite(t, art, bytes.Repeat([]byte("x"), len(artifact)))
		}, ErrRefused},
		{"truncated", func(t *testing.T, _ *Cache, art, _ string) {
			overwrite(t, art, artifact[:len(artifact)/2])
		}, ErrRefused},
		{"extended", func(t *testing.T, _ *Cache, art, _ string) {
			overwrite(t, art, append(readFile(t, art), "payload"...))
		}, ErrRefused},
		{"artifact is a link to an identical copy", func(t *testing.T, _ *Cache, art, _ string) {
			// The payload matches its record, but is reached through a link.
			evil := filepath.Join(t.TempDir(), "evil")
			overwrite(t, evil, artifact)
			replaceWithLink(t, art, evil)
		}, ErrRefused},
		{"record is a link", func(t *testing.T, _ *Cache, _, rec string) {
			evil := filepath.Join(t.TempDir(), "evil.sha256")
			overwrite(t, evil, readFile(t, rec))
			replaceWithLink(t, rec, evil)
		}, ErrRefused},
		{"subdirectory swapped for a link to a copy", func(t *testing.T, c *Cache, art, _ string) {
			sub := filepath.Dir(art)
			copyDir := filepath.Join(t.TempDir(), "copy")
			if err := os.Rename(sub, copyDir); err != nil {
				t.Fatal(err)
			}
			symlink(t, copyDir, sub)
		}, ErrRefused},
		{"artifact hard-linked from elsewhere", func(t *testing.T, _ *Cache, art, _ string) {
			if err := os.Link(art, filepath.Join(filepath.Dir(art), "..", "elsewhere")); err != nil {
				t.Fatal(err)
			}
		}, ErrRefused},
		{"artifact writable by others", func(t *testing.T, _ *Cache, art, _ string) { chmod(t, art, 0o666) }, ErrRefused},
		{"subdirectory writable by others", func(t *testing.T, _ *Cache, art, _ string) { chmod(t, filepath.Dir(art), 0o777) }, ErrRefused},
		{"artifact owned by another user", func(t *testing.T, _ *Cache, art, _ string) {
			requireRoot(t)
			chown(t, art, other)
		}, ErrRefused},
		{"record garbage", func(t *testing.T, _ *Cache, _, rec string) { overwrite(t, rec, []byte("trust me\n")) }, ErrRefused},
		{"record of the tampered bytes, other user's", func(t *testing.T, _ *Cache, art, rec string) {
			requireRoot(t)
			b := readFile(t, art)
			b[0] ^= 1
			overwrite(t, art, b)
			overwrite(t, rec, []byte(digestOf(b)+"\n"))
			chown(t, rec, other)
		}, ErrRefused},
		{"record missing", func(t *testing.T, _ *Cache, _, rec string) { remove(t, rec) }, ErrNotFound},
		{"artifact missing", func(t *testing.T, _ *Cache, art, _ string) { remove(t, art) }, ErrNotFound},
	}
	for _, tc := range tests {
		for _, how := range []string{"Load", "OpenFile"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				c := open(t, filepath.Join(t.TempDir(), "cache"))
				art, rec := put(t, c)
				tc.tamper(t, c, art, rec)
				var err error
				if how == "Load" {
					var b []byte
					b, err = c.Load(key)
					if err == nil && !bytes.Equal(b, artifact) {
						t.Fatal("Load served bytes that are not the artifact")
					}
				} else {
					var a *Artifact
					a, err = c.OpenFile(key)
					if a != nil {
						a.Close()
					}
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("%s after tampering: %v, want %v", how, err, tc.want)
				}
				// Refused entries are gone; a new Put serves again.
				if tc.want == ErrRefused {
					if _, err := c.Load(key); !errors.Is(err, ErrNotFound) {
						t.Fatalf("after refusal: %v, want the entry removed", err)
					}
				}
				put(t, c)
				if b, err := c.Load(key); err != nil || !bytes.Equal(b, artifact) {
					t.Fatalf("after a new Put: %v", err)
				}
			})
		}
	}
}

// TestOpenFileServesTheVerifiedInode: replacing the entry after OpenFile
// verified it does not change what its Path reaches.
func TestOpenFileServesTheVerifiedInode(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	art, _ := put(t, c)
	a, err := c.OpenFile(key)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	evil := art + ".evil"
	overwrite(t, evil, bytes.Repeat([]byte("y"), len(artifact)))
	if err := os.Rename(evil, art); err != nil {
		t.Fatal(err)
	}
	if b := readFile(t, a.Path()); !bytes.Equal(b, artifact) {
		t.Fatal("Path reached the replacement, not the verified file")
	}
}

// TestCacheDirSwappedAfterOpen: once open, the cache works through its
// directory handle; renaming the directory away and putting a link to
// someone else's in its place changes nothing.
func TestCacheDirSwappedAfterOpen(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "cache")
	c := open(t, dir)
	// The attacker's directory holds an entry for the same key.
	evilDir := filepath.Join(base, "evil")
	ec := open(t, evilDir)
	if err := ec.Put(key, []byte("evil code")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, filepath.Join(base, "moved")); err != nil {
		t.Fatal(err)
	}
	symlink(t, evilDir, dir)
	if b, err := c.Load(key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the swap: %q, %v; want ErrNotFound from the original directory", b, err)
	}
	put(t, c)
	if b := readFile(t, filepath.Join(base, "moved", key[:2], filepath.Base(mustName(t, c)))); !bytes.Equal(b, artifact) {
		t.Fatal("Put did not write into the original directory")
	}
}

func TestDigestMustBeHex(t *testing.T) {
	c := open(t, filepath.Join(t.TempDir(), "cache"))
	for _, d := range []string{"", "../../../../etc/passwd", strings.Repeat("A", 64), strings.Repeat("0", 63) + "/", strings.Repeat("0", 65)} {
		if err := c.Put(d, artifact); err == nil || !strings.Contains(err.Error(), "not a SHA-256 hex digest") {
			t.Errorf("Put(%q): %v", d, err)
		}
		if _, err := c.Load(d); err == nil {
			t.Errorf("Load(%q) succeeded", d)
		}
	}
}

func mustName(t *testing.T, c *Cache) string {
	t.Helper()
	_, file, err := c.name(key)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

func mkdir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	chmod(t, path, mode)
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	// os.Chmod takes the sticky bit as os.ModeSticky, not 0o1000.
	m := mode.Perm()
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	requireRoot(t)
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func replaceWithLink(t *testing.T, path, target string) {
	t.Helper()
	remove(t, path)
	symlink(t, target, path)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// overwrite rewrites a file in place, keeping its inode, owner and mode,
// as an attacker with write access would.
func overwrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentWritersAndReaders: two caches over one directory (two
// processes, say) writing and reading the same entry at once. A reader may
// miss while a writer is between the artifact and its record, or when a
// writer renames a new file over the one it opened, but never gets bytes
// other than the artifact's and never refuses (and so removes) the entry.
func TestConcurrentWritersAndReaders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	caches := []*Cache{open(t, dir), open(t, dir)}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := caches[g%2]
			for i := range 50 {
				if (g+i)%3 == 0 {
					if err := c.Put(key, artifact); err != nil {
						errs <- err
						return
					}
					continue
				}
				var b []byte
				var err error
				if i%2 == 0 {
					b, err = c.Load(key)
				} else {
					var a *Artifact
					if a, err = c.OpenFile(key); err == nil {
						b, err = os.ReadFile(a.Path())
						a.Close()
					}
				}
				if err == nil && !bytes.Equal(b, artifact) {
					errs <- errors.New("served bytes that are not the artifact")
					return
				}
				// Never a refusal: a file replaced under a reader (Nlink 0)
				// is a miss, not a hard link into the cache.
				if err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	put(t, caches[0])
	if b, err := caches[1].Load(key); err != nil || !bytes.Equal(b, artifact) {
		t.Fatalf("after the storm: %v", err)
	}
}
