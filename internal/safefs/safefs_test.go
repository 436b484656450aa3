//go:build linux

package safefs

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const outsideSecret = "OUTSIDE-SECRET"

// fixture: tmp/root (the allowed root) and tmp/outside (never to be read or written through the root).
type fixture struct{ root, outside string }

func newFixture(t *testing.T) fixture {
	t.Helper()
	// Roots are opened without following symlinks: the fixture's own path must have none (TMPDIR may be a link).
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	f := fixture{root: filepath.Join(tmp, "root"), outside: filepath.Join(tmp, "outside")}
	for _, d := range []string{f.root, f.outside, filepath.Join(f.root, "sub")} {
		must(t, os.Mkdir(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte(outsideSecret), 0o644))
	must(t, os.WriteFile(filepath.Join(f.root, "in.txt"), []byte("hello"), 0o644))
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eachMethod runs fn under openat2 (when the kernel has it) and under the openat walk.
func eachMethod(t *testing.T, fn func(t *testing.T, method string)) {
	t.Helper()
	for _, walkOnly := range []bool{false, true} {
		if !walkOnly && !haveOpenat2() {
			t.Log("kernel has no openat2: only the openat walk is tested")
			continue
		}
		name := "openat2"
		if walkOnly {
			name = "openat"
		}
		t.Run(name, func(t *testing.T) {
			defer ForceWalkForTesting(walkOnly)()
			if got := Method(); got != name {
				t.Fatalf("Method() = %q, want %q", got, name)
			}
			fn(t, name)
		})
	}
}

func wantKind(t *testing.T, err error, kinds ...Kind) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want a *safefs.Error of kind %v", err, err, kinds)
	}
	for _, k := range kinds {
		if e.Kind == k {
			return
		}
	}
	t.Fatalf("error %v has kind %q, want one of %v", err, e.Kind, kinds)
}

func TestMethodReported(t *testing.T) {
	t.Logf("this kernel: %s", Method())
	if m := Method(); m != "openat2" && m != "openat" {
		t.Fatalf("Method() = %q", m)
	}
}

// BOUNDARIES.md B3 (a relative path or one with ".." is invalid_path) and B4 (a 4097-character path is
// path_too_long), applied to fs_read/fs_write/fs_list paths; ".." inside a relative path at the kernel layer is an escape.
func TestDotDotAndInvalidPaths(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		for _, p := range []string{
			f.root + "/../outside/secret.txt", f.root + "/sub/../../outside/secret.txt", "root/in.txt",
			f.root + "/./in.txt", f.root + "//in.txt", f.root + "/sub/", "", f.root + "/in\x00.txt",
		} {
			_, err := Read(roots, p, 1<<20)
			wantKind(t, err, KindInvalidPath)
			wantKind(t, Write(roots, p, []byte("x"), 1<<20), KindInvalidPath)
			_, err = List(roots, p, 10)
			wantKind(t, err, KindInvalidPath)
		}
		long := "/" + strings.Repeat("a", MaxPath)
		_, err := Read([]Root{{Path: "/"}}, long, 10)
		wantKind(t, err, KindPathTooLong)
		// The kernel layer refuses ".." that climbs out even when handed one directly.
		for _, rel := range []string{"../outside/secret.txt", "sub/../../outside/secret.txt"} {
			fd, err := openBeneath(target{root: f.root, dir: f.root}, rel, unix.O_RDONLY, 0)
			if err == nil {
				unix.Close(fd)
				t.Fatalf("openBeneath(%q) opened a file outside the root", rel)
			}
			if !errors.Is(err, unix.EXDEV) {
				t.Fatalf("openBeneath(%q): %v, want EXDEV", rel, err)
			}
		}
	})
}

func TestOutsideAndReadOnly(t *testing.T) {
	f := newFixture(t)
	roots := []Root{{Path: f.root}}
	_, err := Read(roots, filepath.Join(f.outside, "secret.txt"), 100)
	wantKind(t, err, KindOutside)
	if !errors.Is(err, ErrOutside) || !strings.Contains(err.Error(), filepath.Join(f.outside, "secret.txt")) {
		t.Fatalf("error %q should match ErrOutside and name the path", err)
	}
	// A sibling whose name extends the root's is not beneath it.
	_, err = Read(roots, f.root+"x/a", 100)
	wantKind(t, err, KindOutside)
	wantKind(t, Write(roots, filepath.Join(f.root, "new.txt"), []byte("x"), 100), KindReadOnly)
	if _, err := os.Stat(filepath.Join(f.root, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused write created the file")
	}
	// A nested writable root inside a read-only one: writes go only beneath the nested root.
	roots = append(roots, Root{Path: filepath.Join(f.root, "sub"), Access: AccessWrite})
	must(t, Write(roots, filepath.Join(f.root, "sub", "w.txt"), []byte("ok"), 100))
	wantKind(t, Write(roots, filepath.Join(f.root, "w.txt"), []byte("x"), 100), KindReadOnly)
	c, err := Read(roots, filepath.Join(f.root, "sub", "w.txt"), 100)
	must(t, err)
	if c.Data != "ok" || c.Base64 {
		t.Fatalf("read back %+v", c)
	}
}

func TestAbsoluteSymlinks(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		must(t, os.Symlink(filepath.Join(f.outside, "secret.txt"), filepath.Join(f.root, "abs")))
		must(t, os.Symlink(f.outside, filepath.Join(f.root, "absdir")))
		// Even an absolute link that points inside the root is refused: RESOLVE_BENEATH refuses absolute links.
		must(t, os.Symlink(filepath.Join(f.root, "in.txt"), filepath.Join(f.root, "absin")))
		for _, p := range []string{"abs", "absdir/secret.txt", "absin"} {
			c, err := Read(roots, filepath.Join(f.root, p), 1<<20)
			if strings.Contains(c.Data, outsideSecret) {
				t.Fatalf("read the outside file through %s", p)
			}
			wantKind(t, err, KindEscape, KindSymlink)
		}
		_, err := List(roots, filepath.Join(f.root, "absdir"), 10)
		wantKind(t, err, KindEscape, KindSymlink, KindNotDir)
		err = Write(roots, filepath.Join(f.root, "absdir", "planted.txt"), []byte("x"), 100)
		wantKind(t, err, KindEscape, KindSymlink, KindNotDir)
		if _, err := os.Stat(filepath.Join(f.outside, "planted.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a write through an absolute directory symlink created a file outside the root")
		}
	})
}

func TestRelativeSymlinks(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		must(t, os.Symlink("../outside/secret.txt", filepath.Join(f.root, "rel")))
		must(t, os.Symlink("../../outside", filepath.Join(f.root, "sub", "deep")))
		must(t, os.Symlink("../in.txt", filepath.Join(f.root, "sub", "ok"))) // stays inside
		for _, p := range []string{"rel", "sub/deep/secret.txt"} {
			c, err := Read(roots, filepath.Join(f.root, p), 1<<20)
			if strings.Contains(c.Data, outsideSecret) {
				t.Fatalf("read the outside file through %s", p)
			}
			wantKind(t, err, KindEscape, KindSymlink)
		}
		c, err := Read(roots, filepath.Join(f.root, "sub", "ok"), 100)
		if method == "openat2" {
			must(t, err)
			if c.Data != "hello" {
				t.Fatalf("inside symlink read %q", c.Data)
			}
		} else {
			wantKind(t, err, KindSymlink) // the walk follows no symlink at all
		}
		// Writes never follow a symlink at the last component, even one that points inside.
		must(t, os.Symlink("../outside/created.txt", filepath.Join(f.root, "wout")))
		wantKind(t, Write(roots, filepath.Join(f.root, "wout"), []byte("x"), 100), KindSymlink)
		wantKind(t, Write(roots, filepath.Join(f.root, "sub", "ok"), []byte("x"), 100), KindSymlink)
		if _, err := os.Stat(filepath.Join(f.outside, "created.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a write through a symlink created a file outside the root")
		}
		if b, _ := os.ReadFile(filepath.Join(f.root, "in.txt")); string(b) != "hello" {
			t.Fatalf("a write through an inside symlink changed its target: %q", b)
		}
		wantKind(t, Write(roots, filepath.Join(f.root, "sub", "deep", "x.txt"), []byte("x"), 100), KindEscape, KindSymlink)
		if _, err := os.Stat(filepath.Join(f.outside, "x.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a write through a relative directory symlink created a file outside the root")
		}
	})
}

// /proc magic links (root, cwd, fd/N) jump anywhere; with /proc/self as a root they must still be refused.
func TestProcMagicLinks(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		secret := filepath.Join(f.outside, "secret.txt")
		held, err := os.Open(secret)
		must(t, err)
		defer held.Close()
		// Control: through the ordinary file API these paths do reach the secret, so refusing them means something.
		if b, err := os.ReadFile("/proc/self/root" + secret); err != nil || string(b) != outsideSecret {
			t.Fatalf("control read through /proc/self/root: %q, %v", b, err)
		}
		// /proc/self is itself a symlink, so as a root it is refused outright; /proc/PID is the same directory.
		_, err = Read([]Root{{Path: "/proc/self"}}, "/proc/self/root"+secret, 1<<20)
		wantKind(t, err, KindSymlink)
		self := "/proc/" + strconv.Itoa(os.Getpid())
		roots := []Root{{Path: self}}
		for _, p := range []string{
			self + "/root" + secret,
			self + "/fd/" + strconv.Itoa(int(held.Fd())),
			self + "/cwd/safefs_test.go",
		} {
			c, err := Read(roots, p, 1<<20)
			if strings.Contains(c.Data, outsideSecret) {
				t.Fatalf("read the secret through %s", p)
			}
			wantKind(t, err, KindSymlink, KindEscape)
		}
	})
}

func TestLimitsAndTypes(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		p := filepath.Join(f.root, "ten.txt")
		must(t, Write(roots, p, []byte("0123456789"), 10))
		_, err := Read(roots, p, 9)
		wantKind(t, err, KindTooLarge)
		c, err := Read(roots, p, 10)
		must(t, err)
		if c.Data != "0123456789" || c.Size != 10 {
			t.Fatalf("read %+v", c)
		}
		wantKind(t, Write(roots, filepath.Join(f.root, "big.txt"), make([]byte, 11), 10), KindTooLarge)
		if _, err := os.Stat(filepath.Join(f.root, "big.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("an oversized write created the file")
		}
		// Truncation: a shorter write replaces the whole file.
		must(t, Write(roots, p, []byte("ab"), 10))
		if b, _ := os.ReadFile(p); string(b) != "ab" {
			t.Fatalf("after rewrite: %q", b)
		}
		bin := []byte{0, 1, 2, 0xff, 'a'}
		must(t, Write(roots, filepath.Join(f.root, "bin"), bin, 10))
		c, err = Read(roots, filepath.Join(f.root, "bin"), 10)
		must(t, err)
		if got, _ := base64.StdEncoding.DecodeString(c.Data); !c.Base64 || string(got) != string(bin) {
			t.Fatalf("binary read %+v", c)
		}
		_, err = Read(roots, filepath.Join(f.root, "sub"), 10)
		wantKind(t, err, KindIsDir)
		wantKind(t, Write(roots, filepath.Join(f.root, "sub"), []byte("x"), 10), KindIsDir)
		wantKind(t, Write(roots, f.root, []byte("x"), 10), KindIsDir)
		_, err = Read(roots, filepath.Join(f.root, "missing"), 10)
		wantKind(t, err, KindNotFound)
		if !errors.Is(err, ErrNotFound) {
			t.Fatal("errors.Is(ErrNotFound) false")
		}
		wantKind(t, Write(roots, filepath.Join(f.root, "nodir", "x"), []byte("x"), 10), KindNotFound)
		// A FIFO neither blocks a read or a write nor is treated as a file.
		fifo := filepath.Join(f.root, "fifo")
		must(t, unix.Mkfifo(fifo, 0o644))
		_, err = Read(roots, fifo, 10)
		wantKind(t, err, KindNotRegular)
		wantKind(t, Write(roots, fifo, []byte("x"), 10), KindNotRegular)
		_, err = List(roots, filepath.Join(f.root, "in.txt"), 10)
		wantKind(t, err, KindNotDir)
	})
}

func TestList(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root}}
		must(t, os.Symlink("../outside", filepath.Join(f.root, "lnk")))
		l, err := List(roots, f.root, 10)
		must(t, err)
		want := []Entry{{"in.txt", TypeFile, 5}, {"lnk", TypeSymlink, int64(len("../outside"))}, {"sub", TypeDir, 0}}
		if len(l.Entries) != len(want) || l.Truncated {
			t.Fatalf("listing %+v", l)
		}
		for i, e := range want {
			got := l.Entries[i]
			if got.Name != e.Name || got.Type != e.Type || (e.Type != TypeDir && got.Size != e.Size) {
				t.Fatalf("entry %d = %+v, want %+v", i, got, e)
			}
		}
		l, err = List(roots, f.root, 2)
		must(t, err)
		if !l.Truncated || len(l.Entries) != 2 {
			t.Fatalf("capped listing %+v", l)
		}
		l, err = List(roots, f.root, 3)
		must(t, err)
		if l.Truncated || len(l.Entries) != 3 {
			t.Fatalf("listing at exactly the cap %+v", l)
		}
		_, err = List(roots, filepath.Join(f.root, "lnk"), 10)
		wantKind(t, err, KindEscape, KindSymlink)
	})
}

// The race: a real directory inside the root and a symlink to the outside directory are exchanged atomically
// (renameat2 RENAME_EXCHANGE) as fast as possible while other goroutines read and write through that name. Nothing
// outside may ever be read or created. Bounded to raceFor per method; both outcomes must occur, so the swap really
// raced the opens.
func TestSymlinkSwapRace(t *testing.T) {
	const raceFor = 700 * time.Millisecond
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		d := filepath.Join(f.root, "d")
		must(t, os.Mkdir(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "secret.txt"), []byte("inside"), 0o644))
		x := filepath.Join(f.root, "x")
		must(t, os.Symlink(f.outside, x))

		var stop atomic.Bool
		var swaps, inside, refused, writes atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, x, unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("RENAME_EXCHANGE: %v", err)
					return
				}
				swaps.Add(1)
			}
		}()
		var bad atomic.Value
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					c, err := Read(roots, filepath.Join(d, "secret.txt"), 100)
					switch {
					case err == nil && c.Data == "inside":
						inside.Add(1)
					case err == nil:
						bad.Store("read " + strconv.Quote(c.Data) + " through the swapped name")
					default:
						var e *Error
						if !errors.As(err, &e) || (e.Kind != KindEscape && e.Kind != KindSymlink && e.Kind != KindNotFound) {
							bad.Store("unexpected error: " + err.Error())
						}
						refused.Add(1)
					}
					if i%4 == 0 {
						if Write(roots, filepath.Join(d, "w.txt"), []byte("w"), 10) == nil {
							writes.Add(1)
						}
					}
					if i%4 == 2 {
						if WriteAtomic(roots, filepath.Join(d, "a.txt"), []byte("a"), 10) == nil {
							writes.Add(1)
						}
					}
				}
			}()
		}
		time.Sleep(raceFor)
		stop.Store(true)
		wg.Wait()
		if b := bad.Load(); b != nil {
			t.Fatal(b)
		}
		for _, e := range mustReadDir(t, f.outside) {
			if e != "secret.txt" {
				t.Fatalf("a racing write created %s in the outside directory", e)
			}
		}
		t.Logf("%s: %d swaps, %d inside reads, %d refused, %d writes", method, swaps.Load(), inside.Load(), refused.Load(), writes.Load())
		if swaps.Load() == 0 || inside.Load() == 0 || refused.Load() == 0 {
			t.Fatal("the race did not exercise both outcomes; the test proves nothing")
		}
	})
}

func BenchmarkReadSmall(b *testing.B) {
	dir := b.TempDir()
	p := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(p, []byte(strings.Repeat("maiden ", 150)), 0o644); err != nil {
		b.Fatal(err)
	}
	roots := []Root{{Path: dir}}
	b.Run("os.ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("safefs.Read/"+Method(), func(b *testing.B) {
		for b.Loop() {
			if _, err := Read(roots, p, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	if Method() == "openat2" {
		b.Run("safefs.Read/openat", func(b *testing.B) {
			defer ForceWalkForTesting(true)()
			for b.Loop() {
				if _, err := Read(roots, p, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Explicit deny and protected names (the boundary's deny entries and protected names, BOUNDARIES.md Assessment 1 /
// B8-B10 applied to the built-in tools' paths): refused on the path given and on where a symlink inside the root
// leads.
func TestDenyAndProtected(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		secrets, git := filepath.Join(f.root, "secrets"), filepath.Join(f.root, ".git")
		must(t, os.Mkdir(secrets, 0o755))
		must(t, os.Mkdir(git, 0o755))
		must(t, os.WriteFile(filepath.Join(secrets, "key"), []byte("KEY-MATERIAL"), 0o644))
		must(t, os.WriteFile(filepath.Join(git, "config"), []byte("cfg"), 0o644))
		must(t, os.Symlink("secrets", filepath.Join(f.root, "s")))
		must(t, os.Symlink("secrets/key", filepath.Join(f.root, "k")))
		must(t, os.Symlink(".git", filepath.Join(f.root, "g")))
		roots := []Root{
			{Path: f.root, Access: AccessWrite},
			{Path: secrets, Access: AccessDeny},
			{Path: git, Access: AccessNoWrite},
		}
		viaLink := []Kind{KindDenied}
		protLink := []Kind{KindProtected}
		if method == "openat" {
			viaLink = append(viaLink, KindSymlink) // the walk refuses the symlink before it gets there
			protLink = append(protLink, KindSymlink)
		}
		_, err := Read(roots, filepath.Join(secrets, "key"), 100)
		wantKind(t, err, KindDenied)
		_, err = List(roots, secrets, 10)
		wantKind(t, err, KindDenied)
		for _, p := range []string{"s/key", "k"} {
			c, err := Read(roots, filepath.Join(f.root, p), 100)
			if strings.Contains(c.Data, "KEY-MATERIAL") {
				t.Fatalf("read a denied file through %s", p)
			}
			wantKind(t, err, viaLink...)
		}
		_, err = List(roots, filepath.Join(f.root, "s"), 10)
		wantKind(t, err, viaLink...)
		wantKind(t, Write(roots, filepath.Join(f.root, "s", "new"), []byte("x"), 10), viaLink...)
		if _, err := os.Stat(filepath.Join(secrets, "new")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a write through a symlink created a file in a denied directory")
		}
		// Protected: readable, never writable, also through a symlink.
		c, err := Read(roots, filepath.Join(git, "config"), 100)
		must(t, err)
		if c.Data != "cfg" {
			t.Fatalf("protected read %q", c.Data)
		}
		wantKind(t, Write(roots, filepath.Join(git, "config"), []byte("x"), 10), KindProtected)
		wantKind(t, Write(roots, filepath.Join(f.root, "g", "config"), []byte("x"), 10), protLink...)
		wantKind(t, Write(roots, filepath.Join(f.root, "g", "hooks-new"), []byte("x"), 10), protLink...)
		if b, _ := os.ReadFile(filepath.Join(git, "config")); string(b) != "cfg" {
			t.Fatalf("protected file changed: %q", b)
		}
		if _, err := os.Stat(filepath.Join(git, "hooks-new")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a write through a symlink created a file under a protected directory")
		}
		// Elsewhere in the root, writes still work.
		must(t, Write(roots, filepath.Join(f.root, "ok.txt"), []byte("fine"), 10))
	})
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteAtomic(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}, {Path: filepath.Join(f.root, "deny"), Access: AccessDeny}}
		must(t, os.Mkdir(filepath.Join(f.root, "deny"), 0o755))
		p := filepath.Join(f.root, "a.txt")
		must(t, WriteAtomic(roots, p, []byte("one"), 10))
		must(t, os.Chmod(p, 0o600))
		must(t, WriteAtomic(roots, p, []byte("two"), 10))
		if b, _ := os.ReadFile(p); string(b) != "two" {
			t.Fatalf("after replace: %q", b)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Fatalf("replaced file's mode %v, want 0600 kept", st.Mode().Perm())
		}
		// A symlink at the path is replaced, never followed.
		must(t, os.Symlink("../outside/secret.txt", filepath.Join(f.root, "l")))
		must(t, WriteAtomic(roots, filepath.Join(f.root, "l"), []byte("mine"), 10))
		if st, _ := os.Lstat(filepath.Join(f.root, "l")); !st.Mode().IsRegular() {
			t.Fatal("the symlink was not replaced by a file")
		}
		// A hard link to a file outside the root: the outside file keeps its content.
		must(t, os.Link(filepath.Join(f.outside, "secret.txt"), filepath.Join(f.root, "h")))
		must(t, WriteAtomic(roots, filepath.Join(f.root, "h"), []byte("new"), 10))
		if b, _ := os.ReadFile(filepath.Join(f.outside, "secret.txt")); string(b) != outsideSecret {
			t.Fatalf("the outside file changed through a hard link: %q", b)
		}
		wantKind(t, WriteAtomic(roots, filepath.Join(f.root, "sub"), []byte("x"), 10), KindIsDir)
		wantKind(t, WriteAtomic(roots, filepath.Join(f.root, "big"), make([]byte, 11), 10), KindTooLarge)
		must(t, os.Symlink("deny", filepath.Join(f.root, "dl")))
		err := WriteAtomic(roots, filepath.Join(f.root, "dl", "x"), []byte("x"), 10)
		if method == "openat2" {
			wantKind(t, err, KindDenied)
		} else {
			wantKind(t, err, KindSymlink)
		}
		must(t, os.Symlink("../outside", filepath.Join(f.root, "ol")))
		wantKind(t, WriteAtomic(roots, filepath.Join(f.root, "ol", "x"), []byte("x"), 10), KindEscape, KindSymlink)
		if got := mustReadDir(t, f.outside); len(got) != 1 {
			t.Fatalf("outside directory now holds %v", got)
		}
		if got := mustReadDir(t, filepath.Join(f.root, "deny")); len(got) != 0 {
			t.Fatalf("denied directory now holds %v", got)
		}
		for _, n := range mustReadDir(t, f.root) {
			if strings.HasPrefix(n, ".safefs-") {
				t.Fatalf("temporary file %s left behind", n)
			}
		}
	})
}

// The swap race again, with the symlink pointing at a denied directory inside the root: openat2 follows it (it stays
// beneath the root), so only the check on where the descriptor really is stands between the reader and the key.
func TestDenySwapRace(t *testing.T) {
	const raceFor = 500 * time.Millisecond
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		secrets := filepath.Join(f.root, "secrets")
		must(t, os.Mkdir(secrets, 0o755))
		must(t, os.WriteFile(filepath.Join(secrets, "key"), []byte("KEY-MATERIAL"), 0o644))
		d := filepath.Join(f.root, "d")
		must(t, os.Mkdir(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "key"), []byte("public"), 0o644))
		x := filepath.Join(f.root, "x")
		must(t, os.Symlink("secrets", x))
		roots := []Root{{Path: f.root, Access: AccessWrite}, {Path: secrets, Access: AccessDeny}}

		var stop atomic.Bool
		var swaps, allowed, refused atomic.Int64
		var bad atomic.Value
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, x, unix.RENAME_EXCHANGE); err != nil {
					bad.Store("RENAME_EXCHANGE: " + err.Error())
					return
				}
				swaps.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				c, err := Read(roots, filepath.Join(d, "key"), 100)
				if err == nil && c.Data != "public" {
					bad.Store("read " + strconv.Quote(c.Data) + " through the swapped name")
				}
				if err == nil {
					allowed.Add(1)
				} else {
					refused.Add(1)
				}
				if i%4 == 0 {
					_ = WriteAtomic(roots, filepath.Join(d, "planted"), []byte("p"), 10)
				}
			}
		}()
		time.Sleep(raceFor)
		stop.Store(true)
		wg.Wait()
		if b := bad.Load(); b != nil {
			t.Fatal(b)
		}
		if got := mustReadDir(t, secrets); len(got) != 1 {
			t.Fatalf("a racing write reached the denied directory: %v", got)
		}
		t.Logf("%s: %d swaps, %d allowed reads, %d refused", method, swaps.Load(), allowed.Load(), refused.Load())
		if swaps.Load() == 0 || allowed.Load() == 0 || refused.Load() == 0 {
			t.Fatal("the race did not exercise both outcomes; the test proves nothing")
		}
	})
}

// A root path with a symlink anywhere in it is refused (KindSymlink, the root named), not followed to its target:
// roots are opened with RESOLVE_NO_SYMLINKS (or the O_NOFOLLOW walk from /).
func TestRootWithSymlinkRefused(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		tmp := filepath.Dir(f.root)
		must(t, os.Symlink(f.outside, filepath.Join(tmp, "lroot"))) // the root itself is a link
		must(t, os.Symlink(tmp, filepath.Join(f.root, "up")))       // a link earlier in the root's path
		for _, root := range []string{filepath.Join(tmp, "lroot"), filepath.Join(f.root, "up", "outside")} {
			roots := []Root{{Path: root, Access: AccessWrite}}
			c, err := Read(roots, filepath.Join(root, "secret.txt"), 100)
			if strings.Contains(c.Data, outsideSecret) {
				t.Fatalf("read the outside through root %s", root)
			}
			wantKind(t, err, KindSymlink)
			if !strings.Contains(err.Error(), "has a symlink in its path") {
				t.Fatalf("error does not say why: %v", err)
			}
			_, err = List(roots, root, 10)
			wantKind(t, err, KindSymlink)
			wantKind(t, WriteAtomic(roots, filepath.Join(root, "planted"), []byte("x"), 10), KindSymlink)
			// An Exact root whose parent path holds the link: refused the same way.
			_, err = Read([]Root{{Path: filepath.Join(root, "secret.txt"), Exact: true}}, filepath.Join(root, "secret.txt"), 100)
			wantKind(t, err, KindSymlink)
		}
		if names := mustReadDir(t, f.outside); len(names) != 1 {
			t.Fatalf("outside holds %v, want only secret.txt", names)
		}
		// Control: the same root by its real path works.
		c, err := Read([]Root{{Path: f.outside}}, filepath.Join(f.outside, "secret.txt"), 100)
		must(t, err)
		if c.Data != outsideSecret {
			t.Fatalf("control read %q", c.Data)
		}
	})
}

// An Exact root grants its own path only and never follows it when it is a symlink, to a sibling (which openat2
// would otherwise follow, since it stays beneath the parent) or to a directory outside.
func TestExactRoot(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		d := filepath.Join(f.root, "d")
		must(t, os.Mkdir(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "f"), []byte("granted"), 0o644))
		must(t, os.WriteFile(filepath.Join(d, "sibling"), []byte("SIBLING"), 0o644))
		must(t, os.Symlink("sibling", filepath.Join(d, "link")))
		must(t, os.Symlink(f.outside, filepath.Join(d, "dl")))
		exact := func(p string, a Access) []Root { return []Root{{Path: p, Access: a, Exact: true}} }
		c, err := Read(exact(filepath.Join(d, "f"), AccessRead), filepath.Join(d, "f"), 100)
		must(t, err)
		if c.Data != "granted" {
			t.Fatalf("exact read %q", c.Data)
		}
		l, err := List(exact(d, AccessRead), d, 10)
		must(t, err)
		if len(l.Entries) != 4 {
			t.Fatalf("exact list of a directory: %+v", l.Entries)
		}
		// Only the path itself: not a sibling, not beneath.
		_, err = Read(exact(filepath.Join(d, "f"), AccessRead), filepath.Join(d, "sibling"), 100)
		wantKind(t, err, KindOutside)
		_, err = Read(exact(d, AccessRead), filepath.Join(d, "f"), 100)
		wantKind(t, err, KindOutside)
		// The named symlinks are not followed.
		c, err = Read(exact(filepath.Join(d, "link"), AccessRead), filepath.Join(d, "link"), 100)
		if strings.Contains(c.Data, "SIBLING") {
			t.Fatal("read the sibling through an exact root naming a symlink")
		}
		wantKind(t, err, KindSymlink)
		l, err = List(exact(filepath.Join(d, "dl"), AccessRead), filepath.Join(d, "dl"), 10)
		if len(l.Entries) != 0 {
			t.Fatalf("listed the outside through an exact root naming a symlink: %+v", l.Entries)
		}
		wantKind(t, err, KindSymlink)
		// A write replaces the link itself (never follows it); an exact root on a missing file creates it.
		must(t, WriteAtomic(exact(filepath.Join(d, "link"), AccessWrite), filepath.Join(d, "link"), []byte("new"), 10))
		if b, _ := os.ReadFile(filepath.Join(d, "sibling")); string(b) != "SIBLING" {
			t.Fatalf("sibling changed: %q", b)
		}
		must(t, Write(exact(filepath.Join(d, "made"), AccessWrite), filepath.Join(d, "made"), []byte("m"), 10))
		wantKind(t, Write(exact(filepath.Join(d, "made"), AccessRead), filepath.Join(d, "made"), []byte("m"), 10), KindReadOnly)
		// A longer subtree root covering nothing more changes nothing; an equal-length one loses to Exact.
		both := []Root{{Path: d, Access: AccessRead}, {Path: filepath.Join(d, "link"), Access: AccessRead, Exact: true}}
		must(t, os.Remove(filepath.Join(d, "link")))
		must(t, os.Symlink("sibling", filepath.Join(d, "link")))
		_, err = Read(both, filepath.Join(d, "link"), 100)
		wantKind(t, err, KindSymlink)
	})
}

// ProtectNames: a write is refused when any component beneath the root is protected, as given or where a symlink
// led (ws/g -> sub/.git, at any depth); reads ignore it; nothing is created or changed there.
func TestProtectNames(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		git := filepath.Join(f.root, "sub", "deep", ".git")
		must(t, os.MkdirAll(filepath.Join(git, "hooks"), 0o755))
		must(t, os.WriteFile(filepath.Join(git, "config"), []byte("cfg"), 0o644))
		must(t, os.Symlink("sub/deep/.git", filepath.Join(f.root, "g")))
		must(t, os.Symlink("sub/deep/.git/hooks", filepath.Join(f.root, "h")))
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		prot := ProtectNames(".git")
		viaLink := []Kind{KindProtected}
		if method == "openat" {
			viaLink = append(viaLink, KindSymlink) // the walk refuses the symlink before it gets there
		}
		wantKind(t, Write(roots, filepath.Join(git, "config"), []byte("x"), 10, prot), KindProtected)
		wantKind(t, WriteAtomic(roots, filepath.Join(git, "config"), []byte("x"), 10, prot), KindProtected)
		for _, p := range []string{"g/config", "g/new", "h/pre-commit"} {
			wantKind(t, Write(roots, filepath.Join(f.root, p), []byte("x"), 10, prot), viaLink...)
			err := WriteAtomic(roots, filepath.Join(f.root, p), []byte("x"), 10, prot)
			wantKind(t, err, viaLink...)
			if method == "openat2" && !strings.Contains(err.Error(), "under the protected name .git") {
				t.Fatalf("error does not name the protected name: %v", err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(git, "config")); string(b) != "cfg" {
			t.Fatalf("protected file changed: %q", b)
		}
		if names := mustReadDir(t, git); len(names) != 2 {
			t.Fatalf("something was created under .git: %v", names)
		}
		if names := mustReadDir(t, filepath.Join(git, "hooks")); len(names) != 0 {
			t.Fatalf("something was created under .git/hooks: %v", names)
		}
		// Control: without the option the symlink does reach .git under openat2 (what the option exists for).
		if method == "openat2" {
			must(t, Write(roots, filepath.Join(f.root, "g", "control"), []byte("x"), 10))
			if _, err := os.Stat(filepath.Join(git, "control")); err != nil {
				t.Fatalf("control write through g did not land in .git: %v", err)
			}
		}
		// Reads are not affected; a name merely containing .git is not protected; a root beneath .git is judged
		// beneath itself only.
		c, err := Read(roots, filepath.Join(f.root, "g", "config"), 100)
		if method == "openat2" {
			must(t, err)
			if c.Data != "cfg" {
				t.Fatalf("read %q", c.Data)
			}
		}
		must(t, Write(roots, filepath.Join(f.root, "x.git"), []byte("x"), 10, prot))
		must(t, Write([]Root{{Path: filepath.Join(git, "hooks"), Access: AccessWrite}}, filepath.Join(git, "hooks", "ok"), []byte("x"), 10, prot))
	})
}

// TestAuthorize: the caller's Authorize is asked about where the kernel resolved the path (a symlink beneath the root
// followed: its target, named beneath the root as the caller names it), right before any byte moves; its refusal is
// KindRefused wrapping its error, with nothing read, listed or created.
func TestAuthorize(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		sub := filepath.Join(f.root, "sub")
		must(t, os.WriteFile(filepath.Join(sub, "f.txt"), []byte("SUBFILE"), 0o644))
		must(t, os.Symlink("sub/f.txt", filepath.Join(f.root, "link")))
		must(t, os.Symlink("sub", filepath.Join(f.root, "dlink")))
		rw := []Root{{Path: f.root, Access: AccessWrite}}
		var asked []string
		allowAll := Authorize(func(p string) error { asked = append(asked, p); return nil })
		no := errors.New("no card allows it")
		refuse := Authorize(func(p string) error { asked = append(asked, p); return no })
		wantAsked := func(what string, want ...string) {
			t.Helper()
			if strings.Join(asked, " ") != strings.Join(want, " ") {
				t.Errorf("%s: asked about %q, want %q", what, asked, want)
			}
			asked = nil
		}
		wantRefused := func(what string, err error) {
			t.Helper()
			wantKind(t, err, KindRefused)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), no.Error()) {
				t.Errorf("%s: %v, want the refusal wrapping %q", what, err, no)
			}
		}

		c, err := Read(rw, filepath.Join(f.root, "in.txt"), 100, allowAll)
		must(t, err)
		wantAsked("a plain read", filepath.Join(f.root, "in.txt"))
		if c.Data != "hello" {
			t.Fatalf("read %q", c.Data)
		}
		c, err = Read(rw, filepath.Join(f.root, "in.txt"), 100, refuse)
		wantRefused("a refused read", err)
		wantAsked("a refused read", filepath.Join(f.root, "in.txt"))
		if c.Data != "" {
			t.Errorf("a refused read returned %q", c.Data)
		}
		l, err := List(rw, sub, 10, refuse)
		wantRefused("a refused list", err)
		wantAsked("a refused list", sub)
		if len(l.Entries) != 0 {
			t.Errorf("a refused list returned %+v", l.Entries)
		}
		err = WriteAtomic(rw, filepath.Join(f.root, "new.txt"), []byte("x"), 10, refuse)
		wantRefused("a refused write", err)
		wantAsked("a refused write", filepath.Join(f.root, "new.txt"))
		if _, err := os.Lstat(filepath.Join(f.root, "new.txt")); !os.IsNotExist(err) {
			t.Errorf("a refused write created its file: %v", err)
		}

		if method == "openat" {
			// The walk follows no symlink, so the path asked is the path resolved.
			_, err = Read(rw, filepath.Join(f.root, "link"), 100, allowAll)
			wantKind(t, err, KindSymlink)
			wantAsked("a symlink under the walk")
			return
		}
		// Where the symlinks led, not the names asked for.
		c, err = Read(rw, filepath.Join(f.root, "link"), 100, refuse)
		wantRefused("a read through a symlink", err)
		wantAsked("a read through a symlink", filepath.Join(sub, "f.txt"))
		if strings.Contains(c.Data, "SUBFILE") {
			t.Error("a refused read through a symlink returned the file")
		}
		_, err = List(rw, filepath.Join(f.root, "dlink"), 10, allowAll)
		must(t, err)
		wantAsked("a list through a symlink", sub)
		err = WriteAtomic(rw, filepath.Join(f.root, "dlink", "new.txt"), []byte("x"), 10, refuse)
		wantRefused("a write through a symlinked parent", err)
		wantAsked("a write through a symlinked parent", filepath.Join(sub, "new.txt"))
		if _, err := os.Lstat(filepath.Join(sub, "new.txt")); !os.IsNotExist(err) {
			t.Errorf("a refused write created its file: %v", err)
		}
		// An exact root: its own path, named as the caller names it.
		_, err = Read([]Root{{Path: filepath.Join(sub, "f.txt"), Access: AccessRead, Exact: true}}, filepath.Join(sub, "f.txt"), 100, allowAll)
		must(t, err)
		wantAsked("an exact root", filepath.Join(sub, "f.txt"))
	})
}

// TestRemovedWhileOpened (security review of the fs cards): the path a descriptor resolved to is read from
// /proc/self/fd, which names a file removed since the open "PATH (deleted)": a path no exact refusal names. A file
// replaced by rename (as a secret rotated in place is) while a read through a symlink beneath the root opens it is
// refused both by an Authorize that refuses its path exactly and by a Deny root naming the file: its old content
// never comes back. (openat2 only: the walk follows no symlink.)
func TestRemovedWhileOpened(t *testing.T) {
	if !haveOpenat2() {
		t.Skip("kernel has no openat2: the walk follows no symlink")
	}
	const raceFor = 700 * time.Millisecond
	f := newFixture(t)
	private, pub := filepath.Join(f.root, "private"), filepath.Join(f.root, "pub")
	must(t, os.Mkdir(private, 0o755))
	must(t, os.Mkdir(pub, 0o755))
	key, denied := filepath.Join(private, "key"), filepath.Join(private, "denied.key")
	for _, p := range []string{key, denied} {
		must(t, os.WriteFile(p, []byte("SECRET-0"), 0o644))
	}
	must(t, os.Symlink("../private/key", filepath.Join(pub, "l1")))
	must(t, os.Symlink("../private/denied.key", filepath.Join(pub, "l2")))
	roots := []Root{{Path: f.root, Access: AccessWrite}, {Path: denied, Access: AccessDeny}}
	// As an exact negative card (fs:read ROOT/private/key) refuses: that path, and only it.
	exact := Authorize(func(p string) error {
		if p == key {
			return errors.New("no card allows reading " + p)
		}
		return nil
	})

	var stop atomic.Bool
	var rotations, removedSeen atomic.Int64
	var bad atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; !stop.Load(); i++ {
			for _, p := range []string{key, denied} {
				tmp := p + ".new"
				if err := os.WriteFile(tmp, []byte("SECRET-"+strconv.Itoa(i)), 0o644); err != nil {
					bad.Store(err.Error())
					return
				}
				if err := os.Rename(tmp, p); err != nil {
					bad.Store(err.Error())
					return
				}
			}
			rotations.Add(1)
		}
	}()
	deadline := time.Now().Add(raceFor)
	for time.Now().Before(deadline) && bad.Load() == nil {
		for _, c := range []struct {
			name string
			opts []Option
		}{{"l1", []Option{exact}}, {"l2", nil}} {
			got, err := Read(roots, filepath.Join(pub, c.name), 100, c.opts...)
			if err == nil {
				bad.Store(c.name + ": read " + strconv.Quote(got.Data) + " of a file its refusal names")
				break
			}
			if e := (*Error)(nil); errors.As(err, &e) && e.Kind != KindRefused && e.Kind != KindDenied {
				removedSeen.Add(1)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Fatal(b)
	}
	t.Logf("%d rotations, %d reads refused as removed or moved meanwhile", rotations.Load(), removedSeen.Load())
}

// TestDeniedAnswersTheSame: beneath a Deny root every path is refused as denied, whether or not what it names exists,
// whether it is named directly or reached through a symlink that ends there, and whether a symlink only passes
// through it on the way elsewhere (a twin link through a missing directory answers the same). Otherwise not_found
// against denied tells the caller what exists where it may not look. A Deny root named by a symlink denies where the
// symlink leads.
func TestDeniedAnswersTheSame(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		private, pub := filepath.Join(f.root, "private"), filepath.Join(f.root, "pub")
		must(t, os.MkdirAll(filepath.Join(private, "x"), 0o755))
		must(t, os.Mkdir(pub, 0o755))
		must(t, os.WriteFile(filepath.Join(private, "key"), []byte("KEY-MATERIAL"), 0o644))
		must(t, os.Symlink("../private", filepath.Join(pub, "l")))
		must(t, os.Symlink("../private/x/../../in.txt", filepath.Join(pub, "through")))
		must(t, os.Symlink("../private/nox/../../in.txt", filepath.Join(pub, "twin")))
		roots := []Root{{Path: f.root, Access: AccessWrite}, {Path: private, Access: AccessDeny}}
		viaLink := []Kind{KindDenied}
		if method == "openat" {
			viaLink = append(viaLink, KindSymlink) // the walk refuses the symlink before it gets there
		}
		for _, c := range []struct {
			path string
			want []Kind
		}{
			{filepath.Join(private, "key"), []Kind{KindDenied}},
			{filepath.Join(private, "missing"), []Kind{KindDenied}},
			{filepath.Join(private, "nodir", "missing"), []Kind{KindDenied}},
			{filepath.Join(pub, "l", "key"), viaLink},
			{filepath.Join(pub, "l", "missing"), viaLink},
			{filepath.Join(pub, "through"), viaLink},
			{filepath.Join(pub, "twin"), viaLink},
		} {
			got, err := Read(roots, c.path, 100)
			if err == nil {
				t.Errorf("Read(%s) = %q, want it refused", c.path, got.Data)
				continue
			}
			var e *Error
			if !errors.As(err, &e) || !slices.Contains(c.want, e.Kind) {
				t.Errorf("Read(%s): %v, want kind %v: a Deny root answers the same whatever lies beneath it", c.path, err, c.want)
			}
		}

		// The Deny root names a symlink: what it leads to is denied.
		alias := filepath.Join(f.root, "alias")
		must(t, os.Symlink("private", alias))
		roots = []Root{{Path: f.root, Access: AccessWrite}, {Path: alias, Access: AccessDeny}}
		got, err := Read(roots, filepath.Join(private, "key"), 100)
		if err == nil {
			t.Fatalf("read %q beneath a Deny root named by its symlink %s", got.Data, alias)
		}
		wantKind(t, err, KindDenied)
	})
}

// TestSizeIsCheckedBeforeReading: a file's size is checked before a buffer is made for it (a 1 GiB sparse file
// under a 100-byte limit is refused by its size, nothing allocated for it), and a file that says it is smaller than
// it is (/proc's files say 0 bytes) is refused once more than the limit arrives, never returned over it.
func TestSizeIsCheckedBeforeReading(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		sparse := filepath.Join(f.root, "sparse")
		must(t, os.WriteFile(sparse, nil, 0o644))
		must(t, os.Truncate(sparse, 1<<30))
		_, err := Read(roots, sparse, 100)
		wantKind(t, err, KindTooLarge)
		if want := "file is 1073741824 bytes, limit 100"; !strings.Contains(err.Error(), want) {
			t.Errorf("Read(1 GiB sparse file, 100): %v, want it refused by its size (%q) before a buffer is made", err, want)
		}
		c, err := Read([]Root{{Path: "/proc", Access: AccessRead}}, "/proc/version", 10)
		if err == nil {
			t.Fatalf("Read(/proc/version, 10) = %d bytes %q, over the limit", len(c.Data), c.Data)
		}
		wantKind(t, err, KindTooLarge)
	})
}

// TestResolvedIsTheFileOpened: the path /proc/self/fd gives for a descriptor is used only when it still names that
// file. A file removed after it was opened is named "PATH (deleted)" there; a file of that very name (which anyone
// who may write beside it can make) is another file, so the descriptor's path is not known, and nothing is decided on
// that name.
func TestResolvedIsTheFileOpened(t *testing.T) {
	f := newFixture(t)
	key := filepath.Join(f.root, "key")
	must(t, os.WriteFile(key, []byte("SECRET-0"), 0o644))
	fd, err := unix.Open(key, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	must(t, os.Remove(key))
	must(t, os.WriteFile(key+" (deleted)", []byte("decoy"), 0o644))
	if real, err := resolved(fd); err == nil {
		t.Fatalf("resolved(descriptor of the removed %s) = %q, a path that names another file", key, real)
	}
}

// TestAuthorizeWhereTheRootMoved: Authorize is asked about a path beneath the root as the caller names it. A root
// renamed after the open resolves elsewhere; that is refused (io), not asked about under the root's new name.
func TestAuthorizeWhereTheRootMoved(t *testing.T) {
	f := newFixture(t)
	fd, err := unix.Open(filepath.Join(f.root, "in.txt"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	must(t, os.Rename(f.root, f.root+"-moved"))
	var asked []string
	err = authorize("read", filepath.Join(f.root, "in.txt"), target{root: f.root, dir: f.root, rel: "in.txt"}, fd, "",
		func(p string) error { asked = append(asked, p); return nil })
	if err == nil || asked != nil {
		t.Fatalf("authorize after the root moved: %v, asked about %q; want it refused without asking", err, asked)
	}
	wantKind(t, err, KindIO)
}
