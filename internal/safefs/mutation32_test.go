//go:build linux

package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// The thirty-second pass (docs/security-tests.md, docs/mutation/safefs.tsv): plants in safefs_linux.go that the
// earlier tests let through.

// TestMutation32DevicesAndFIFOsAreNotFiles: a device node (here one like /dev/null, made with mknod: the tests run as
// root) and a FIFO that has a reader are refused by Read, Write and WriteAtomic as not_regular, and stay what they
// were: nothing is read from or written to them, and WriteAtomic does not replace them by a file. (The FIFO of
// TestLimitsAndTypes has no reader, so its open fails with ENXIO before the type is ever looked at.)
func TestMutation32DevicesAndFIFOsAreNotFiles(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		dev := filepath.Join(f.root, "null")
		if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Skipf("mknod (needs CAP_MKNOD): %v", err)
		}
		fifo := filepath.Join(f.root, "fifo")
		must(t, unix.Mkfifo(fifo, 0o666))
		reader, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		must(t, err)
		defer unix.Close(reader)

		c, err := Read(roots, dev, 100)
		if err == nil {
			t.Fatalf("Read(character device) = %+v, <nil>; want not_regular", c)
		}
		wantKind(t, err, KindNotRegular)
		for _, p := range []string{dev, fifo} {
			if err := Write(roots, p, []byte("x"), 10); err == nil {
				t.Fatalf("Write(%s) = <nil>; want not_regular, nothing written", filepath.Base(p))
			} else {
				wantKind(t, err, KindNotRegular)
			}
			if err := WriteAtomic(roots, p, []byte("x"), 10); err == nil {
				t.Fatalf("WriteAtomic(%s) = <nil>; want not_regular, the node left as it was", filepath.Base(p))
			} else {
				wantKind(t, err, KindNotRegular)
			}
		}
		if n, _ := unix.Read(reader, make([]byte, 8)); n > 0 {
			t.Fatalf("the FIFO's reader got %d bytes; want nothing written", n)
		}
		for p, want := range map[string]uint32{dev: unix.S_IFCHR, fifo: unix.S_IFIFO} {
			var st unix.Stat_t
			must(t, unix.Lstat(p, &st))
			if st.Mode&unix.S_IFMT != want {
				t.Fatalf("%s is now of type %#o, want %#o: it was replaced", filepath.Base(p), st.Mode&unix.S_IFMT, want)
			}
		}
		for _, n := range mustReadDir(t, f.root) {
			if strings.HasPrefix(n, ".safefs-") {
				t.Fatalf("temporary file %s left behind", n)
			}
		}
	})
}

// TestMutation32TempNameTakenByAHardLink: whoever may write in the directory can guess WriteAtomic's next temporary
// names (.safefs-PID-N.tmp) and put there hard links to a file elsewhere. The temporary file is created with O_EXCL,
// so a name already taken is skipped, never opened: the linked file keeps its content and its mode.
func TestMutation32TempNameTakenByAHardLink(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		secret := filepath.Join(f.outside, "secret.txt")
		must(t, os.Chmod(secret, 0o600))
		next := tmpSeq.Load()
		for i := uint64(1); i <= 8; i++ {
			name := ".safefs-" + itoa(int64(os.Getpid())) + "-" + itoa(int64(next+i)) + ".tmp"
			must(t, os.Link(secret, filepath.Join(f.root, name)))
		}
		p := filepath.Join(f.root, "in.txt")
		must(t, WriteAtomic(roots, p, []byte("new"), 10))
		if b, _ := os.ReadFile(secret); string(b) != outsideSecret {
			t.Fatalf("the file hard-linked at a temporary name now holds %q; want %q unchanged", b, outsideSecret)
		}
		if st, _ := os.Stat(secret); st.Mode().Perm() != 0o600 {
			t.Fatalf("the file hard-linked at a temporary name now has mode %v; want 0600 unchanged", st.Mode().Perm())
		}
		if b, _ := os.ReadFile(p); string(b) != "new" {
			t.Fatalf("%s holds %q, want %q", p, b, "new")
		}
	})
}

// TestMutation32AtomicKeepsTheModeWhateverTheUmask: a replaced file keeps its permission bits even those the umask
// would clear at creation (0666 under umask 022).
func TestMutation32AtomicKeepsTheModeWhateverTheUmask(t *testing.T) {
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		p := filepath.Join(f.root, "in.txt")
		must(t, os.Chmod(p, 0o666))
		must(t, WriteAtomic(roots, p, []byte("new"), 10))
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o666 {
			t.Fatalf("replaced file's mode %v under umask 022; want 0666 kept", st.Mode().Perm())
		}
	})
}

// TestMutation32FailedAtomicWriteLeavesNoTemp: when writing the temporary file fails (here the file size limit,
// RLIMIT_FSIZE, lets 4 of 10 bytes through: EFBIG), WriteAtomic returns the error, the file keeps its old content and
// no temporary file is left behind.
func TestMutation32FailedAtomicWriteLeavesNoTemp(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		p := filepath.Join(f.root, "in.txt")
		var lim unix.Rlimit
		must(t, unix.Getrlimit(unix.RLIMIT_FSIZE, &lim))
		must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 4, Max: lim.Max}))
		err := WriteAtomic(roots, p, []byte("0123456789"), 10)
		must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
		if err == nil {
			t.Fatal("WriteAtomic over RLIMIT_FSIZE = <nil>; want the write's error")
		}
		wantKind(t, err, KindIO)
		if b, _ := os.ReadFile(p); string(b) != "hello" {
			t.Fatalf("after a failed WriteAtomic the file holds %q; want %q", b, "hello")
		}
		for _, n := range mustReadDir(t, f.root) {
			if strings.HasPrefix(n, ".safefs-") {
				t.Fatalf("a failed WriteAtomic left its temporary file %s behind (%v)", n, err)
			}
		}
	})
}

// TestMutation32PathLengthAtItsEdge: a path of exactly MaxPath (4096) bytes is judged like any other (here: under no
// root), one of 4097 is path_too_long (BOUNDARIES.md validation 5).
func TestMutation32PathLengthAtItsEdge(t *testing.T) {
	f := newFixture(t)
	roots := []Root{{Path: f.root}}
	at := filepath.Join(f.outside, strings.Repeat("a/", (MaxPath-len(f.outside)-1)/2))
	at += strings.Repeat("b", MaxPath-len(at)-1)
	at = filepath.Clean(at)
	for len(at) < MaxPath {
		at += "c"
	}
	if len(at) != MaxPath || filepath.Clean(at) != at {
		t.Fatalf("test path is %d bytes, want %d, normalised", len(at), MaxPath)
	}
	_, err := Read(roots, at, 10)
	wantKind(t, err, KindOutside)
	_, err = Read(roots, at+"d", 10)
	wantKind(t, err, KindPathTooLong)
}

// TestMutation32DeniedFileThroughALinkedParent: a Deny root naming a file is refused when a write reaches it through
// a symlinked parent (root/l -> sub, writing root/l/key): the check of where the parent resolved includes the last
// component. The key is unchanged.
func TestMutation32DeniedFileThroughALinkedParent(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		key := filepath.Join(f.root, "sub", "key")
		must(t, os.WriteFile(key, []byte("KEY"), 0o644))
		must(t, os.Symlink("sub", filepath.Join(f.root, "l")))
		roots := []Root{{Path: f.root, Access: AccessWrite}, {Path: key, Access: AccessDeny}}
		want := []Kind{KindDenied}
		if method == "openat" {
			want = append(want, KindSymlink)
		}
		for name, write := range map[string]func([]Root, string, []byte, int64, ...Option) error{"Write": Write, "WriteAtomic": WriteAtomic} {
			err := write(roots, filepath.Join(f.root, "l", "key"), []byte("planted"), 10)
			if err == nil {
				t.Fatalf("%s(l/key) = <nil>, with l -> sub and sub/key denied; want denied", name)
			}
			wantKind(t, err, want...)
		}
		if b, _ := os.ReadFile(key); string(b) != "KEY" {
			t.Fatalf("the denied file now holds %q", b)
		}
	})
}

// TestMutation32ListCapAtZeroAndBelow: a cap of 0 (or below, as 0) lists nothing and says the directory held more;
// it never panics.
func TestMutation32ListCapAtZeroAndBelow(t *testing.T) {
	f := newFixture(t)
	roots := []Root{{Path: f.root}}
	for _, max := range []int{0, -1} {
		l, err := List(roots, f.root, max)
		if err != nil || len(l.Entries) != 0 || !l.Truncated {
			t.Fatalf("List(non-empty directory, %d) = %+v, %v; want no entries, truncated", max, l, err)
		}
	}
	l, err := List(roots, filepath.Join(f.root, "sub"), 0)
	if err != nil || len(l.Entries) != 0 || l.Truncated {
		t.Fatalf("List(empty directory, 0) = %+v, %v; want no entries, not truncated", l, err)
	}
}

// TestMutation32TextWithNULIsBase64: valid UTF-8 holding a NUL byte is returned as base64, not as text.
func TestMutation32TextWithNULIsBase64(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.root, "nul")
	must(t, os.WriteFile(p, []byte("a\x00b"), 0o644))
	c, err := Read([]Root{{Path: f.root}}, p, 10)
	must(t, err)
	if !c.Base64 || c.Data != "YQBi" {
		t.Fatalf("Read(\"a\\x00b\") = %+v; want base64 \"YQBi\"", c)
	}
}

// TestMutation32WriteThroughADetour (openat2; the walk follows no symlink): a write whose parent is reached through a
// link that passes through a denied directory (pub/t -> ../private/x/../../sub) is refused as denied, like its twin
// through a missing directory, and nothing is created where it led.
func TestMutation32WriteThroughADetour(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		private, pub := filepath.Join(f.root, "private"), filepath.Join(f.root, "pub")
		must(t, os.MkdirAll(filepath.Join(private, "x"), 0o755))
		must(t, os.Mkdir(pub, 0o755))
		must(t, os.Symlink("../private/x/../../sub", filepath.Join(pub, "t")))
		must(t, os.Symlink("../private/nox/../../sub", filepath.Join(pub, "twin")))
		roots := []Root{{Path: f.root, Access: AccessWrite}, {Path: private, Access: AccessDeny}}
		want := []Kind{KindDenied}
		if method == "openat" {
			want = append(want, KindSymlink)
		}
		for _, l := range []string{"t", "twin"} {
			for name, write := range map[string]func([]Root, string, []byte, int64, ...Option) error{"Write": Write, "WriteAtomic": WriteAtomic} {
				err := write(roots, filepath.Join(pub, l, "new.txt"), []byte("x"), 10)
				if err == nil {
					t.Fatalf("%s(pub/%s/new.txt) = <nil> through the denied %s; want denied", name, l, private)
				}
				wantKind(t, err, want...)
			}
		}
		if names := mustReadDir(t, filepath.Join(f.root, "sub")); len(names) != 0 {
			t.Fatalf("a write through a detour created %v", names)
		}
	})
}

// TestMutation32ProtectedAnswersTheSameForAMissingDirectory: a write beneath a protected place whose parent directory
// is missing is refused as protected, not not_found (which would tell what the protected directory holds): by
// ProtectNames named directly (both methods), and by a NoWrite root or ProtectNames reached through a symlink
// (openat2; the walk refuses the symlink).
func TestMutation32ProtectedAnswersTheSameForAMissingDirectory(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		git := filepath.Join(f.root, ".git")
		must(t, os.Mkdir(git, 0o755))
		must(t, os.Symlink(".git", filepath.Join(f.root, "g")))
		rw := []Root{{Path: f.root, Access: AccessWrite}}
		noWrite := []Root{{Path: f.root, Access: AccessWrite}, {Path: git, Access: AccessNoWrite}}
		viaLink := []Kind{KindProtected}
		if method == "openat" {
			viaLink = append(viaLink, KindSymlink)
		}
		for _, c := range []struct {
			what  string
			roots []Root
			path  string
			opts  []Option
			want  []Kind
		}{
			{"ProtectNames, named", rw, filepath.Join(git, "nodir", "x"), []Option{ProtectNames(".git")}, []Kind{KindProtected}},
			{"ProtectNames, through g", rw, filepath.Join(f.root, "g", "nodir", "x"), []Option{ProtectNames(".git")}, viaLink},
			{"NoWrite root, through g", noWrite, filepath.Join(f.root, "g", "nodir", "x"), nil, viaLink},
		} {
			for name, write := range map[string]func([]Root, string, []byte, int64, ...Option) error{"Write": Write, "WriteAtomic": WriteAtomic} {
				err := write(c.roots, c.path, []byte("x"), 10, c.opts...)
				if err == nil {
					t.Fatalf("%s: %s = <nil>; want protected", c.what, name)
				}
				var e *Error
				if !errors.As(err, &e) || !containsKind(c.want, e.Kind) {
					t.Fatalf("%s: %s: %v; want kind %v: a missing directory beneath a protected place answers as protected", c.what, name, err, c.want)
				}
			}
		}
	})
}

func containsKind(ks []Kind, k Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// TestMutation32AtomicLooksAtTheLinkNotItsTarget: WriteAtomic over a symlink judges the link itself, never what it
// points to: a link to a directory is replaced by the file (not refused as is_directory), and a link to a file
// elsewhere does not lend that file's permission bits to the new file (which would tell them: 0640 here), nor change it.
func TestMutation32AtomicLooksAtTheLinkNotItsTarget(t *testing.T) {
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		secret := filepath.Join(f.outside, "secret.txt")
		must(t, os.Chmod(secret, 0o640))
		must(t, os.Symlink("sub", filepath.Join(f.root, "dl")))
		must(t, os.Symlink("../outside/secret.txt", filepath.Join(f.root, "fl")))
		for _, n := range []string{"dl", "fl"} {
			p := filepath.Join(f.root, n)
			if err := WriteAtomic(roots, p, []byte("new"), 10); err != nil {
				t.Fatalf("WriteAtomic over the symlink %s: %v; want the link replaced by the file", n, err)
			}
			st, err := os.Lstat(p)
			must(t, err)
			if !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 {
				t.Fatalf("after WriteAtomic over the symlink %s: %v; want a regular file, mode 0644 (not its target's)", n, st.Mode())
			}
		}
		if st, _ := os.Stat(secret); st.Mode().Perm() != 0o640 {
			t.Fatalf("the link's target now has mode %v", st.Mode().Perm())
		}
		if b, _ := os.ReadFile(secret); string(b) != outsideSecret {
			t.Fatalf("the link's target now holds %q", b)
		}
	})
}

// TestMutation32ProtectedIsTheWholeName: ProtectNames(".git") protects a component named exactly .git: .gitignore
// and .github/x are written like any file.
func TestMutation32ProtectedIsTheWholeName(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		must(t, os.Mkdir(filepath.Join(f.root, ".github"), 0o755))
		roots := []Root{{Path: f.root, Access: AccessWrite}}
		for _, p := range []string{".gitignore", ".github/x"} {
			if err := WriteAtomic(roots, filepath.Join(f.root, p), []byte("x"), 10, ProtectNames(".git")); err != nil {
				t.Fatalf("WriteAtomic(%s, ProtectNames(.git)): %v; want it written", p, err)
			}
		}
	})
}

// TestMutation32ExactWinsATieInAnyOrder: a subtree root and an Exact root on the same path (a file) are a tie the
// Exact one wins whatever their order: the file is read (opened beneath its parent), not refused as not_directory by
// the subtree root, which would open it as a directory.
func TestMutation32ExactWinsATieInAnyOrder(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		p := filepath.Join(f.root, "in.txt")
		sub, exact := Root{Path: p, Access: AccessRead}, Root{Path: p, Access: AccessRead, Exact: true}
		for _, roots := range [][]Root{{sub, exact}, {exact, sub}} {
			c, err := Read(roots, p, 100)
			if err != nil || c.Data != "hello" {
				t.Fatalf("Read(%s) under %+v = %q, %v; want \"hello\" through the Exact root", p, roots, c.Data, err)
			}
		}
	})
}

// TestMutation32AskedOnlyAboutTheWay (openat2; the walk follows no symlink): Authorize is asked about where the way
// went and nothing else. A directory the path named, which a ".." in a link leaves, is not asked about (pub/l ->
// ../in.txt reads in.txt even though pub itself is refused: the caller named pub). An Exact root naming a symlink
// is refused as symlink without a question about the link's target. An absolute link is an escape, its text never
// taken as a path beneath the root to ask about.
func TestMutation32AskedOnlyAboutTheWay(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		f := newFixture(t)
		pub := filepath.Join(f.root, "pub")
		must(t, os.Mkdir(pub, 0o755))
		must(t, os.Symlink("../in.txt", filepath.Join(pub, "l")))
		must(t, os.Symlink("/nowhere/x", filepath.Join(pub, "abs")))
		must(t, os.WriteFile(filepath.Join(pub, "sibling"), []byte("SIBLING"), 0o644))
		must(t, os.Symlink("sibling", filepath.Join(pub, "link")))
		var asked []string
		refusePub := Authorize(func(p string) error {
			asked = append(asked, p)
			if p == pub {
				return errors.New("pub refused")
			}
			return nil
		})
		rw := []Root{{Path: f.root, Access: AccessWrite}}
		if method == "openat2" {
			c, err := Read(rw, filepath.Join(pub, "l"), 100, refusePub)
			if err != nil || c.Data != "hello" {
				t.Fatalf("Read(pub/l -> ../in.txt) with pub refused = %q, %v (asked %q); want \"hello\": pub was named by the caller, not found on the way", c.Data, err, asked)
			}
		}
		asked = nil
		_, err := Read([]Root{{Path: filepath.Join(pub, "link"), Access: AccessRead, Exact: true}}, filepath.Join(pub, "link"), 100, refusePub)
		wantKind(t, err, KindSymlink)
		if asked != nil {
			t.Fatalf("an Exact root naming a symlink asked about %q; want no question", asked)
		}
		_, err = Read(rw, filepath.Join(pub, "abs"), 100, refusePub)
		wantKind(t, err, KindEscape, KindSymlink)
		if asked != nil {
			t.Fatalf("an absolute link asked about %q; want no question", asked)
		}
	})
}

// TestMutation32DotDotWhileRenamesRace (openat2): a ".." resolved beneath the root while something on the machine
// renames makes openat2 answer EAGAIN (RESOLVE_BENEATH cannot tell the ".." stayed beneath); the open is retried, so
// a read through pub/l -> ../in.txt racing renames elsewhere in the root succeeds every time, never io.
func TestMutation32DotDotWhileRenamesRace(t *testing.T) {
	if !haveOpenat2() {
		t.Skip("kernel has no openat2")
	}
	f := newFixture(t)
	pub := filepath.Join(f.root, "pub")
	must(t, os.Mkdir(pub, 0o755))
	must(t, os.Symlink("../in.txt", filepath.Join(pub, "l")))
	a, b := filepath.Join(f.root, "a"), filepath.Join(f.root, "b")
	must(t, os.Mkdir(a, 0o755))
	must(t, os.Mkdir(b, 0o755))
	roots := []Root{{Path: f.root}}
	var stop atomic.Bool
	var renames atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				return
			}
			renames.Add(1)
		}
	}()
	const reads = 20000
	var failed int
	var first error
	for i := 0; i < reads; i++ {
		if _, err := Read(roots, filepath.Join(pub, "l"), 100); err != nil {
			if failed++; first == nil {
				first = err
			}
		}
	}
	stop.Store(true)
	<-done
	t.Logf("%d reads, %d renames meanwhile, %d failed", reads, renames.Load(), failed)
	if renames.Load() == 0 {
		t.Fatal("no rename raced the reads: the test proves nothing")
	}
	if failed > 0 {
		t.Fatalf("%d of %d reads through a \"..\" link racing renames failed, the first: %v; want none (EAGAIN retried)", failed, reads, first)
	}
}
